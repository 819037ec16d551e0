// Byte-level BPE encoding. Merging follows Hugging Face tokenizers exactly
// (bpe::applyMerges): the lowest-ranked adjacent pair is merged first, the
// leftmost one among equals, until no adjacent pair has a merge.
#include "ByteLevelBpe.h"

#include "BpeTable.h"
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
  Result<bpe::TableBasics> basics = bpe::tableBasics(table);
  if (!basics)
    return basics.status();
  const auto* tokens = table.tokens();
  const size_t vocab = basics->vocab;
  const std::vector<bool>& isSpecial = basics->isSpecial;
  bos_ = basics->bos;

  if (const auto* name = table.pretokenizer(); name && name->size() != 0) {
    auto kind = preTokenizerFromName(name->string_view());
    if (!kind)
      return Status::error("plan tokenizer uses pre-tokenizer '" + name->str() +
                           "', which this runtime does not support");
    preTokenizer_ = *kind;
  }
  std::string_view normalizerName = table.normalizer() ? table.normalizer()->string_view() : "";
  auto normalizer = normalizerFromName(normalizerName);
  if (!normalizer)
    return Status::error("plan tokenizer uses normalizer '" + std::string(normalizerName) +
                         "', which this runtime does not support");
  normalizer_ = *normalizer;
  ignoreMerges_ = table.ignore_merges();

  // Inverse of bytes_to_unicode, for turning vocabulary text back into bytes.
  std::unordered_map<char32_t, uint8_t> codePointToByte;
  for (unsigned b = 0; b < 256; ++b)
    codePointToByte[byteToCodePoint(static_cast<uint8_t>(b))] = static_cast<uint8_t>(b);

  std::unordered_map<std::string_view, int32_t> idOfText;
  idOfText.reserve(vocab);
  std::vector<int32_t> wholeCandidates;
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
    bool inAlphabet = true;
    for (size_t pos = 0; pos < text.size();) {
      size_t length;
      char32_t cp = utf8::decodeValid(text, pos, length);
      auto it = codePointToByte.find(cp);
      // A character outside the byte alphabet stands for itself, as in the
      // ByteLevel decoder of Hugging Face tokenizers.
      if (it != codePointToByte.end()) {
        bytes.push_back(static_cast<char>(it->second));
      } else {
        bytes.append(text.substr(pos, length));
        inAlphabet = false;
      }
      pos += length;
    }
    if (inAlphabet)
      wholeCandidates.push_back(static_cast<int32_t>(id));
  }
  if (ignoreMerges_) {
    wholeWords_.reserve(wholeCandidates.size());
    // The first id wins for a repeated text, as tokenizers' vocabulary map does
    // not hold duplicates (the importer refuses them).
    for (int32_t id : wholeCandidates)
      wholeWords_.emplace(tokenBytes_[id], id);
  }

  for (unsigned b = 0; b < 256; ++b) {
    std::string text;
    utf8::append(text, byteToCodePoint(static_cast<uint8_t>(b)));
    auto it = idOfText.find(text);
    // A byte without a token is dropped, as tokenizers does for BPE without unk.
    byteToId_[b] = it == idOfText.end() ? -1 : it->second;
  }

  Result<std::vector<bpe::MergeRule>> merges = bpe::mergeRules(table, idOfText);
  if (!merges)
    return merges.status();
  merges_.reserve(merges->size());
  // A repeated pair keeps its last rank, as tokenizers' map does.
  for (size_t i = 0; i < merges->size(); ++i) {
    const bpe::MergeRule& m = (*merges)[i];
    merges_.insert(m.left, m.right, static_cast<uint32_t>(i), m.result);
  }

  for (size_t id = 0; id < vocab; ++id)
    if (isSpecial[id])
      added_.add(tokenBytes_[id], static_cast<int32_t>(id));
  added_.finish();

  return Status::ok();
}

Result<std::vector<int32_t>> ByteLevelBpe::encode(std::string_view text, bool addSpecial) const {
  NINFER_RETURN_IF_ERROR(bpe::checkPrompt(text));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (addSpecial && bos_.add)
    ids.push_back(bos_.id);

  Scratch scratch;
  std::unique_lock<std::mutex> lock(cacheMutex_, std::try_to_lock);
  if (lock.owns_lock())
    scratch.cache = &cache_;

  // Added tokens are found before normalization and pre-tokenization (leftmost,
  // then longest, as tokenizers' matcher does); the text between them is ordinary.
  added_.split(
      text, [](size_t pos) { return pos + 1; },
      [&](size_t, std::string_view piece) { encodeOrdinary(piece, ids, scratch); },
      [&](int32_t id) { ids.push_back(id); });
  return ids;
}

void ByteLevelBpe::encodeOrdinary(std::string_view text, std::vector<int32_t>& ids,
                                  Scratch& scratch) const {
  if (text.empty())
    return;
  text = normalize(normalizer_, text, scratch.normalized);
  scratch.pieces.clear();
  scratch.pieces.reserve(text.size() / 4 + 8);
  preTokenize(preTokenizer_, text, scratch.pieces);
  for (std::string_view piece : scratch.pieces)
    encodePiece(piece, ids, scratch);
}

void ByteLevelBpe::encodePiece(std::string_view piece, std::vector<int32_t>& ids,
                               Scratch& scratch) const {
  if (piece.size() == 1) {
    int32_t id = byteToId_[static_cast<unsigned char>(piece[0])];
    if (id >= 0)
      ids.push_back(id);
    return;
  }
  if (ignoreMerges_) {
    auto it = wholeWords_.find(piece);
    if (it != wholeWords_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  bool cacheable = scratch.cache && piece.size() <= bpe::WordCache::kMaxWordBytes;
  uint64_t hash = 0;
  if (cacheable) {
    hash = bpe::hashBytes(piece);
    if (scratch.cache->lookup(piece, hash, ids))
      return;
  }
  std::vector<int32_t>& initial = scratch.merge.initial;
  initial.clear();
  for (char ch : piece) {
    int32_t id = byteToId_[static_cast<unsigned char>(ch)];
    // A byte without a token is dropped, as tokenizers does for BPE without unk.
    if (id >= 0)
      initial.push_back(id);
  }
  size_t first = ids.size();
  bpe::applyMerges(merges_, scratch.merge, ids);
  if (cacheable)
    scratch.cache->insert(piece, hash, ids.data() + first, ids.size() - first);
}

std::string ByteLevelBpe::tokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokenBytes_.size())
    return std::string();
  return tokenBytes_[id];
}

} // namespace ninfer
