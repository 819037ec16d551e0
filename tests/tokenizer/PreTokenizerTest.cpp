// The hand-written regex scanners against Hugging Face tokenizers' Split
// pre-tokenizer with the same patterns (pieces as byte lengths, see goldens).
#include "PreTokenizer.h"
#include "TestSupport.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace {

std::vector<int64_t> pieceLengths(PreTokenizerKind kind, std::string_view text) {
  std::vector<std::string_view> pieces;
  preTokenize(kind, text, pieces);
  std::vector<int64_t> lengths;
  size_t covered = 0;
  for (std::string_view piece : pieces) {
    // Pieces must tile the text in order.
    EXPECT_EQ(piece.data(), text.data() + covered);
    covered += piece.size();
    lengths.push_back(static_cast<int64_t>(piece.size()));
  }
  EXPECT_EQ(covered, text.size());
  return lengths;
}

TEST(PreTokenizer, NamesMapToKinds) {
  EXPECT_EQ(preTokenizerFromName("gpt2"), PreTokenizerKind::Gpt2);
  EXPECT_EQ(preTokenizerFromName("llama3"), PreTokenizerKind::Llama3);
  EXPECT_EQ(preTokenizerFromName("qwen2"), PreTokenizerKind::Qwen2);
  EXPECT_FALSE(preTokenizerFromName("GPT2").has_value());
}

TEST(PreTokenizer, MatchesReferenceOnHandMadeStrings) {
  test::Goldens goldens;
  std::string error;
  ASSERT_TRUE(test::loadGoldens(goldens, error)) << error;
  int compared = 0;
  for (const auto& c : goldens.cases) {
    for (const auto& [name, expected] : c.pieceLengths) {
      auto kind = preTokenizerFromName(name);
      ASSERT_TRUE(kind.has_value()) << name;
      EXPECT_EQ(pieceLengths(*kind, c.text), expected) << "case " << c.name << ", " << name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int>(goldens.cases.size()) * 3);
}

TEST(PreTokenizer, MatchesReferenceOverAllOfUnicode) {
  test::Goldens goldens;
  std::string error;
  ASSERT_TRUE(test::loadGoldens(goldens, error)) << error;
  std::string text = test::sweepText();
  ASSERT_EQ(goldens.sweepPieces.size(), 3u);
  for (const auto& [name, expected] : goldens.sweepPieces) {
    auto lengths = pieceLengths(*preTokenizerFromName(name), text);
    EXPECT_EQ(lengths.size(), expected.first) << name;
    EXPECT_EQ(test::fnv1a64(lengths), expected.second) << name;
  }
}

} // namespace
} // namespace ninfer
