// SentencePiece-style BPE (TokenizerKind::SentencePieceBpe): spaces become "▁"
// (U+2581), a "▁" is put in front of the text, and the characters are merged
// pairwise; characters without a token become <0xXX> byte tokens (byte
// fallback) or <unk>. Decoding turns "▁" back into spaces, assembles byte
// tokens and drops the leading space at the start of a text; from a
// SentencePiece model <unk> decodes as the library does, to " ⁇ ".
//
// One kind, two references, told apart by the plan's `scores`:
//
//  * scores present: a SentencePiece model (tokenizer.model), encoded exactly as
//    the sentencepiece library does. The dummy prefix goes once in front of the
//    whole text; user-defined pieces (special_ids) are matched in the
//    normalized text and never merged; a merge's priority is the score of the
//    piece it makes (highest first, then leftmost), `merges` listing every pair
//    of pieces whose concatenation is a piece; unknown characters fall back to
//    bytes after merging, and without byte fallback a run of them is one <unk>.
//  * no scores: a tokenizer.json in that style (Llama 2/Mistral/TinyLlama as
//    converted by transformers), encoded as Hugging Face tokenizers does. Added
//    tokens (special_ids) are split off the raw text first; each part between
//    them is normalized on its own (add_dummy_prefix is the Prepend("▁")
//    normalizer, spaces are replaced by "▁"), then optionally split by a
//    Metaspace pre-tokenizer; `merges` are rank-ordered; unknown characters
//    become byte tokens before merging.
//
// The plan's `pretokenizer` is "" (none) or, for tokenizer.json only,
// "metaspace-<always|first|never>[-split]" (Metaspace's prepend_scheme and
// split). `normalizer` is "" or "nfc".
#pragma once

#include "BpeSupport.h"
#include "BpeTable.h"
#include "Normalizer.h"
#include "ninfer/Tokenizer.h"

#include <array>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ninfer {

class SentencePieceBpe : public Tokenizer {
public:
  static Result<std::unique_ptr<Tokenizer>> create(const plan::Tokenizer& table);

  Result<std::vector<int32_t>> encode(std::string_view text, bool addSpecial) const override;
  std::string tokenBytes(int32_t id) const override;
  int vocabSize() const override { return static_cast<int>(decoded_.size()); }
  bool dropsLeadingSpaceAtStart(int32_t id) const override;

private:
  enum class Mode { SentencePiece, HuggingFace };
  enum class Prepend { Never, Always, First };

  struct Scratch {
    std::string nfc;
    std::string normalized;
    std::vector<int32_t> word;
    bpe::MergeScratch merge;
    bpe::WordCache* cache = nullptr; // null when another thread holds it
  };

  SentencePieceBpe() = default;
  Status init(const plan::Tokenizer& table);
  Status parsePreTokenizer(std::string_view name);

  void encodeSentencePiece(std::string_view text, std::vector<int32_t>& ids, Scratch& s) const;
  void encodeHuggingFace(std::string_view text, std::vector<int32_t>& ids, Scratch& s) const;
  void encodeHfSegment(std::string_view text, bool atTextStart, std::vector<int32_t>& ids,
                       Scratch& s) const;
  // Normalized text with user-defined pieces matched in it (SentencePiece).
  void encodeWithUserPieces(std::string_view text, std::vector<int32_t>& ids, Scratch& s) const;
  // Normalized text without added tokens: cut where no merge can reach across.
  void encodeWords(std::string_view text, std::vector<int32_t>& ids, Scratch& s) const;
  void encodeWord(std::string_view word, std::vector<int32_t>& ids, Scratch& s) const;
  void appendWord(const std::vector<int32_t>& word, std::vector<int32_t>& ids) const;
  // The id of the single character text[pos, pos + length), or -1.
  int32_t charId(std::string_view text, size_t pos, size_t length) const;

  Mode mode_ = Mode::SentencePiece;
  NormalizerKind normalizer_ = NormalizerKind::None;
  bool addDummyPrefix_ = false;
  bool metaspace_ = false;
  Prepend metaspacePrepend_ = Prepend::Never;
  bool metaspaceSplit_ = false;
  bool byteFallback_ = false;
  bool ignoreMerges_ = false;
  bool stripLeadingSpace_ = false;
  // No merge joins a character other than "▁" to a following "▁", so words can
  // be cut before each such "▁" (and cached) without changing the result.
  bool splitWords_ = false;
  int32_t unkId_ = -1;
  bpe::BosToken bos_;

  std::vector<std::string> decoded_; // id -> bytes for tokenBytes()
  std::vector<bool> isByteToken_;
  std::array<int32_t, 256> byteIds_{};
  std::array<int32_t, 128> asciiIds_{};
  std::unordered_map<uint32_t, int32_t> charIds_; // UTF-8 bytes packed little-endian -> id
  std::unordered_map<std::string_view, int32_t> wholeWords_; // ignore_merges
  std::vector<std::string> pieces_;                          // id -> token text
  bpe::MergeTable merges_;
  bpe::AddedTokenMatcher added_;

  mutable std::mutex cacheMutex_;
  mutable bpe::WordCache cache_;
};

} // namespace ninfer
