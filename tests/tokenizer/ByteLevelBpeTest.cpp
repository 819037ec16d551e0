// Byte-level BPE on a hand-built table: merge order, added tokens, BOS, the
// byte map, and the errors for bad input and bad tables. Needs no compiler.
#include "TestSupport.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace {

std::vector<int32_t> encodeOk(const Tokenizer& tok, std::string_view text, bool addSpecial) {
  auto ids = tok.encode(text, addSpecial);
  EXPECT_TRUE(ids.isOk()) << ids.status().message();
  return ids.isOk() ? *ids : std::vector<int32_t>{};
}

TEST(ByteLevelBpe, MergesByRankWithinPieces) {
  auto tok = test::tokenizerFrom(test::tinyTable(/*addBos=*/false));
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  // Pieces "abc", " ab", " a", "bc": merges never cross piece boundaries.
  EXPECT_EQ(encodeOk(**tok, "abc ab a bc", true),
            (std::vector<int32_t>{257, ' ', 256, ' ', 'a', ' ', 'b', 'c'}));
  EXPECT_EQ(encodeOk(**tok, "ababab", false), (std::vector<int32_t>{256, 256, 256}));
  EXPECT_EQ(encodeOk(**tok, "", true), std::vector<int32_t>{});
  EXPECT_EQ((*tok)->vocabSize(), 259);
}

TEST(ByteLevelBpe, AddsBosOnlyWhenAsked) {
  auto tok = test::tokenizerFrom(test::tinyTable(/*addBos=*/true));
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  EXPECT_EQ(encodeOk(**tok, "ab", true), (std::vector<int32_t>{258, 256}));
  EXPECT_EQ(encodeOk(**tok, "ab", false), (std::vector<int32_t>{256}));
}

TEST(ByteLevelBpe, SplitsAddedTokensBeforePreTokenizing) {
  auto tok = test::tokenizerFrom(test::tinyTable(/*addBos=*/false));
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  EXPECT_EQ(encodeOk(**tok, "a<s>b<s><s", false),
            (std::vector<int32_t>{'a', 258, 'b', 258, '<', 's'}));
}

TEST(ByteLevelBpe, TokenBytesUndoTheByteMap) {
  auto tok = test::tokenizerFrom(test::tinyTable(/*addBos=*/false));
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ((*tok)->tokenBytes(b), std::string(1, static_cast<char>(b))) << b;
  EXPECT_EQ((*tok)->tokenBytes(257), "abc");
  EXPECT_EQ((*tok)->tokenBytes(258), "<s>");
  EXPECT_EQ((*tok)->tokenBytes(259), "");
  EXPECT_EQ((*tok)->tokenBytes(-1), "");
  // Every byte value survives encode -> bytes.
  std::string all;
  for (int b = 1; b < 128; ++b)
    all.push_back(static_cast<char>(b));
  all += "\xC3\xA9\xF0\x9F\x98\x80";
  std::string back;
  for (int32_t id : encodeOk(**tok, all, false))
    back += (*tok)->tokenBytes(id);
  EXPECT_EQ(back, all);
}

TEST(ByteLevelBpe, RefusesInvalidUtf8WithItsOffset) {
  auto tok = test::tokenizerFrom(test::tinyTable(/*addBos=*/true));
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  auto ids = (*tok)->encode("abc\xC3(", true);
  ASSERT_FALSE(ids.isOk());
  EXPECT_EQ(ids.status().message(), "prompt is not valid UTF-8 (byte offset 3)");
  EXPECT_FALSE((*tok)->encode("\xFF", false).isOk());
}

TEST(ByteLevelBpe, RejectsBadTablesWithAMessage) {
  auto expectError = [](plan::TokenizerT table, const std::string& fragment) {
    auto tok = test::tokenizerFrom(table);
    ASSERT_FALSE(tok.isOk());
    EXPECT_NE(tok.status().message().find(fragment), std::string::npos) << tok.status().message();
  };
  auto table = test::tinyTable(false);
  table.merges = {'a', 'c'};
  expectError(table, "merge 0 makes 'ac'");
  table = test::tinyTable(false);
  table.merges.push_back(999);
  expectError(table, "odd number");
  table = test::tinyTable(false);
  table.merges = {'a', 999};
  expectError(table, "merge 0 refers to a token id out of range");
  table = test::tinyTable(false);
  table.special_ids = {400};
  expectError(table, "special_ids[0] = 400");
  table = test::tinyTable(true);
  table.bos_id = -1;
  expectError(table, "bos_id -1");
  table = test::tinyTable(false);
  table.pretokenizer = "bert";
  expectError(table, "pre-tokenizer 'bert'");
  table = test::tinyTable(false);
  table.tokens.clear();
  expectError(table, "no tokens");
}

TEST(Tokenizer, PlansWithoutTokenizerSaySo) {
  auto none = Tokenizer::fromPlan(nullptr);
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.status().message().find("--prompt-ids"), std::string::npos);
  plan::TokenizerT table;
  table.kind = plan::TokenizerKind::None;
  EXPECT_FALSE(test::tokenizerFrom(table).isOk());
}

} // namespace
} // namespace ninfer
