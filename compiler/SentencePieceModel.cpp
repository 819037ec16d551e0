// SentencePiece ModelProto reader and its conversion to the plan's tokenizer
// table. Field numbers, wire types and defaults follow sentencepiece_model.proto:
//
//   ModelProto:      pieces = 1 (repeated message), trainer_spec = 2, normalizer_spec = 3,
//                    denormalizer_spec = 5
//   SentencePiece:   piece = 1 (string), score = 2 (float), type = 3 (enum, default NORMAL)
//   TrainerSpec:     model_type = 3 (default UNIGRAM), treat_whitespace_as_suffix = 24,
//                    byte_fallback = 35, unk_id = 40 (0), bos_id = 41 (1), eos_id = 42 (2)
//   NormalizerSpec:  name = 1, precompiled_charsmap = 2, add_dummy_prefix = 3 (true),
//                    remove_extra_whitespaces = 4 (true), escape_whitespaces = 5 (true),
//                    normalization_rule_tsv = 6
//
// Unknown fields are skipped, as protobuf does; a message that appears twice is
// merged into one, also as protobuf does.
#include "SentencePieceModel.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cstring>

namespace ninfer {
namespace {

llvm::Error fail(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads one message's fields. Offsets in messages are from the file start.
class WireReader {
public:
  WireReader(llvm::StringRef data, size_t base, llvm::StringRef name)
      : data_(data), base_(base), name_(name) {}

  bool atEnd() const { return pos_ >= data_.size(); }
  size_t offset() const { return base_ + pos_; }

  llvm::Error key(uint32_t& field, int& wireType) {
    size_t at = offset();
    uint64_t value;
    if (auto err = varint(value))
      return err;
    field = static_cast<uint32_t>(value >> 3);
    wireType = static_cast<int>(value & 7);
    if (field == 0 || value >> 32 != 0)
      return bad("invalid field key", at);
    return llvm::Error::success();
  }

  llvm::Error varint(uint64_t& value) {
    size_t at = offset();
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (atEnd())
        return bad("truncated varint", at);
      uint8_t byte = static_cast<uint8_t>(data_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80))
        return llvm::Error::success();
    }
    return bad("varint longer than 10 bytes", at);
  }

  llvm::Error fixed32(uint32_t& value) {
    if (data_.size() - pos_ < 4)
      return bad("truncated 32-bit field", offset());
    const auto* p = reinterpret_cast<const uint8_t*>(data_.data() + pos_);
    value = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    pos_ += 4;
    return llvm::Error::success();
  }

  // A length-delimited field: its bytes and the file offset where they start.
  llvm::Error bytes(llvm::StringRef& out, size_t& start) {
    size_t at = offset();
    uint64_t length;
    if (auto err = varint(length))
      return err;
    if (length > data_.size() - pos_)
      return bad("length-delimited field runs past the end", at);
    start = offset();
    out = data_.substr(pos_, length);
    pos_ += length;
    return llvm::Error::success();
  }

  llvm::Error skip(int wireType) {
    size_t at = offset();
    switch (wireType) {
    case kVarint: {
      uint64_t ignored;
      return varint(ignored);
    }
    case kFixed64:
      if (data_.size() - pos_ < 8)
        return bad("truncated 64-bit field", at);
      pos_ += 8;
      return llvm::Error::success();
    case kLengthDelimited: {
      llvm::StringRef ignored;
      size_t start = 0;
      return bytes(ignored, start);
    }
    case kFixed32: {
      uint32_t ignored;
      return fixed32(ignored);
    }
    default:
      return bad("unsupported wire type " + llvm::Twine(wireType), at);
    }
  }

  llvm::Error expect(int wireType, int expected, uint32_t field, llvm::StringRef message) {
    if (wireType == expected)
      return llvm::Error::success();
    return bad(message + " field " + llvm::Twine(field) + " has wire type " +
                   llvm::Twine(wireType) + ", expected " + llvm::Twine(expected),
               offset());
  }

  llvm::Error bad(const llvm::Twine& what, size_t at) const {
    return fail("'" + name_ + "' is not a valid SentencePiece model: " + what + " at byte " +
                llvm::Twine(at));
  }

private:
  llvm::StringRef data_;
  size_t base_;
  llvm::StringRef name_;
  size_t pos_ = 0;
};

// One field of a message, read by the parsers below: its number and wire type, and the
// readers of its value that check the wire type first.
struct Field {
  WireReader& r;
  uint32_t number;
  int wireType;
  llvm::StringRef message; // the message's name, for errors

