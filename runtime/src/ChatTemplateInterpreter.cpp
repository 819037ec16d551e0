// The chat-template interpreter: statements, expressions, and the filters,
// tests, methods and global functions real chat templates use. Each behaves
// as in jinja2 3.1 on CPython (the reference); where a corner of Python is not
// reproduced, the interpreter raises an error instead of guessing.
#include "ChatTemplateInterpreter.h"

#include "ChatTemplateParser.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <limits>

namespace ninfer {
namespace jinja {
namespace {

// Guards against templates that would run away (all far beyond real templates).
constexpr size_t kMaxOutputBytes = size_t(64) << 20;
constexpr uint64_t kMaxSteps = 2'000'000;
constexpr int kMaxCallDepth = 64;
constexpr int64_t kMaxRangeLength = 100'000;

const char* const kFilters[] = {
    "abs",     "capitalize", "count",  "d",      "default",    "dictsort", "e",          "escape",
    "first",   "float",      "indent", "int",    "items",      "join",     "last",       "length",
    "list",    "lower",      "map",    "max",    "min",        "reject",   "rejectattr", "replace",
    "reverse", "round",      "safe",   "select", "selectattr", "sort",     "string",     "sum",
    "title",   "tojson",     "trim",   "unique", "upper"};
const char* const kTests[] = {"boolean",  "callable",    "defined", "divisibleby", "eq",
                              "equalto",  "even",        "false",   "float",       "ge",
                              "gt",       "greaterthan", "in",      "integer",     "iterable",
                              "le",       "lower",       "lt",      "lessthan",    "mapping",
                              "ne",       "none",        "number",  "odd",         "sameas",
                              "sequence", "string",      "true",    "undefined",   "upper",
                              "==",       "!=",          "<",       "<=",          ">",
                              ">="};
const char* const kGlobals[] = {"raise_exception", "strftime_now", "namespace", "dict", "range"};
const char* const kMethods[] = {
    "strip",      "lstrip",  "rstrip",  "startswith",   "endswith",     "split",   "rsplit",
    "splitlines", "title",   "upper",   "lower",        "capitalize",   "replace", "find",
    "rfind",      "index",   "count",   "join",         "isdigit",      "isalpha", "isalnum",
    "isspace",    "isupper", "islower", "removeprefix", "removesuffix", "items",   "keys",
    "values",     "get",     "cycle"};

template <size_t N> bool listed(const char* const (&list)[N], std::string_view name) {
  return std::any_of(std::begin(list), std::end(list),
                     [&](const char* item) { return name == item; });
}

struct Scope;
using ScopePtr = std::shared_ptr<Scope>;
struct Scope {
  explicit Scope(ScopePtr parent) : parent(std::move(parent)) {}
  ScopePtr parent;
  Dict vars;
  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      if (const Value* v = s->vars.find(name))
        return v;
    return nullptr;
  }
};

struct BuiltinFunction : Callable {
  explicit BuiltinFunction(std::string name) : Callable(Kind::Builtin, std::move(name)) {}
};
struct MacroFunction : Callable {
  MacroFunction(const Node* node, ScopePtr closure)
      : Callable(Kind::Macro, node->name), node(node), closure(std::move(closure)) {}
  const Node* node;
  ScopePtr closure;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

enum class Flow { Normal, Break, Continue };

[[noreturn]] void failUndefined(const Value& v) { fail(v.undefinedHint()); }

std::string objectName(const Value& v) { return "'" + typeName(v) + " object'"; }

// ---- argument binding ----

// The argument at `index` or keyword `name`; Undefined when not given.
class Binder {
public:
  Binder(const CallArgs& args, std::string what, std::initializer_list<const char*> names)
      : args_(args), what_(std::move(what)), names_(names) {
    if (args.positional.size() > names_.size())
      fail(what_ + " takes at most " + std::to_string(names_.size()) + " arguments (" +
           std::to_string(args.positional.size()) + " given)");
    for (const auto& [key, value] : args.keywords)
      if (std::find(names_.begin(), names_.end(), key) == names_.end())
        fail(what_ + " got an unexpected keyword argument '" + key + "'");
  }
  Value get(size_t index) const {
    if (index < args_.positional.size())
      return args_.positional[index];
    for (const auto& [key, value] : args_.keywords)
      if (key == names_[index])
        return value;
    return Value();
  }
  bool given(size_t index) const {
    if (index < args_.positional.size())
      return true;
    for (const auto& [key, value] : args_.keywords)
      if (key == names_[index])
        return true;
    return false;
  }

private:
  const CallArgs& args_;
  std::string what_;
  std::vector<const char*> names_;
};

int64_t toIndexInt(const Value& v, const std::string& what) {
  if (v.isInt() || v.isBool())
    return v.asInt();
  if (v.isUndefined())
    failUndefined(v);
  fail(what + " must be an integer, not '" + typeName(v) + "'");
}

std::string requireString(const Value& v, const std::string& what) {
  if (v.isString())
    return v.asString();
  if (v.isUndefined())
    failUndefined(v);
  fail(what + " must be a string, not '" + typeName(v) + "'");
}

// ---- Python string operations on code points ----

bool isCased(char32_t c) { return isCasedLetter(c); }
bool isLetter(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && isCased(c));
}

std::string pyCapitalize(const std::string& s) {
  std::u32string text = decodeUtf8(s);
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = i == 0 ? asciiUpper(text[i]) : asciiLower(text[i]);
  return encodeUtf8(text);
}

// str.title(): a cased character after an uncased one starts a word.
std::string pyTitle(const std::string& s) {
  std::u32string text = decodeUtf8(s);
  bool previousCased = false;
  for (char32_t& c : text) {
    const bool cased = isCased(c);
    c = previousCased ? asciiLower(c) : asciiUpper(c);
    previousCased = cased;
  }
  return encodeUtf8(text);
}

// jinja2's title filter: words start after runs of [-\s({\[<].
std::string jinjaTitle(const std::string& s) {
  std::u32string text = decodeUtf8(s);
  bool wordStart = true;
  for (char32_t& c : text) {
    const bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || isPySpace(c);
    if (separator) {
      wordStart = true;
      continue;
    }
    c = wordStart ? asciiUpper(c) : asciiLower(c);
    wordStart = false;
  }
  return encodeUtf8(text);
}

std::vector<std::string> pySplit(const std::string& s, const Value& sepValue, int64_t maxSplit,
                                 bool fromRight) {
  std::vector<std::string> parts;
  if (sepValue.isNone() || sepValue.isUndefined()) {
    std::u32string text = decodeUtf8(s);
    std::vector<std::u32string> words;
    if (!fromRight) {
      size_t i = 0;
      while (true) {
        while (i < text.size() && isPySpace(text[i]))
          ++i;
        if (i >= text.size())
          break;
        if (maxSplit >= 0 && int64_t(words.size()) == maxSplit) {
          size_t end = text.size();
          while (end > i && isPySpace(text[end - 1]))
            --end;
          words.push_back(text.substr(i, end - i));
          break;
        }
        size_t j = i;
        while (j < text.size() && !isPySpace(text[j]))
          ++j;
        words.push_back(text.substr(i, j - i));
        i = j;
      }
    } else {
      size_t i = text.size();
      while (true) {
        while (i > 0 && isPySpace(text[i - 1]))
          --i;
        if (i == 0)
          break;
        if (maxSplit >= 0 && int64_t(words.size()) == maxSplit) {
          size_t start = 0;
          while (start < i && isPySpace(text[start]))
            ++start;
          words.push_back(text.substr(start, i - start));
          break;
        }
        size_t j = i;
        while (j > 0 && !isPySpace(text[j - 1]))
          --j;
        words.push_back(text.substr(j, i - j));
        i = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (const auto& w : words)
      parts.push_back(encodeUtf8(w));
    return parts;
  }
  const std::string sep = requireString(sepValue, "split() separator");
  if (sep.empty())
    fail("empty separator");
  if (!fromRight) {
    size_t start = 0;
    while (true) {
      if (maxSplit >= 0 && int64_t(parts.size()) == maxSplit)
        break;
      const size_t at = s.find(sep, start);
      if (at == std::string::npos)
        break;
      parts.push_back(s.substr(start, at - start));
      start = at + sep.size();
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (true) {
    if (maxSplit >= 0 && int64_t(parts.size()) == maxSplit)
      break;
    if (end < sep.size())
      break;
    const size_t at = s.rfind(sep, end - sep.size());
    if (at == std::string::npos)
      break;
    parts.push_back(s.substr(at + sep.size(), end - at - sep.size()));
    end = at;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

bool isLineBreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::vector<std::string> pySplitLines(const std::string& s, bool keepEnds) {
  std::u32string text = decodeUtf8(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!isLineBreak(text[i]))
      continue;
    size_t end = i + 1;
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')
      end = i + 2;
    lines.push_back(encodeUtf8(text.substr(start, (keepEnds ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < text.size())
    lines.push_back(encodeUtf8(text.substr(start)));
  return lines;
}

std::string pyReplace(const std::string& s, const std::string& from, const std::string& to,
                      int64_t count) {
  if (from.empty()) { // inserts `to` around every character
    std::u32string text = decodeUtf8(s);
    std::string out;
    int64_t done = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < text.size())
        out += encodeUtf8(text.substr(i, 1));
    }
    return out;
  }
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(from, start);
    if (at == std::string::npos)
      break;
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

// Byte offset -> code point index.
int64_t codePointIndex(const std::string& s, size_t byteOffset) {
  return int64_t(codePointCount(std::string_view(s).substr(0, byteOffset)));
}

std::string htmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&#34;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

// ---- arithmetic ----

Value numberResult(double d) { return Value::number(d); }

Value intResult(bool overflow, int64_t value, const char* op) {
  if (overflow)
    fail(std::string("integer overflow in '") + op + "'");
  return Value::integer(value);
}

[[noreturn]] void badOperands(const char* op, const Value& a, const Value& b) {
  if (a.isUndefined())
    failUndefined(a);
  if (b.isUndefined())
    failUndefined(b);
  fail(std::string("unsupported operand type(s) for ") + op + ": '" + typeName(a) + "' and '" +
       typeName(b) + "'");
}

bool isIntLike(const Value& v) { return v.isInt() || v.isBool(); }

Value repeat(const Value& seq, int64_t times) {
  if (times <= 0)
    return seq.isString() ? Value::string("") : seq.isTuple() ? Value::tuple({}) : Value::list({});
  if (seq.isString()) {
    if (seq.asString().size() * uint64_t(times) > kMaxOutputBytes)
      fail("string repetition result is too large");
    std::string out;
    for (int64_t i = 0; i < times; ++i)
      out += seq.asString();
    return Value::string(std::move(out));
  }
  if (seq.asList().size() * uint64_t(times) > uint64_t(kMaxRangeLength))
    fail("list repetition result is too large");
  List out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), seq.asList().begin(), seq.asList().end());
  return seq.isTuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

void pyFloatDivMod(double x, double y, double& floorDiv, double& mod) {
  if (y == 0.0)
    fail("float division by zero");
  mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  if (div != 0.0) {
    floorDiv = std::floor(div);
    if (div - floorDiv > 0.5)
      floorDiv += 1.0;
  } else {
    floorDiv = std::copysign(0.0, x / y);
  }
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool numbers = a.isNumber() && b.isNumber();
  const bool floats = numbers && (a.isFloat() || b.isFloat());
  if (op == "+") {
    if (numbers) {
      if (floats)
        return numberResult(a.asFloat() + b.asFloat());
      int64_t r = 0;
      const bool overflow = __builtin_add_overflow(a.asInt(), b.asInt(), &r);
      return intResult(overflow, r, "+");
    }
    if (a.isString() && b.isString())
      return Value::string(a.asString() + b.asString());
    if (a.kind() == b.kind() && a.isSequence()) {
      List items = a.asList();
      items.insert(items.end(), b.asList().begin(), b.asList().end());
      return a.isTuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    badOperands("+", a, b);
  }
  if (op == "-") {
    if (!numbers)
      badOperands("-", a, b);
    if (floats)
      return numberResult(a.asFloat() - b.asFloat());
    int64_t r = 0;
    const bool overflow = __builtin_sub_overflow(a.asInt(), b.asInt(), &r);
    return intResult(overflow, r, "-");
  }
  if (op == "*") {
    if (numbers) {
      if (floats)
        return numberResult(a.asFloat() * b.asFloat());
      int64_t r = 0;
      const bool overflow = __builtin_mul_overflow(a.asInt(), b.asInt(), &r);
      return intResult(overflow, r, "*");
    }
    if ((a.isString() || a.isSequence()) && isIntLike(b))
      return repeat(a, b.asInt());
    if (isIntLike(a) && (b.isString() || b.isSequence()))
      return repeat(b, a.asInt());
    badOperands("*", a, b);
  }
  if (op == "/") {
    if (!numbers)
      badOperands("/", a, b);
    if (b.asFloat() == 0.0)
      fail("division by zero");
    return numberResult(a.asFloat() / b.asFloat());
  }
  if (op == "//" || op == "%") {
    if (a.isString() && op == "%")
      fail("printf-style string formatting ('...' % value) is not supported by ninfer's chat "
           "template engine");
    if (!numbers)
      badOperands(op.c_str(), a, b);
    if (floats) {
      double div, mod;
      pyFloatDivMod(a.asFloat(), b.asFloat(), div, mod);
      return numberResult(op == "//" ? div : mod);
    }
    const int64_t x = a.asInt(), y = b.asInt();
    if (y == 0)
      fail("integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1)
      fail("integer overflow in '" + op + "'");
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      r += y;
      --q;
    }
    return Value::integer(op == "//" ? q : r);
  }
  if (op == "**") {
    if (!numbers)
      badOperands("**", a, b);
    if (!floats && b.asInt() >= 0) {
      int64_t result = 1, base = a.asInt(), exp = b.asInt();
      while (exp > 0) {
        if (exp & 1)
          if (__builtin_mul_overflow(result, base, &result))
            fail("integer overflow in '**'");
        exp >>= 1;
        if (exp > 0 && __builtin_mul_overflow(base, base, &base))
          fail("integer overflow in '**'");
      }
      return Value::integer(result);
    }
    if (a.asFloat() == 0.0 && b.asFloat() < 0)
      fail("0.0 cannot be raised to a negative power");
    return numberResult(std::pow(a.asFloat(), b.asFloat()));
  }
  fail("unknown operator '" + op + "'");
}

// ---- containers ----

List iterate(const Value& v) {
  switch (v.kind()) {
  case ValueKind::Undefined:
    return {};
  case ValueKind::List:
  case ValueKind::Tuple:
    return v.asList();
  case ValueKind::String: {
    List chars;
    const std::string& s = v.asString();
    for (size_t pos = 0; pos < s.size();) {
      size_t length = 1;
      while (pos + length < s.size() &&
             (static_cast<unsigned char>(s[pos + length]) & 0xC0) == 0x80)
        ++length;
      chars.push_back(Value::string(s.substr(pos, length)));
      pos += length;
    }
    return chars;
  }
  case ValueKind::Dict: {
    List keys;
    for (const auto& entry : v.asDict().entries)
      keys.push_back(Value::string(entry.first));
    return keys;
  }
  default:
    fail("'" + typeName(v) + "' object is not iterable");
  }
}

bool containsValue(const Value& container, const Value& item) {
  switch (container.kind()) {
  case ValueKind::Undefined:
    return false;
  case ValueKind::String:
    if (!item.isString()) {
      if (item.isUndefined())
        failUndefined(item);
      fail("'in <string>' requires string as left operand, not " + typeName(item));
    }
    return container.asString().find(item.asString()) != std::string::npos;
  case ValueKind::List:
  case ValueKind::Tuple:
    for (const Value& element : container.asList())
      if (equals(element, item))
        return true;
    return false;
  case ValueKind::Dict:
    return item.isString() && container.asDict().find(item.asString()) != nullptr;
  default:
    fail("argument of type '" + typeName(container) + "' is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
  case ValueKind::Undefined:
    return 0;
  case ValueKind::String:
    return int64_t(codePointCount(v.asString()));
  case ValueKind::List:
  case ValueKind::Tuple:
    return int64_t(v.asList().size());
  case ValueKind::Dict:
    return int64_t(v.asDict().entries.size());
  default:
    fail("object of type '" + typeName(v) + "' has no len()");
  }
}

Value getAttribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
  case ValueKind::Undefined:
    failUndefined(object);
  case ValueKind::Dict:
  case ValueKind::Namespace:
    if (const Value* v = object.asDict().find(name))
      return *v;
    break;
  default:
    break;
  }
  return Value::undefined(objectName(object) + " has no attribute '" + name + "'");
}

Value getItem(const Value& object, const Value& key) {
  switch (object.kind()) {
  case ValueKind::Undefined:
    failUndefined(object);
  case ValueKind::Dict:
  case ValueKind::Namespace:
    if (key.isString()) {
      if (const Value* v = object.asDict().find(key.asString()))
        return *v;
      return Value::undefined(objectName(object) + " has no attribute '" + key.asString() + "'");
    }
    break;
  case ValueKind::List:
  case ValueKind::Tuple:
  case ValueKind::String:
    if (isIntLike(key)) {
      int64_t index = key.asInt();
      if (object.isString()) {
        std::u32string text = decodeUtf8(object.asString());
        const int64_t n = int64_t(text.size());
        if (index < 0)
          index += n;
        if (index >= 0 && index < n)
          return Value::string(encodeUtf8(text.substr(size_t(index), 1)));
      } else {
        const int64_t n = int64_t(object.asList().size());
        if (index < 0)
          index += n;
        if (index >= 0 && index < n)
          return object.asList()[size_t(index)];
      }
      return Value::undefined(typeName(object) + " object has no element " +
                              std::to_string(key.asInt()));
    }
    if (key.isString())
      return Value::undefined(objectName(object) + " has no attribute '" + key.asString() + "'");
    break;
  default:
    break;
  }
  return Value::undefined(objectName(object) + " has no element " + toRepr(key));
}

// Python slice semantics on lists, tuples and strings (code points).
Value sliceValue(const Value& object, const Value& startV, const Value& stopV, const Value& stepV) {
  if (object.isUndefined())
    failUndefined(object);
  if (!object.isSequence() && !object.isString())
    fail("'" + typeName(object) + "' object is not subscriptable with a slice");
  auto optionalInt = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.isNone() || (v.isUndefined() && v.undefinedHint().empty()))
      return std::nullopt;
    return toIndexInt(v, std::string("slice ") + what);
  };
  const std::optional<int64_t> start = optionalInt(startV, "start");
  const std::optional<int64_t> stop = optionalInt(stopV, "stop");
  const int64_t step = optionalInt(stepV, "step").value_or(1);
  if (step == 0)
    fail("slice step cannot be zero");
  std::u32string text;
  int64_t n;
  if (object.isString()) {
    text = decodeUtf8(object.asString());
    n = int64_t(text.size());
  } else {
    n = int64_t(object.asList().size());
  }
  auto clamp = [&](std::optional<int64_t> v, int64_t defaultValue) {
    if (!v)
      return defaultValue;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0)
        x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t begin = clamp(start, step < 0 ? n - 1 : 0);
  const int64_t end = clamp(stop, step < 0 ? -1 : n);
  std::vector<int64_t> indices;
  if (step > 0)
    for (int64_t i = begin; i < end; i += step)
      indices.push_back(i);
  else
    for (int64_t i = begin; i > end; i += step)
      indices.push_back(i);
  if (object.isString()) {
    std::u32string out;
    for (int64_t i : indices)
      out.push_back(text[size_t(i)]);
    return Value::string(encodeUtf8(out));
  }
  List out;
  for (int64_t i : indices)
    out.push_back(object.asList()[size_t(i)]);
  return object.isTuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// jinja2's make_attrgetter: "a.b.0" looks up items one part at a time.
Value attributePath(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    v = digits ? getItem(v, Value::integer(std::atoll(part.c_str())))
               : getItem(v, Value::string(part));
    if (dot == std::string::npos)
      return v;
    start = dot + 1;
  }
}

// Python's round(x, ndigits) for floats (correctly rounded, ties to even).
double pyRound(double x, int64_t digits) {
  if (!std::isfinite(x))
    return x;
  if (digits == 0)
    return std::nearbyint(x);
  if (digits > 0) {
    if (digits > 300)
      return x;
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer), "%.*f", int(digits), x);
    return std::strtod(buffer, nullptr);
  }
  const double scale = std::pow(10.0, double(-digits));
  return std::nearbyint(x / scale) * scale;
}

// Python's int(str, base) and float(str), for the int and float filters.
std::optional<int64_t> parseIntText(std::string text, int base) {
  text = pyStrip(text, std::nullopt, true, true);
  std::string digits;
  for (char c : text)
    if (c != '_')
      digits += c;
  if (digits.empty())
    return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (!end || *end != '\0' || errno == ERANGE)
    return std::nullopt;
  if (base != 16 && digits.find_first_of("xX") != std::string::npos)
    return std::nullopt;
  return int64_t(v);
}

std::optional<double> parseFloatText(const std::string& raw) {
  const std::string text = pyStrip(raw, std::nullopt, true, true);
  if (text.empty())
    return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (!end || *end != '\0')
    return std::nullopt;
  if (text.find_first_of("xXpP") != std::string::npos) // strtod's hex floats are not Python's
    return std::nullopt;
  return v;
}

// ---- the interpreter ----

class Interpreter {
public:
  std::string run(const Template& tmpl, const Dict& variables) {
    auto globals = std::make_shared<Scope>(nullptr);
    for (const char* name : kGlobals)
      globals->vars.set(name, Value::callable(std::make_shared<BuiltinFunction>(name)));
    auto context = std::make_shared<Scope>(globals);
    context->vars = variables;
    std::string out;
    exec(tmpl.body, context, out);
    return out;
  }

private:
  // ---- statements ----

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const NodePtr& node : body) {
      const Flow flow = execNode(*node, scope, out);
      if (flow != Flow::Normal)
        return flow;
    }
    return Flow::Normal;
  }

  void step() {
    if (++steps_ > kMaxSteps)
      fail("the template runs too long (more than " + std::to_string(kMaxSteps) + " steps)");
  }

  void append(std::string& out, const std::string& text) {
    out += text;
    if (out.size() > kMaxOutputBytes)
      fail("the rendered text is larger than " + std::to_string(kMaxOutputBytes >> 20) + " MiB");
  }

  Flow execNode(const Node& node, const ScopePtr& scope, std::string& out) {
    step();
    try {
      switch (node.kind) {
      case Node::Kind::Text:
        append(out, node.text);
        return Flow::Normal;
      case Node::Kind::Output:
        append(out, toStr(eval(*node.expr, scope)));
        return Flow::Normal;
      case Node::Kind::If:
        for (size_t i = 0; i < node.conditions.size(); ++i)
          if (truthy(eval(*node.conditions[i], scope)))
            return exec(node.bodies[i], scope, out);
        return exec(node.elseBody, scope, out);
      case Node::Kind::For:
        execFor(node, scope, out);
        return Flow::Normal;
      case Node::Kind::Set:
        assign(node.target, eval(*node.expr, scope), scope);
        return Flow::Normal;
      case Node::Kind::SetBlock: {
        std::string text;
        exec(node.body, scope, text);
        Value value = Value::string(std::move(text));
        if (node.filter)
          value = applyFilterChain(*node.filter, value, scope);
        assign(node.target, value, scope);
        return Flow::Normal;
      }
      case Node::Kind::Macro:
        scope->vars.set(node.name, Value::callable(std::make_shared<MacroFunction>(&node, scope)));
        return Flow::Normal;
      case Node::Kind::With: {
        auto inner = std::make_shared<Scope>(scope);
        for (size_t i = 0; i < node.withTargets.size(); ++i)
          inner->vars.set(node.withTargets[i], eval(*node.withValues[i], scope));
        return exec(node.body, inner, out);
      }
      case Node::Kind::Generation:
        return exec(node.body, scope, out);
      case Node::Kind::Break:
        return Flow::Break;
      case Node::Kind::Continue:
        return Flow::Continue;
      }
    } catch (TemplateError& e) {
      if (e.line == 0)
        e.line = node.line;
      throw;
    }
    return Flow::Normal;
  }

  void unpack(const std::vector<std::string>& names, const Value& value, Scope& scope) {
    if (!value.isSequence() && !value.isString() && !value.isDict()) {
      if (value.isUndefined())
        failUndefined(value);
      fail("cannot unpack non-iterable " + typeName(value) + " object");
    }
    const List items = iterate(value);
    if (items.size() != names.size())
      fail(items.size() < names.size()
               ? "not enough values to unpack (expected " + std::to_string(names.size()) +
                     ", got " + std::to_string(items.size()) + ")"
               : "too many values to unpack (expected " + std::to_string(names.size()) + ")");
    for (size_t i = 0; i < names.size(); ++i)
      scope.vars.set(names[i], items[i]);
  }

  void assign(const Target& target, const Value& value, const ScopePtr& scope) {
    if (!target.namespaceAttribute.empty()) {
      const Value* ns = scope->lookup(target.names[0]);
      if (!ns || !ns->isNamespace())
        fail("cannot assign attribute on non-namespace object '" + target.names[0] + "'");
      if (!target.namespaceAttribute.empty() && target.namespaceAttribute[0] == '_')
        fail("chat templates cannot store underscore-prefixed attributes on a namespace");
      ns->namespaceAttributes().set(target.namespaceAttribute, value);
      return;
    }
    if (target.isTuple)
      unpack(target.names, value, *scope);
    else
      scope->vars.set(target.names[0], value);
  }

  void bindLoopTarget(const Target& target, const Value& item, Scope& scope) {
    if (target.isTuple)
      unpack(target.names, item, scope);
    else
      scope.vars.set(target.names[0], item);
  }

  void execFor(const Node& node, const ScopePtr& scope, std::string& out) {
    const Value iterable = eval(*node.expr, scope);
    // Lists are iterated in place (they are immutable); other values are copied out.
    std::shared_ptr<const List> shared = iterable.isSequence()
                                             ? iterable.sharedList()
                                             : std::make_shared<const List>(iterate(iterable));
    if (node.filter) {
      List kept;
      for (const Value& item : *shared) {
        step();
        auto probe = std::make_shared<Scope>(scope);
        bindLoopTarget(node.target, item, *probe);
        if (truthy(eval(*node.filter, probe)))
          kept.push_back(item);
      }
      shared = std::make_shared<const List>(std::move(kept));
    }
    const List& items = *shared;
    if (items.empty()) {
      exec(node.elseBody, scope, out);
      return;
    }
    const int64_t n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
      step();
      auto iteration = std::make_shared<Scope>(scope);
      if (node.usesLoopVariable)
        iteration->vars.set("loop", loopObject(items, i));
      bindLoopTarget(node.target, items[size_t(i)], *iteration);
      if (exec(node.body, iteration, out) == Flow::Break)
        break;
    }
  }

  static Value loopObject(const List& items, int64_t i) {
    const int64_t n = int64_t(items.size());
    Dict loop; // keys are distinct: append without lookups
    loop.entries.reserve(11);
    auto add = [&](const char* key, Value value) {
      loop.entries.emplace_back(key, std::move(value));
    };
    add("index", Value::integer(i + 1));
    add("index0", Value::integer(i));
    add("revindex", Value::integer(n - i));
    add("revindex0", Value::integer(n - i - 1));
    add("first", Value::boolean(i == 0));
    add("last", Value::boolean(i == n - 1));
    add("length", Value::integer(n));
    add("depth", Value::integer(1));
    add("depth0", Value::integer(0));
    if (i > 0)
      add("previtem", items[size_t(i - 1)]);
    if (i + 1 < n)
      add("nextitem", items[size_t(i + 1)]);
    return Value::dict(std::move(loop));
  }

  // ---- expressions ----

  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return evalInner(e, scope);
    } catch (TemplateError& error) {
      if (error.line == 0)
        error.line = e.line;
      throw;
    }
  }

