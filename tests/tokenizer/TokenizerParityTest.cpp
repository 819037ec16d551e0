// Exact id parity with Hugging Face tokenizers for the pycode models'
// tokenizer.json, imported by compiler/TokenizerImport.cpp and run by the
// runtime: hand-made strings, ~2 KB chunks of heldout_python.txt, the whole
// file, and a sweep over all of Unicode.
#include "TestSupport.h"
#include "TokenizerImport.h"
#include "Utf8.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace {

class PycodeTokenizer : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    ModelConfig config;
    config.vocabSize = 4096;
    config.bosId = 0;
    config.eosIds = {1};
    auto table = importTokenizer(test::sharedPath("models/pycode-llama-3m"), config);
    if (!table) {
      importError_ = llvm::toString(table.takeError());
      return;
    }
    table_ = std::move(*table);
    auto tok = test::tokenizerFrom(*table_);
    if (!tok.isOk()) {
      importError_ = tok.status().message();
      return;
    }
    tokenizer_ = std::move(*tok).release();
    std::string error;
    if (!test::loadGoldens(goldens_, error))
      importError_ = error;
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(importError_.empty()) << importError_; }

  static std::vector<int32_t> encode(std::string_view text, bool addSpecial) {
    auto ids = tokenizer_->encode(text, addSpecial);
    EXPECT_TRUE(ids.isOk()) << ids.status().message();
    return ids.isOk() ? *ids : std::vector<int32_t>{};
  }
  static std::string decode(const std::vector<int32_t>& ids) {
    std::string text;
    for (int32_t id : ids)
      text += tokenizer_->tokenBytes(id);
    return text;
  }

  static inline std::unique_ptr<plan::TokenizerT> table_;
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline test::Goldens goldens_;
  static inline std::string importError_;
};

TEST_F(PycodeTokenizer, ImportsTheTables) {
  EXPECT_EQ(table_->kind, plan::TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(table_->tokens.size(), 4096u);
  EXPECT_EQ(table_->merges.size(), 2u * 3838u);
  EXPECT_EQ(table_->special_ids, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(table_->tokens[0], "<|begin_of_text|>");
  EXPECT_EQ(table_->bos_id, 0);
  EXPECT_TRUE(table_->add_bos);
  EXPECT_EQ(table_->eos_ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(table_->pretokenizer, "gpt2");
  EXPECT_EQ(tokenizer_->vocabSize(), 4096);
}

TEST_F(PycodeTokenizer, MatchesReferenceOnHandMadeStrings) {
  for (const auto& c : goldens_.cases) {
    EXPECT_EQ(encode(c.text, true), c.ids) << "case " << c.name;
    ASSERT_FALSE(c.ids.empty());
    ASSERT_EQ(c.ids[0], 0) << "goldens start with BOS";
    std::vector<int32_t> plain(c.ids.begin() + 1, c.ids.end());
    EXPECT_EQ(encode(c.text, false), plain) << "case " << c.name;
    EXPECT_EQ(decode(plain), c.text) << "case " << c.name;
  }
}

TEST_F(PycodeTokenizer, MatchesReferenceOnHeldoutChunksAndWholeFile) {
  std::string data = test::readFile(test::sharedPath("data/heldout_python.txt"));
  ASSERT_GT(data.size(), 100000u);
  ASSERT_GE(goldens_.chunks.size(), 150u);
  for (size_t i = 0; i < goldens_.chunks.size(); ++i) {
    const auto& chunk = goldens_.chunks[i];
    ASSERT_LE(chunk.offset + chunk.length, data.size());
    std::string_view text(data.data() + chunk.offset, chunk.length);
    auto ids = encode(text, false);
    EXPECT_EQ(ids.size(), chunk.count) << "chunk " << i << " (see make_goldens.py --dump-chunk)";
    EXPECT_EQ(test::fnv1a64(ids), chunk.hash) << "chunk " << i;
    EXPECT_EQ(decode(ids), text) << "chunk " << i;
  }
}

TEST_F(PycodeTokenizer, MatchesReferenceOverAllOfUnicode) {
  std::string text = test::sweepText();
  auto ids = encode(text, false);
  EXPECT_EQ(ids.size(), goldens_.sweepCount);
  EXPECT_EQ(test::fnv1a64(ids), goldens_.sweepHash);
  EXPECT_EQ(decode(ids), text);
}

TEST_F(PycodeTokenizer, StreamDecoderRebuildsTextWithoutPartialCharacters) {
  const std::string text = "naïve café 👨\u200d👩\u200d👧 中文 Ελληνικά\n";
  auto ids = encode(text, false);
  StreamDecoder decoder(*tokenizer_);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = decoder.push(id);
    EXPECT_EQ(utf8::findInvalid(piece), std::string_view::npos);
    out += piece;
  }
  out += decoder.finish();
  EXPECT_EQ(out, text);
  // The model only knows bytes for rare characters: é arrives as two byte tokens.
  int32_t c3 = -1, a9 = -1;
  for (int32_t id = 0; id < tokenizer_->vocabSize(); ++id) {
    if (tokenizer_->tokenBytes(id) == "\xC3")
      c3 = id;
    if (tokenizer_->tokenBytes(id) == "\xA9")
      a9 = id;
  }
  ASSERT_GE(c3, 0);
  ASSERT_GE(a9, 0);
  StreamDecoder bytes(*tokenizer_);
  EXPECT_EQ(bytes.push(c3), "");
  EXPECT_EQ(bytes.push(a9), "\xC3\xA9");
}

TEST_F(PycodeTokenizer, SpecialTokensDecodeToTheirText) {
  EXPECT_EQ(tokenizer_->tokenBytes(1), "<|end_of_text|>");
  EXPECT_EQ(encode("x<|end_of_text|>", false), (std::vector<int32_t>{89, 1}));
}

TEST_F(PycodeTokenizer, RefusesInvalidUtf8) {
  auto ids = tokenizer_->encode("print('\xE2\x82')", true);
  ASSERT_FALSE(ids.isOk());
  EXPECT_EQ(ids.status().message(), "prompt is not valid UTF-8 (byte offset 7)");
}

} // namespace
} // namespace ninfer
