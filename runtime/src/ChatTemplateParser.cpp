// Recursive-descent parser following jinja2/parser.py: the same precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary < postfix
// and filters), the same tuple rules, and the same statement forms.
#include "ChatTemplateParser.h"

#include "ChatTemplateLexer.h"

#include <algorithm>
#include <initializer_list>

namespace ninfer {
namespace jinja {
namespace {

// jinja2 built-ins we do not implement: named "not supported" rather than "unknown".
const char* const kOtherJinjaFilters[] = {"batch",  "center",    "filesizeformat", "forceescape",
                                          "format", "groupby",   "pprint",         "random",
                                          "slice",  "striptags", "truncate",       "urlencode",
                                          "urlize", "wordcount", "wordwrap",       "xmlattr"};
const char* const kOtherJinjaTests[] = {"escaped", "filter", "test"};
const char* const kOtherJinjaGlobals[] = {"lipsum", "cycler", "joiner", "caller"};
const char* const kOtherPythonMethods[] = {
    "casefold", "center",    "encode",       "expandtabs", "format",      "format_map",
    "isascii",  "isdecimal", "isidentifier", "isnumeric",  "isprintable", "istitle",
    "ljust",    "maketrans", "partition",    "rindex",     "rjust",       "rpartition",
    "swapcase", "translate", "zfill",        "append",     "clear",       "copy",
    "extend",   "insert",    "pop",          "remove",     "reverse",     "sort",
    "fromkeys", "popitem",   "setdefault",   "update"};
const char* const kUnsupportedTags[] = {"call", "filter",  "include",   "import",
                                        "from", "extends", "block",     "autoescape",
                                        "do",   "trans",   "pluralize", "debug"};

template <size_t N> bool listed(const char* const (&list)[N], std::string_view name) {
  return std::any_of(std::begin(list), std::end(list),
                     [&](const char* item) { return name == item; });
}

constexpr int kMaxDepth = 200;

bool mentions(const Expr* e, std::string_view name);
bool mentions(const Body& body, std::string_view name);

bool mentions(const Expr* e, std::string_view name) {
  if (!e)
    return false;
  if (e->kind == Expr::Kind::Name && e->name == name)
    return true;
  for (const ExprPtr& child : e->children)
    if (mentions(child.get(), name))
      return true;
  for (const auto& keyword : e->keywords)
    if (mentions(keyword.second.get(), name))
      return true;
  return false;
}

bool mentions(const Body& body, std::string_view name) {
  for (const NodePtr& node : body) {
    if (mentions(node->expr.get(), name) || mentions(node->filter.get(), name) ||
        mentions(node->body, name) || mentions(node->elseBody, name))
      return true;
    for (const ExprPtr& e : node->conditions)
      if (mentions(e.get(), name))
        return true;
    for (const Body& b : node->bodies)
      if (mentions(b, name))
        return true;
    for (const ExprPtr& e : node->defaults)
      if (mentions(e.get(), name))
        return true;
    for (const ExprPtr& e : node->withValues)
      if (mentions(e.get(), name))
        return true;
  }
  return false;
}

class Parser {
public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Template run() {
    Template t;
    t.body = subparse({});
    return t;
  }

private:
  // ---- token helpers ----
  const Token& current() const { return tokens_[index_]; }
  const Token& peek(size_t ahead = 1) const {
    return tokens_[std::min(index_ + ahead, tokens_.size() - 1)];
  }
  void advance() {
    if (index_ + 1 < tokens_.size())
      ++index_;
  }
  bool isOp(std::string_view op) const {
    return current().type == TokenType::Operator && current().text == op;
  }
  bool isName(std::string_view name) const {
    return current().type == TokenType::Name && current().text == name;
  }
  bool skipOp(std::string_view op) {
    if (!isOp(op))
      return false;
    advance();
    return true;
  }
  bool skipName(std::string_view name) {
    if (!isName(name))
      return false;
    advance();
    return true;
  }
  static std::string describe(const Token& token) {
    switch (token.type) {
    case TokenType::Data:
      return "template text";
    case TokenType::VariableBegin:
      return "'{{'";
    case TokenType::VariableEnd:
      return "'}}'";
    case TokenType::BlockBegin:
      return "'{%'";
    case TokenType::BlockEnd:
      return "'%}'";
    case TokenType::Name:
      return "'" + token.text + "'";
    case TokenType::String:
      return "a string";
    case TokenType::Integer:
      return "an integer";
    case TokenType::Float:
      return "a number";
    case TokenType::Operator:
      return "'" + token.text + "'";
    case TokenType::Eof:
      return "the end of the template";
    }
    return "a token";
  }
  [[noreturn]] void error(const std::string& message) const { fail(message, current().line); }
  void expectOp(std::string_view op) {
    if (!skipOp(op))
      error("expected '" + std::string(op) + "', got " + describe(current()));
  }
  void expectName(std::string_view name) {
    if (!skipName(name))
      error("expected '" + std::string(name) + "', got " + describe(current()));
  }
  std::string expectIdentifier() {
    if (current().type != TokenType::Name)
      error("expected a name, got " + describe(current()));
    std::string name = current().text;
    advance();
    return name;
  }
  void expectBlockEnd() {
    if (current().type != TokenType::BlockEnd)
      error("expected '%}', got " + describe(current()));
    advance();
  }

