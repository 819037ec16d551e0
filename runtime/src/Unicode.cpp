// Character classification for the pre-tokenizer. The Basic Multilingual Plane
// (nearly all text) goes through a lazily built 64 KiB table; rarer code points
// fall back to binary search over the generated ranges.
#include "Unicode.h"

#include <algorithm>
#include <array>

namespace ninfer {
namespace unicode {
namespace {

bool inRanges(const CodePointRange* ranges, size_t count, char32_t cp) {
  const CodePointRange* end = ranges + count;
  const CodePointRange* it = std::upper_bound(
      ranges, end, cp, [](char32_t value, const CodePointRange& r) { return value < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

CharClass classifySlow(char32_t cp) {
  if (inRanges(kLetterRanges, kLetterRangesCount, cp))
    return CharClass::Letter;
  if (inRanges(kNumberRanges, kNumberRangesCount, cp))
    return CharClass::Number;
  if (inRanges(kWhitespaceRanges, kWhitespaceRangesCount, cp))
    return CharClass::Whitespace;
  return CharClass::Other;
}

using BmpTable = std::array<CharClass, 0x10000>;

const BmpTable& bmpTable() {
  // Function-local static: built once, thread-safe since C++11.
  static const BmpTable table = [] {
    BmpTable t;
    for (char32_t cp = 0; cp < 0x10000; ++cp)
      t[cp] = classifySlow(cp);
    return t;
  }();
  return table;
}

} // namespace

CharClass classify(char32_t cp) {
  if (cp < 0x10000)
    return bmpTable()[cp];
  return classifySlow(cp);
}

} // namespace unicode
} // namespace ninfer
