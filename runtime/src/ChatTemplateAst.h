// The parsed form of a chat template: statements (Node) and expressions (Expr),
// with the line each came from for error messages.
#pragma once

#include "ChatTemplateValue.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ninfer {
namespace jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind : uint8_t {
    Const,    // constant
    Name,     // name
    List,     // children: items
    Tuple,    // children: items
    Dict,     // children: key, value, key, value, ...
    GetAttr,  // children[0].name
    GetItem,  // children[0][children[1]]
    Slice,    // children[0][children[1]:children[2]:children[3]] (null when left out)
    Call,     // children[0](children[1..], keywords)
    Filter,   // children[0] | name(children[1..], keywords); children[0] null in `set` blocks
    Test,     // children[0] is name(children[1..]); `negated` for `is not`
    Negate,   // -children[0]
    Plus,     // +children[0]
    Not,      // not children[0]
    And,      // children[0] and children[1]
    Or,       // children[0] or children[1]
    Binary,   // children[0] op children[1], op in name: + - * / // % **
    Compare,  // children[0] ops[0] children[1] ops[1] children[2] ...
    Concat,   // children joined with ~
    CondExpr, // children[0] if children[1] else children[2] (null: undefined)
  };
  Kind kind;
  int line = 0;
  Value constant;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops; // Compare: == != < <= > >= in notin
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// An assignment target: a name, a tuple of names, or namespace.attribute.
struct Target {
  std::vector<std::string> names;
  bool isTuple = false;
  std::string namespaceAttribute; // set: names[0] is the namespace
};

struct Node {
  enum class Kind : uint8_t {
    Text,       // text
    Output,     // {{ expr }}
    If,         // conditions[i] -> bodies[i], else elseBody
    For,        // for target in expr [if filter] body [else elseBody]
    Set,        // set target = expr
    SetBlock,   // set target [| filters] body endset; filter: Filter chain with a null operand
    Macro,      // macro name(params = defaults) body
    With,       // with target = expr, ... (withTargets/withValues) body
    Generation, // transformers' {% generation %} body (rendered as is)
    Break,
    Continue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  Target target;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body elseBody;
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr>
      defaults; // defaults[i] belongs to params[params.size() - defaults.size() + i]
  std::vector<std::string> withTargets;
  std::vector<ExprPtr> withValues;
  bool usesLoopVariable = false; // For: the body names `loop` (else no loop object is built)
};

struct Template {
  Body body;
};

} // namespace jinja
} // namespace ninfer