  ExprPtr makeExpr(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  NodePtr makeNode(Node::Kind kind, int line) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = line;
    return n;
  }

  // ---- statements ----

  // Parses until a block tag named in `endTags` (left unconsumed, after its
  // `{%`), or the end of the template when endTags is empty.
  Body subparse(std::initializer_list<const char*> endTags) {
    Body body;
    while (true) {
      const Token& token = current();
      switch (token.type) {
      case TokenType::Data: {
        auto node = makeNode(Node::Kind::Text, token.line);
        node->text = token.text;
        body.push_back(std::move(node));
        advance();
        break;
      }
      case TokenType::VariableBegin: {
        auto node = makeNode(Node::Kind::Output, token.line);
        advance();
        node->expr = parseTuple(true, {}, false);
        if (current().type != TokenType::VariableEnd)
          error("expected '}}', got " + describe(current()));
        advance();
        body.push_back(std::move(node));
        break;
      }
      case TokenType::BlockBegin: {
        advance();
        if (current().type != TokenType::Name)
          error("expected a tag name after '{%', got " + describe(current()));
        for (const char* end : endTags)
          if (current().text == end)
            return body;
        body.push_back(parseStatement());
        break;
      }
      case TokenType::Eof: {
        if (endTags.size() != 0) {
          std::string expected;
          for (const char* end : endTags)
            expected += std::string(expected.empty() ? "'" : " or '") + end + "'";
          error("unexpected end of template; expected " + expected);
        }
        return body;
      }
      default:
        error("unexpected " + describe(token));
      }
    }
  }

