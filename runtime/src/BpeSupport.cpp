// The BPE merge loop: symbols form a linked list over the word; a min-heap of
// candidate pairs (priority, then position) keeps long words (runs of spaces,
// long identifiers) O(n log n). A merge folds the right symbol into the left
// one, so index 0 always heads the list.
#include "BpeSupport.h"

#include <algorithm>

namespace ninfer {
namespace bpe {

void MergeTable::reserve(size_t count) {
  size_t capacity = 16;
  while (capacity < count * 2)
    capacity *= 2;
  if (capacity <= slots_.size())
    return;
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(capacity, Entry{kEmpty, 0, 0});
  mask_ = capacity - 1;
  count_ = 0;
  for (const Entry& e : old)
    if (e.key != kEmpty)
      insert(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xFFFFFFFFu),
             e.priority, e.result);
}

void MergeTable::insert(int32_t left, int32_t right, uint32_t priority, int32_t result) {
  if ((count_ + 1) * 2 > slots_.size())
    reserve(std::max<size_t>(8, slots_.size()));
  uint64_t k = key(left, right);
  for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    Entry& e = slots_[i];
    if (e.key == k) {
      e.priority = priority;
      e.result = result;
      return;
    }
    if (e.key == kEmpty) {
      e = Entry{k, priority, result};
      ++count_;
      return;
    }
  }
}

void applyMerges(const MergeTable& table, MergeScratch& scratch, std::vector<int32_t>& out) {
  using Symbol = MergeScratch::Symbol;
  using Candidate = MergeScratch::Candidate;
  const std::vector<int32_t>& initial = scratch.initial;
  const int32_t n = static_cast<int32_t>(initial.size());
  if (n == 0)
    return;
  if (n == 1) {
    out.push_back(initial[0]);
    return;
  }
  // Lowest priority first, then the leftmost position (std heaps are max-heaps).
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.pos > b.pos;
  };
  std::vector<Symbol>& symbols = scratch.symbols;
  std::vector<Candidate>& heap = scratch.heap;
  symbols.resize(n);
  heap.clear();
  for (int32_t i = 0; i < n; ++i)
    symbols[i] = Symbol{initial[i], i - 1, i + 1 < n ? i + 1 : -1};

  auto consider = [&](int32_t pos) {
    if (pos < 0)
      return;
    const Symbol& s = symbols[pos];
    if (s.next < 0 || s.id < 0)
      return;
    int32_t right = symbols[s.next].id;
    if (right < 0)
      return;
    const MergeTable::Entry* e = table.find(s.id, right);
    if (!e)
      return;
    heap.push_back(Candidate{e->priority, pos, s.id, right, e->result});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (initial[i] < 0 || initial[i + 1] < 0)
      continue;
    if (const MergeTable::Entry* e = table.find(initial[i], initial[i + 1]))
      heap.push_back(Candidate{e->priority, i, initial[i], initial[i + 1], e->result});
  }
  std::make_heap(heap.begin(), heap.end(), worse);

  constexpr int32_t kRemoved = INT32_MIN;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    Candidate c = heap.back();
    heap.pop_back();
    Symbol& s = symbols[c.pos];
    if (s.id == kRemoved || s.next < 0)
      continue;
    Symbol& right = symbols[s.next];
    if (s.id != c.left || right.id != c.right)
      continue;
    s.id = c.result;
    int32_t after = right.next;
    s.next = after;
    if (after >= 0)
      symbols[after].prev = c.pos;
    right.id = kRemoved;
    consider(s.prev);
    consider(c.pos);
  }
  for (int32_t pos = 0; pos >= 0; pos = symbols[pos].next)
    out.push_back(symbols[pos].id);
}

void WordCache::clear() {
  slots_.assign(kMinSlots, Slot{});
  mask_ = kMinSlots - 1;
  keys_.clear();
  ids_.clear();
  count_ = 0;
}

void WordCache::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.keyLength == 0)
      continue;
    size_t i = s.hash & mask_;
    while (slots_[i].keyLength != 0)
      i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

bool WordCache::lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const {
  if (slots_.empty())
    return false;
  for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.keyLength == 0)
      return false;
    if (s.hash == hash && s.keyLength == word.size() &&
        std::memcmp(keys_.data() + s.keyOffset, word.data(), word.size()) == 0) {
      out.insert(out.end(), ids_.begin() + s.idsOffset, ids_.begin() + s.idsOffset + s.idsLength);
      return true;
    }
  }
}

void WordCache::insert(std::string_view word, uint64_t hash, const int32_t* ids, size_t count) {
  if (word.empty() || word.size() > kMaxWordBytes || count > 0xFFFF)
    return;
  if (slots_.empty())
    clear();
  if ((count_ + 1) * 2 > slots_.size()) {
    if (slots_.size() < kMaxSlots)
      grow();
    else
      clear();
  }
  if (keys_.size() + ids_.size() * 4 > kMaxArena)
    clear();
  for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.keyLength != 0) {
      if (s.hash == hash && s.keyLength == word.size() &&
          std::memcmp(keys_.data() + s.keyOffset, word.data(), word.size()) == 0)
        return; // already there
      continue;
    }
    s.hash = hash;
    s.keyOffset = static_cast<uint32_t>(keys_.size());
    s.keyLength = static_cast<uint16_t>(word.size());
    s.idsOffset = static_cast<uint32_t>(ids_.size());
    s.idsLength = static_cast<uint16_t>(count);
    keys_.append(word);
    ids_.insert(ids_.end(), ids, ids + count);
    ++count_;
    return;
  }
}

void AddedTokenMatcher::add(std::string text, int32_t id) {
  if (text.empty())
    return;
  unsigned char first = static_cast<unsigned char>(text[0]);
  byFirstByte_[first].push_back(Token{std::move(text), id});
  empty_ = false;
}

void AddedTokenMatcher::finish() {
  for (auto& group : byFirstByte_)
    std::stable_sort(group.begin(), group.end(),
                     [](const Token& a, const Token& b) { return a.text.size() > b.text.size(); });
}

int32_t AddedTokenMatcher::match(std::string_view text, size_t pos, size_t& length) const {
  for (const Token& token : byFirstByte_[static_cast<unsigned char>(text[pos])]) {
    if (text.compare(pos, token.text.size(), token.text) == 0) {
      length = token.text.size();
      return token.id;
    }
  }
  return -1;
}

} // namespace bpe
} // namespace ninfer
