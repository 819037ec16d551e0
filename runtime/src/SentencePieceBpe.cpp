// SentencePiece-style BPE: the two encoders described in SentencePieceBpe.h
// share the word splitting, the cache and the merge loop and differ in
// normalization order, merge priority, stale-pair rule and where unknown
// characters turn into bytes.
#include "SentencePieceBpe.h"

#include "Utf8.h"
#include "plan_generated.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ninfer {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81"; // U+2581 LOWER ONE EIGHTH BLOCK

bool isSpaceSymbolAt(std::string_view text, size_t pos) {
  return pos + 3 <= text.size() && text.compare(pos, 3, kSpaceSymbol) == 0;
}

size_t charLength(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

uint32_t packChar(std::string_view text, size_t pos, size_t length) {
  uint32_t packed = 0;
  for (size_t k = 0; k < length; ++k)
    packed |= static_cast<uint32_t>(static_cast<unsigned char>(text[pos + k])) << (8 * k);
  return packed;
}

// "<0xAB>" -> 0xAB, or -1.
int byteOfToken(std::string_view text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>')
    return -1;
  int value = 0;
  for (size_t k = 3; k < 5; ++k) {
    char c = text[k];
    int digit = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                         : -1;
    if (digit < 0)
      return -1;
    value = value * 16 + digit;
  }
  return value;
}

// Appends `text` with every space replaced by "▁".
void appendEscaped(std::string_view text, std::string& out) {
  size_t start = 0;
  for (size_t pos = text.find(' '); pos != std::string_view::npos; pos = text.find(' ', start)) {
    out.append(text, start, pos - start);
    out.append(kSpaceSymbol);
    start = pos + 1;
  }
  out.append(text, start, text.size() - start);
}

} // namespace