  NodePtr parseStatement() {
    const std::string tag = current().text;
    const int line = current().line;
    if (tag == "if")
      return parseIf();
    if (tag == "for")
      return parseFor();
    if (tag == "set")
      return parseSet();
    if (tag == "macro")
      return parseMacro();
    if (tag == "with")
      return parseWith();
    if (tag == "generation") {
      advance();
      auto node = makeNode(Node::Kind::Generation, line);
      expectBlockEnd();
      node->body = subparse({"endgeneration"});
      advance();
      expectBlockEnd();
      return node;
    }
    if (tag == "print") {
      advance();
      auto node = makeNode(Node::Kind::Output, line);
      node->expr = parseTuple(true, {}, false);
      expectBlockEnd();
      return node;
    }
    if (tag == "break" || tag == "continue") {
      if (loopDepth_ == 0)
        error("'" + tag + "' outside of a loop");
      advance();
      expectBlockEnd();
      return makeNode(tag == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
    }
    if (listed(kUnsupportedTags, tag))
      error("the '" + tag + "' tag is not supported by ninfer's chat template engine");
    static const char* const kEndTags[] = {"endif",   "elif",      "else",     "endfor",
                                           "endset",  "endmacro",  "endwith",  "endgeneration",
                                           "endcall", "endfilter", "endblock", "endraw"};
    if (listed(kEndTags, tag))
      error("unexpected '" + tag + "' (no open block it could close)");
    error("unknown tag '" + tag + "'");
  }

  NodePtr parseIf() {
    auto node = makeNode(Node::Kind::If, current().line);
    advance(); // if
    while (true) {
      node->conditions.push_back(parseTuple(false, {}, false));
      expectBlockEnd();
      node->bodies.push_back(subparse({"elif", "else", "endif"}));
      const std::string tag = current().text;
      advance();
      if (tag == "elif")
        continue;
      if (tag == "else") {
        expectBlockEnd();
        node->elseBody = subparse({"endif"});
        advance();
      }
      expectBlockEnd();
      return node;
    }
  }

  NodePtr parseFor() {
    auto node = makeNode(Node::Kind::For, current().line);
    advance(); // for
    node->target = parseAssignTarget({"in"}, false);
    expectName("in");
    node->expr = parseTuple(false, {"recursive"}, false);
    if (skipName("if"))
      node->filter = parseExpression(true);
    if (isName("recursive"))
      error("recursive for loops are not supported by ninfer's chat template engine");
    expectBlockEnd();
    ++loopDepth_;
    node->body = subparse({"endfor", "else"});
    --loopDepth_;
    node->usesLoopVariable = mentions(node->body, "loop");
    const std::string tag = current().text;
    advance();
    if (tag == "else") {
      expectBlockEnd();
      node->elseBody = subparse({"endfor"});
      advance();
    }
    expectBlockEnd();
    return node;
  }

  NodePtr parseSet() {
    const int line = current().line;
    advance(); // set
    Target target = parseAssignTarget({}, true);
    if (skipOp("=")) {
      auto node = makeNode(Node::Kind::Set, line);
      node->target = std::move(target);
      node->expr = parseTuple(true, {}, false);
      expectBlockEnd();
      return node;
    }
    auto node = makeNode(Node::Kind::SetBlock, line);
    node->target = std::move(target);
    if (isOp("|"))
      node->filter = parseFilters(nullptr);
    expectBlockEnd();
    node->body = subparse({"endset"});
    advance();
    expectBlockEnd();
    return node;
  }

  NodePtr parseMacro() {
    auto node = makeNode(Node::Kind::Macro, current().line);
    advance(); // macro
    node->name = expectIdentifier();
    expectOp("(");
    while (!isOp(")")) {
      if (!node->params.empty())
        expectOp(",");
      if (isOp(")"))
        break;
      node->params.push_back(expectIdentifier());
      if (skipOp("="))
        node->defaults.push_back(parseExpression(true));
      else if (!node->defaults.empty())
        error("non-default argument follows default argument");
    }
    expectOp(")");
    expectBlockEnd();
    const int savedLoopDepth = loopDepth_;
    loopDepth_ = 0;
    node->body = subparse({"endmacro"});
    loopDepth_ = savedLoopDepth;
    advance();
    expectBlockEnd();
    return node;
  }

  NodePtr parseWith() {
    auto node = makeNode(Node::Kind::With, current().line);
    advance(); // with
    while (current().type != TokenType::BlockEnd) {
      if (!node->withTargets.empty())
        expectOp(",");
      node->withTargets.push_back(expectIdentifier());
      expectOp("=");
      node->withValues.push_back(parseExpression(true));
    }
    expectBlockEnd();
    node->body = subparse({"endwith"});
    advance();
    expectBlockEnd();
    return node;
  }

  // name | name, name, ... | namespace.attribute (with withNamespace)
  Target parseAssignTarget(std::initializer_list<const char*> endNames, bool withNamespace) {
    Target target;
    while (true) {
      if (current().type != TokenType::Name)
        error("can't assign to " + describe(current()));
      const std::string name = current().text;
      if (name == "true" || name == "false" || name == "none" || name == "True" ||
          name == "False" || name == "None")
        error("can't assign to the constant '" + name + "'");
      advance();
      if (withNamespace && isOp(".")) {
        if (!target.names.empty())
          error("can't assign to a namespace attribute inside a tuple");
        advance();
        target.names.push_back(name);
        target.namespaceAttribute = expectIdentifier();
        return target;
      }
      target.names.push_back(name);
      if (!isOp(","))
        return target;
      advance();
      target.isTuple = true;
      bool end = current().type == TokenType::BlockEnd || isOp("=");
      for (const char* e : endNames)
        end = end || isName(e);
      if (end)
        return target;
    }
  }

  // ---- expressions ----

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth)
        parser.error("expression nested too deeply");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  bool isTupleEnd(std::initializer_list<const char*> extraEnd) const {
    const Token& t = current();
    if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd ||
        t.type == TokenType::Eof)
      return true;
    if (t.type == TokenType::Operator && t.text == ")")
      return true;
    for (const char* e : extraEnd)
      if (t.type == TokenType::Name && t.text == e)
        return true;
    return false;
  }