  llvm::Error expect(int expected) { return r.expect(wireType, expected, number, message); }

  llvm::Error readVarint(uint64_t& value) {
    if (auto err = expect(kVarint))
      return err;
    return r.varint(value);
  }

  llvm::Error readInt(int& out) { // int32 semantics
    uint64_t value = 0;
    if (auto err = readVarint(value))
      return err;
    out = static_cast<int>(static_cast<int32_t>(static_cast<uint32_t>(value)));
    return llvm::Error::success();
  }

  llvm::Error readBool(bool& out) {
    uint64_t value = 0;
    if (auto err = readVarint(value))
      return err;
    out = value != 0;
    return llvm::Error::success();
  }

  llvm::Error readFloat(float& out) {
    if (auto err = expect(kFixed32))
      return err;
    uint32_t bits = 0;
    if (auto err = r.fixed32(bits))
      return err;
    std::memcpy(&out, &bits, 4);
    return llvm::Error::success();
  }

  // A length-delimited field's bytes and the file offset where they start.
  llvm::Error readBytes(llvm::StringRef& out, size_t& start) {
    if (auto err = expect(kLengthDelimited))
      return err;
    return r.bytes(out, start);
  }

  llvm::Error readString(std::string& out) {
    llvm::StringRef text;
    size_t start = 0;
    if (auto err = readBytes(text, start))
      return err;
    out = text.str();
    return llvm::Error::success();
  }

