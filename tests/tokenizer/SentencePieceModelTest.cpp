// compiler/SentencePieceModel.cpp: the protobuf reader on the real Llama 2
// model and on models written here field by field (so every unsupported option
// and every malformed byte sequence has its own case), and the conversion to
// the plan table with its errors.
#include "SentencePieceModel.h"
#include "TestSupport.h"

#include <gtest/gtest.h>

#include <cstring>

namespace ninfer {
namespace {

// Minimal protobuf writer for the tests.
class Proto {
public:
  Proto& varint(uint32_t field, uint64_t value) {
    key(field, 0);
    raw(value);
    return *this;
  }
  Proto& fixed32(uint32_t field, float value) {
    key(field, 5);
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    for (int k = 0; k < 4; ++k)
      bytes_.push_back(static_cast<char>(bits >> (8 * k)));
    return *this;
  }
  Proto& bytes(uint32_t field, const std::string& value) {
    key(field, 2);
    raw(value.size());
    bytes_ += value;
    return *this;
  }
  Proto& message(uint32_t field, const Proto& value) { return bytes(field, value.str()); }
  const std::string& str() const { return bytes_; }

private:
  void key(uint32_t field, int wireType) { raw((uint64_t(field) << 3) | wireType); }
  void raw(uint64_t value) {
    do {
      uint8_t byte = value & 0x7F;
      value >>= 7;
      bytes_.push_back(static_cast<char>(byte | (value ? 0x80 : 0)));
    } while (value);
  }
  std::string bytes_;
};

Proto piece(const std::string& text, float score, int type = 1) {
  Proto p;
  p.bytes(1, text).fixed32(2, score);
  if (type != 1)
    p.varint(3, type);
  return p;
}

// A small valid BPE model: <unk> <s> </s> ▁ a b ▁a ab, identity normalizer.
struct ModelSpec {
  int modelType = 2;
  std::string normalizerName = "identity";
  bool removeExtraWhitespaces = false;
  bool byteFallback = false;
  std::vector<Proto> extraPieces;
};

std::string buildModel(const ModelSpec& spec) {
  Proto model;
  model.message(1, piece("<unk>", 0, 2))
      .message(1, piece("<s>", 0, 3))
      .message(1, piece("</s>", 0, 3));
  for (const char* text : {"\xE2\x96\x81", "a", "b"})
    model.message(1, piece(text, -10));
  model
      .message(1, piece("\xE2\x96\x81"
                        "a",
                        -1))
      .message(1, piece("ab", -2));
  for (const Proto& extra : spec.extraPieces)
    model.message(1, extra);
  Proto trainer;
  trainer.varint(3, spec.modelType).varint(4, 8).varint(43, uint64_t(-1)); // pad_id = -1
  if (spec.byteFallback)
    trainer.varint(35, 1);
  trainer.bytes(1000, "an unknown field"); // skipped, as protobuf does
  model.message(2, trainer);
  Proto normalizer;
  normalizer.bytes(1, spec.normalizerName).varint(4, spec.removeExtraWhitespaces ? 1 : 0);
  model.message(3, normalizer);
  return model.str();
}

llvm::Expected<std::unique_ptr<plan::TokenizerT>> convert(const std::string& bytes) {
  auto model = parseSentencePieceModel(bytes, "tokenizer.model");
  if (!model)
    return model.takeError();
  return sentencePieceTokenizer(*model);
}

std::string errorOf(const std::string& bytes) {
  auto table = convert(bytes);
  if (table)
    return "(no error)";
  return llvm::toString(table.takeError());
}

TEST(SentencePieceModel, ReadsTheLlama2Model) {
  auto model = readSentencePieceModel(test::sharedPath("models/tokenizers/llama2/tokenizer.model"));
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->pieces.size(), 32000u);
  EXPECT_EQ(model->modelType, 2);
  EXPECT_TRUE(model->byteFallback);
  EXPECT_EQ(model->normalizer.name, "identity");
  EXPECT_TRUE(model->normalizer.addDummyPrefix);
  EXPECT_FALSE(model->normalizer.removeExtraWhitespaces);
  EXPECT_TRUE(model->normalizer.escapeWhitespaces); // absent: the proto default
  EXPECT_EQ(model->pieces[29871].text, "\xE2\x96\x81");
  EXPECT_EQ(model->pieces[29871].score, -1e9f);
  EXPECT_EQ(model->pieces[3].text, "<0x00>");
  EXPECT_EQ(model->pieces[3].type, 6);
  auto table = sentencePieceTokenizer(*model);
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ((*table)->kind, plan::TokenizerKind::SentencePieceBpe);
  EXPECT_EQ((*table)->merges.size(), 2u * 61249u);
  EXPECT_EQ((*table)->unk_id, 0);
  EXPECT_EQ((*table)->bos_id, 1);
  EXPECT_EQ((*table)->eos_ids, std::vector<int32_t>{2});
}

TEST(SentencePieceModel, ConvertsASmallModel) {
  auto table = convert(buildModel({}));
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ((*table)->tokens.size(), 8u);
  EXPECT_EQ((*table)->scores[6], -1.0f);
  // ▁a = ▁ + a, ab = a + b; ordered by the result's score.
  EXPECT_EQ((*table)->merges, (std::vector<uint32_t>{3, 4, 4, 5}));
  EXPECT_FALSE((*table)->byte_fallback);
  EXPECT_TRUE((*table)->add_dummy_prefix);
  auto tok = test::tokenizerFrom(**table);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  EXPECT_EQ(*(*tok)->encode("ab", false), (std::vector<int32_t>{6, 5}));
  // Unknown characters without byte fallback: one <unk> per run.
  EXPECT_EQ(*(*tok)->encode("axyb", false), (std::vector<int32_t>{6, 0, 5}));
}

TEST(SentencePieceModel, NamesWhatIsNotSupported) {
  ModelSpec spec;
  spec.modelType = 1;
  EXPECT_EQ(errorOf(buildModel(spec)), "SentencePiece unigram models are not supported yet");
  spec.modelType = 3;
  EXPECT_EQ(errorOf(buildModel(spec)), "SentencePiece word models are not supported yet");
  spec = {};
  spec.normalizerName = "nmt_nfkc";
  EXPECT_EQ(errorOf(buildModel(spec)),
            "SentencePiece normalizer 'nmt_nfkc' is not supported yet (only 'identity')");
  spec = {};
  spec.removeExtraWhitespaces = true;
  EXPECT_NE(errorOf(buildModel(spec)).find("remove_extra_whitespaces"), std::string::npos);
  spec = {};
  spec.extraPieces.push_back(piece("<0x41>", 0, 6));
  EXPECT_NE(errorOf(buildModel(spec)).find("BYTE piece but byte_fallback is off"),
            std::string::npos);
  spec = {};
  spec.byteFallback = true;
  EXPECT_NE(errorOf(buildModel(spec)).find("no BYTE piece <0x00>"), std::string::npos);
  spec = {};
  spec.extraPieces.push_back(piece("xy", -3, 5));
  EXPECT_NE(errorOf(buildModel(spec)).find("is UNUSED"), std::string::npos);
  spec = {};
  spec.extraPieces.push_back(piece("xy", -3));
  EXPECT_NE(errorOf(buildModel(spec)).find("contains 'x', which is not itself a piece"),
            std::string::npos);
  spec = {};
  spec.extraPieces.push_back(piece("ab", -3));
  EXPECT_NE(errorOf(buildModel(spec)).find("'ab' appears twice (ids 7 and 8)"), std::string::npos);
  spec = {};
  spec.extraPieces.push_back(piece("q", -3, 9));
  EXPECT_NE(errorOf(buildModel(spec)).find("unknown type 9"), std::string::npos);
}

TEST(SentencePieceModel, RejectsMalformedBytes) {
  std::string good = buildModel({});
  auto parseError = [](const std::string& bytes) {
    auto model = parseSentencePieceModel(bytes, "tokenizer.model");
    return model ? std::string("(no error)") : llvm::toString(model.takeError());
  };
  EXPECT_EQ(parseError(""),
            "'tokenizer.model' is not a valid SentencePiece model: it has no pieces");
  EXPECT_NE(parseError(good.substr(0, good.size() - 3)).find("runs past the end"),
            std::string::npos);
  EXPECT_NE(parseError(std::string("\x0A\xFF", 2)).find("truncated varint at byte 1"),
            std::string::npos);
  EXPECT_NE(parseError(std::string("\x23", 1)).find("unsupported wire type 3"), std::string::npos);
  EXPECT_NE(parseError(std::string("\x08\x01", 2)).find("field 1 has wire type 0, expected 2"),
            std::string::npos);
  EXPECT_NE(parseError(std::string("\x00", 1)).find("invalid field key at byte 0"),
            std::string::npos);
  Proto badScore;
  badScore.message(1, Proto().bytes(1, "a").varint(2, 5));
  EXPECT_NE(parseError(badScore.str()).find("SentencePiece field 2 has wire type 0, expected 5"),
            std::string::npos);
  Proto badUtf8;
  badUtf8.message(1, piece("<unk>", 0, 2)).message(1, piece("\xC3", 0));
  badUtf8.message(2, Proto().varint(3, 2)).message(3, Proto().varint(4, 0));
  EXPECT_NE(errorOf(badUtf8.str()).find("piece 1 is not valid UTF-8"), std::string::npos);
  auto missing = readSentencePieceModel("/nonexistent/tokenizer.model");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("cannot read '/nonexistent/tokenizer.model'"),
            std::string::npos);
}

} // namespace
} // namespace ninfer
