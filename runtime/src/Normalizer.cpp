// NFC (Unicode standard annex 15): full canonical decomposition, canonical
// ordering of each run of non-starters by combining class, then canonical
// composition of each character with the last starter unless blocked. Hangul
// syllables are decomposed and composed arithmetically.
//
// Almost all text is already in NFC, so the work is limited to "dirty"
// stretches: a character is inert when it has combining class 0, does not
// decompose and never composes with a preceding character. Nothing moves or
// merges across an inert character, so each stretch from the inert character
// before a non-inert one up to the next inert character is normalized alone and
// the rest is copied.
#include "Normalizer.h"

#include "Utf8.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <vector>

namespace ninfer {
namespace unicode {
namespace {

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

enum Flag : uint8_t { kDecomposes = 1, kNonStarter = 2, kComposesBackward = 4 };

uint8_t combiningClassSlow(char32_t cp) {
  const CombiningClassRange* end = kCombiningClasses + kCombiningClassesCount;
  const CombiningClassRange* it = std::upper_bound(
      kCombiningClasses, end, cp,
      [](char32_t value, const CombiningClassRange& r) { return value < r.first; });
  if (it == kCombiningClasses || cp > (it - 1)->last)
    return 0;
  return (it - 1)->combiningClass;
}

const Decomposition* findDecomposition(char32_t cp) {
  const Decomposition* end = kDecompositions + kDecompositionsCount;
  const Decomposition* it =
      std::lower_bound(kDecompositions, end, cp,
                       [](const Decomposition& d, char32_t value) { return d.codePoint < value; });
  return it != end && it->codePoint == cp ? it : nullptr;
}

bool isHangulV(char32_t cp) { return cp >= kVBase && cp < kVBase + kVCount; }
bool isHangulT(char32_t cp) { return cp > kTBase && cp < kTBase + kTCount; }

struct Tables {
  std::array<uint8_t, 0x10000> bmpFlags{};
  std::array<uint8_t, 0x10000> bmpClass{};
  std::vector<char32_t> astralSeconds; // sorted
  std::unordered_map<uint64_t, char32_t> compositions;

  Tables() {
    for (size_t i = 0; i < kCombiningClassesCount; ++i) {
      const CombiningClassRange& r = kCombiningClasses[i];
      for (char32_t cp = r.first; cp <= r.last && cp < 0x10000; ++cp) {
        bmpClass[cp] = r.combiningClass;
        bmpFlags[cp] |= kNonStarter;
      }
    }
    for (size_t i = 0; i < kDecompositionsCount; ++i)
      if (kDecompositions[i].codePoint < 0x10000)
        bmpFlags[kDecompositions[i].codePoint] |= kDecomposes;
    compositions.reserve(kCompositionsCount * 2);
    for (size_t i = 0; i < kCompositionsCount; ++i) {
      const Composition& c = kCompositions[i];
      compositions.emplace(key(c.first, c.second), c.composite);
      if (c.second < 0x10000)
        bmpFlags[c.second] |= kComposesBackward;
      else
        astralSeconds.push_back(c.second);
    }
    std::sort(astralSeconds.begin(), astralSeconds.end());
    // Hangul: V and T jamo compose with what precedes them. Syllables stay inert:
    // an LV syllable followed by a T jamo is caught through the jamo.
    for (char32_t cp = kVBase; cp < kVBase + kVCount; ++cp)
      bmpFlags[cp] |= kComposesBackward;
    for (char32_t cp = kTBase + 1; cp < kTBase + kTCount; ++cp)
      bmpFlags[cp] |= kComposesBackward;
  }

  static uint64_t key(char32_t first, char32_t second) {
    return (static_cast<uint64_t>(first) << 32) | second;
  }

  uint8_t flags(char32_t cp) const {
    if (cp < 0x10000)
      return bmpFlags[cp];
    uint8_t f = 0;
    if (combiningClassSlow(cp) != 0)
      f |= kNonStarter;
    if (findDecomposition(cp))
      f |= kDecomposes;
    if (std::binary_search(astralSeconds.begin(), astralSeconds.end(), cp))
      f |= kComposesBackward;
    return f;
  }

  uint8_t combiningClass(char32_t cp) const {
    return cp < 0x10000 ? bmpClass[cp] : combiningClassSlow(cp);
  }