  llvm::Error skip() { return r.skip(wireType); }
};

// Calls onField(Field&) for each field of the message `message` whose bytes are `data` (at
// file offset base), and stops at its first error.
template <class OnField>
llvm::Error forEachField(llvm::StringRef data, size_t base, llvm::StringRef name,
                         llvm::StringRef message, OnField&& onField) {
  WireReader r(data, base, name);
  while (!r.atEnd()) {
    Field f{r, 0, 0, message};
    if (auto err = r.key(f.number, f.wireType))
      return err;
    if (auto err = onField(f))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error parsePiece(llvm::StringRef data, size_t base, llvm::StringRef name,
                       SentencePieceModel::Piece& piece) {
  return forEachField(data, base, name, "SentencePiece", [&](Field& f) {
    switch (f.number) {
    case 1:
      return f.readString(piece.text);
    case 2:
      return f.readFloat(piece.score);
    case 3:
      return f.readInt(piece.type);
    default:
      return f.skip();
    }
  });
}

llvm::Error parseTrainerSpec(llvm::StringRef data, size_t base, llvm::StringRef name,
                             SentencePieceModel& model) {
  return forEachField(data, base, name, "TrainerSpec", [&](Field& f) {
    switch (f.number) {
    case 3:
      return f.readInt(model.modelType);
    case 24:
      return f.readBool(model.treatWhitespaceAsSuffix);
    case 35:
      return f.readBool(model.byteFallback);
    case 40:
      return f.readInt(model.unkId);
    case 41:
      return f.readInt(model.bosId);
    case 42:
      return f.readInt(model.eosId);
    default:
      return f.skip();
    }
  });
}

llvm::Error parseNormalizerSpec(llvm::StringRef data, size_t base, llvm::StringRef name,
                                SentencePieceModel::NormalizerSpec& spec) {
  spec.present = true;
  return forEachField(data, base, name, "NormalizerSpec", [&](Field& f) {
    switch (f.number) {
    case 1:
      return f.readString(spec.name);
    case 2: {
      std::string charsmap;
      llvm::Error err = f.readString(charsmap);
      spec.precompiledCharsmapBytes = charsmap.size();
      return err;
    }
    case 3:
      return f.readBool(spec.addDummyPrefix);
    case 4:
      return f.readBool(spec.removeExtraWhitespaces);
    case 5:
      return f.readBool(spec.escapeWhitespaces);
    case 6:
      return f.readString(spec.normalizationRuleTsv);
    default:
      return f.skip();
    }
  });
}

// Byte offsets of the character boundaries inside `text` (valid UTF-8), the
// end included, the start not.
std::vector<size_t> charEnds(llvm::StringRef text) {
  std::vector<size_t> ends;
  for (size_t pos = 0; pos < text.size();) {
    unsigned char lead = static_cast<unsigned char>(text[pos]);
    pos += lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    ends.push_back(std::min(pos, text.size()));
  }
  return ends;
}

const char* typeName(int type) {
  switch (static_cast<SentencePieceModel::PieceType>(type)) {
  case SentencePieceModel::PieceType::Normal:
    return "NORMAL";
  case SentencePieceModel::PieceType::Unknown:
    return "UNKNOWN";
  case SentencePieceModel::PieceType::Control:
    return "CONTROL";
  case SentencePieceModel::PieceType::UserDefined:
    return "USER_DEFINED";
  case SentencePieceModel::PieceType::Unused:
    return "UNUSED";
  case SentencePieceModel::PieceType::Byte:
    return "BYTE";
  }
  return "?";
}

} // namespace

llvm::Expected<SentencePieceModel> parseSentencePieceModel(llvm::StringRef bytes,
                                                           llvm::StringRef name) {
  SentencePieceModel model;
  llvm::Error err = forEachField(bytes, 0, name, "ModelProto", [&](Field& f) -> llvm::Error {
    if (f.number != 1 && f.number != 2 && f.number != 3 && f.number != 5)
      return f.skip();
    llvm::StringRef message;
    size_t start = 0;
    if (auto err = f.readBytes(message, start))
      return err;
    if (f.number == 1) {
      model.pieces.emplace_back();
      return parsePiece(message, start, name, model.pieces.back());
    }
    if (f.number == 2)
      return parseTrainerSpec(message, start, name, model);
    return parseNormalizerSpec(message, start, name,
                               f.number == 3 ? model.normalizer : model.denormalizer);
  });
  if (err)
    return err;
  if (model.pieces.empty())
    return fail("'" + name + "' is not a valid SentencePiece model: it has no pieces");
  return model;
}

llvm::Expected<SentencePieceModel> readSentencePieceModel(const std::string& path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    return fail("cannot read '" + path + "': " + buffer.getError().message());
  return parseSentencePieceModel((*buffer)->getBuffer(), path);
}

llvm::Expected<std::unique_ptr<plan::TokenizerT>>
sentencePieceTokenizer(const SentencePieceModel& model) {
  using Type = SentencePieceModel::PieceType;
  switch (static_cast<SentencePieceModel::ModelType>(model.modelType)) {
  case SentencePieceModel::ModelType::Bpe:
    break;
  case SentencePieceModel::ModelType::Unigram:
    return fail("SentencePiece unigram models are not supported yet");
  case SentencePieceModel::ModelType::Word:
    return fail("SentencePiece word models are not supported yet");
  case SentencePieceModel::ModelType::Char:
    return fail("SentencePiece char models are not supported yet");
  default:
    return fail("SentencePiece model type " + llvm::Twine(model.modelType) + " is unknown");
  }

  // Normalization: only what Llama 2 uses (identity, dummy prefix, spaces to "▁").
  const auto& norm = model.normalizer;
  bool identity = (norm.name == "identity" || norm.name.empty()) &&
                  norm.precompiledCharsmapBytes == 0 && norm.normalizationRuleTsv.empty();
  if (!identity)
    return fail("SentencePiece normalizer '" + (norm.name.empty() ? "(custom rules)" : norm.name) +
                "' is not supported yet (only 'identity')");
  if (norm.removeExtraWhitespaces)
    return fail("SentencePiece normalizer option remove_extra_whitespaces is not supported yet");
  if (!norm.escapeWhitespaces)
    return fail("SentencePiece normalizer without escape_whitespaces is not supported yet");
  if (model.treatWhitespaceAsSuffix)
    return fail("SentencePiece option treat_whitespace_as_suffix is not supported yet");
  if (model.denormalizer.present && (model.denormalizer.precompiledCharsmapBytes != 0 ||
                                     !model.denormalizer.normalizationRuleTsv.empty()))
    return fail("SentencePiece denormalizer '" + model.denormalizer.name +
                "' is not supported yet");

  auto table = std::make_unique<plan::TokenizerT>();
  table->kind = plan::TokenizerKind::SentencePieceBpe;
  table->add_dummy_prefix = norm.addDummyPrefix;
  table->byte_fallback = model.byteFallback;

  const size_t vocab = model.pieces.size();
  if (vocab > static_cast<size_t>(INT32_MAX))
    return fail("SentencePiece model has too many pieces");
  llvm::StringMap<int> allIds;
  llvm::StringMap<int> mergeable; // NORMAL and USER_DEFINED: what the library merges into
  int unkId = -1;
  int bytePieces = 0;
  for (size_t id = 0; id < vocab; ++id) {
    const auto& piece = model.pieces[id];
    const std::string where = "SentencePiece piece " + std::to_string(id);
    if (piece.text.empty())
      return fail(where + " is empty");
    const auto* begin = reinterpret_cast<const llvm::UTF8*>(piece.text.data());
    if (!llvm::isLegalUTF8String(&begin, begin + piece.text.size()))
      return fail(where + " is not valid UTF-8");
    auto [it, inserted] = allIds.try_emplace(piece.text, static_cast<int>(id));
    if (!inserted)
      return fail("SentencePiece piece '" + piece.text + "' appears twice (ids " +
                  llvm::Twine(it->second) + " and " + llvm::Twine(id) + ")");
    bool singleChar = charEnds(piece.text).size() == 1;
    switch (static_cast<Type>(piece.type)) {
    case Type::Normal:
    case Type::UserDefined:
      mergeable[piece.text] = static_cast<int>(id);
      if (piece.type == static_cast<int>(Type::UserDefined))
        table->special_ids.push_back(static_cast<uint32_t>(id));
      break;
    case Type::Unknown:
      if (unkId >= 0)
        return fail("SentencePiece model has two UNKNOWN pieces (ids " + llvm::Twine(unkId) +
                    " and " + llvm::Twine(id) + ")");
      unkId = static_cast<int>(id);
      [[fallthrough]];
    case Type::Control:
    case Type::Byte:
      // The runtime finds single characters among all tokens; the library
      // would not merge these. No real model has one.
      if (singleChar)
        return fail(where + " ('" + piece.text + "') is a " + typeName(piece.type) +
                    " piece of one character; not supported");
      if (piece.type == static_cast<int>(Type::Byte)) {
        if (!model.byteFallback)
          return fail(where + " is a BYTE piece but byte_fallback is off");
        ++bytePieces;
      }
      break;
    case Type::Unused:
      return fail(where + " ('" + piece.text + "') is UNUSED; such pieces are not supported yet");
    default:
      return fail(where + " has unknown type " + llvm::Twine(piece.type));
    }
    table->tokens.push_back(piece.text);
    table->scores.push_back(piece.score);
  }
  if (unkId < 0)
    return fail("SentencePiece model has no UNKNOWN piece");
  if (model.byteFallback) {
    for (unsigned b = 0; b < 256; ++b) {
      char name[8];
      snprintf(name, sizeof(name), "<0x%02X>", b);
      auto it = allIds.find(name);
      if (it == allIds.end() || model.pieces[it->second].type != static_cast<int>(Type::Byte))
        return fail(llvm::Twine("SentencePiece model has byte_fallback but no BYTE piece ") + name);
    }
  }
  table->unk_id = unkId;

  // Every way to make a mergeable piece from two mergeable pieces. The library
  // starts from single characters, so each character of a NORMAL piece must be
  // a piece itself for this list to be complete.
  struct Pair {
    float score;
    uint32_t left, right;
  };
  std::vector<Pair> pairs;
  for (size_t id = 0; id < vocab; ++id) {
    const auto& piece = model.pieces[id];
    if (piece.type != static_cast<int>(Type::Normal) &&
        piece.type != static_cast<int>(Type::UserDefined))
      continue;
    llvm::StringRef text = piece.text;
    std::vector<size_t> ends = charEnds(text);
    if (piece.type == static_cast<int>(Type::Normal)) {
      size_t start = 0;
      for (size_t end : ends) {
        llvm::StringRef ch = text.slice(start, end);
        if (!mergeable.count(ch))
          return fail("SentencePiece piece " + llvm::Twine(id) + " ('" + text + "') contains '" +
                      ch + "', which is not itself a piece; not supported");
        start = end;
      }
    }
    for (size_t k = 0; k + 1 < ends.size(); ++k) {
      auto left = mergeable.find(text.take_front(ends[k]));
      auto right = mergeable.find(text.drop_front(ends[k]));
      if (left != mergeable.end() && right != mergeable.end())
        pairs.push_back(Pair{piece.score, static_cast<uint32_t>(left->second),
                             static_cast<uint32_t>(right->second)});
    }
  }
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return a.score != b.score ? a.score > b.score
                              : (a.left != b.left ? a.left < b.left : a.right < b.right);
  });
  table->merges.reserve(pairs.size() * 2);
  for (const Pair& p : pairs) {
    table->merges.push_back(p.left);
    table->merges.push_back(p.right);
  }

  auto idOrNone = [&](int id) { return id >= 0 && static_cast<size_t>(id) < vocab ? id : -1; };
  table->bos_id = idOrNone(model.bosId);
  if (idOrNone(model.eosId) >= 0)
    table->eos_ids.push_back(model.eosId);
  return table;
}

} // namespace ninfer
