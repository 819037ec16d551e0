// Byte-level BPE encoding. Merging follows Hugging Face tokenizers exactly:
// the lowest-ranked adjacent pair is merged first, the leftmost one among
// equals, until no adjacent pair has a merge. A min-heap of candidate pairs
// keeps long pieces (runs of spaces or punctuation) O(n log n).
#include "ByteLevelBpe.h"

#include "Utf8.h"
#include "plan_generated.h"

#include <algorithm>

namespace ninfer {

char32_t byteToCodePoint(uint8_t b) {
  // Printable Latin-1 bytes stand for themselves; the rest (controls, space,
  // DEL, NBSP, soft hyphen) are moved, in byte order, to U+0100 onwards.
  auto printable = [](unsigned v) {
    return (v >= 0x21 && v <= 0x7E) || (v >= 0xA1 && v <= 0xAC) || (v >= 0xAE && v <= 0xFF);
  };
  if (printable(b))
    return b;
  char32_t shifted = 0;
  for (unsigned v = 0; v < b; ++v)
    shifted += printable(v) ? 0 : 1;
  return 0x100 + shifted;
}

Result<std::unique_ptr<Tokenizer>> ByteLevelBpe::create(const plan::Tokenizer& table) {
  std::unique_ptr<ByteLevelBpe> tok(new ByteLevelBpe());
  NINFER_RETURN_IF_ERROR(tok->init(table));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

Status ByteLevelBpe::init(const plan::Tokenizer& table) {
  const auto* tokens = table.tokens();
  if (!tokens || tokens->size() == 0)
    return Status::error("plan tokenizer has no tokens");
  const size_t vocab = tokens->size();
  if (vocab > static_cast<size_t>(INT32_MAX))
    return Status::error("plan tokenizer has too many tokens");

  if (const auto* name = table.pretokenizer(); name && name->size() != 0) {
    auto kind = preTokenizerFromName(name->string_view());
    if (!kind)
      return Status::error("plan tokenizer uses pre-tokenizer '" + name->str() +
                           "', which this runtime does not support");
    preTokenizer_ = *kind;
  }

  std::vector<bool> isSpecial(vocab, false);
  if (const auto* specials = table.special_ids()) {
    for (size_t i = 0; i < specials->size(); ++i) {
      uint32_t id = specials->Get(i);
      if (id >= vocab)
        return Status::error("plan tokenizer special_ids[" + std::to_string(i) +
                             "] = " + std::to_string(id) + " is out of range");
      isSpecial[id] = true;
    }
  }

  // Inverse of bytes_to_unicode, for turning vocabulary text back into bytes.
  std::unordered_map<char32_t, uint8_t> codePointToByte;
  for (unsigned b = 0; b < 256; ++b)
    codePointToByte[byteToCodePoint(static_cast<uint8_t>(b))] = static_cast<uint8_t>(b);

  std::unordered_map<std::string_view, int32_t> idOfText;
  idOfText.reserve(vocab);
  tokenBytes_.resize(vocab);
  for (size_t id = 0; id < vocab; ++id) {
    const auto* str = tokens->Get(static_cast<flatbuffers::uoffset_t>(id));
    std::string_view text = str ? str->string_view() : std::string_view();
    if (utf8::findInvalid(text) != std::string_view::npos)
      return Status::error("plan tokenizer tokens[" + std::to_string(id) + "] is not valid UTF-8");
    if (isSpecial[id]) {
      tokenBytes_[id] = std::string(text);
      continue;
    }
    idOfText.emplace(text, static_cast<int32_t>(id));
    std::string& bytes = tokenBytes_[id];
    for (size_t pos = 0; pos < text.size();) {
      size_t length;
      char32_t cp = utf8::decodeValid(text, pos, length);
      auto it = codePointToByte.find(cp);
      // A character outside the byte alphabet stands for itself, as in the
      // ByteLevel decoder of Hugging Face tokenizers.
      if (it != codePointToByte.end())
        bytes.push_back(static_cast<char>(it->second));
      else
        bytes.append(text.substr(pos, length));
      pos += length;
    }
  }

  for (unsigned b = 0; b < 256; ++b) {
    std::string text;
    utf8::append(text, byteToCodePoint(static_cast<uint8_t>(b)));
    auto it = idOfText.find(text);
    // A byte without a token is dropped, as tokenizers does for BPE without unk.
    byteToId_[b] = it == idOfText.end() ? -1 : it->second;
  }

  if (const auto* merges = table.merges()) {
    if (merges->size() % 2 != 0)
      return Status::error("plan tokenizer merges has an odd number of entries");
    const size_t count = merges->size() / 2;
    merges_.reserve(count);
    std::string joined;
    for (size_t i = 0; i < count; ++i) {
      uint32_t left = merges->Get(static_cast<flatbuffers::uoffset_t>(2 * i));
      uint32_t right = merges->Get(static_cast<flatbuffers::uoffset_t>(2 * i + 1));
      if (left >= vocab || right >= vocab)
        return Status::error("plan tokenizer merge " + std::to_string(i) +
                             " refers to a token id out of range");
      joined.assign(tokens->Get(left)->string_view());
      joined.append(tokens->Get(right)->string_view());
      auto it = idOfText.find(joined);
      if (it == idOfText.end())
        return Status::error("plan tokenizer merge " + std::to_string(i) + " makes '" + joined +
                             "', which is not in the vocabulary");
      // A repeated pair keeps its last rank, as tokenizers' map does.
      merges_[pairKey(static_cast<int32_t>(left), static_cast<int32_t>(right))] =
          Merge{static_cast<uint32_t>(i), it->second};
    }
  }

  for (size_t id = 0; id < vocab; ++id) {
    if (!isSpecial[id] || tokenBytes_[id].empty())
      continue;
    const std::string& text = tokenBytes_[id];
    addedByFirstByte_[static_cast<unsigned char>(text[0])].push_back(
        AddedToken{text, static_cast<int32_t>(id)});
  }
  for (auto& group : addedByFirstByte_)
    std::stable_sort(group.begin(), group.end(), [](const AddedToken& a, const AddedToken& b) {
      return a.text.size() > b.text.size();
    });

  bosId_ = table.bos_id();
  addBos_ = table.add_bos();
  if (addBos_ && (bosId_ < 0 || static_cast<size_t>(bosId_) >= vocab))
    return Status::error("plan tokenizer adds BOS but bos_id " + std::to_string(bosId_) +
                         " is not a token");
  return Status::ok();
}

const ByteLevelBpe::AddedToken* ByteLevelBpe::matchAdded(std::string_view text, size_t pos) const {
  for (const AddedToken& token : addedByFirstByte_[static_cast<unsigned char>(text[pos])]) {
    if (text.compare(pos, token.text.size(), token.text) == 0)
      return &token;
  }
  return nullptr;
}

Result<std::vector<int32_t>> ByteLevelBpe::encode(std::string_view text, bool addSpecial) const {
  size_t bad = utf8::findInvalid(text);
  if (bad != std::string_view::npos)
    return Status::error("prompt is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");

  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (addSpecial && addBos_)
    ids.push_back(bosId_);

  // Added tokens are found before pre-tokenization (leftmost, then longest, as
  // tokenizers' Aho-Corasick matcher does); the text between them is ordinary.
  std::vector<std::string_view> pieces;
  size_t segmentStart = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (addedByFirstByte_[static_cast<unsigned char>(text[pos])].empty()) {
      ++pos;
      continue;
    }
    const AddedToken* added = matchAdded(text, pos);
    if (!added) {
      ++pos;
      continue;
    }
    encodeOrdinary(text.substr(segmentStart, pos - segmentStart), ids, pieces);
    ids.push_back(added->id);
    pos += added->text.size();
    segmentStart = pos;
  }
  encodeOrdinary(text.substr(segmentStart), ids, pieces);
  return ids;
}

void ByteLevelBpe::encodeOrdinary(std::string_view text, std::vector<int32_t>& ids,
                                  std::vector<std::string_view>& pieces) const {
  if (text.empty())
    return;
  pieces.clear();
  preTokenize(preTokenizer_, text, pieces);
  for (std::string_view piece : pieces)
    encodePiece(piece, ids);
}

void ByteLevelBpe::encodePiece(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.size() == 1) {
    int32_t id = byteToId_[static_cast<unsigned char>(piece[0])];
    if (id >= 0)
      ids.push_back(id);
    return;
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    applyMerges(piece, ids);
    return;
  }
  std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = ids.size();
  applyMerges(piece, ids);
  std::lock_guard<std::mutex> lock(cacheMutex_);
  if (cache_.size() < kCacheCapacity)
    cache_.emplace(std::move(key), std::vector<int32_t>(ids.begin() + first, ids.end()));
}

