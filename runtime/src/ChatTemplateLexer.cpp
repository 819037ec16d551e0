// jinja2's lexer, reduced to the default delimiters and transformers'
// environment. The rules that matter for byte-identical output:
//  - newlines (\r\n, \r, \n) become \n and one trailing newline is dropped;
//  - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`,
//    `-#}` all whitespace after it;
//  - trim_blocks: a block or comment tag eats the one newline right after it;
//  - lstrip_blocks: spaces and tabs between the start of a line and a block or
//    comment tag are dropped (not before `{{`), unless the tag says `{%+`;
//  - an end delimiter only counts when (), [] and {} inside the tag balance.
#include "ChatTemplateLexer.h"

#include "ChatTemplateValue.h"
#include "Utf8.h"

#include <cerrno>
#include <cstdlib>

namespace ninfer {
namespace jinja {
namespace {

bool isAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isNameChar(char c) { return isNameStart(c) || isDigit(c); }

// Python's str.rstrip() on UTF-8 text.
std::string_view rstripSpace(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
      --start;
    size_t length = 0;
    const char32_t c = utf8::decodeValid(text, start, length);
    if (!isPySpace(c))
      break;
    end = start;
  }
  return text.substr(0, end);
}

// The whole of `text` is Python whitespace (and not empty).
bool allSpace(std::string_view text) {
  if (text.empty())
    return false;
  return rstripSpace(text).empty();
}

int countNewlines(std::string_view text) {
  int n = 0;
  for (char c : text)
    n += c == '\n';
  return n;
}

class Lexer {
public:
  explicit Lexer(std::string_view source) : source_(normalize(source)) {}

  std::vector<Token> run() {
    while (pos_ < source_.size()) {
      const size_t tag = findTagStart(pos_);
      if (tag == std::string::npos) {
        emitData(std::string_view(source_).substr(pos_));
        pos_ = source_.size();
        break;
      }
      const char kind = source_[tag + 1];
      size_t after = tag + 2;
      char sign = 0;
      if (after < source_.size() && (source_[after] == '-' || source_[after] == '+'))
        sign = source_[after++];
      std::string_view text = std::string_view(source_).substr(pos_, tag - pos_);
      const int textLines = countNewlines(text);
      emitData(stripBeforeTag(text, sign, kind != '{'));
      line_ += textLines;
      pos_ = after;

      if (kind == '#') {
        lexComment();
      } else if (kind == '%' && lexRawIfPresent()) {
        // handled
      } else {
        lexTag(kind == '{');
      }
    }
    tokens_.push_back(Token{TokenType::Eof, "", 0, 0, line_});
    return std::move(tokens_);
  }

private:
  static std::string normalize(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        out += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n')
          ++i;
      } else {
        out += source[i];
      }
    }
    if (!out.empty() && out.back() == '\n') // keep_trailing_newline=False
      out.pop_back();
    return out;
  }

