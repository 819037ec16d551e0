// StreamDecoder never emits part of a UTF-8 character, and flushes leftovers
// as U+FFFD. Uses the hand-built table, whose ids 0..255 are the bytes.
#include "TestSupport.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

class StreamDecoderTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto tok = test::tokenizerFrom(test::tinyTable(/*addBos=*/false));
    ASSERT_TRUE(tok.isOk()) << tok.status().message();
    tokenizer_ = std::move(*tok);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(StreamDecoderTest, HoldsBackSplitCharacters) {
  StreamDecoder decoder(*tokenizer_);
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z"; // a é € 😀 z
  std::vector<std::string> outputs;
  for (unsigned char b : text)
    outputs.push_back(decoder.push(b));
  std::vector<std::string> expected = {"a", "", "\xC3\xA9",         "", "", "\xE2\x82\xAC", "",
                                       "",  "", "\xF0\x9F\x98\x80", "z"};
  EXPECT_EQ(outputs, expected);
  EXPECT_EQ(decoder.finish(), "");
}

TEST_F(StreamDecoderTest, PassesWholeTokensThrough) {
  StreamDecoder decoder(*tokenizer_);
  EXPECT_EQ(decoder.push(257), "abc");
  EXPECT_EQ(decoder.push(258), "<s>");
}

TEST_F(StreamDecoderTest, FinishReplacesAnIncompleteTail) {
  StreamDecoder decoder(*tokenizer_);
  EXPECT_EQ(decoder.push('x'), "x");
  EXPECT_EQ(decoder.push(0xE2), "");
  EXPECT_EQ(decoder.push(0x82), "");
  EXPECT_EQ(decoder.finish(), kReplacement);
  EXPECT_EQ(decoder.finish(), "");
}

TEST_F(StreamDecoderTest, ReplacesBytesThatCanNeverComplete) {
  StreamDecoder decoder(*tokenizer_);
  EXPECT_EQ(decoder.push(0xFF), kReplacement);
  EXPECT_EQ(decoder.push(0xC3), "");
  EXPECT_EQ(decoder.push('a'), kReplacement + "a");
  EXPECT_EQ(decoder.push(0xED), "");
  EXPECT_EQ(decoder.push(0xA0), kReplacement + kReplacement); // surrogate: ED, A0 each
}

} // namespace
} // namespace ninfer