void ByteLevelBpe::applyMerges(std::string_view piece, std::vector<int32_t>& ids) const {
  // Symbols form a linked list over the piece; a merge folds the right symbol
  // into the left one, so index 0 always heads the list.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
    int32_t result;
    // std::push_heap builds a max-heap: "greater" puts the lowest rank, then the
    // leftmost position, on top.
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };

  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (char ch : piece) {
    int32_t id = byteToId_[static_cast<unsigned char>(ch)];
    if (id < 0)
      continue;
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, index - 1, -1});
    if (index > 0)
      symbols[index - 1].next = index;
  }
  if (symbols.empty())
    return;

  std::vector<Candidate> heap;
  auto consider = [&](int32_t pos) {
    if (pos < 0)
      return;
    const Symbol& s = symbols[pos];
    if (s.next < 0)
      return;
    int32_t right = symbols[s.next].id;
    auto it = merges_.find(pairKey(s.id, right));
    if (it == merges_.end())
      return;
    heap.push_back(Candidate{it->second.rank, pos, s.id, right, it->second.result});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(symbols.size()); ++pos)
    consider(pos);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Candidate c = heap.back();
    heap.pop_back();
    Symbol& s = symbols[c.pos];
    // Stale when either side has changed since the candidate was pushed.
    if (s.id != c.left || s.next < 0 || symbols[s.next].id != c.right)
      continue;
    Symbol& right = symbols[s.next];
    s.id = c.result;
    s.next = right.next;
    if (right.next >= 0)
      symbols[right.next].prev = c.pos;
    right.id = -1;
    consider(s.prev);
    consider(c.pos);
  }

  for (int32_t pos = 0; pos >= 0; pos = symbols[pos].next)
    ids.push_back(symbols[pos].id);
}

std::string ByteLevelBpe::tokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokenBytes_.size())
    return std::string();
  return tokenBytes_[id];
}

} // namespace ninfer
