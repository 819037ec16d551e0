// Unicode normalization for tokenizers whose tokenizer.json asks for it (Qwen2
// uses NFC). The reference is Hugging Face tokenizers, whose NFC comes from an
// older Unicode version than current Python or ICU, so the tables are measured
// on tokenizers itself by scripts/gen_normalizer_tables.py (NormalizerTables.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ninfer {
namespace unicode {

struct CombiningClassRange {
  char32_t first;
  char32_t last; // inclusive
  uint8_t combiningClass;
};
struct Decomposition {
  char32_t codePoint;
  uint16_t offset; // into kDecompositionData
  uint8_t length;  // the full canonical decomposition, already in canonical order
};
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

extern const CombiningClassRange kCombiningClasses[];
extern const size_t kCombiningClassesCount;
extern const char32_t kDecompositionData[];
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionsCount;
extern const Composition kCompositions[]; // sorted by (first, second)
extern const size_t kCompositionsCount;

// Canonical combining class (0 for starters).
uint8_t combiningClass(char32_t cp);

// Appends NFC(text) to `out`; `text` must be valid UTF-8. Text that is already
// stable (all ASCII, most text in any script) is copied without decoding it
// twice: only the stretches around characters that can decompose, reorder or
// compose go through the full algorithm.
void appendNfc(std::string_view text, std::string& out);

} // namespace unicode

// Normalizers a plan may name in its tokenizer table ("" or "nfc").
enum class NormalizerKind { None, Nfc };
std::optional<NormalizerKind> normalizerFromName(std::string_view name);

// `text` as the normalizer leaves it: `text` itself, or its NFC form written into `buffer`.
inline std::string_view normalize(NormalizerKind kind, std::string_view text, std::string& buffer) {
  if (kind != NormalizerKind::Nfc)
    return text;
  buffer.clear();
  unicode::appendNfc(text, buffer);
  return buffer;
}

} // namespace ninfer