  size_t findTagStart(size_t from) const {
    for (size_t i = from; i + 1 < source_.size(); ++i)
      if (source_[i] == '{' &&
          (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#'))
        return i;
    return std::string::npos;
  }

  // Whitespace control for the text before a tag (jinja2's OptionalLStrip).
  std::string_view stripBeforeTag(std::string_view text, char sign, bool blockOrComment) const {
    if (sign == '-')
      return rstripSpace(text);
    if (sign != '+' && blockOrComment) {
      const size_t newline = text.rfind('\n');
      const size_t lineStart = newline == std::string_view::npos ? 0 : newline + 1;
      if ((lineStart > 0 || lineStarting_) && allSpace(text.substr(lineStart)))
        return text.substr(0, lineStart);
    }
    return text;
  }

  void emitData(std::string_view text) {
    if (!text.empty())
      tokens_.push_back(Token{TokenType::Data, std::string(text), 0, 0, line_});
  }

  void push(TokenType type, std::string text) {
    tokens_.push_back(Token{type, std::move(text), 0, 0, line_});
  }

  // Consumes the end of a tag: `-` + delimiter + all whitespace, `+` +
  // delimiter, or the delimiter and (block/comment) one newline.
  void consumeEnd(size_t at, bool trimNewline) {
    size_t p = at;
    const char first = source_[p];
    if (first == '-' || first == '+')
      ++p;
    p += 2;
    if (first == '-') {
      while (p < source_.size()) {
        size_t length = 1;
        if (!isPySpace(utf8::decodeValid(source_, p, length)))
          break;
        p += length;
      }
    } else if (first != '+' && trimNewline && p < source_.size() && source_[p] == '\n') {
      ++p;
    }
    line_ += countNewlines(std::string_view(source_).substr(pos_, p - pos_));
    lineStarting_ = p > 0 && source_[p - 1] == '\n';
    pos_ = p;
  }

  bool endsAt(size_t p, const char* delimiter) const {
    return source_.compare(p, 2, delimiter) == 0;
  }

  void lexComment() {
    for (size_t p = pos_; p + 1 < source_.size(); ++p) {
      if ((source_[p] == '+' || source_[p] == '-') && endsAt(p + 1, "#}")) {
        consumeEnd(p, true);
        return;
      }
      if (endsAt(p, "#}")) {
        consumeEnd(p, true);
        return;
      }
    }
    fail("missing end of comment tag", line_);
  }

  // `{% raw %}...{% endraw %}`: the body is text.
  bool lexRawIfPresent() {
    size_t p = pos_;
    while (p < source_.size() && isAsciiSpace(source_[p]))
      ++p;
    if (source_.compare(p, 3, "raw") != 0 || (p + 3 < source_.size() && isNameChar(source_[p + 3])))
      return false;
    p += 3;
    while (p < source_.size() && isAsciiSpace(source_[p]))
      ++p;
    if (source_.compare(p, 3, "-%}") == 0) {
      p += 3;
      while (p < source_.size() && isAsciiSpace(source_[p]))
        ++p;
    } else if (source_.compare(p, 2, "%}") == 0) {
      p += 2; // no trim_blocks newline after `raw` (jinja2 does not apply it here)
    } else {
      fail("malformed raw tag", line_);
    }
    line_ += countNewlines(std::string_view(source_).substr(pos_, p - pos_));
    // Find `{%[-+]? endraw [-+]?%}`.
    for (size_t q = p; q + 1 < source_.size(); ++q) {
      if (!endsAt(q, "{%"))
        continue;
      size_t r = q + 2;
      char sign = 0;
      if (r < source_.size() && (source_[r] == '-' || source_[r] == '+'))
        sign = source_[r++];
      while (r < source_.size() && isAsciiSpace(source_[r]))
        ++r;
      if (source_.compare(r, 6, "endraw") != 0)
        continue;
      r += 6;
      while (r < source_.size() && isAsciiSpace(source_[r]))
        ++r;
      const bool closes = endsAt(r, "%}") || ((source_[r] == '-' || source_[r] == '+') &&
                                              r + 1 < source_.size() && endsAt(r + 1, "%}"));
      if (!closes)
        continue;
      lineStarting_ = p > 0 && source_[p - 1] == '\n';
      std::string_view body = std::string_view(source_).substr(p, q - p);
      const int bodyLines = countNewlines(body);
      emitData(stripBeforeTag(body, sign, true));
      line_ += bodyLines;
      pos_ = r;
      consumeEnd(r, true);
      return true;
    }
    fail("missing end of raw directive", line_);
  }

  void lexTag(bool variable) {
    push(variable ? TokenType::VariableBegin : TokenType::BlockBegin, "");
    const char* delimiter = variable ? "}}" : "%}";
    std::vector<char> balance;
    while (true) {
      if (pos_ >= source_.size())
        fail(std::string("unexpected end of template, expected '") + delimiter + "'", line_);
      const char c = source_[pos_];
      if (balance.empty()) {
        const bool signed_ = (c == '-' || (c == '+' && !variable)) && pos_ + 1 < source_.size() &&
                             endsAt(pos_ + 1, delimiter);
        if (signed_ || endsAt(pos_, delimiter)) {
          push(variable ? TokenType::VariableEnd : TokenType::BlockEnd, "");
          consumeEnd(pos_, !variable);
          return;
        }
      }
      if (isAsciiSpace(c)) {
        if (c == '\n')
          ++line_;
        ++pos_;
        continue;
      }
      if (isDigit(c)) {
        lexNumber();
        continue;
      }
      if (isNameStart(c)) {
        size_t end = pos_;
        while (end < source_.size() && isNameChar(source_[end]))
          ++end;
        push(TokenType::Name, source_.substr(pos_, end - pos_));
        pos_ = end;
        continue;
      }
      if (c == '\'' || c == '"') {
        lexString(c);
        continue;
      }
      lexOperator(balance);
    }
  }

  void lexNumber() {
    // Float: digits ( [.digits] e[+-]digits | .digits ); else integer.
    auto digits = [&](size_t p) {
      const size_t start = p;
      while (p < source_.size() &&
             (isDigit(source_[p]) || (source_[p] == '_' && p > start && p + 1 < source_.size() &&
                                      isDigit(source_[p + 1]))))
        ++p;
      return p;
    };
    const size_t start = pos_;
    size_t p = digits(pos_);
    bool isFloat = false;
    size_t q = p;
    if (q + 1 < source_.size() && source_[q] == '.' && isDigit(source_[q + 1])) {
      q = digits(q + 1);
      isFloat = true;
    }
    if (q < source_.size() && (source_[q] == 'e' || source_[q] == 'E')) {
      size_t r = q + 1;
      if (r < source_.size() && (source_[r] == '+' || source_[r] == '-'))
        ++r;
      if (r < source_.size() && isDigit(source_[r])) {
        q = digits(r);
        isFloat = true;
      }
    }
    const bool afterDot = start > 0 && source_[start - 1] == '.';
    if (isFloat && !afterDot) {
      std::string text;
      for (size_t i = start; i < q; ++i)
        if (source_[i] != '_')
          text += source_[i];
      Token token{TokenType::Float, text, 0, std::strtod(text.c_str(), nullptr), line_};
      tokens_.push_back(token);
      pos_ = q;
      return;
    }
    // Integers: 0x / 0o / 0b prefixes, decimals without leading zeros.
    int base = 10;
    size_t digitsStart = start;
    if (source_[start] == '0' && start + 1 < source_.size()) {
      const char x = source_[start + 1];
      if (x == 'x' || x == 'X')
        base = 16;
      else if (x == 'o' || x == 'O')
        base = 8;
      else if (x == 'b' || x == 'B')
        base = 2;
      if (base != 10)
        digitsStart = start + 2;
    }
    std::string text;
    size_t end = digitsStart;
    auto validDigit = [&](char d) {
      if (base == 16)
        return isDigit(d) || (d >= 'a' && d <= 'f') || (d >= 'A' && d <= 'F');
      if (base == 8)
        return d >= '0' && d <= '7';
      if (base == 2)
        return d == '0' || d == '1';
      return isDigit(d);
    };
    if (base == 10 && source_[start] == '0') {
      end = start + 1;
      while (end < source_.size() && (source_[end] == '0' || source_[end] == '_'))
        ++end;
      text = "0";
    } else {
      while (end < source_.size() && (validDigit(source_[end]) || source_[end] == '_')) {
        if (source_[end] != '_')
          text += source_[end];
        ++end;
      }
    }
    if (text.empty())
      fail("malformed number literal", line_);
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str(), nullptr, base);
    if (errno == ERANGE || value > uint64_t(INT64_MAX))
      fail("integer literal " + text + " is too large", line_);
    Token token{TokenType::Integer, text, int64_t(value), 0, line_};
    tokens_.push_back(token);
    pos_ = end;
  }

  // Python's unicode-escape decoding of a string literal's body.
  void lexString(char quote) {
    const int startLine = line_;
    std::string out;
    size_t p = pos_ + 1;
    while (true) {
      if (p >= source_.size())
        fail("unterminated string literal", startLine);
      const char c = source_[p];
      if (c == quote) {
        ++p;
        break;
      }
      if (c == '\n')
        ++line_;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      if (p + 1 >= source_.size())
        fail("unterminated string literal", startLine);
      const char e = source_[p + 1];
      p += 2;
      auto hex = [&](int count) {
        uint32_t v = 0;
        for (int i = 0; i < count; ++i) {
          if (p >= source_.size())
            fail("truncated escape in string literal", line_);
          const char h = source_[p];
          int d = isDigit(h)               ? h - '0'
                  : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                           : -1;
          if (d < 0)
            fail(std::string("truncated \\") + e + " escape in string literal", line_);
          v = v * 16 + uint32_t(d);
          ++p;
        }
        return v;
      };
      auto appendCodePoint = [&](uint32_t cp) {
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
          fail("string literal escape gives an invalid code point", line_);
        utf8::append(out, char32_t(cp));
      };
      switch (e) {
      case '\n':
        ++line_;
        break; // line continuation
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
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
      case 'v':
        out += '\v';
        break;
      case 'x':
        appendCodePoint(hex(2));
        break;
      case 'u':
        appendCodePoint(hex(4));
        break;
      case 'U':
        appendCodePoint(hex(8));
        break;
      case 'N':
        fail("\\N{...} escapes in string literals are not supported", line_);
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = uint32_t(e - '0');
          for (int i = 0; i < 2 && p < source_.size() && source_[p] >= '0' && source_[p] <= '7';
               ++i)
            v = v * 8 + uint32_t(source_[p++] - '0');
          appendCodePoint(v);
        } else {
          out += '\\'; // unknown escapes stay as written
          out += e;
        }
      }
    }
    Token token{TokenType::String, std::move(out), 0, 0, startLine};
    tokens_.push_back(std::move(token));
    pos_ = p;
  }

  void lexOperator(std::vector<char>& balance) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo)
      if (source_.compare(pos_, 2, op) == 0) {
        push(TokenType::Operator, op);
        pos_ += 2;
        return;
      }
    const char c = source_[pos_];
    static const std::string kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string::npos) {
      size_t length = 1;
      utf8::decodeValid(source_, pos_, length);
      fail("unexpected character '" + source_.substr(pos_, length) + "' in tag", line_);
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty())
        fail(std::string("unexpected '") + c + "'", line_);
      if (balance.back() != c)
        fail(std::string("unexpected '") + c + "', expected '" + balance.back() + "'", line_);
      balance.pop_back();
    }
    push(TokenType::Operator, std::string(1, c));
    ++pos_;
  }

  std::string source_;
  size_t pos_ = 0;
  int line_ = 1;
  bool lineStarting_ = true;
  std::vector<Token> tokens_;
};

} // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

} // namespace jinja
} // namespace ninfer