  // The composite of a starter and a following character, or 0.
  char32_t compose(char32_t first, char32_t second) const {
    if (first >= kLBase && first < kLBase + kLCount && isHangulV(second))
      return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
    if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
        isHangulT(second))
      return first + (second - kTBase);
    auto it = compositions.find(key(first, second));
    return it == compositions.end() ? 0 : it->second;
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

void decompose(const Tables& t, char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0)
      out.push_back(kTBase + s % kTCount);
    return;
  }
  if (t.flags(cp) & kDecomposes) {
    const Decomposition* d = findDecomposition(cp);
    out.insert(out.end(), kDecompositionData + d->offset,
               kDecompositionData + d->offset + d->length);
    return;
  }
  out.push_back(cp);
}

// NFC of a stretch that starts with an inert character or at the text start.
void normalizeStretch(const Tables& t, std::string_view text, std::string& out) {
  std::vector<char32_t> chars;
  chars.reserve(text.size() + 4);
  for (size_t pos = 0; pos < text.size();) {
    size_t length;
    char32_t cp = utf8::decodeValid(text, pos, length);
    decompose(t, cp, chars);
    pos += length;
  }
  // Canonical ordering: a stable sort of each run of non-starters.
  for (size_t i = 0; i < chars.size();) {
    if (t.combiningClass(chars[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < chars.size() && t.combiningClass(chars[j]) != 0)
      ++j;
    std::stable_sort(chars.begin() + i, chars.begin() + j, [&](char32_t a, char32_t b) {
      return t.combiningClass(a) < t.combiningClass(b);
    });
    i = j;
  }
  // Composition. `kept` holds the output so far; a character composes with the
  // last starter when adjacent to it, or when everything between has a lower,
  // non-zero combining class (the last of them is the highest after ordering).
  size_t kept = 0;
  ptrdiff_t starter = -1;
  uint8_t lastClass = 0;
  for (size_t i = 0; i < chars.size(); ++i) {
    char32_t cp = chars[i];
    uint8_t cls = t.combiningClass(cp);
    if (starter >= 0) {
      bool adjacent = static_cast<size_t>(starter) + 1 == kept;
      if (adjacent || (lastClass != 0 && lastClass < cls)) {
        if (char32_t composite = t.compose(chars[starter], cp)) {
          chars[starter] = composite;
          continue;
        }
      }
    }
    if (cls == 0) {
      starter = static_cast<ptrdiff_t>(kept);
      lastClass = 0;
    } else {
      lastClass = cls;
    }
    chars[kept++] = cp;
  }
  for (size_t i = 0; i < kept; ++i)
    utf8::append(out, chars[i]);
}

} // namespace

uint8_t combiningClass(char32_t cp) { return tables().combiningClass(cp); }

void appendNfc(std::string_view text, std::string& out) {
  const Tables& t = tables();
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t copiedTo = 0;  // text before this offset is already in `out`
  size_t prevStart = 0; // start of the previous (inert) character
  size_t pos = 0;
  while (pos < text.size()) {
    if (bytes[pos] < 0x80) { // ASCII is inert
      prevStart = pos++;
      continue;
    }
    size_t length;
    char32_t cp = utf8::decodeValid(text, pos, length);
    if (t.flags(cp) == 0) {
      prevStart = pos;
      pos += length;
      continue;
    }
    size_t stretchStart = pos == 0 ? 0 : prevStart;
    size_t end = pos + length;
    while (end < text.size()) {
      size_t next;
      char32_t c = utf8::decodeValid(text, end, next);
      if (c < 0x80 || t.flags(c) == 0)
        break;
      end += next;
    }
    out.append(text, copiedTo, stretchStart - copiedTo);
    normalizeStretch(t, text.substr(stretchStart, end - stretchStart), out);
    copiedTo = end;
    pos = end;
    prevStart = end; // the inert character at `end` (if any) comes next
  }
  out.append(text, copiedTo, text.size() - copiedTo);
}

} // namespace unicode

std::optional<NormalizerKind> normalizerFromName(std::string_view name) {
  if (name.empty())
    return NormalizerKind::None;
  if (name == "nfc")
    return NormalizerKind::Nfc;
  return std::nullopt;
}

} // namespace ninfer
