// SentencePieceBpe on hand-built tables: what the plan's fields mean (scores
// select SentencePiece's rules, add_dummy_prefix, byte fallback, decoding of
// byte tokens and of the dummy-prefix space), the errors for bad tables, and
// concurrent use. Exact parity with the libraries is TokenizerFixtureParityTest.
#include "TestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <thread>

namespace ninfer {
namespace {

// ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, 259 "▁", 260 "a", 261 "b",
// 262 "▁a", 263 "ab", 264 "▁ab".
plan::TokenizerT spTable(bool sentencePiece) {
  plan::TokenizerT t;
  t.kind = plan::TokenizerKind::SentencePieceBpe;
  t.tokens = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    t.tokens.push_back(name);
  }
  for (const char* piece : {"\xE2\x96\x81", "a", "b",
                            "\xE2\x96\x81"
                            "a",
                            "ab",
                            "\xE2\x96\x81"
                            "ab"})
    t.tokens.push_back(piece);
  // "▁a" outranks "ab": "▁ab" is made as "▁a" + "b".
  t.merges = {259, 260, 262, 261, 260, 261, 259, 263};
  if (sentencePiece) {
    t.scores.assign(t.tokens.size(), 0.0f);
    t.scores[262] = -1;
    t.scores[263] = -2;
    t.scores[264] = -3;
    t.scores[259] = t.scores[260] = t.scores[261] = -10;
  } else {
    t.special_ids = {0, 1, 2};
  }
  t.byte_fallback = true;
  t.add_dummy_prefix = true;
  t.unk_id = 0;
  t.bos_id = 1;
  t.add_bos = true;
  t.eos_ids = {2};
  return t;
}

std::vector<int32_t> encodeOk(const Tokenizer& tok, std::string_view text, bool addSpecial) {
  auto ids = tok.encode(text, addSpecial);
  EXPECT_TRUE(ids.isOk()) << ids.status().message();
  return ids.isOk() ? *ids : std::vector<int32_t>{};
}

TEST(SentencePieceBpe, MergesAddsDummyPrefixAndFallsBackToBytes) {
  for (bool sentencePiece : {true, false}) {
    auto tok = test::tokenizerFrom(spTable(sentencePiece));
    ASSERT_TRUE(tok.isOk()) << tok.status().message();
    EXPECT_EQ(encodeOk(**tok, "ab", true), (std::vector<int32_t>{1, 264}));
    EXPECT_EQ(encodeOk(**tok, "ab ba", false), (std::vector<int32_t>{264, 259, 261, 260}));
    // é has no piece: its two UTF-8 bytes.
    EXPECT_EQ(encodeOk(**tok, "\xC3\xA9", false), (std::vector<int32_t>{259, 3 + 0xC3, 3 + 0xA9}));
    EXPECT_EQ(encodeOk(**tok, "", true), std::vector<int32_t>{1});
    EXPECT_EQ(encodeOk(**tok, "", false), std::vector<int32_t>{});
    EXPECT_EQ((*tok)->vocabSize(), 265);
  }
}

TEST(SentencePieceBpe, DecodesSpacesBytesAndTheDummyPrefix) {
  auto tok = test::tokenizerFrom(spTable(true));
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  EXPECT_EQ((*tok)->tokenBytes(264), " ab");
  EXPECT_EQ((*tok)->tokenBytes(3 + 0x0A), "\n");
  EXPECT_EQ((*tok)->tokenBytes(1), "<s>");
  EXPECT_EQ((*tok)->tokenBytes(0), " \xE2\x81\x87 "); // sentencepiece's unk surface
  EXPECT_EQ((*tok)->tokenBytes(999), "");
  EXPECT_EQ((*tok)->decode({264, 259, 261}), "ab b");
  EXPECT_EQ((*tok)->decode({259, 264}), " ab");       // only one space is the prefix
  EXPECT_EQ((*tok)->decode({3 + 0x20, 264}), "  ab"); // a byte token is not the prefix
  EXPECT_EQ((*tok)->decode({1, 264}), "<s> ab");      // the text started with <s>
  EXPECT_EQ((*tok)->decode({259, 3 + 0xC3, 3 + 0xA9}), "\xC3\xA9");
  EXPECT_EQ((*tok)->decode({3 + 0xC3}), "\xEF\xBF\xBD"); // a lone lead byte
  // tokenizer.json's Strip decoder drops any leading space, byte tokens included.
  auto hf = test::tokenizerFrom(spTable(false));
  ASSERT_TRUE(hf.isOk()) << hf.status().message();
  EXPECT_EQ((*hf)->decode({3 + 0x20, 264}), " ab");
  EXPECT_EQ((*hf)->tokenBytes(0), "<unk>");
}

TEST(SentencePieceBpe, WithoutDummyPrefixKeepsLeadingSpaces) {
  auto table = spTable(true);
  table.add_dummy_prefix = false;
  auto tok = test::tokenizerFrom(table);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  EXPECT_EQ(encodeOk(**tok, "ab", false), (std::vector<int32_t>{263}));
  EXPECT_EQ((*tok)->decode({264}), " ab");
}

TEST(SentencePieceBpe, SharedAcrossThreadsGivesTheSameIds) {
  auto tok = test::tokenizerFrom(spTable(true));
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += (i % 3 ? "ab ba " : "\xC3\xA9 aab ");
  std::vector<int32_t> expected = encodeOk(**tok, text, true);
  std::vector<std::vector<int32_t>> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results)
    threads.emplace_back([&] {
      for (int k = 0; k < 5; ++k)
        result = *(*tok)->encode(text, true);
    });
  for (auto& t : threads)
    t.join();
  for (const auto& result : results)
    EXPECT_EQ(result, expected);
}

