// UTF-8 decoding and validation shared by the tokenizer and the stream decoder.
// Validation follows the Unicode standard's well-formed byte sequences (no
// overlong forms, no surrogates, nothing above U+10FFFF), which is what Python
// and Rust strings accept, so invalid input is refused rather than guessed at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ninfer {
namespace utf8 {

enum class SequenceStatus : uint8_t { Valid, Invalid, Truncated };

struct Sequence {
  SequenceStatus status;
  // Valid: the sequence length. Invalid: the length of the maximal ill-formed
  // subpart (what one U+FFFD replaces). Truncated: bytes present, all a valid prefix.
  uint8_t length;
  char32_t codePoint; // only for Valid
};

// Examines the sequence starting at bytes[0]; `size` > 0.
Sequence checkSequence(const unsigned char* bytes, size_t size);

// Byte offset of the first ill-formed or truncated sequence, or npos.
size_t findInvalid(std::string_view text);

// Decodes the code point at text[pos] of already validated text.
inline char32_t decodeValid(std::string_view text, size_t pos, size_t& length) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  unsigned char b0 = p[0];
  if (b0 < 0x80) {
    length = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    length = 2;
    return (char32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b0 < 0xF0) {
    length = 3;
    return (char32_t(b0 & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  length = 4;
  return (char32_t(b0 & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

void append(std::string& out, char32_t cp);

// The replacement character U+FFFD.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

} // namespace utf8
} // namespace ninfer