Result<std::unique_ptr<Tokenizer>> SentencePieceBpe::create(const plan::Tokenizer& table) {
  std::unique_ptr<SentencePieceBpe> tok(new SentencePieceBpe());
  NINFER_RETURN_IF_ERROR(tok->init(table));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

Status SentencePieceBpe::parsePreTokenizer(std::string_view name) {
  if (name.empty())
    return Status::ok();
  std::string_view rest = name;
  auto take = [&](std::string_view prefix) {
    if (rest.substr(0, prefix.size()) != prefix)
      return false;
    rest.remove_prefix(prefix.size());
    return true;
  };
  if (mode_ == Mode::HuggingFace && take("metaspace-")) {
    metaspace_ = true;
    if (take("always"))
      metaspacePrepend_ = Prepend::Always;
    else if (take("first"))
      metaspacePrepend_ = Prepend::First;
    else if (take("never"))
      metaspacePrepend_ = Prepend::Never;
    else
      rest = "?";
    if (take("-split"))
      metaspaceSplit_ = true;
    if (rest.empty())
      return Status::ok();
  }
  return Status::error("plan tokenizer uses pre-tokenizer '" + std::string(name) +
                       "', which this runtime does not support for SentencePiece BPE");
}

Status SentencePieceBpe::init(const plan::Tokenizer& table) {
  Result<bpe::TableBasics> basics = bpe::tableBasics(table);
  if (!basics)
    return basics.status();
  const auto* tokens = table.tokens();
  const size_t vocab = basics->vocab;
  const std::vector<bool>& isSpecial = basics->isSpecial;
  bos_ = basics->bos;
  const auto* scores = table.scores();
  mode_ = scores && scores->size() != 0 ? Mode::SentencePiece : Mode::HuggingFace;
  if (mode_ == Mode::SentencePiece && scores->size() != vocab)
    return Status::error("plan tokenizer has " + std::to_string(scores->size()) + " scores for " +
                         std::to_string(vocab) + " tokens");

  std::string_view normalizerName = table.normalizer() ? table.normalizer()->string_view() : "";
  auto normalizer = normalizerFromName(normalizerName);
  if (!normalizer)
    return Status::error("plan tokenizer uses normalizer '" + std::string(normalizerName) +
                         "', which this runtime does not support");
  normalizer_ = *normalizer;
  NINFER_RETURN_IF_ERROR(
      parsePreTokenizer(table.pretokenizer() ? table.pretokenizer()->string_view() : ""));
  addDummyPrefix_ = table.add_dummy_prefix();
  byteFallback_ = table.byte_fallback();
  ignoreMerges_ = table.ignore_merges() && mode_ == Mode::HuggingFace;
  stripLeadingSpace_ = addDummyPrefix_ || (metaspace_ && metaspacePrepend_ != Prepend::Never);

  pieces_.resize(vocab);
  decoded_.resize(vocab);
  isByteToken_.assign(vocab, false);
  byteIds_.fill(-1);
  asciiIds_.fill(-1);
  std::unordered_map<std::string_view, int32_t> idOfText;
  idOfText.reserve(vocab);
  for (size_t id = 0; id < vocab; ++id) {
    const auto* str = tokens->Get(static_cast<flatbuffers::uoffset_t>(id));
    std::string_view text = str ? str->string_view() : std::string_view();
    if (utf8::findInvalid(text) != std::string_view::npos)
      return Status::error("plan tokenizer tokens[" + std::to_string(id) + "] is not valid UTF-8");
    if (mode_ == Mode::SentencePiece &&
        std::isnan(scores->Get(static_cast<flatbuffers::uoffset_t>(id))))
      return Status::error("plan tokenizer scores[" + std::to_string(id) + "] is not a number");
    pieces_[id] = std::string(text);
    int byte = byteOfToken(text);
    if (byte >= 0) {
      decoded_[id] = std::string(1, static_cast<char>(byte));
      isByteToken_[id] = true;
    } else {
      std::string& out = decoded_[id];
      size_t start = 0;
      for (size_t pos = text.find(kSpaceSymbol); pos != std::string_view::npos;
           pos = text.find(kSpaceSymbol, start)) {
        out.append(text, start, pos - start);
        out.push_back(' ');
        start = pos + kSpaceSymbol.size();
      }
      out.append(text, start, text.size() - start);
    }
  }
  // Merges may make any token (SentencePiece merges into user-defined pieces;
  // tokenizers into added tokens that are also in the model's vocabulary).
  // The first id wins for a repeated text (the importers refuse them anyway).
  for (size_t id = 0; id < vocab; ++id)
    idOfText.emplace(pieces_[id], static_cast<int32_t>(id));
  std::unordered_map<std::string_view, int32_t> ordinaryIds; // byte tokens are looked up here
  for (size_t id = 0; id < vocab; ++id) {
    if (isSpecial[id]) {
      added_.add(pieces_[id], static_cast<int32_t>(id));
      continue;
    }
    const std::string& text = pieces_[id];
    ordinaryIds.emplace(text, static_cast<int32_t>(id));
    // Single characters: the symbols merging starts from (first id wins).
    if (text.size() == 1) {
      int32_t& ascii = asciiIds_[static_cast<unsigned char>(text[0])];
      if (ascii < 0)
        ascii = static_cast<int32_t>(id);
    } else if (!text.empty() && charLength(static_cast<unsigned char>(text[0])) == text.size()) {
      charIds_.emplace(packChar(text, 0, text.size()), static_cast<int32_t>(id));
    }
  }
  added_.finish();
  for (unsigned b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = ordinaryIds.find(name);
    if (it != ordinaryIds.end())
      byteIds_[b] = it->second;
    else if (byteFallback_)
      return Status::error(std::string("plan tokenizer uses byte fallback but has no token ") +
                           name);
  }
  if (ignoreMerges_) {
    wholeWords_.reserve(vocab);
    for (size_t id = 0; id < vocab; ++id)
      if (!isSpecial[id])
        wholeWords_.emplace(pieces_[id], static_cast<int32_t>(id));
  }

  // Merges. SentencePiece: the priority is the rank of the result's score among
  // all distinct scores, highest first, so equal scores tie (and the leftmost
  // pair wins, as in the library). tokenizer.json: the list order.
  Result<std::vector<bpe::MergeRule>> merges = bpe::mergeRules(table, idOfText);
  if (!merges)
    return merges.status();
  std::vector<float> distinct;
  if (mode_ == Mode::SentencePiece) {
    for (const bpe::MergeRule& m : *merges)
      distinct.push_back(scores->Get(static_cast<flatbuffers::uoffset_t>(m.result)));
    std::sort(distinct.begin(), distinct.end(), std::greater<float>());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  }
  merges_.reserve(merges->size());
  splitWords_ = true;
  for (size_t i = 0; i < merges->size(); ++i) {
    const bpe::MergeRule& m = (*merges)[i];
    uint32_t priority = static_cast<uint32_t>(i);
    if (mode_ == Mode::SentencePiece) {
      float score = scores->Get(static_cast<flatbuffers::uoffset_t>(m.result));
      priority = static_cast<uint32_t>(
          std::lower_bound(distinct.begin(), distinct.end(), score, std::greater<float>()) -
          distinct.begin());
    }
    merges_.insert(m.left, m.right, priority, m.result);
    const std::string& l = pieces_[m.left];
    const std::string& r = pieces_[m.right];
    bool leftEndsInSpace = l.size() >= 3 && l.compare(l.size() - 3, 3, kSpaceSymbol) == 0;
    if (!leftEndsInSpace && isSpaceSymbolAt(r, 0))
      splitWords_ = false;
  }

  unkId_ = table.unk_id();
  if (unkId_ < -1 || (unkId_ >= 0 && static_cast<size_t>(unkId_) >= vocab))
    return Status::error("plan tokenizer unk_id " + std::to_string(unkId_) + " is not a token");
  if (unkId_ < 0)
    unkId_ = -1;
  // sentencepiece decodes <unk> as its default unk_surface, " ⁇ " (U+2047).
  if (mode_ == Mode::SentencePiece && unkId_ >= 0)
    decoded_[unkId_] = " \xE2\x81\x87 ";
  return Status::ok();
}

Result<std::vector<int32_t>> SentencePieceBpe::encode(std::string_view text,
                                                      bool addSpecial) const {
  NINFER_RETURN_IF_ERROR(bpe::checkPrompt(text));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (addSpecial && bos_.add)
    ids.push_back(bos_.id);

  Scratch scratch;
  std::unique_lock<std::mutex> lock(cacheMutex_, std::try_to_lock);
  if (lock.owns_lock())
    scratch.cache = &cache_;
  if (mode_ == Mode::SentencePiece)
    encodeSentencePiece(text, ids, scratch);
  else
    encodeHuggingFace(text, ids, scratch);
  return ids;
}

void SentencePieceBpe::encodeSentencePiece(std::string_view text, std::vector<int32_t>& ids,
                                           Scratch& s) const {
  // An empty text stays empty: no dummy prefix (the library's normalizer).
  if (text.empty())
    return;
  text = normalize(normalizer_, text, s.nfc);
  s.normalized.clear();
  s.normalized.reserve(text.size() + text.size() / 2 + 3);
  if (addDummyPrefix_)
    s.normalized.append(kSpaceSymbol);
  appendEscaped(text, s.normalized);
  encodeWithUserPieces(s.normalized, ids, s);
}

void SentencePieceBpe::encodeWithUserPieces(std::string_view text, std::vector<int32_t>& ids,
                                            Scratch& s) const {
  // The library's prefix matcher looks for user-defined pieces at the start of
  // every character; a match becomes one frozen symbol.
  added_.split(
      text, [&](size_t pos) { return pos + charLength(static_cast<unsigned char>(text[pos])); },
      [&](size_t, std::string_view piece) { encodeWords(piece, ids, s); },
      [&](int32_t id) { ids.push_back(id); });
}

void SentencePieceBpe::encodeHuggingFace(std::string_view text, std::vector<int32_t>& ids,
                                         Scratch& s) const {
  added_.split(
      text, [](size_t pos) { return pos + 1; },
      [&](size_t start, std::string_view piece) { encodeHfSegment(piece, start == 0, ids, s); },
      [&](int32_t id) { ids.push_back(id); });
}

void SentencePieceBpe::encodeHfSegment(std::string_view text, bool atTextStart,
                                       std::vector<int32_t>& ids, Scratch& s) const {
  if (text.empty())
    return;
  text = normalize(normalizer_, text, s.nfc);
  std::string& norm = s.normalized;
  norm.clear();
  norm.reserve(text.size() + text.size() / 2 + 6);
  if (addDummyPrefix_) // Prepend("▁")
    norm.append(kSpaceSymbol);
  appendEscaped(text, norm); // Replace(" ", "▁"), or Metaspace's own replacement
  if (metaspace_) {
    bool prepend = metaspacePrepend_ == Prepend::Always ||
                   (metaspacePrepend_ == Prepend::First && atTextStart);
    if (prepend && !isSpaceSymbolAt(norm, 0))
      norm.insert(0, kSpaceSymbol);
    if (metaspaceSplit_) {
      // Each "▁" starts a word (MergedWithNext).
      std::string_view all = norm;
      size_t start = 0;
      for (size_t pos = all.find(kSpaceSymbol, 1); pos != std::string_view::npos;
           pos = all.find(kSpaceSymbol, pos + 1)) {
        if (pos == start)
          continue;
        encodeWord(all.substr(start, pos - start), ids, s);
        start = pos;
      }
      encodeWord(all.substr(start), ids, s);
      return;
    }
  }
  encodeWords(norm, ids, s);
}

void SentencePieceBpe::encodeWords(std::string_view text, std::vector<int32_t>& ids,
                                   Scratch& s) const {
  if (text.empty())
    return;
  if (!splitWords_) {
    encodeWord(text, ids, s);
    return;
  }
  // A word starts at each "▁" that follows another character; runs of "▁" stay
  // with the word they lead into. 0xE2 only ever starts a character, so a byte
  // scan finds "▁" exactly.
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t start = 0;
  bool prevIsSpace = isSpaceSymbolAt(text, 0);
  size_t pos = charLength(bytes[0]);
  while (pos < text.size()) {
    if (bytes[pos] == 0xE2 && isSpaceSymbolAt(text, pos)) {
      if (!prevIsSpace) {
        encodeWord(text.substr(start, pos - start), ids, s);
        start = pos;
      }
      prevIsSpace = true;
      pos += 3;
      continue;
    }
    prevIsSpace = false;
    pos += charLength(bytes[pos]);
  }
  encodeWord(text.substr(start), ids, s);
}

int32_t SentencePieceBpe::charId(std::string_view text, size_t pos, size_t length) const {
  if (length == 1)
    return asciiIds_[static_cast<unsigned char>(text[pos])];
  auto it = charIds_.find(packChar(text, pos, length));
  return it == charIds_.end() ? -1 : it->second;
}

void SentencePieceBpe::encodeWord(std::string_view word, std::vector<int32_t>& ids,
                                  Scratch& s) const {
  if (word.empty())
    return;
  if (ignoreMerges_) {
    auto it = wholeWords_.find(word);
    if (it != wholeWords_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  bool cacheable = s.cache && word.size() <= bpe::WordCache::kMaxWordBytes;
  uint64_t hash = 0;
  if (cacheable) {
    hash = bpe::hashBytes(word);
    s.word.clear();
    if (s.cache->lookup(word, hash, s.word)) {
      appendWord(s.word, ids);
      return;
    }
  }

  std::vector<int32_t>& initial = s.merge.initial;
  initial.clear();
  bool unknownChars = false;
  for (size_t pos = 0; pos < word.size();) {
    size_t length = charLength(static_cast<unsigned char>(word[pos]));
    int32_t id = charId(word, pos, length);
    if (id >= 0) {
      initial.push_back(id);
    } else if (mode_ == Mode::SentencePiece) {
      // Unknown characters take part in no merge; they become bytes (or <unk>)
      // afterwards. The symbol remembers where the character is.
      initial.push_back(-1 - static_cast<int32_t>(pos));
      unknownChars = true;
    } else if (byteFallback_) {
      for (size_t k = 0; k < length; ++k)
        initial.push_back(byteIds_[static_cast<unsigned char>(word[pos + k])]);
    } else if (unkId_ >= 0 && (initial.empty() || initial.back() != unkId_)) {
      initial.push_back(unkId_); // consecutive unknown characters fuse (fuse_unk)
    }
    pos += length;
  }

  s.word.clear();
  bpe::applyMerges(merges_, s.merge, s.word);
  if (unknownChars) {
    std::vector<int32_t> merged;
    merged.swap(s.word);
    for (int32_t id : merged) {
      if (id >= 0) {
        s.word.push_back(id);
        continue;
      }
      size_t pos = static_cast<size_t>(-1 - id);
      size_t length = charLength(static_cast<unsigned char>(word[pos]));
      if (byteFallback_) {
        for (size_t k = 0; k < length; ++k)
          s.word.push_back(byteIds_[static_cast<unsigned char>(word[pos + k])]);
      } else if (unkId_ >= 0 && (s.word.empty() || s.word.back() != unkId_)) {
        s.word.push_back(unkId_); // a run of unknown pieces is one <unk>
      }
    }
  }
  if (cacheable)
    s.cache->insert(word, hash, s.word.data(), s.word.size());
  appendWord(s.word, ids);
}

void SentencePieceBpe::appendWord(const std::vector<int32_t>& word,
                                  std::vector<int32_t>& ids) const {
  size_t from = 0;
  // SentencePiece fuses unknown pieces across word boundaries too.
  if (mode_ == Mode::SentencePiece && !byteFallback_ && unkId_ >= 0 && !word.empty() &&
      !ids.empty() && ids.back() == unkId_ && word[0] == unkId_)
    from = 1;
  ids.insert(ids.end(), word.begin() + from, word.end());
}

std::string SentencePieceBpe::tokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= decoded_.size())
    return std::string();
  return decoded_[id];
}

bool SentencePieceBpe::dropsLeadingSpaceAtStart(int32_t id) const {
  if (!stripLeadingSpace_ || id < 0 || static_cast<size_t>(id) >= decoded_.size())
    return false;
  // tokenizers' Strip decoder removes any leading space; SentencePiece only
  // the "▁" of a piece (not a <0x20> byte token, nor the <unk> surface).
  return mode_ == Mode::HuggingFace || (!isByteToken_[id] && id != unkId_);
}

} // namespace ninfer