  ExprPtr parseTuple(bool withCondexpr, std::initializer_list<const char*> extraEnd,
                     bool explicitParentheses) {
    const int line = current().line;
    std::vector<ExprPtr> items;
    bool isTuple = false;
    while (true) {
      if (!items.empty())
        expectOp(",");
      if (isTupleEnd(extraEnd))
        break;
      items.push_back(parseExpression(withCondexpr));
      if (isOp(","))
        isTuple = true;
      else
        break;
    }
    if (!isTuple) {
      if (!items.empty())
        return std::move(items[0]);
      if (!explicitParentheses)
        error("expected an expression, got " + describe(current()));
    }
    auto tuple = makeExpr(Expr::Kind::Tuple, line);
    tuple->children = std::move(items);
    return tuple;
  }

  ExprPtr parseExpression(bool withCondexpr) {
    DepthGuard guard(*this);
    return withCondexpr ? parseCondExpr() : parseOr();
  }

  ExprPtr parseCondExpr() {
    ExprPtr expr = parseOr();
    while (isName("if")) {
      const int line = current().line;
      advance();
      ExprPtr condition = parseOr();
      ExprPtr otherwise;
      if (skipName("else"))
        otherwise = parseCondExpr();
      auto node = makeExpr(Expr::Kind::CondExpr, line);
      node->children.push_back(std::move(expr));
      node->children.push_back(std::move(condition));
      node->children.push_back(std::move(otherwise));
      expr = std::move(node);
    }
    return expr;
  }

  ExprPtr binary(Expr::Kind kind, ExprPtr left, ExprPtr right, int line, std::string op = "") {
    auto node = makeExpr(kind, line);
    node->name = std::move(op);
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    return node;
  }

  ExprPtr parseOr() {
    ExprPtr left = parseAnd();
    while (isName("or")) {
      const int line = current().line;
      advance();
      left = binary(Expr::Kind::Or, std::move(left), parseAnd(), line);
    }
    return left;
  }

  ExprPtr parseAnd() {
    ExprPtr left = parseNot();
    while (isName("and")) {
      const int line = current().line;
      advance();
      left = binary(Expr::Kind::And, std::move(left), parseNot(), line);
    }
    return left;
  }

  ExprPtr parseNot() {
    if (isName("not")) {
      DepthGuard guard(*this);
      const int line = current().line;
      advance();
      auto node = makeExpr(Expr::Kind::Not, line);
      node->children.push_back(parseNot());
      return node;
    }
    return parseCompare();
  }

  ExprPtr parseCompare() {
    const int line = current().line;
    ExprPtr first = parseMath1();
    std::unique_ptr<Expr> node;
    while (true) {
      std::string op;
      if (current().type == TokenType::Operator &&
          (current().text == "==" || current().text == "!=" || current().text == "<" ||
           current().text == "<=" || current().text == ">" || current().text == ">=")) {
        op = current().text;
        advance();
      } else if (isName("in")) {
        op = "in";
        advance();
      } else if (isName("not") && peek().type == TokenType::Name && peek().text == "in") {
        op = "notin";
        advance();
        advance();
      } else {
        break;
      }
      if (!node) {
        node = makeExpr(Expr::Kind::Compare, line);
        node->children.push_back(std::move(first));
      }
      node->ops.push_back(op);
      node->children.push_back(parseMath1());
    }
    return node ? std::move(node) : std::move(first);
  }

  ExprPtr parseMath1() {
    ExprPtr left = parseConcat();
    while (isOp("+") || isOp("-")) {
      const int line = current().line;
      std::string op = current().text;
      advance();
      left = binary(Expr::Kind::Binary, std::move(left), parseConcat(), line, op);
    }
    return left;
  }

  ExprPtr parseConcat() {
    const int line = current().line;
    ExprPtr first = parseMath2();
    if (!isOp("~"))
      return first;
    auto node = makeExpr(Expr::Kind::Concat, line);
    node->children.push_back(std::move(first));
    while (skipOp("~"))
      node->children.push_back(parseMath2());
    return node;
  }

  ExprPtr parseMath2() {
    ExprPtr left = parsePow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      const int line = current().line;
      std::string op = current().text;
      advance();
      left = binary(Expr::Kind::Binary, std::move(left), parsePow(), line, op);
    }
    return left;
  }

  ExprPtr parsePow() {
    ExprPtr left = parseUnary(true);
    while (isOp("**")) {
      const int line = current().line;
      advance();
      left = binary(Expr::Kind::Binary, std::move(left), parseUnary(true), line, "**");
    }
    return left;
  }

