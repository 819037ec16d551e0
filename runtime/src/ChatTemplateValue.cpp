// Python semantics for the chat-template interpreter's values: conversions,
// comparisons, json.dumps / json.loads and the string helpers.
#include "ChatTemplateValue.h"

#include "Utf8.h"
#include "ninfer/Json.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ninfer {
namespace jinja {

void fail(std::string message, int line) { throw TemplateError{std::move(message), line}; }

// ---- Value ----

Value Value::undefined(std::string hint) {
  Value v;
  v.string_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = ValueKind::None;
  return v;
}
Value Value::boolean(bool value) {
  Value v;
  v.kind_ = ValueKind::Bool;
  v.bool_ = value;
  return v;
}
Value Value::integer(int64_t value) {
  Value v;
  v.kind_ = ValueKind::Int;
  v.int_ = value;
  return v;
}
Value Value::number(double value) {
  Value v;
  v.kind_ = ValueKind::Float;
  v.float_ = value;
  return v;
}
Value Value::string(std::string value) {
  Value v;
  v.kind_ = ValueKind::String;
  v.string_ = std::move(value);
  return v;
}
Value Value::list(List items) {
  Value v;
  v.kind_ = ValueKind::List;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}
Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.kind_ = ValueKind::Tuple;
  return v;
}
Value Value::dict(Dict entries) {
  Value v;
  v.kind_ = ValueKind::Dict;
  v.dict_ = std::make_shared<Dict>(std::move(entries));
  return v;
}
Value Value::namespaceObject(Dict attributes) {
  Value v = dict(std::move(attributes));
  v.kind_ = ValueKind::Namespace;
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> function) {
  Value v;
  v.kind_ = ValueKind::Callable;
  v.callable_ = std::move(function);
  return v;
}

const List& Value::asList() const {
  static const List empty;
  return list_ ? *list_ : empty;
}
const Dict& Value::asDict() const {
  static const Dict empty;
  return dict_ ? *dict_ : empty;
}
Dict& Value::namespaceAttributes() const { return *dict_; }

const void* Value::identity() const {
  if (list_)
    return list_.get();
  if (dict_)
    return dict_.get();
  return callable_.get();
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& entry : entries)
    if (entry.first == key)
      return &entry.second;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& entry : entries)
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  entries.emplace_back(key, std::move(value));
}

// ---- UTF-8 ----

std::u32string decodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 1;
    out.push_back(utf8::decodeValid(text, pos, length));
    pos += length;
  }
  return out;
}

std::string encodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text)
    utf8::append(out, c);
  return out;
}

size_t codePointCount(std::string_view text) {
  size_t count = 0;
  for (unsigned char c : text)
    count += (c & 0xC0) != 0x80;
  return count;
}

bool isPySpace(char32_t c) {
  switch (c) {
  case 0x09:
  case 0x0A:
  case 0x0B:
  case 0x0C:
  case 0x0D:
  case 0x1C:
  case 0x1D:
  case 0x1E:
  case 0x1F:
  case 0x20:
  case 0x85:
  case 0xA0:
  case 0x1680:
  case 0x2028:
  case 0x2029:
  case 0x202F:
  case 0x205F:
  case 0x3000:
    return true;
  default:
    return c >= 0x2000 && c <= 0x200A;
  }
}

std::string pyStrip(std::string_view text, const std::optional<std::string>& chars, bool left,
                    bool right) {
  std::u32string s = decodeUtf8(text);
  std::u32string set = chars ? decodeUtf8(*chars) : std::u32string();
  auto strip = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : isPySpace(c);
  };
  size_t begin = 0, end = s.size();
  if (left)
    while (begin < end && strip(s[begin]))
      ++begin;
  if (right)
    while (end > begin && strip(s[end - 1]))
      --end;
  return encodeUtf8(std::u32string_view(s).substr(begin, end - begin));
}

// Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic: the
// one-to-one part; the few one-to-many mappings are in pyUpper/pyLower.
char32_t asciiUpper(char32_t c) {
  if (c >= 'a' && c <= 'z')
    return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) ||
      (c >= 0x430 && c <= 0x44F))
    return c - 32;
  if ((c >= 0x100 && c <= 0x137 && (c & 1) && c != 0x131) ||
      (c >= 0x14A && c <= 0x177 && (c & 1)) || (c >= 0x139 && c <= 0x148 && !(c & 1)) ||
      (c >= 0x179 && c <= 0x17E && !(c & 1)))
    return c - 1;
  switch (c) {
  case 0xB5:
    return 0x39C;
  case 0xFF:
    return 0x178;
  case 0x131:
    return 'I';
  case 0x17F:
    return 'S';
  case 0x3C2:
    return 0x3A3;
  case 0x3AC:
    return 0x386;
  case 0x3AD:
    return 0x388;
  case 0x3AE:
    return 0x389;
  case 0x3AF:
    return 0x38A;
  case 0x3CC:
    return 0x38C;
  case 0x3CD:
    return 0x38E;
  case 0x3CE:
    return 0x38F;
  default:
    break;
  }
  if (c >= 0x450 && c <= 0x45F)
    return c - 80;
  return c;
}

char32_t asciiLower(char32_t c) {
  if (c >= 'A' && c <= 'Z')
    return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) ||
      (c >= 0x410 && c <= 0x42F))
    return c + 32;
  if ((c >= 0x100 && c <= 0x137 && !(c & 1) && c != 0x130) ||
      (c >= 0x14A && c <= 0x177 && !(c & 1)) || (c >= 0x139 && c <= 0x148 && (c & 1)) ||
      (c >= 0x179 && c <= 0x17E && (c & 1)))
    return c + 1;
  switch (c) {
  case 0x178:
    return 0xFF;
  case 0x386:
    return 0x3AC;
  case 0x388:
    return 0x3AD;
  case 0x389:
    return 0x3AE;
  case 0x38A:
    return 0x3AF;
  case 0x38C:
    return 0x3CC;
  case 0x38E:
    return 0x3CD;
  case 0x38F:
    return 0x3CE;
  default:
    break;
  }
  if (c >= 0x400 && c <= 0x40F)
    return c + 80;
  return c;
}

bool isCasedLetter(char32_t c) {
  return asciiUpper(c) != c || asciiLower(c) != c || c == 0xDF || c == 0x138 || c == 0x149;
}

std::string pyUpper(std::string_view text) {
  std::u32string s = decodeUtf8(text);
  std::u32string out;
  for (char32_t c : s) {
    if (c == 0xDF) { // ß -> SS, as Python does
      out += U"SS";
    } else if (c == 0x149) { // ŉ -> ʼN
      out += U"\u02BCN";
    } else {
      out.push_back(asciiUpper(c));
    }
  }
  return encodeUtf8(out);
}

std::string pyLower(std::string_view text) {
  std::u32string s = decodeUtf8(text);
  std::u32string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char32_t c = s[i];
    if (c == 0x130) { // İ -> i + combining dot above
      out += U"i\u0307";
    } else if (c == 0x3A3) {
      // Python's Final_Sigma: after a cased letter and not before one.
      const bool after = i > 0 && isCasedLetter(s[i - 1]);
      const bool before = i + 1 < s.size() && isCasedLetter(s[i + 1]);
      out.push_back(after && !before ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(asciiLower(c));
    }
  }
  return encodeUtf8(out);
}

// ---- str / repr ----

std::string typeName(const Value& value) {
  switch (value.kind()) {
  case ValueKind::Undefined:
    return "Undefined";
  case ValueKind::None:
    return "NoneType";
  case ValueKind::Bool:
    return "bool";
  case ValueKind::Int:
    return "int";
  case ValueKind::Float:
    return "float";
  case ValueKind::String:
    return "str";
  case ValueKind::List:
    return "list";
  case ValueKind::Tuple:
    return "tuple";
  case ValueKind::Dict:
    return "dict";
  case ValueKind::Namespace:
    return "Namespace";
  case ValueKind::Callable:
    return "function";
  }
  return "object";
}

