// GPT-2 style byte-level BPE (TokenizerKind::ByteLevelBpe): added tokens are
// split out first, the text between them is normalized (nothing, or NFC for
// Qwen2) and pre-tokenized, each piece's bytes start as the vocabulary's 256
// byte tokens and are merged pairwise by rank. With ignore_merges (Llama 3) a
// piece that is itself a token is taken whole. The vocabulary stores bytes
// through GPT-2's bytes_to_unicode table ("Ġ" is a space); this class maps that
// away once at construction, so encoding never touches it.
#pragma once

#include "BpeSupport.h"
#include "BpeTable.h"
#include "Normalizer.h"
#include "PreTokenizer.h"
#include "ninfer/Tokenizer.h"

#include <array>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ninfer {

class ByteLevelBpe : public Tokenizer {
public:
  // Checks the table (ids in range, merges that produce vocabulary tokens, a
  // known pre-tokenizer and normalizer) and names the offending index when it is bad.
  static Result<std::unique_ptr<Tokenizer>> create(const plan::Tokenizer& table);

  Result<std::vector<int32_t>> encode(std::string_view text, bool addSpecial) const override;
  std::string tokenBytes(int32_t id) const override;
  int vocabSize() const override { return static_cast<int>(tokenBytes_.size()); }

private:
  // Per-call buffers, reused across the pieces of one encode call.
  struct Scratch {
    std::vector<std::string_view> pieces;
    std::string normalized;
    bpe::MergeScratch merge;
    bpe::WordCache* cache = nullptr; // null when another thread holds it
  };

  ByteLevelBpe() = default;
  Status init(const plan::Tokenizer& table);

  void encodeOrdinary(std::string_view text, std::vector<int32_t>& ids, Scratch& scratch) const;
  void encodePiece(std::string_view piece, std::vector<int32_t>& ids, Scratch& scratch) const;

  PreTokenizerKind preTokenizer_ = PreTokenizerKind::Gpt2;
  NormalizerKind normalizer_ = NormalizerKind::None;
  bool ignoreMerges_ = false;
  std::vector<std::string> tokenBytes_;
  std::array<int32_t, 256> byteToId_{};
  bpe::MergeTable merges_;
  // ignore_merges: the bytes of every ordinary token whose text lies in the
  // byte alphabet (only those can equal a byte-mapped piece) -> id.
  std::unordered_map<std::string_view, int32_t> wholeWords_;
  bpe::AddedTokenMatcher added_;
  bpe::BosToken bos_;

  // encode() is const and may be shared between threads: the cache is used by
  // one call at a time (try_lock); a call that finds it busy encodes without it.
  mutable std::mutex cacheMutex_;
  mutable bpe::WordCache cache_;
};

// GPT-2's bytes_to_unicode: the code point that stands for byte `b` in a
// byte-level vocabulary.
char32_t byteToCodePoint(uint8_t b);

} // namespace ninfer