  ExprPtr parseUnary(bool withFilter) {
    DepthGuard guard(*this);
    const int line = current().line;
    ExprPtr node;
    if (isOp("-") || isOp("+")) {
      const bool negate = isOp("-");
      advance();
      node = makeExpr(negate ? Expr::Kind::Negate : Expr::Kind::Plus, line);
      node->children.push_back(parseUnary(false));
    } else {
      node = parsePrimary();
    }
    node = parsePostfix(std::move(node));
    if (withFilter)
      node = parseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr parsePrimary() {
    DepthGuard guard(*this);
    const Token& token = current();
    const int line = token.line;
    switch (token.type) {
    case TokenType::Name: {
      const std::string name = token.text;
      advance();
      auto node = makeExpr(Expr::Kind::Const, line);
      if (name == "true" || name == "True")
        node->constant = Value::boolean(true);
      else if (name == "false" || name == "False")
        node->constant = Value::boolean(false);
      else if (name == "none" || name == "None")
        node->constant = Value::none();
      else {
        node->kind = Expr::Kind::Name;
        node->name = name;
      }
      return node;
    }
    case TokenType::String: {
      std::string text;
      while (current().type == TokenType::String) { // adjacent literals concatenate
        text += current().text;
        advance();
      }
      auto node = makeExpr(Expr::Kind::Const, line);
      node->constant = Value::string(std::move(text));
      return node;
    }
    case TokenType::Integer: {
      auto node = makeExpr(Expr::Kind::Const, line);
      node->constant = Value::integer(token.integer);
      advance();
      return node;
    }
    case TokenType::Float: {
      auto node = makeExpr(Expr::Kind::Const, line);
      node->constant = Value::number(token.number);
      advance();
      return node;
    }
    case TokenType::Operator:
      if (token.text == "(") {
        advance();
        ExprPtr inner = parseTuple(true, {}, true);
        expectOp(")");
        return inner;
      }
      if (token.text == "[") {
        advance();
        auto node = makeExpr(Expr::Kind::List, line);
        while (!isOp("]")) {
          if (!node->children.empty())
            expectOp(",");
          if (isOp("]"))
            break;
          node->children.push_back(parseExpression(true));
        }
        expectOp("]");
        return node;
      }
      if (token.text == "{") {
        advance();
        auto node = makeExpr(Expr::Kind::Dict, line);
        while (!isOp("}")) {
          if (!node->children.empty())
            expectOp(",");
          if (isOp("}"))
            break;
          node->children.push_back(parseExpression(true));
          expectOp(":");
          node->children.push_back(parseExpression(true));
        }
        expectOp("}");
        return node;
      }
      break;
    default:
      break;
    }
    error("unexpected " + describe(token));
  }

  ExprPtr parsePostfix(ExprPtr node) {
    while (true) {
      if (isOp(".") || isOp("[")) {
        node = parseSubscript(std::move(node));
      } else if (isOp("(")) {
        node = parseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parseFilterExpr(ExprPtr node) {
    while (true) {
      if (isOp("|")) {
        node = parseFilters(std::move(node));
      } else if (isName("is")) {
        node = parseTest(std::move(node));
      } else if (isOp("(")) {
        node = parseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parseSubscript(ExprPtr object) {
    const int line = current().line;
    if (skipOp(".")) {
      if (current().type == TokenType::Name) {
        auto node = makeExpr(Expr::Kind::GetAttr, line);
        node->name = current().text;
        advance();
        node->children.push_back(std::move(object));
        return node;
      }
      if (current().type != TokenType::Integer)
        error("expected a name or number after '.'");
      auto node = makeExpr(Expr::Kind::GetItem, line);
      auto index = makeExpr(Expr::Kind::Const, line);
      index->constant = Value::integer(current().integer);
      advance();
      node->children.push_back(std::move(object));
      node->children.push_back(std::move(index));
      return node;
    }
    expectOp("[");
    std::vector<ExprPtr> args;
    while (!isOp("]")) {
      if (!args.empty())
        expectOp(",");
      args.push_back(parseSubscribed(object));
      if (args.back() && args.back()->kind == Expr::Kind::Slice) {
        // A slice node already holds the object; nothing else may follow.
        expectOp("]");
        return std::move(args.back());
      }
    }
    expectOp("]");
    if (args.empty())
      error("expected a subscript expression");
    auto node = makeExpr(Expr::Kind::GetItem, line);
    node->children.push_back(std::move(object));
    if (args.size() == 1) {
      node->children.push_back(std::move(args[0]));
    } else {
      auto tuple = makeExpr(Expr::Kind::Tuple, line);
      tuple->children = std::move(args);
      node->children.push_back(std::move(tuple));
    }
    return node;
  }

  // An index expression or a slice [start:stop:step]. A slice takes over `object`.
  ExprPtr parseSubscribed(ExprPtr& object) {
    const int line = current().line;
    ExprPtr start;
    if (!isOp(":")) {
      start = parseExpression(true);
      if (!isOp(":"))
        return start;
    }
    advance(); // ':'
    ExprPtr stop, step;
    if (!isOp(":") && !isOp("]") && !isOp(","))
      stop = parseExpression(true);
    if (skipOp(":")) {
      if (!isOp("]") && !isOp(","))
        step = parseExpression(true);
    }
    auto node = makeExpr(Expr::Kind::Slice, line);
    node->children.push_back(std::move(object));
    node->children.push_back(std::move(start));
    node->children.push_back(std::move(stop));
    node->children.push_back(std::move(step));
    return node;
  }

  void parseCallArgs(Expr& node) {
    expectOp("(");
    bool needComma = false;
    while (!isOp(")")) {
      if (needComma) {
        expectOp(",");
        if (isOp(")"))
          break;
      }
      if (isOp("*") || isOp("**"))
        error("'" + current().text +
              "' arguments in calls are not supported by ninfer's chat "
              "template engine");
      if (current().type == TokenType::Name && peek().type == TokenType::Operator &&
          peek().text == "=") {
        std::string key = current().text;
        advance();
        advance();
        node.keywords.emplace_back(std::move(key), parseExpression(true));
      } else {
        if (!node.keywords.empty())
          error("positional argument follows keyword argument");
        node.children.push_back(parseExpression(true));
      }
      needComma = true;
    }
    expectOp(")");
  }

  ExprPtr parseCall(ExprPtr callee) {
    auto node = makeExpr(Expr::Kind::Call, current().line);
    // Refuse at parse time what can never run.
    if (callee->kind == Expr::Kind::Name) {
      if (listed(kOtherJinjaGlobals, callee->name))
        error("the function '" + callee->name +
              "' is not supported by ninfer's chat template engine");
    } else if (callee->kind == Expr::Kind::GetAttr) {
      if (!hasMethod(callee->name) && listed(kOtherPythonMethods, callee->name))
        error("the method '" + callee->name +
              "()' is not supported by ninfer's chat template engine");
    }
    node->children.push_back(std::move(callee));
    parseCallArgs(*node);
    return node;
  }

  ExprPtr parseFilters(ExprPtr operand) {
    while (skipOp("|")) {
      const int line = current().line;
      std::string name = expectIdentifier();
      if (isOp("."))
        error("dotted filter names ('" + name + ".…') are not supported");
      if (!hasFilter(name)) {
        if (listed(kOtherJinjaFilters, name))
          error("the filter '" + name + "' is not supported by ninfer's chat template engine");
        error("unknown filter '" + name + "'");
      }
      auto node = makeExpr(Expr::Kind::Filter, line);
      node->name = name;
      node->children.push_back(std::move(operand));
      if (isOp("("))
        parseCallArgs(*node);
      operand = std::move(node);
    }
    return operand;
  }

  ExprPtr parseTest(ExprPtr operand) {
    const int line = current().line;
    advance(); // is
    const bool negated = skipName("not");
    if (current().type != TokenType::Name)
      error("expected a test name after 'is', got " + describe(current()));
    const std::string name = current().text;
    advance();
    if (isOp("."))
      error("dotted test names are not supported");
    if (!hasTest(name)) {
      if (listed(kOtherJinjaTests, name))
        error("the test '" + name + "' is not supported by ninfer's chat template engine");
      error("unknown test '" + name + "'");
    }
    auto node = makeExpr(Expr::Kind::Test, line);
    node->name = name;
    node->negated = negated;
    node->children.push_back(std::move(operand));
    const Token& t = current();
    if (isOp("(")) {
      parseCallArgs(*node);
    } else if ((t.type == TokenType::Name || t.type == TokenType::String ||
                t.type == TokenType::Integer || t.type == TokenType::Float ||
                (t.type == TokenType::Operator &&
                 (t.text == "(" || t.text == "[" || t.text == "{"))) &&
               !isName("else") && !isName("or") && !isName("and")) {
      if (isName("is"))
        error("you cannot chain multiple tests with 'is'");
      node->children.push_back(parsePostfix(parsePrimary()));
    }
    return node;
  }

  std::vector<Token> tokens_;
  size_t index_ = 0;
  int depth_ = 0;
  int loopDepth_ = 0;
};

} // namespace

Template parseTemplate(std::string_view source) { return Parser(tokenize(source)).run(); }

} // namespace jinja
} // namespace ninfer