bool truthy(const Value& value) {
  switch (value.kind()) {
  case ValueKind::Undefined:
  case ValueKind::None:
    return false;
  case ValueKind::Bool:
    return value.asBool();
  case ValueKind::Int:
    return value.asInt() != 0;
  case ValueKind::Float:
    return value.asFloat() != 0.0;
  case ValueKind::String:
    return !value.asString().empty();
  case ValueKind::List:
  case ValueKind::Tuple:
    return !value.asList().empty();
  case ValueKind::Dict:
    return !value.asDict().entries.empty();
  case ValueKind::Namespace:
  case ValueKind::Callable:
    return true;
  }
  return false;
}

namespace {

// Shortest digits that read back as `value` (what Python's repr prints), as
// a digit string and the decimal exponent of its first digit.
void shortestDigits(double value, std::string& digits, int& exponent) {
  char buffer[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*e", precision - 1, value);
    if (std::strtod(buffer, nullptr) == value || precision == 17)
      break;
  }
  // buffer: d[.ddd]e±XX
  const char* p = buffer;
  digits.clear();
  for (; *p && *p != 'e'; ++p)
    if (*p >= '0' && *p <= '9')
      digits.push_back(*p);
  exponent = *p == 'e' ? std::atoi(p + 1) : 0;
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
}

} // namespace

std::string formatFloat(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value < 0 ? "-inf" : "inf";
  std::string sign = std::signbit(value) ? "-" : "";
  double magnitude = std::fabs(value);
  if (magnitude == 0.0)
    return sign + "0.0";
  std::string digits;
  int exponent = 0;
  shortestDigits(magnitude, digits, exponent);
  std::string out = sign;
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1)
      out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) {
    out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
    return out;
  }
  const size_t intDigits = size_t(exponent) + 1;
  if (digits.size() <= intDigits) {
    out += digits + std::string(intDigits - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, intDigits) + "." + digits.substr(intDigits);
  }
  return out;
}

namespace {

std::string reprString(const std::string& text) {
  const bool hasSingle = text.find('\'') != std::string::npos;
  const bool hasDouble = text.find('"') != std::string::npos;
  const char quote = hasSingle && !hasDouble ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : text) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", c);
      out += buffer;
    } else {
      out += char(c);
    }
  }
  return out + quote;
}

std::string reprItems(const Value& value) {
  std::string out;
  const List& items = value.asList();
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? ", " : "") + toRepr(items[i]);
  return out;
}

std::string reprDict(const Dict& dict) {
  std::string out = "{";
  for (size_t i = 0; i < dict.entries.size(); ++i)
    out +=
        (i ? ", " : "") + reprString(dict.entries[i].first) + ": " + toRepr(dict.entries[i].second);
  return out + "}";
}

} // namespace

std::string toRepr(const Value& value) {
  switch (value.kind()) {
  case ValueKind::Undefined:
    return "Undefined";
  case ValueKind::String:
    return reprString(value.asString());
  case ValueKind::List:
    return "[" + reprItems(value) + "]";
  case ValueKind::Tuple:
    return "(" + reprItems(value) + (value.asList().size() == 1 ? ",)" : ")");
  case ValueKind::Dict:
    return reprDict(value.asDict());
  case ValueKind::Namespace:
    return "<Namespace " + reprDict(value.asDict()) + ">";
  default:
    return toStr(value);
  }
}

