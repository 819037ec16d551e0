// Scanners for the pre-tokenizer regexes. Each returns the end of the match
// that the regex (leftmost alternative first, greedy quantifiers) finds at a
// position; the alternatives are checked in the pattern's order. Every pattern
// here ends in \s+ after the letter/number/other alternatives, so some
// alternative always matches and the pieces cover the text.
#include "PreTokenizer.h"

#include "Unicode.h"
#include "Utf8.h"

namespace ninfer {
namespace {

using unicode::CharClass;

struct Char {
  char32_t cp = 0;
  CharClass cls = CharClass::Other;
  size_t length = 0; // 0: past the end
};

// The classes of the ASCII characters, as a table (the scanners' hot path).
constexpr CharClass asciiClass(unsigned char b) {
  if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'))
    return CharClass::Letter;
  if (b >= '0' && b <= '9')
    return CharClass::Number;
  if (b == ' ' || (b >= '\t' && b <= '\r'))
    return CharClass::Whitespace;
  return CharClass::Other;
}
struct AsciiClassTable {
  CharClass cls[128];
  constexpr AsciiClassTable() : cls() {
    for (unsigned b = 0; b < 128; ++b)
      cls[b] = asciiClass(static_cast<unsigned char>(b));
  }
  constexpr CharClass operator[](unsigned char b) const { return cls[b]; }
};
constexpr AsciiClassTable kAsciiClasses{};

class Cursor {
public:
  explicit Cursor(std::string_view text) : text_(text) {}
  size_t size() const { return text_.size(); }

  Char at(size_t pos) const {
    Char c;
    if (pos >= text_.size())
      return c;
    unsigned char b = static_cast<unsigned char>(text_[pos]);
    if (b < 0x80) {
      c.cp = b;
      c.length = 1;
      c.cls = kAsciiClasses[b];
      return c;
    }
    c.cp = utf8::decodeValid(text_, pos, c.length);
    c.cls = unicode::classify(c.cp);
    return c;
  }

