// GPT-2 style byte-level BPE (TokenizerKind::ByteLevelBpe): added tokens are
// split out first, the rest is pre-tokenized, each piece's bytes start as the
// vocabulary's 256 byte tokens and are merged pairwise by rank. The vocabulary
// stores bytes through GPT-2's bytes_to_unicode table ("Ġ" is a space); this
// class maps that away once at construction, so encoding never touches it.
#pragma once

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
  // Checks the table (ids in range, merges that produce vocabulary tokens, all
  // 256 bytes present) and names the offending index when it is bad.
  static Result<std::unique_ptr<Tokenizer>> create(const plan::Tokenizer& table);

  Result<std::vector<int32_t>> encode(std::string_view text, bool addSpecial) const override;
  std::string tokenBytes(int32_t id) const override;
  int vocabSize() const override { return static_cast<int>(tokenBytes_.size()); }

private:
  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  struct AddedToken {
    std::string text;
    int32_t id;
  };

  ByteLevelBpe() = default;
  Status init(const plan::Tokenizer& table);

  // The added token starting at text[pos] (longest wins), or nullptr.
  const AddedToken* matchAdded(std::string_view text, size_t pos) const;
  void encodeOrdinary(std::string_view text, std::vector<int32_t>& ids,
                      std::vector<std::string_view>& pieces) const;
  void encodePiece(std::string_view piece, std::vector<int32_t>& ids) const;
  void applyMerges(std::string_view piece, std::vector<int32_t>& ids) const;

  static uint64_t pairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  PreTokenizerKind preTokenizer_ = PreTokenizerKind::Gpt2;
  std::vector<std::string> tokenBytes_;
  std::array<int32_t, 256> byteToId_{};
  std::unordered_map<uint64_t, Merge> merges_;
  // Added tokens grouped by first byte, longest first, for leftmost-longest matching.
  std::array<std::vector<AddedToken>, 256> addedByFirstByte_;
  int32_t bosId_ = -1;
  bool addBos_ = false;

  // Words repeat a lot in real text; remembering their ids skips BPE for most
  // of them. Bounded, and guarded because encode() is const and may be shared.
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedPieceBytes = 64;
  mutable std::mutex cacheMutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

// GPT-2's bytes_to_unicode: the code point that stands for byte `b` in a
// byte-level vocabulary.
char32_t byteToCodePoint(uint8_t b);

} // namespace ninfer
