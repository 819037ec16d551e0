// Exact id parity with the reference libraries for every tokenizer layout the
// importer accepts besides the pycode one: the real Llama 2 tokenizer.model
// (reference: sentencepiece), a small sentencepiece-trained model with
// user-defined pieces and no byte fallback, SentencePiece-style tokenizer.json
// in three layouts, and byte-level tokenizer.json with the Llama 3 regex and
// ignore_merges and with the Qwen2 regex and NFC (reference: tokenizers). Each
// is imported by compiler/TokenizerImport.cpp and run by the runtime on the
// hand-made cases, ~2 KB chunks of heldout_python.txt, the whole file, a
// multilingual sample, an NFC fuzz text and a sweep over all of Unicode; the
// decoded text must match the reference decoder too.
#include "TestSupport.h"
#include "TokenizerImport.h"
#include "Utf8.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace {

struct Fixture {
  const char* name; // goldens/<name>.txt
  bool shared;      // directory under the shared models, else under fixtures/
  const char* dir;
  plan::TokenizerKind kind;
};

const Fixture kFixtures[] = {
    {"llama2", true, "models/tokenizers/llama2", plan::TokenizerKind::SentencePieceBpe},
    {"sp_tiny", false, "fixtures/sp_tiny", plan::TokenizerKind::SentencePieceBpe},
    {"sp_ties", false, "fixtures/sp_ties", plan::TokenizerKind::SentencePieceBpe},
    {"sp_prepend", false, "fixtures/sp_prepend", plan::TokenizerKind::SentencePieceBpe},
    {"sp_metaspace_first", false, "fixtures/sp_metaspace_first",
     plan::TokenizerKind::SentencePieceBpe},
    {"sp_metaspace_split", false, "fixtures/sp_metaspace_split",
     plan::TokenizerKind::SentencePieceBpe},
    {"llama3_bl", false, "fixtures/llama3_bl", plan::TokenizerKind::ByteLevelBpe},
    {"qwen2_bl", false, "fixtures/qwen2_bl", plan::TokenizerKind::ByteLevelBpe},
};

class FixtureParity : public ::testing::TestWithParam<Fixture> {
protected:
  void SetUp() override {
    const Fixture& f = GetParam();
    std::string dir = f.shared ? test::sharedPath(f.dir) : test::testDataPath(f.dir);
    auto table = importTokenizer(dir, ModelConfig{});
    ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
    table_ = std::move(*table);
    ASSERT_EQ(table_->kind, f.kind);
    auto tok = test::tokenizerFrom(*table_);
    ASSERT_TRUE(tok.isOk()) << tok.status().message();
    tokenizer_ = std::move(*tok);
    std::string error;
    ASSERT_TRUE(test::loadParityGoldens(f.name, goldens_, error)) << error;
  }

  std::vector<int32_t> encode(std::string_view text, bool addSpecial) const {
    auto ids = tokenizer_->encode(text, addSpecial);
    EXPECT_TRUE(ids.isOk()) << ids.status().message();
    return ids.isOk() ? *ids : std::vector<int32_t>{};
  }

  std::string textNamed(const std::string& name) const {
    if (name == "sweep")
      return test::sweepText();
    return test::readFile(test::testDataPath("fixtures/" + name + ".txt"));
  }

  std::unique_ptr<plan::TokenizerT> table_;
  std::unique_ptr<Tokenizer> tokenizer_;
  test::ParityGoldens goldens_;
};

TEST_P(FixtureParity, MatchesReferenceOnHandMadeStrings) {
  ASSERT_GE(goldens_.cases.size(), 30u);
  for (const auto& c : goldens_.cases) {
    EXPECT_EQ(encode(c.text, true), c.ids) << "case " << c.name;
    std::vector<int32_t> plain = c.ids;
    if (table_->add_bos) {
      ASSERT_FALSE(plain.empty());
      ASSERT_EQ(plain[0], table_->bos_id) << "goldens start with BOS";
      plain.erase(plain.begin());
    }
    EXPECT_EQ(encode(c.text, false), plain) << "case " << c.name;
    EXPECT_EQ(tokenizer_->decode(plain), c.decoded) << "case " << c.name;
  }
}

TEST_P(FixtureParity, MatchesReferenceOnHeldoutChunksAndWholeFile) {
  std::string data = test::readFile(test::sharedPath("data/heldout_python.txt"));
  ASSERT_GT(data.size(), 100000u);
  ASSERT_GE(goldens_.chunks.size(), 150u);
  for (size_t i = 0; i < goldens_.chunks.size(); ++i) {
    const auto& chunk = goldens_.chunks[i];
    ASSERT_LE(chunk.offset + chunk.length, data.size());
    std::string_view text(data.data() + chunk.offset, chunk.length);
    auto ids = encode(text, false);
    EXPECT_EQ(ids.size(), chunk.count) << "chunk " << i;
    EXPECT_EQ(test::fnv1a64(ids), chunk.hash) << "chunk " << i;
    std::string decoded = tokenizer_->decode(ids);
    EXPECT_EQ(decoded.size(), chunk.decodedLength) << "chunk " << i;
    EXPECT_EQ(test::fnv1a64Bytes(decoded), chunk.decodedHash) << "chunk " << i;
  }
}