  // End of the run of characters of class `cls` starting at `pos`.
  size_t runOf(size_t pos, CharClass cls) const {
    for (;;) {
      // ASCII (nearly all of code and English) without decoding.
      while (pos < text_.size() && static_cast<unsigned char>(text_[pos]) < 0x80) {
        if (kAsciiClasses[static_cast<unsigned char>(text_[pos])] != cls)
          return pos;
        ++pos;
      }
      Char c = at(pos);
      if (c.length == 0 || c.cls != cls)
        return pos;
      pos += c.length;
    }
  }

private:
  std::string_view text_;
};

bool isLetterNumberOrOther(CharClass cls) { return cls != CharClass::Whitespace; }

char32_t lower(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z')
    return cp + ('a' - 'A');
  if (cp == 0x17F) // LATIN SMALL LETTER LONG S case-folds to 's'
    return 's';
  return cp;
}

// 's|'t|'re|'ve|'m|'ll|'d at `pos` (which holds an apostrophe); returns the end
// or 0. Case-insensitive for the Llama 3 family, which writes (?i:...).
size_t matchContraction(const Cursor& cur, size_t pos, bool ignoreCase) {
  Char a = cur.at(pos + 1);
  if (a.length == 0)
    return 0;
  char32_t c1 = ignoreCase ? lower(a.cp) : a.cp;
  size_t end1 = pos + 1 + a.length;
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
    return end1;
  if (c1 != 'r' && c1 != 'v' && c1 != 'l')
    return 0;
  Char b = cur.at(end1);
  if (b.length == 0)
    return 0;
  char32_t c2 = ignoreCase ? lower(b.cp) : b.cp;
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
    return end1 + b.length;
  return 0;
}

// \s+(?!\S)|\s+ at `pos` (a whitespace character): the whole run when it ends
// the text, else the run minus its last character (that one joins the next
// piece), else a single character.
size_t matchTrailingWhitespace(const Cursor& cur, size_t pos) {
  size_t lastStart = pos;
  size_t end = pos;
  int count = 0;
  for (;;) {
    Char c = cur.at(end);
    if (c.length == 0)
      return end; // the run reaches the end: (?!\S) holds
    if (c.cls != CharClass::Whitespace)
      break;
    lastStart = end;
    end += c.length;
    ++count;
  }
  return count >= 2 ? lastStart : end;
}

size_t matchGpt2(const Cursor& cur, size_t pos) {
  Char c = cur.at(pos);
  if (c.cp == '\'') {
    if (size_t end = matchContraction(cur, pos, /*ignoreCase=*/false))
      return end;
  }
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: one optional space, then a run
  // of one class.
  if (c.cp == ' ') {
    Char next = cur.at(pos + 1);
    if (next.length != 0 && isLetterNumberOrOther(next.cls))
      return cur.runOf(pos + 1, next.cls);
  } else if (isLetterNumberOrOther(c.cls)) {
    return cur.runOf(pos, c.cls);
  }
  return matchTrailingWhitespace(cur, pos);
}

size_t matchLlama3(const Cursor& cur, size_t pos, size_t maxDigits) {
  Char c = cur.at(pos);
  if (c.cp == '\'') {
    if (size_t end = matchContraction(cur, pos, /*ignoreCase=*/true))
      return end;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls == CharClass::Letter)
    return cur.runOf(pos, CharClass::Letter);
  bool isNewline = c.cp == '\r' || c.cp == '\n';
  if (c.cls != CharClass::Number && !isNewline) {
    Char next = cur.at(pos + c.length);
    if (next.cls == CharClass::Letter && next.length != 0)
      return cur.runOf(pos + c.length, CharClass::Letter);
  }
  // \p{N}{1,3} (Llama 3) or \p{N} (Qwen2)
  if (c.cls == CharClass::Number) {
    size_t end = pos;
    for (size_t n = 0; n < maxDigits; ++n) {
      Char d = cur.at(end);
      if (d.length == 0 || d.cls != CharClass::Number)
        break;
      end += d.length;
    }
    return end;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t otherStart = std::string_view::npos;
  if (c.cls == CharClass::Other) {
    otherStart = pos;
  } else if (c.cp == ' ') {
    Char next = cur.at(pos + 1);
    if (next.length != 0 && next.cls == CharClass::Other)
      otherStart = pos + 1;
  }
  if (otherStart != std::string_view::npos) {
    size_t end = cur.runOf(otherStart, CharClass::Other);
    while (end < cur.size()) {
      Char n = cur.at(end);
      if (n.cp != '\r' && n.cp != '\n')
        break;
      end += 1;
    }
    return end;
  }
  // \s*[\r\n]+: the whitespace run up to and including its last line break.
  size_t end = pos;
  size_t afterLastNewline = 0;
  for (;;) {
    Char w = cur.at(end);
    if (w.length == 0 || w.cls != CharClass::Whitespace)
      break;
    end += w.length;
    if (w.cp == '\r' || w.cp == '\n')
      afterLastNewline = end;
  }
  if (afterLastNewline != 0)
    return afterLastNewline;
  return matchTrailingWhitespace(cur, pos);
}

size_t matchAt(PreTokenizerKind kind, const Cursor& cur, size_t pos) {
  switch (kind) {
  case PreTokenizerKind::Gpt2:
    return matchGpt2(cur, pos);
  case PreTokenizerKind::Llama3:
    return matchLlama3(cur, pos, 3);
  case PreTokenizerKind::Qwen2:
    return matchLlama3(cur, pos, 1);
  }
  return cur.size();
}

} // namespace

std::optional<PreTokenizerKind> preTokenizerFromName(std::string_view name) {
  if (name == "gpt2")
    return PreTokenizerKind::Gpt2;
  if (name == "llama3")
    return PreTokenizerKind::Llama3;
  if (name == "qwen2")
    return PreTokenizerKind::Qwen2;
  return std::nullopt;
}

void preTokenize(PreTokenizerKind kind, std::string_view text,
                 std::vector<std::string_view>& pieces) {
  Cursor cur(text);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = matchAt(kind, cur, pos);
    if (end <= pos) // cannot happen (see the file comment); never loop forever
      end = text.size();
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
}

} // namespace ninfer
