// UTF-8 well-formedness per the Unicode standard, table 3-7.
#include "Utf8.h"

#include <cstring>

namespace ninfer {
namespace utf8 {

Sequence checkSequence(const unsigned char* bytes, size_t size) {
  unsigned char b0 = bytes[0];
  if (b0 < 0x80)
    return {SequenceStatus::Valid, 1, b0};
  int length;
  // The second byte's range is narrower after some lead bytes: that is what
  // excludes overlong forms, surrogates and values above U+10FFFF.
  unsigned char lo = 0x80, hi = 0xBF;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0)
      lo = 0xA0;
    else if (b0 == 0xED)
      hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0)
      lo = 0x90;
    else if (b0 == 0xF4)
      hi = 0x8F;
  } else {
    return {SequenceStatus::Invalid, 1, 0};
  }
  for (int k = 1; k < length; ++k) {
    if (static_cast<size_t>(k) >= size)
      return {SequenceStatus::Truncated, static_cast<uint8_t>(k), 0};
    unsigned char b = bytes[k];
    if (b < lo || b > hi)
      return {SequenceStatus::Invalid, static_cast<uint8_t>(k), 0};
    lo = 0x80;
    hi = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
  }
  return {SequenceStatus::Valid, static_cast<uint8_t>(length), cp};
}

size_t findInvalid(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t size = text.size();
  size_t pos = 0;
  while (pos < size) {
    // ASCII dominates prompts; skip it without the full check, 8 bytes at a time.
    if (bytes[pos] < 0x80) {
      ++pos;
      while (pos + 8 <= size) {
        uint64_t word;
        std::memcpy(&word, bytes + pos, 8);
        if (word & 0x8080808080808080ull)
          break;
        pos += 8;
      }
      continue;
    }
    Sequence seq = checkSequence(bytes + pos, size - pos);
    if (seq.status != SequenceStatus::Valid)
      return pos;
    pos += seq.length;
  }
  return std::string_view::npos;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

} // namespace utf8
} // namespace ninfer