TEST_P(FixtureParity, MatchesReferenceOnMultilingualFuzzAndUnicodeSweep) {
  ASSERT_EQ(goldens_.texts.size(), 3u);
  for (const auto& span : goldens_.texts) {
    std::string text = textNamed(span.name);
    ASSERT_FALSE(text.empty()) << span.name;
    auto ids = encode(text, false);
    EXPECT_EQ(ids.size(), span.count) << span.name;
    EXPECT_EQ(test::fnv1a64(ids), span.hash) << span.name;
    std::string decoded = tokenizer_->decode(ids);
    EXPECT_EQ(decoded.size(), span.decodedLength) << span.name;
    EXPECT_EQ(test::fnv1a64Bytes(decoded), span.decodedHash) << span.name;
  }
}

TEST_P(FixtureParity, StreamDecoderAgreesWithDecode) {
  std::string text = textNamed("multilingual");
  auto ids = encode(text, false);
  StreamDecoder decoder(*tokenizer_, /*startOfText=*/true);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = decoder.push(id);
    EXPECT_EQ(utf8::findInvalid(piece), std::string_view::npos);
    out += piece;
  }
  out += decoder.finish();
  EXPECT_EQ(out, tokenizer_->decode(ids));
}

TEST_P(FixtureParity, EmptyPromptIsJustBos) {
  std::vector<int32_t> expected;
  if (table_->add_bos)
    expected.push_back(table_->bos_id);
  EXPECT_EQ(encode("", true), expected);
  EXPECT_EQ(encode("", false), std::vector<int32_t>{});
}

TEST_P(FixtureParity, RefusesInvalidUtf8) {
  for (std::string_view bad : {std::string_view("ok \xC3"), std::string_view("\xED\xA0\x80"),
                               std::string_view("a\xF8"
                                                "b"),
                               std::string_view("\xC0\xAF")}) {
    auto ids = tokenizer_->encode(bad, true);
    ASSERT_FALSE(ids.isOk());
    EXPECT_NE(ids.status().message().find("prompt is not valid UTF-8 (byte offset"),
              std::string::npos)
        << ids.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, FixtureParity, ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           return std::string(info.param.name);
                         });

// What the fixtures must exercise, so a regenerated fixture cannot quietly lose it.
TEST(FixtureTables, ExerciseTheFeaturesTheyStandFor) {
  auto import = [](const char* dir) {
    auto table = importTokenizer(test::testDataPath(dir), ModelConfig{});
    EXPECT_TRUE(bool(table)) << llvm::toString(table.takeError());
    return table ? std::move(*table) : std::make_unique<plan::TokenizerT>();
  };
  auto llama2 = importTokenizer(test::sharedPath("models/tokenizers/llama2"), ModelConfig{});
  ASSERT_TRUE(bool(llama2)) << llvm::toString(llama2.takeError());
  EXPECT_EQ((*llama2)->tokens.size(), 32000u);
  EXPECT_EQ((*llama2)->scores.size(), 32000u);
  EXPECT_TRUE((*llama2)->byte_fallback);
  EXPECT_TRUE((*llama2)->add_dummy_prefix);
  EXPECT_TRUE((*llama2)->add_bos);
  EXPECT_EQ((*llama2)->bos_id, 1);
  EXPECT_EQ((*llama2)->eos_ids, std::vector<int32_t>{2});
  EXPECT_EQ((*llama2)->unk_id, 0);
  EXPECT_TRUE((*llama2)->special_ids.empty());

  auto tiny = import("fixtures/sp_tiny");
  EXPECT_FALSE(tiny->byte_fallback);
  EXPECT_EQ(tiny->special_ids.size(), 4u); // user-defined pieces

  auto prepend = import("fixtures/sp_prepend");
  EXPECT_TRUE(prepend->add_dummy_prefix);
  EXPECT_TRUE(prepend->scores.empty());
  EXPECT_EQ(prepend->pretokenizer, "");
  EXPECT_EQ(import("fixtures/sp_metaspace_first")->pretokenizer, "metaspace-first");
  EXPECT_EQ(import("fixtures/sp_metaspace_split")->pretokenizer, "metaspace-always-split");

  auto llama3 = import("fixtures/llama3_bl");
  EXPECT_TRUE(llama3->ignore_merges);
  EXPECT_EQ(llama3->pretokenizer, "llama3");
  auto qwen2 = import("fixtures/qwen2_bl");
  EXPECT_EQ(qwen2->normalizer, "nfc");
  EXPECT_EQ(qwen2->pretokenizer, "qwen2");
  EXPECT_FALSE(qwen2->add_bos);
}

// The README's example: SentencePiece keeps the 4-space indent as "▁▁▁" + "▁if".
TEST(Llama2Tokenizer, KeepsSentencePieceIndentation) {
  auto table = importTokenizer(test::sharedPath("models/tokenizers/llama2"), ModelConfig{});
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  auto tok = test::tokenizerFrom(**table);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  auto ids = (*tok)->encode("int:\n    if n", false);
  ASSERT_TRUE(ids.isOk());
  EXPECT_EQ(*ids, (std::vector<int32_t>{938, 29901, 13, 1678, 565, 302}));
  EXPECT_EQ((*tok)->decode(*ids), "int:\n    if n");
  // Continuing a text keeps the space; a whole text drops the dummy prefix.
  StreamDecoder continuing(**tok);
  EXPECT_EQ(continuing.push(565), " if");
  StreamDecoder whole(**tok, /*startOfText=*/true);
  EXPECT_EQ(whole.push(565), "if");
  EXPECT_EQ((*tok)->tokenBytes(13), "\n"); // <0x0A>
  EXPECT_EQ((*tok)->tokenBytes(1), "<s>");
}

} // namespace
} // namespace ninfer
