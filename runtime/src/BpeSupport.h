// Building blocks shared by the BPE tokenizers (ByteLevelBpe, SentencePieceBpe):
// the pair table and the merge loop, a word cache, and the leftmost-longest
// matcher for added tokens. They hold no tokenizer-specific rules; the few
// places where SentencePiece and Hugging Face tokenizers differ are parameters.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {
namespace bpe {

// Fast non-cryptographic hash of a short byte string (words, token texts).
inline uint64_t hashBytes(const char* data, size_t size) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (size * 0xFF51AFD7ED558CCDull);
  while (size >= 8) {
    uint64_t v;
    std::memcpy(&v, data, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    data += 8;
    size -= 8;
  }
  if (size != 0) {
    uint64_t v = 0;
    std::memcpy(&v, data, size);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  return h ^ (h >> 32);
}
inline uint64_t hashBytes(std::string_view text) { return hashBytes(text.data(), text.size()); }

// (left id, right id) -> (priority, result id); a lower priority merges first.
// Open addressing over a power-of-two table: lookups are the inner loop of BPE.
class MergeTable {
public:
  struct Entry {
    uint64_t key;
    uint32_t priority;
    int32_t result;
  };

  void reserve(size_t count);
  // A pair inserted twice keeps the later value (as tokenizers' HashMap does).
  void insert(int32_t left, int32_t right, uint32_t priority, int32_t result);
  const Entry* find(int32_t left, int32_t right) const {
    if (slots_.empty())
      return nullptr;
    uint64_t k = key(left, right);
    for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == k)
        return &e;
      if (e.key == kEmpty)
        return nullptr;
    }
  }
  size_t size() const { return count_; }
  template <typename F> void forEach(F&& f) const {
    for (const Entry& e : slots_)
      if (e.key != kEmpty)
        f(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xFFFFFFFFu), e);
  }

private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  static size_t mix(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(k ^ (k >> 29));
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// Reused across the words of one encode call so merging allocates nothing.
struct MergeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    uint32_t priority;
    int32_t pos;
    int32_t left;
    int32_t right;
    int32_t result;
  };
  std::vector<int32_t> initial;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

// Merges the symbols in `scratch.initial` (token ids; negative ids never
// merge) and appends the surviving ids, in order, to `out`. Both libraries
// queue every adjacent pair with a merge and pop the best (lowest priority,
// then leftmost). A popped pair is stale when either symbol changed since it
// was queued (SentencePiece's test); tokenizers instead asks whether the pair
// now at that position merges into the same token, which is the same test
// because a merge's result is always the concatenation of its two sides (the
// tables are checked for that), so a changed pair cannot make the same token.
void applyMerges(const MergeTable& table, MergeScratch& scratch, std::vector<int32_t>& out);

// Remembers the ids of words (pre-tokenized pieces), since words repeat a lot
// in real text. Bounded: when full it starts over. Not thread-safe; owners
// guard it.
class WordCache {
public:
  static constexpr size_t kMaxWordBytes = 256;

  // Appends the ids of `word` to `out` and returns true when cached.
  bool lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const;
  void insert(std::string_view word, uint64_t hash, const int32_t* ids, size_t count);

private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t keyOffset = 0;
    uint32_t idsOffset = 0;
    uint16_t keyLength = 0; // 0: empty slot (words are never empty)
    uint16_t idsLength = 0;
  };
  // The table starts small (a prompt's words fit in cache lines) and doubles
  // up to kMaxSlots, kept at most half full; then it starts over.
  static constexpr size_t kMinSlots = 1 << 10;
  static constexpr size_t kMaxSlots = 1 << 17;
  static constexpr size_t kMaxArena = 8 << 20; // key bytes + id bytes before starting over

  void clear();
  void grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t count_ = 0;
};

// Added tokens are found by leftmost-longest matching, as tokenizers'
// Aho-Corasick matcher (leftmost-longest) and SentencePiece's prefix matcher do.
class AddedTokenMatcher {
public:
  void add(std::string text, int32_t id);
  void finish(); // sorts each group longest first
  bool empty() const { return empty_; }
  // Whether some added token starts with this byte (a quick filter).
  bool mayStartWith(unsigned char byte) const { return !byFirstByte_[byte].empty(); }
  // The longest added token at text[pos]: sets `length` and returns the id, or -1.
  int32_t match(std::string_view text, size_t pos, size_t& length) const;

  // Cuts `text` at the added tokens in it, leftmost first: ordinary(start, piece) for each
  // stretch between them (empty ones too; the whole text when there are none) and
  // added(id) for each token, in order. Where no token starts, next(pos) gives the next
  // byte offset to try (pos + 1, or the next character for SentencePiece's matcher).
  template <typename Next, typename Ordinary, typename Added>
  void split(std::string_view text, Next&& next, Ordinary&& ordinary, Added&& added) const {
    size_t runStart = 0;
    for (size_t pos = 0; !empty_ && pos < text.size();) {
      size_t length = 0;
      const int32_t id =
          mayStartWith(static_cast<unsigned char>(text[pos])) ? match(text, pos, length) : -1;
      if (id < 0) {
        pos = next(pos);
        continue;
      }
      ordinary(runStart, text.substr(runStart, pos - runStart));
      added(id);
      pos += length;
      runStart = pos;
    }
    ordinary(runStart, text.substr(runStart));
  }

private:
  struct Token {
    std::string text;
    int32_t id;
  };
  std::array<std::vector<Token>, 256> byFirstByte_;
  bool empty_ = true;
};

} // namespace bpe
} // namespace ninfer
