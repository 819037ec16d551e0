// NFC against Hugging Face tokenizers (goldens/nfc.txt, made by make_goldens.py):
// every line of fixtures/nfc_fuzz.txt, the Unicode sweep and the multilingual
// sample; plus the places where tokenizers' older Unicode data differs from
// current Unicode, which the generated tables must keep.
#include "Normalizer.h"
#include "TestSupport.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace ninfer {
namespace {

std::string nfc(std::string_view text) {
  std::string out;
  unicode::appendNfc(text, out);
  return out;
}

std::string fromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t pos = text.find('\n'); pos != std::string::npos; pos = text.find('\n', start)) {
    lines.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
  lines.push_back(text.substr(start));
  return lines;
}

TEST(Nfc, MatchesTokenizersOnFuzzLinesSweepAndSample) {
  std::ifstream in(test::testDataPath("goldens/nfc.txt"));
  ASSERT_TRUE(in) << "cannot read goldens/nfc.txt";
  std::vector<std::string> fuzz =
      splitLines(test::readFile(test::testDataPath("fixtures/nfc_fuzz.txt")));
  ASSERT_GT(fuzz.size(), 1000u);
  size_t lines = 0, texts = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string tag;
    fields >> tag;
    if (tag == "nfcline") {
      size_t number;
      std::string hex;
      fields >> number >> hex;
      ASSERT_LT(number, fuzz.size());
      EXPECT_EQ(nfc(fuzz[number]), hex == "-" ? std::string() : fromHex(hex))
          << "fixtures/nfc_fuzz.txt line " << number + 1;
      ++lines;
    } else if (tag == "nfctext") {
      std::string name, hash;
      size_t length;
      fields >> name >> length >> hash;
      std::string text = name == "sweep"
                             ? test::sweepText()
                             : test::readFile(test::testDataPath("fixtures/" + name + ".txt"));
      std::string out = nfc(text);
      EXPECT_EQ(out.size(), length) << name;
      EXPECT_EQ(test::fnv1a64Bytes(out), hash) << name;
      ++texts;
    }
  }
  EXPECT_EQ(lines, fuzz.size());
  EXPECT_EQ(texts, 2u);
}

TEST(Nfc, ComposesReordersAndLeavesStableTextAlone) {
  EXPECT_EQ(nfc("e\u0301"), "\u00e9");
  EXPECT_EQ(nfc("\u212b"), "\u00c5");              // singleton
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093c");        // composition exclusion
  EXPECT_EQ(nfc("a\u0301\u0316"), "\u00e1\u0316"); // reordered, then composed
  EXPECT_EQ(nfc("\u1100\u1161\u11a8"), "\uac01");  // Hangul LV + T
  EXPECT_EQ(nfc("\uac00\u11a8"), "\uac01");
  EXPECT_EQ(nfc("\u1100\u1161\u0300\u11a8"), "\uac00\u0300\u11a8"); // blocked
  EXPECT_EQ(nfc("plain ASCII text\n"), "plain ASCII text\n");
  EXPECT_EQ(nfc("caf\u00e9 \u4e2d\u6587 \U0001F600"), "caf\u00e9 \u4e2d\u6587 \U0001F600");
  EXPECT_EQ(nfc(""), "");
  // A mark at the very start has no starter to join.
  EXPECT_EQ(nfc("\u0301e"), "\u0301e");
}

TEST(Nfc, KeepsTheReferencesOlderUnicodeData) {
  // tokenizers does not decompose or compose U+11938 (Dives Akuru), and gives
  // U+07FD (Unicode 11) no combining class: both differ from current Unicode.
  EXPECT_EQ(nfc("\U00011935\U00011930"), "\U00011935\U00011930");
  EXPECT_EQ(nfc("a\u07fd\u0316"), "a\u07fd\u0316");
  EXPECT_EQ(unicode::combiningClass(0x7FD), 0);
  EXPECT_EQ(unicode::combiningClass(0x301), 230);
  EXPECT_EQ(unicode::combiningClass(0x1D165), 216);
}

TEST(Nfc, NamesFromThePlan) {
  EXPECT_EQ(normalizerFromName(""), NormalizerKind::None);
  EXPECT_EQ(normalizerFromName("nfc"), NormalizerKind::Nfc);
  EXPECT_FALSE(normalizerFromName("nfkc").has_value());
}

} // namespace
} // namespace ninfer
