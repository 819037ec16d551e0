// Pre-tokenization: splits text into the pieces BPE runs on, exactly as the
// Hugging Face tokenizers regexes do, with hand-written scanners instead of a
// regex engine (no dependency, and several times faster). Each supported
// pattern is one PreTokenizerKind with its own scanner; adding a pattern means
// adding a kind, its name and its scanner.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace ninfer {

enum class PreTokenizerKind {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,
  // Qwen2: as Llama 3 with \p{N} instead of \p{N}{1,3}.
  Qwen2,
};

// The plan's `pretokenizer` names: "gpt2", "llama3", "qwen2".
std::optional<PreTokenizerKind> preTokenizerFromName(std::string_view name);

// Appends the pieces of `text` (valid UTF-8) to `pieces`, in order; together they
// cover `text` exactly.
void preTokenize(PreTokenizerKind kind, std::string_view text,
                 std::vector<std::string_view>& pieces);

} // namespace ninfer
