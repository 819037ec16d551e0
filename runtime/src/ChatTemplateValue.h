// Values of the chat-template interpreter: the Python objects a Jinja template
// sees (None, bool, int, float, str, list, tuple, dict), plus jinja2's
// Undefined, namespace() objects and callables (macros, global functions).
// The helpers follow Python, because the reference renderer is jinja2 running
// in CPython: str() and repr(), truthiness, ==, ordering, and json.dumps as
// transformers' `tojson` filter calls it. Strings are UTF-8; operations that
// Python defines on code points (len, indexing, slicing, strip) decode first.
//
// Errors inside the engine are thrown as TemplateError and turned into a
// Status at the API boundary (ChatTemplate.cpp); nothing throws past it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ninfer {
namespace jinja {

// A parse or render error; line 0 means "not known yet" (the caller adds it).
struct TemplateError {
  std::string message;
  int line = 0;
  bool raisedByTemplate = false; // raise_exception(message)
};
[[noreturn]] void fail(std::string message, int line = 0);

class Value;
struct Dict;
struct Callable;
using List = std::vector<Value>;

enum class ValueKind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Tuple,
  Dict,
  Namespace,
  Callable,
};

class Value {
public:
  Value() = default; // undefined
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool value);
  static Value integer(int64_t value);
  static Value number(double value);
  static Value string(std::string value);
  static Value list(List items);
  static Value tuple(List items);
  static Value dict(Dict entries);
  static Value namespaceObject(Dict attributes);
  static Value callable(std::shared_ptr<const Callable> function);

  ValueKind kind() const { return kind_; }
  bool isUndefined() const { return kind_ == ValueKind::Undefined; }
  bool isNone() const { return kind_ == ValueKind::None; }
  bool isBool() const { return kind_ == ValueKind::Bool; }
  bool isInt() const { return kind_ == ValueKind::Int; }
  bool isFloat() const { return kind_ == ValueKind::Float; }
  // int, float and bool (Python's bool is an int).
  bool isNumber() const { return isInt() || isFloat() || isBool(); }
  bool isString() const { return kind_ == ValueKind::String; }
  bool isList() const { return kind_ == ValueKind::List; }
  bool isTuple() const { return kind_ == ValueKind::Tuple; }
  bool isSequence() const { return isList() || isTuple(); }
  bool isDict() const { return kind_ == ValueKind::Dict; }
  bool isNamespace() const { return kind_ == ValueKind::Namespace; }
  bool isCallable() const { return kind_ == ValueKind::Callable; }

  bool asBool() const { return bool_; }
  int64_t asInt() const { return isBool() ? int64_t(bool_) : int_; }
  double asFloat() const { return isFloat() ? float_ : double(asInt()); }
  const std::string& asString() const { return string_; }
  const List& asList() const; // List or Tuple
  std::shared_ptr<const List> sharedList() const { return list_; }
  const Dict& asDict() const; // Dict or Namespace
  Dict& namespaceAttributes() const;
  const Callable& asCallable() const { return *callable_; }
  // What jinja2 says when an undefined value is used, e.g. "'x' is undefined".
  const std::string& undefinedHint() const { return string_; }
  // Identity of the shared container (namespaces and lists compare by it for `is sameas`).
  const void* identity() const;

private:
  ValueKind kind_ = ValueKind::Undefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_; // String, or the Undefined hint
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> callable_;
};

// An insertion-ordered mapping with string keys (JSON objects, dict literals,
// namespace attributes). Small, so lookups are linear.
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

// Something a template can call; the interpreter knows the concrete kinds.
struct Callable {
  enum class Kind : uint8_t { Builtin, Macro };
  Callable(Kind kind, std::string name) : kind(kind), name(std::move(name)) {}
  virtual ~Callable() = default;
  Kind kind;
  std::string name;
};

// ---- Python semantics ----

std::string typeName(const Value& value); // Python's type name: 'str', 'NoneType', ...
bool truthy(const Value& value);
std::string toStr(const Value& value); // str(); Undefined gives ""
std::string toRepr(const Value& value);
std::string formatFloat(double value); // repr(float)
bool equals(const Value& a, const Value& b);
// -1, 0 or 1; throws for types Python cannot order.
int compare(const Value& a, const Value& b, std::string_view op);

struct JsonOptions {
  bool ensureAscii = false;
  std::optional<std::string> indent; // nullopt: one line
  std::string itemSeparator = ", ";
  std::string keySeparator = ": ";
  bool sortKeys = false;
};
// json.dumps; throws for values JSON cannot hold (Undefined, callables).
std::string toJson(const Value& value, const JsonOptions& options);
// json.loads for the API's inputs; throws with a position on malformed text.
Value parseJson(std::string_view text);

// ---- UTF-8 and Python string helpers (input is valid UTF-8) ----

std::u32string decodeUtf8(std::string_view text);
std::string encodeUtf8(std::u32string_view text);
size_t codePointCount(std::string_view text);
bool isPySpace(char32_t c); // str.isspace()
std::string pyStrip(std::string_view text, const std::optional<std::string>& chars, bool left,
                    bool right);
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
// (see ChatTemplate.h); other characters are left as they are.
char32_t asciiUpper(char32_t c);
char32_t asciiLower(char32_t c);
bool isCasedLetter(char32_t c);
std::string pyUpper(std::string_view text); // str.upper()
std::string pyLower(std::string_view text); // str.lower(), with Greek final sigma

} // namespace jinja
} // namespace ninfer