  Value evalInner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
    case Expr::Kind::Const:
      return e.constant;
    case Expr::Kind::Name: {
      if (const Value* v = scope->lookup(e.name))
        return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      List items;
      for (const ExprPtr& child : e.children)
        items.push_back(eval(*child, scope));
      return e.kind == Expr::Kind::List ? Value::list(std::move(items))
                                        : Value::tuple(std::move(items));
    }
    case Expr::Kind::Dict: {
      Dict dict;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        const Value key = eval(*e.children[i], scope);
        if (!key.isString())
          fail("dict keys other than strings are not supported by ninfer's chat template engine");
        dict.set(key.asString(), eval(*e.children[i + 1], scope));
      }
      return Value::dict(std::move(dict));
    }
    case Expr::Kind::GetAttr:
      return getAttribute(eval(*e.children[0], scope), e.name);
    case Expr::Kind::GetItem:
      return getItem(eval(*e.children[0], scope), eval(*e.children[1], scope));
    case Expr::Kind::Slice: {
      const Value object = eval(*e.children[0], scope);
      auto part = [&](size_t i) { return e.children[i] ? eval(*e.children[i], scope) : Value(); };
      return sliceValue(object, part(1), part(2), part(3));
    }
    case Expr::Kind::Call:
      return evalCall(e, scope);
    case Expr::Kind::Filter:
      return applyFilterChain(e, Value(), scope);
    case Expr::Kind::Test: {
      const Value operand = eval(*e.children[0], scope);
      const bool result = applyTest(e.name, operand, evalArgs(e, 1, scope));
      return Value::boolean(result != e.negated);
    }
    case Expr::Kind::Negate:
    case Expr::Kind::Plus: {
      const Value v = eval(*e.children[0], scope);
      if (!v.isNumber()) {
        if (v.isUndefined())
          failUndefined(v);
        fail(std::string("bad operand type for unary ") +
             (e.kind == Expr::Kind::Negate ? "-" : "+") + ": '" + typeName(v) + "'");
      }
      if (e.kind == Expr::Kind::Plus)
        return v.isBool() ? Value::integer(v.asInt()) : v;
      if (v.isFloat())
        return Value::number(-v.asFloat());
      if (v.asInt() == std::numeric_limits<int64_t>::min())
        fail("integer overflow in unary '-'");
      return Value::integer(-v.asInt());
    }
    case Expr::Kind::Not:
      return Value::boolean(!truthy(eval(*e.children[0], scope)));
    case Expr::Kind::And: {
      Value left = eval(*e.children[0], scope);
      return truthy(left) ? eval(*e.children[1], scope) : left;
    }
    case Expr::Kind::Or: {
      Value left = eval(*e.children[0], scope);
      return truthy(left) ? left : eval(*e.children[1], scope);
    }
    case Expr::Kind::Binary:
      return arithmetic(e.name, eval(*e.children[0], scope), eval(*e.children[1], scope));
    case Expr::Kind::Compare: {
      Value left = eval(*e.children[0], scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.children[i + 1], scope);
        if (!compareValues(e.ops[i], left, right))
          return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::Concat: {
      std::string text;
      for (const ExprPtr& child : e.children)
        text += toStr(eval(*child, scope));
      return Value::string(std::move(text));
    }
    case Expr::Kind::CondExpr:
      if (truthy(eval(*e.children[1], scope)))
        return eval(*e.children[0], scope);
      if (e.children[2])
        return eval(*e.children[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined");
    }
    fail("internal error: unknown expression");
  }

  static bool compareValues(const std::string& op, const Value& a, const Value& b) {
    if (op == "==")
      return equals(a, b);
    if (op == "!=")
      return !equals(a, b);
    if (op == "in")
      return containsValue(b, a);
    if (op == "notin")
      return !containsValue(b, a);
    const int c = compare(a, b, op);
    if (op == "<")
      return c < 0;
    if (op == "<=")
      return c <= 0;
    if (op == ">")
      return c > 0;
    return c >= 0;
  }

  CallArgs evalArgs(const Expr& e, size_t first, const ScopePtr& scope) {
    CallArgs args;
    for (size_t i = first; i < e.children.size(); ++i)
      args.positional.push_back(eval(*e.children[i], scope));
    for (const auto& [key, value] : e.keywords)
      args.keywords.emplace_back(key, eval(*value, scope));
    return args;
  }

  // ---- calls ----

  Value evalCall(const Expr& e, const ScopePtr& scope) {
    const Expr& callee = *e.children[0];
    if (callee.kind == Expr::Kind::GetAttr) {
      const Value object = eval(*callee.children[0], scope);
      if (object.isUndefined())
        failUndefined(object);
      if (object.isDict() || object.isNamespace()) {
        const Value* member = object.asDict().find(callee.name);
        if (member && member->isCallable())
          return callValue(*member, evalArgs(e, 1, scope));
      }
      return callMethod(object, callee.name, evalArgs(e, 1, scope));
    }
    const Value function = eval(callee, scope);
    if (function.isUndefined())
      failUndefined(function);
    if (!function.isCallable())
      fail("'" + typeName(function) + "' object is not callable");
    return callValue(function, evalArgs(e, 1, scope));
  }

  Value callValue(const Value& function, const CallArgs& args) {
    const Callable& callable = function.asCallable();
    if (callable.kind == Callable::Kind::Macro)
      return callMacro(static_cast<const MacroFunction&>(callable), args);
    return callBuiltin(callable.name, args);
  }

  Value callMacro(const MacroFunction& macro, const CallArgs& args) {
    if (callDepth_ >= kMaxCallDepth)
      fail("macro calls nested deeper than " + std::to_string(kMaxCallDepth));
    const Node& node = *macro.node;
    if (args.positional.size() > node.params.size())
      fail("macro '" + node.name + "' takes not more than " + std::to_string(node.params.size()) +
           " argument(s)");
    auto scope = std::make_shared<Scope>(macro.closure);
    const size_t firstDefault = node.params.size() - node.defaults.size();
    for (size_t i = 0; i < node.params.size(); ++i) {
      const std::string& param = node.params[i];
      if (i < args.positional.size()) {
        scope->vars.set(param, args.positional[i]);
        continue;
      }
      const auto keyword = std::find_if(args.keywords.begin(), args.keywords.end(),
                                        [&](const auto& kv) { return kv.first == param; });
      if (keyword != args.keywords.end())
        scope->vars.set(param, keyword->second);
      else if (i >= firstDefault)
        scope->vars.set(param, eval(*node.defaults[i - firstDefault], scope));
      else
        scope->vars.set(param, Value::undefined("parameter '" + param + "' was not provided"));
    }
    for (const auto& [key, value] : args.keywords)
      if (std::find(node.params.begin(), node.params.end(), key) == node.params.end())
        fail("macro '" + node.name + "' takes no keyword argument '" + key + "'");
    ++callDepth_;
    std::string out;
    exec(node.body, scope, out);
    --callDepth_;
    return Value::string(std::move(out));
  }

  Value callBuiltin(const std::string& name, const CallArgs& args) {
    if (name == "raise_exception") {
      Binder b(args, "raise_exception()", {"message"});
      TemplateError error{toStr(b.get(0)), 0, true};
      throw error;
    }
    if (name == "strftime_now") {
      Binder b(args, "strftime_now()", {"format"});
      const std::string format = requireString(b.get(0), "strftime_now() format");
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buffer[512];
      const size_t n =
          format.empty() ? 0 : std::strftime(buffer, sizeof(buffer), format.c_str(), &local);
      return Value::string(std::string(buffer, n));
    }
    if (name == "namespace" || name == "dict") {
      Dict attributes;
      if (args.positional.size() > 1)
        fail(name + "() takes at most one positional argument");
      if (args.positional.size() == 1) {
        const Value& init = args.positional[0];
        if (!init.isDict() && !init.isNamespace())
          fail(name + "() expects a mapping, got '" + typeName(init) + "'");
        attributes = init.asDict();
      }
      for (const auto& [key, value] : args.keywords)
        attributes.set(key, value);
      if (name == "dict")
        return Value::dict(std::move(attributes));
      for (const auto& entry : attributes.entries)
        if (!entry.first.empty() && entry.first[0] == '_')
          fail("chat templates cannot store underscore-prefixed attributes on a namespace");
      return Value::namespaceObject(std::move(attributes));
    }
    if (name == "range") {
      if (!args.keywords.empty() || args.positional.empty() || args.positional.size() > 3)
        fail("range() takes 1 to 3 integer arguments");
      int64_t start = 0, stop, stepSize = 1;
      if (args.positional.size() == 1) {
        stop = toIndexInt(args.positional[0], "range() argument");
      } else {
        start = toIndexInt(args.positional[0], "range() argument");
        stop = toIndexInt(args.positional[1], "range() argument");
        if (args.positional.size() == 3)
          stepSize = toIndexInt(args.positional[2], "range() argument");
      }
      if (stepSize == 0)
        fail("range() arg 3 must not be zero");
      List items;
      for (int64_t i = start; stepSize > 0 ? i < stop : i > stop; i += stepSize) {
        if (int64_t(items.size()) >= kMaxRangeLength)
          fail("range() is too long");
        items.push_back(Value::integer(i));
      }
      return Value::list(std::move(items));
    }
    fail("'" + name + "' is not callable");
  }

  Value callMethod(const Value& object, const std::string& name, const CallArgs& args) {
    const std::string what = name + "()";
    if (object.isString()) {
      const std::string& s = object.asString();
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        Binder b(args, what, {"chars"});
        const Value chars = b.get(0);
        std::optional<std::string> set;
        if (!chars.isUndefined() && !chars.isNone())
          set = requireString(chars, what + " argument");
        return Value::string(pyStrip(s, set, name != "rstrip", name != "lstrip"));
      }
      if (name == "startswith" || name == "endswith") {
        Binder b(args, what, {"prefix"});
        const Value arg = b.get(0);
        List candidates = arg.isTuple() ? arg.asList() : List{arg};
        for (const Value& c : candidates) {
          const std::string p = requireString(c, what + " argument");
          const bool hit =
              name == "startswith"
                  ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                  : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
          if (hit)
            return Value::boolean(true);
        }
        return Value::boolean(false);
      }
      if (name == "split" || name == "rsplit") {
        Binder b(args, what, {"sep", "maxsplit"});
        const int64_t maxSplit = b.given(1) ? toIndexInt(b.get(1), "maxsplit") : -1;
        List parts;
        for (std::string& part : pySplit(s, b.get(0), maxSplit, name == "rsplit"))
          parts.push_back(Value::string(std::move(part)));
        return Value::list(std::move(parts));
      }
      if (name == "splitlines") {
        Binder b(args, what, {"keepends"});
        List parts;
        for (std::string& part : pySplitLines(s, truthy(b.get(0))))
          parts.push_back(Value::string(std::move(part)));
        return Value::list(std::move(parts));
      }
      if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        Binder b(args, what, {});
        if (name == "upper")
          return Value::string(pyUpper(s));
        if (name == "lower")
          return Value::string(pyLower(s));
        if (name == "title")
          return Value::string(pyTitle(s));
        return Value::string(pyCapitalize(s));
      }
      if (name == "replace") {
        Binder b(args, what, {"old", "new", "count"});
        const int64_t count = b.given(2) ? toIndexInt(b.get(2), "count") : -1;
        return Value::string(pyReplace(s, requireString(b.get(0), "replace() old"),
                                       requireString(b.get(1), "replace() new"), count));
      }
      if (name == "find" || name == "rfind" || name == "index" || name == "count") {
        Binder b(args, what, {"sub"});
        const std::string sub = requireString(b.get(0), what + " argument");
        if (name == "count") {
          if (sub.empty())
            return Value::integer(int64_t(codePointCount(s)) + 1);
          int64_t n = 0;
          for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size()))
            ++n;
          return Value::integer(n);
        }
        const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
        if (at == std::string::npos) {
          if (name == "index")
            fail("substring not found");
          return Value::integer(-1);
        }
        return Value::integer(codePointIndex(s, at));
      }
      if (name == "join") {
        Binder b(args, what, {"iterable"});
        std::string out;
        const List items = iterate(b.get(0));
        for (size_t i = 0; i < items.size(); ++i) {
          if (!items[i].isString())
            fail("sequence item " + std::to_string(i) + ": expected str instance, " +
                 typeName(items[i]) + " found");
          out += (i ? s : "") + items[i].asString();
        }
        return Value::string(std::move(out));
      }
      if (name == "removeprefix" || name == "removesuffix") {
        Binder b(args, what, {"affix"});
        const std::string affix = requireString(b.get(0), what + " argument");
        if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0)
          return Value::string(s.substr(affix.size()));
        if (name == "removesuffix" && !affix.empty() && s.size() >= affix.size() &&
            s.compare(s.size() - affix.size(), affix.size(), affix) == 0)
          return Value::string(s.substr(0, s.size() - affix.size()));
        return object;
      }
      if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
          name == "isupper" || name == "islower") {
        Binder b(args, what, {});
        const std::u32string text = decodeUtf8(s);
        if (name == "isupper" || name == "islower") {
          bool anyCased = false;
          for (char32_t c : text) {
            if (!isCased(c))
              continue;
            anyCased = true;
            if ((name == "isupper" && asciiUpper(c) != c) ||
                (name == "islower" && asciiLower(c) != c))
              return Value::boolean(false);
          }
          return Value::boolean(anyCased);
        }
        if (text.empty())
          return Value::boolean(false);
        for (char32_t c : text) {
          const bool digit = c >= '0' && c <= '9';
          const bool ok = name == "isdigit"   ? digit
                          : name == "isalpha" ? isLetter(c)
                          : name == "isalnum" ? digit || isLetter(c)
                                              : isPySpace(c);
          if (!ok)
            return Value::boolean(false);
        }
        return Value::boolean(true);
      }
    }
    if (object.isDict()) {
      const Dict& dict = object.asDict();
      if (name == "items" || name == "keys" || name == "values") {
        Binder b(args, what, {});
        List out;
        for (const auto& [key, value] : dict.entries) {
          if (name == "items")
            out.push_back(Value::tuple({Value::string(key), value}));
          else
            out.push_back(name == "keys" ? Value::string(key) : value);
        }
        return Value::list(std::move(out));
      }
      if (name == "get") {
        Binder b(args, what, {"key", "default"});
        const Value key = b.get(0);
        if (key.isString())
          if (const Value* v = dict.find(key.asString()))
            return *v;
        return b.given(1) ? b.get(1) : Value::none();
      }
      if (name == "cycle" && dict.find("index0")) { // loop.cycle(...)
        if (args.positional.empty())
          fail("no items for cycling given");
        const int64_t index = dict.find("index0")->asInt();
        return args.positional[size_t(index % int64_t(args.positional.size()))];
      }
    }
    if (object.isSequence() && (name == "index" || name == "count")) {
      Binder b(args, what, {"value"});
      const List& items = object.asList();
      int64_t count = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!equals(items[i], b.get(0)))
          continue;
        if (name == "index")
          return Value::integer(int64_t(i));
        ++count;
      }
      if (name == "index")
        fail("value is not in list");
      return Value::integer(count);
    }
    fail(objectName(object) + " has no method '" + name + "'");
  }

  // ---- filters ----

  // A Filter expression: children[0] is the operand (or null: use `input`).
  Value applyFilterChain(const Expr& e, const Value& input, const ScopePtr& scope) {
    const Value operand = e.children[0] ? (e.children[0]->kind == Expr::Kind::Filter
                                               ? applyFilterChain(*e.children[0], input, scope)
                                               : eval(*e.children[0], scope))
                                        : input;
    try {
      return applyFilter(e.name, operand, evalArgs(e, 1, scope));
    } catch (TemplateError& error) {
      if (error.line == 0)
        error.line = e.line;
      throw;
    }
  }

  List mapAttribute(const List& items, const std::string& attribute) {
    List out;
    for (const Value& item : items)
      out.push_back(attributePath(item, attribute));
    return out;
  }

  // Sort/unique key: strings lower-cased unless case-sensitive.
  static Value sortKey(const Value& v, bool caseSensitive) {
    if (!caseSensitive && v.isString())
      return Value::string(pyLower(v.asString()));
    return v;
  }

  Value applyFilter(const std::string& name, const Value& value, const CallArgs& args) {
    const std::string what = "filter '" + name + "'";
    if (name == "safe") {
      Binder b(args, what, {});
      return value;
    }
    if (name == "abs") {
      Binder b(args, what, {});
      if (value.isFloat())
        return Value::number(std::fabs(value.asFloat()));
      if (isIntLike(value)) {
        if (value.asInt() == std::numeric_limits<int64_t>::min())
          fail("integer overflow in abs");
        return Value::integer(std::llabs(value.asInt()));
      }
      if (value.isUndefined())
        failUndefined(value);
      fail("bad operand type for abs(): '" + typeName(value) + "'");
    }
    if (name == "trim") {
      Binder b(args, what, {"chars"});
      const Value chars = b.get(0);
      std::optional<std::string> set;
      if (!chars.isUndefined() && !chars.isNone())
        set = requireString(chars, "trim chars");
      return Value::string(pyStrip(toStr(value), set, true, true));
    }
    if (name == "upper" || name == "lower" || name == "capitalize" || name == "title" ||
        name == "string" || name == "e" || name == "escape") {
      Binder b(args, what, {});
      const std::string s = toStr(value);
      if (name == "upper")
        return Value::string(pyUpper(s));
      if (name == "lower")
        return Value::string(pyLower(s));
      if (name == "capitalize")
        return Value::string(pyCapitalize(s));
      if (name == "title")
        return Value::string(jinjaTitle(s));
      if (name == "string")
        return Value::string(s);
      return Value::string(htmlEscape(s));
    }
    if (name == "length" || name == "count") {
      Binder b(args, what, {});
      return Value::integer(length(value));
    }
    if (name == "default" || name == "d") {
      Binder b(args, what, {"default_value", "boolean"});
      const bool boolean = truthy(b.get(1));
      if (value.isUndefined() || (boolean && !truthy(value)))
        return b.given(0) ? b.get(0) : Value::string("");
      return value;
    }
    if (name == "tojson") {
      Binder b(args, what, {"ensure_ascii", "indent", "separators", "sort_keys"});
      JsonOptions options;
      options.ensureAscii = b.given(0) && truthy(b.get(0));
      const Value indent = b.get(1);
      if (isIntLike(indent))
        options.indent = std::string(size_t(std::max<int64_t>(0, indent.asInt())), ' ');
      else if (indent.isString())
        options.indent = indent.asString();
      else if (!indent.isUndefined() && !indent.isNone())
        fail("tojson indent must be an integer or a string");
      if (options.indent)
        options.itemSeparator = ",";
      const Value separators = b.get(2);
      if (!separators.isUndefined() && !separators.isNone()) {
        if (!separators.isSequence() || separators.asList().size() != 2)
          fail("tojson separators must be a pair of strings");
        options.itemSeparator = requireString(separators.asList()[0], "tojson separator");
        options.keySeparator = requireString(separators.asList()[1], "tojson separator");
      }
      options.sortKeys = truthy(b.get(3));
      return Value::string(toJson(value, options));
    }
    if (name == "items") {
      Binder b(args, what, {});
      if (value.isUndefined())
        return Value::list({});
      if (!value.isDict())
        fail("can only get item pairs from a mapping");
      List out;
      for (const auto& [key, item] : value.asDict().entries)
        out.push_back(Value::tuple({Value::string(key), item}));
      return Value::list(std::move(out));
    }
    if (name == "list") {
      Binder b(args, what, {});
      return Value::list(iterate(value));
    }
    if (name == "first" || name == "last") {
      Binder b(args, what, {});
      const List items = iterate(value);
      if (items.empty())
        return Value::undefined("no " + name + " item, sequence was empty");
      return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") {
      Binder b(args, what, {});
      if (value.isString()) {
        std::u32string text = decodeUtf8(value.asString());
        std::reverse(text.begin(), text.end());
        return Value::string(encodeUtf8(text));
      }
      List items = iterate(value);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    }
    if (name == "join") {
      Binder b(args, what, {"d", "attribute"});
      const std::string separator = b.given(0) ? toStr(b.get(0)) : "";
      List items = iterate(value);
      if (b.given(1))
        items = mapAttribute(items, toStr(b.get(1)));
      std::string out;
      for (size_t i = 0; i < items.size(); ++i)
        out += (i ? separator : "") + toStr(items[i]);
      return Value::string(std::move(out));
    }
    if (name == "replace") {
      Binder b(args, what, {"old", "new", "count"});
      const Value count = b.get(2);
      const int64_t n = count.isUndefined() || count.isNone() ? -1 : toIndexInt(count, "count");
      return Value::string(pyReplace(toStr(value), toStr(b.get(0)), toStr(b.get(1)), n));
    }
    if (name == "indent") {
      Binder b(args, what, {"width", "first", "blank"});
      const Value width = b.get(0);
      std::string indentation =
          width.isString() ? width.asString()
          : b.given(0)
              ? std::string(size_t(std::max<int64_t>(0, toIndexInt(width, "indent width"))), ' ')
              : std::string(4, ' ');
      const std::string s = toStr(value) + "\n";
      std::vector<std::string> lines = pySplitLines(s, false);
      std::string out;
      if (truthy(b.get(2))) {
        for (size_t i = 0; i < lines.size(); ++i)
          out += (i ? "\n" + indentation : "") + lines[i];
      } else {
        out = lines.empty() ? "" : lines[0];
        for (size_t i = 1; i < lines.size(); ++i)
          out += "\n" + (lines[i].empty() ? "" : indentation + lines[i]);
      }
      if (truthy(b.get(1)))
        out = indentation + out;
      return Value::string(std::move(out));
    }
    if (name == "int") {
      Binder b(args, what, {"default", "base"});
      const Value fallback = b.given(0) ? b.get(0) : Value::integer(0);
      const int base = b.given(1) ? int(toIndexInt(b.get(1), "base")) : 10;
      if (isIntLike(value))
        return Value::integer(value.asInt());
      if (value.isFloat()) {
        const double d = value.asFloat();
        if (!std::isfinite(d) || std::fabs(d) >= 9.2e18)
          return fallback;
        return Value::integer(int64_t(d));
      }
      if (value.isString()) {
        if (auto v = parseIntText(value.asString(), base))
          return Value::integer(*v);
        if (auto d = parseFloatText(value.asString()))
          if (std::isfinite(*d) && std::fabs(*d) < 9.2e18)
            return Value::integer(int64_t(*d));
      }
      return fallback;
    }
    if (name == "float") {
      Binder b(args, what, {"default"});
      const Value fallback = b.given(0) ? b.get(0) : Value::number(0.0);
      if (value.isNumber())
        return Value::number(value.asFloat());
      if (value.isString())
        if (auto d = parseFloatText(value.asString()))
          return Value::number(*d);
      return fallback;
    }
    if (name == "round") {
      Binder b(args, what, {"precision", "method"});
      const int64_t precision = b.given(0) ? toIndexInt(b.get(0), "precision") : 0;
      const std::string method = b.given(1) ? toStr(b.get(1)) : "common";
      if (method != "common" && method != "ceil" && method != "floor")
        fail("method must be 'common', 'ceil' or 'floor'");
      if (!value.isNumber()) {
        if (value.isUndefined())
          failUndefined(value);
        fail("round needs a number, not '" + typeName(value) + "'");
      }
      if (method == "common") {
        if (isIntLike(value) && precision >= 0)
          return Value::integer(value.asInt());
        return Value::number(pyRound(value.asFloat(), precision));
      }
      const double scale = std::pow(10.0, double(precision));
      const double scaled = value.asFloat() * scale;
      return Value::number((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
    }
    if (name == "sum") {
      Binder b(args, what, {"attribute", "start"});
      List items = iterate(value);
      if (b.given(0))
        items = mapAttribute(items, toStr(b.get(0)));
      Value total = b.given(1) ? b.get(1) : Value::integer(0);
      for (const Value& item : items)
        total = arithmetic("+", total, item);
      return total;
    }
    if (name == "min" || name == "max") {
      Binder b(args, what, {"case_sensitive", "attribute"});
      const bool caseSensitive = truthy(b.get(0));
      const List items = iterate(value);
      if (items.empty())
        return Value::undefined("no " + name + " item, sequence was empty");
      List keys = b.given(1) ? mapAttribute(items, toStr(b.get(1))) : items;
      size_t best = 0;
      for (size_t i = 1; i < items.size(); ++i) {
        const int c =
            compare(sortKey(keys[i], caseSensitive), sortKey(keys[best], caseSensitive), "<");
        if ((name == "min" && c < 0) || (name == "max" && c > 0))
          best = i;
      }
      return items[best];
    }
    if (name == "sort" || name == "unique" || name == "dictsort") {
      return sortFilters(name, value, args);
    }
    if (name == "map") {
      List items = iterate(value);
      const auto attribute = std::find_if(args.keywords.begin(), args.keywords.end(),
                                          [](const auto& kv) { return kv.first == "attribute"; });
      if (attribute != args.keywords.end()) {
        Binder b(args, what, {"attribute", "default"});
        List out;
        for (const Value& item : items) {
          Value v = attributePath(item, toStr(b.get(0)));
          if (v.isUndefined() && b.given(1))
            v = b.get(1);
          out.push_back(v);
        }
        return Value::list(std::move(out));
      }
      if (args.positional.empty())
        fail("map requires a filter name or attribute=");
      const std::string filter = requireString(args.positional[0], "map filter name");
      if (!hasFilter(filter))
        fail("unknown filter '" + filter + "' in map");
      CallArgs rest;
      rest.positional.assign(args.positional.begin() + 1, args.positional.end());
      rest.keywords = args.keywords;
      List out;
      for (const Value& item : items)
        out.push_back(applyFilter(filter, item, rest));
      return Value::list(std::move(out));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      const bool byAttribute = name == "selectattr" || name == "rejectattr";
      const bool keep = name == "select" || name == "selectattr";
      if (!args.keywords.empty())
        fail(what + " takes no keyword arguments");
      size_t next = 0;
      std::string attribute;
      if (byAttribute) {
        if (args.positional.empty())
          fail(what + " needs an attribute name");
        attribute = toStr(args.positional[next++]);
      }
      std::string test;
      if (next < args.positional.size())
        test = requireString(args.positional[next++], what + " test name");
      if (!test.empty() && !hasTest(test))
        fail("unknown test '" + test + "' in " + what);
      CallArgs testArgs;
      testArgs.positional.assign(args.positional.begin() + long(next), args.positional.end());
      List out;
      for (const Value& item : iterate(value)) {
        const Value subject = byAttribute ? attributePath(item, attribute) : item;
        const bool passed = test.empty() ? truthy(subject) : applyTest(test, subject, testArgs);
        if (passed == keep)
          out.push_back(item);
      }
      return Value::list(std::move(out));
    }
    fail("internal error: filter '" + name + "' is listed but not implemented");
  }

  Value sortFilters(const std::string& name, const Value& value, const CallArgs& args) {
    const std::string what = "filter '" + name + "'";
    if (name == "dictsort") {
      Binder b(args, what, {"case_sensitive", "by", "reverse"});
      if (!value.isDict())
        fail("dictsort needs a mapping");
      const bool caseSensitive = truthy(b.get(0));
      const std::string by = b.given(1) ? toStr(b.get(1)) : "key";
      if (by != "key" && by != "value")
        fail("You can only sort by either 'key' or 'value'");
      List pairs;
      for (const auto& [key, item] : value.asDict().entries)
        pairs.push_back(Value::tuple({Value::string(key), item}));
      const size_t index = by == "key" ? 0 : 1;
      std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
        return compare(sortKey(x.asList()[index], caseSensitive),
                       sortKey(y.asList()[index], caseSensitive), "<") < 0;
      });
      if (truthy(b.get(2)))
        std::reverse(pairs.begin(), pairs.end());
      return Value::list(std::move(pairs));
    }
    if (name == "sort") {
      Binder b(args, what, {"reverse", "case_sensitive", "attribute"});
      const bool reverse = truthy(b.get(0));
      const bool caseSensitive = truthy(b.get(1));
      List items = iterate(value);
      List keys = b.given(2) ? mapAttribute(items, toStr(b.get(2))) : items;
      std::vector<size_t> order(items.size());
      for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        const int c =
            compare(sortKey(keys[x], caseSensitive), sortKey(keys[y], caseSensitive), "<");
        return reverse ? c > 0 : c < 0;
      });
      List out;
      for (size_t i : order)
        out.push_back(items[i]);
      return Value::list(std::move(out));
    }
    // unique
    Binder b(args, what, {"case_sensitive", "attribute"});
    const bool caseSensitive = truthy(b.get(0));
    const List items = iterate(value);
    const List keys = b.given(1) ? mapAttribute(items, toStr(b.get(1))) : items;
    List out, seen;
    for (size_t i = 0; i < items.size(); ++i) {
      const Value key = sortKey(keys[i], caseSensitive);
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); }))
        continue;
      seen.push_back(key);
      out.push_back(items[i]);
    }
    return Value::list(std::move(out));
  }

  // ---- tests ----

  bool applyTest(const std::string& name, const Value& value, const CallArgs& args) {
    const std::string what = "test '" + name + "'";
    auto one = [&]() {
      Binder b(args, what, {"other"});
      if (!b.given(0))
        fail(what + " needs an argument");
      return b.get(0);
    };
    if (name == "defined" || name == "undefined") {
      Binder b(args, what, {});
      return value.isUndefined() == (name == "undefined");
    }
    if (name == "none") {
      Binder b(args, what, {});
      return value.isNone();
    }
    if (name == "boolean" || name == "true" || name == "false") {
      Binder b(args, what, {});
      if (!value.isBool())
        return false;
      return name == "boolean" || value.asBool() == (name == "true");
    }
    if (name == "integer") {
      Binder b(args, what, {});
      return value.isInt();
    }
    if (name == "float") {
      Binder b(args, what, {});
      return value.isFloat();
    }
    if (name == "number") {
      Binder b(args, what, {});
      return value.isNumber();
    }
    if (name == "string") {
      Binder b(args, what, {});
      return value.isString();
    }
    if (name == "mapping") {
      Binder b(args, what, {});
      return value.isDict();
    }
    if (name == "iterable") {
      Binder b(args, what, {});
      return value.isUndefined() || value.isString() || value.isSequence() || value.isDict();
    }
    if (name == "sequence") {
      Binder b(args, what, {});
      return value.isUndefined() || value.isString() || value.isSequence() || value.isDict();
    }
    if (name == "callable") {
      Binder b(args, what, {});
      return value.isCallable();
    }
    if (name == "lower" || name == "upper") {
      Binder b(args, what, {});
      const std::u32string text = decodeUtf8(toStr(value));
      bool anyCased = false;
      for (char32_t c : text) {
        if (!isCased(c))
          continue;
        anyCased = true;
        if ((name == "upper" && asciiUpper(c) != c) || (name == "lower" && asciiLower(c) != c))
          return false;
      }
      return anyCased;
    }
    if (name == "even" || name == "odd") {
      Binder b(args, what, {});
      const Value r = arithmetic("%", value, Value::integer(2));
      return truthy(r) == (name == "odd");
    }
    if (name == "divisibleby") {
      const Value r = arithmetic("%", value, one());
      return !truthy(r);
    }
    if (name == "sameas") {
      const Value other = one();
      if (value.kind() != other.kind())
        return false;
      switch (value.kind()) {
      case ValueKind::None:
      case ValueKind::Undefined:
        return true;
      case ValueKind::Bool:
      case ValueKind::Int:
      case ValueKind::Float:
      case ValueKind::String:
        return equals(value, other);
      default:
        return value.identity() == other.identity();
      }
    }
    if (name == "in")
      return containsValue(one(), value);
    if (name == "eq" || name == "equalto" || name == "==")
      return equals(value, one());
    if (name == "ne" || name == "!=")
      return !equals(value, one());
    if (name == "lt" || name == "lessthan" || name == "<")
      return compare(value, one(), "<") < 0;
    if (name == "le" || name == "<=")
      return compare(value, one(), "<=") <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">")
      return compare(value, one(), ">") > 0;
    if (name == "ge" || name == ">=")
      return compare(value, one(), ">=") >= 0;
    fail("internal error: test '" + name + "' is listed but not implemented");
  }

  uint64_t steps_ = 0;
  int callDepth_ = 0;
};

} // namespace

bool hasFilter(std::string_view name) { return listed(kFilters, name); }
bool hasTest(std::string_view name) { return listed(kTests, name); }
bool hasMethod(std::string_view name) { return listed(kMethods, name); }

std::string render(const Template& tmpl, const Dict& variables) {
  return Interpreter().run(tmpl, variables);
}

} // namespace jinja
} // namespace ninfer