std::string toStr(const Value& value) {
  switch (value.kind()) {
  case ValueKind::Undefined:
    return "";
  case ValueKind::None:
    return "None";
  case ValueKind::Bool:
    return value.asBool() ? "True" : "False";
  case ValueKind::Int:
    return std::to_string(value.asInt());
  case ValueKind::Float:
    return formatFloat(value.asFloat());
  case ValueKind::String:
    return value.asString();
  case ValueKind::Callable:
    return "<function " + value.asCallable().name + ">";
  default:
    return toRepr(value);
  }
}

// ---- comparisons ----

bool equals(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat())
      return a.asFloat() == b.asFloat();
    return a.asInt() == b.asInt();
  }
  if (a.kind() != b.kind())
    return false;
  switch (a.kind()) {
  case ValueKind::Undefined:
  case ValueKind::None:
    return true;
  case ValueKind::String:
    return a.asString() == b.asString();
  case ValueKind::List:
  case ValueKind::Tuple: {
    const List& x = a.asList();
    const List& y = b.asList();
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equals(x[i], y[i]))
        return false;
    return true;
  }
  case ValueKind::Dict: {
    const Dict& x = a.asDict();
    const Dict& y = b.asDict();
    if (x.entries.size() != y.entries.size())
      return false;
    for (const auto& [key, item] : x.entries) {
      const Value* other = y.find(key);
      if (!other || !equals(item, *other))
        return false;
    }
    return true;
  }
  default:
    return a.identity() == b.identity();
  }
}

int compare(const Value& a, const Value& b, std::string_view op) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat()) {
      const double x = a.asFloat(), y = b.asFloat();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.asInt(), y = b.asInt();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.isString() && b.isString()) {
    // Byte order of UTF-8 is code point order, which is Python's.
    const int c = a.asString().compare(b.asString());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.kind() == b.kind() && a.isSequence()) {
    const List& x = a.asList();
    const List& y = b.asList();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i]))
        continue;
      return compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.isUndefined())
    fail(a.undefinedHint());
  if (b.isUndefined())
    fail(b.undefinedHint());
  fail("'" + std::string(op) + "' not supported between instances of '" + typeName(a) + "' and '" +
       typeName(b) + "'");
}

// ---- JSON ----

namespace {

void appendJson(std::string& out, const Value& value, const JsonOptions& options, int depth) {
  if (depth > 512)
    fail("tojson: value is nested too deeply");
  auto newline = [&](int level) {
    if (!options.indent)
      return;
    out += '\n';
    for (int i = 0; i < level; ++i)
      out += *options.indent;
  };
  switch (value.kind()) {
  case ValueKind::None:
    out += "null";
    return;
  case ValueKind::Bool:
    out += value.asBool() ? "true" : "false";
    return;
  case ValueKind::Int:
    out += std::to_string(value.asInt());
    return;
  case ValueKind::Float: {
    const double d = value.asFloat();
    if (std::isnan(d))
      out += "NaN";
    else if (std::isinf(d))
      out += d < 0 ? "-Infinity" : "Infinity";
    else
      out += formatFloat(d);
    return;
  }
  case ValueKind::String:
    json::appendString(out, value.asString(), options.ensureAscii);
    return;
  case ValueKind::List:
  case ValueKind::Tuple: {
    const List& items = value.asList();
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += options.itemSeparator;
      newline(depth + 1);
      appendJson(out, items[i], options, depth + 1);
    }
    newline(depth);
    out += ']';
    return;
  }
  case ValueKind::Dict: {
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : value.asDict().entries)
      entries.push_back(&entry);
    if (entries.empty()) {
      out += "{}";
      return;
    }
    if (options.sortKeys)
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i)
        out += options.itemSeparator;
      newline(depth + 1);
      json::appendString(out, entries[i]->first, options.ensureAscii);
      out += options.keySeparator;
      appendJson(out, entries[i]->second, options, depth + 1);
    }
    newline(depth);
    out += '}';
    return;
  }
  default:
    fail("Object of type " + typeName(value) + " is not JSON serializable");
  }
}