TEST(SentencePieceBpe, RejectsBadTablesWithAMessage) {
  auto expectError = [](const plan::TokenizerT& table, const std::string& fragment) {
    auto tok = test::tokenizerFrom(table);
    ASSERT_FALSE(tok.isOk()) << "expected: " << fragment;
    EXPECT_NE(tok.status().message().find(fragment), std::string::npos) << tok.status().message();
  };
  auto table = spTable(true);
  table.scores.pop_back();
  expectError(table, "264 scores for 265 tokens");
  table = spTable(true);
  table.scores[7] = std::nanf("");
  expectError(table, "scores[7] is not a number");
  table = spTable(true);
  table.merges = {260, 260};
  expectError(table, "merge 0 makes 'aa'");
  table = spTable(false);
  table.tokens[3 + 0x41] = "A";
  expectError(table, "byte fallback but has no token <0x41>");
  table = spTable(false);
  table.pretokenizer = "metaspace-sometimes";
  expectError(table, "pre-tokenizer 'metaspace-sometimes'");
  table = spTable(true);
  table.pretokenizer = "metaspace-first"; // tokenizer.json only
  expectError(table, "pre-tokenizer 'metaspace-first'");
  table = spTable(false);
  table.normalizer = "nfkc";
  expectError(table, "normalizer 'nfkc'");
  table = spTable(true);
  table.unk_id = 265;
  expectError(table, "unk_id 265");
  table = spTable(true);
  table.bos_id = -1;
  expectError(table, "bos_id -1");
  table = spTable(true);
  table.tokens[260] = "\xFF";
  expectError(table, "tokens[260] is not valid UTF-8");
  table = spTable(false);
  table.special_ids.push_back(265);
  expectError(table, "special_ids[3] = 265 is out of range");
  table = spTable(true);
  table.merges.push_back(259);
  expectError(table, "odd number");
  table = spTable(true);
  table.merges = {259, 265};
  expectError(table, "merge 0 refers to a token id out of range");
  table = spTable(true);
  table.tokens.clear();
  table.scores.clear();
  expectError(table, "no tokens");
}

TEST(SentencePieceBpe, RefusesInvalidUtf8WithItsOffset) {
  auto tok = test::tokenizerFrom(spTable(true));
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  auto ids = (*tok)->encode("ab \xE2\x82", true);
  ASSERT_FALSE(ids.isOk());
  EXPECT_EQ(ids.status().message(), "prompt is not valid UTF-8 (byte offset 3)");
}

} // namespace
} // namespace ninfer