class JsonReader {
public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  Value document() {
    Value v = value(0);
    skipSpace();
    if (pos_ != text_.size())
      error("unexpected text after the value");
    return v;
  }

private:
  [[noreturn]] void error(const std::string& what) {
    fail("invalid JSON at offset " + std::to_string(pos_) + ": " + what);
  }
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word)
      return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > 512)
      error("nested too deeply");
    skipSpace();
    if (pos_ >= text_.size())
      error("unexpected end");
    const char c = text_[pos_];
    if (c == '{')
      return object(depth);
    if (c == '[')
      return array(depth);
    if (c == '"')
      return Value::string(string());
    if (consume("true"))
      return Value::boolean(true);
    if (consume("false"))
      return Value::boolean(false);
    if (consume("null"))
      return Value::none();
    if (consume("NaN"))
      return Value::number(NAN);
    if (consume("Infinity"))
      return Value::number(INFINITY);
    if (consume("-Infinity"))
      return Value::number(-INFINITY);
    if (c == '-' || (c >= '0' && c <= '9'))
      return number();
    error(std::string("unexpected character '") + c + "'");
  }

  Value object(int depth) {
    ++pos_;
    Dict dict;
    skipSpace();
    if (consume("}"))
      return Value::dict(std::move(dict));
    while (true) {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"')
        error("expected a string key");
      std::string key = string();
      skipSpace();
      if (!consume(":"))
        error("expected ':'");
      Value item = value(depth + 1);
      dict.set(key, std::move(item));
      skipSpace();
      if (consume("}"))
        return Value::dict(std::move(dict));
      if (!consume(","))
        error("expected ',' or '}'");
    }
  }

  Value array(int depth) {
    ++pos_;
    List items;
    skipSpace();
    if (consume("]"))
      return Value::list(std::move(items));
    while (true) {
      items.push_back(value(depth + 1));
      skipSpace();
      if (consume("]"))
        return Value::list(std::move(items));
      if (!consume(","))
        error("expected ',' or ']'");
    }
  }

  unsigned hex4() {
    if (pos_ + 4 > text_.size())
      error("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= unsigned(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= unsigned(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= unsigned(h - 'A' + 10);
      else
        error("bad \\u escape");
    }
    return v;
  }

  std::string string() {
    ++pos_; // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size())
        error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"')
        return out;
      if (static_cast<unsigned char>(c) < 0x20)
        error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size())
        error("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        char32_t cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
          const size_t save = pos_;
          pos_ += 2;
          const unsigned low = hex4();
          if (low >= 0xDC00 && low < 0xE000)
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          else
            pos_ = save;
        }
        if (cp >= 0xD800 && cp < 0xE000)
          cp = 0xFFFD; // a lone surrogate cannot be UTF-8
        utf8::append(out, cp);
        break;
      }
      default:
        error(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  Value number() {
    const size_t start = pos_;
    if (text_[pos_] == '-')
      ++pos_;
    bool isFloat = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        isFloat = true;
        ++pos_;
      } else {
        break;
      }
    }
    const std::string token(text_.substr(start, pos_ - start));
    char* end = nullptr;
    errno = 0;
    if (!isFloat) {
      const long long v = std::strtoll(token.c_str(), &end, 10);
      if (end && *end == '\0' && errno == 0)
        return Value::integer(v);
    }
    const double d = std::strtod(token.c_str(), &end);
    if (!end || *end != '\0' || token == "-")
      error("bad number '" + token + "'");
    return Value::number(d);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

} // namespace

std::string toJson(const Value& value, const JsonOptions& options) {
  std::string out;
  appendJson(out, value, options, 0);
  return out;
}

Value parseJson(std::string_view text) {
  if (utf8::findInvalid(text) != std::string_view::npos)
    fail("invalid JSON: not valid UTF-8");
  return JsonReader(text).document();
}

} // namespace jinja
} // namespace ninfer
