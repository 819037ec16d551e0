// UTF-8 validation and the maximal-subpart rule used for U+FFFD replacement.
#include "Utf8.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace {

constexpr size_t npos = std::string_view::npos;

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_EQ(utf8::findInvalid(""), npos);
  EXPECT_EQ(utf8::findInvalid("plain ascii\n"), npos);
  EXPECT_EQ(utf8::findInvalid("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), npos);
  EXPECT_EQ(utf8::findInvalid("\xEF\xBF\xBF\xF4\x8F\xBF\xBF"), npos); // U+FFFF, U+10FFFF
}

TEST(Utf8, FindsTheFirstBadByte) {
  EXPECT_EQ(utf8::findInvalid("ab\xFF"), 2u);
  EXPECT_EQ(utf8::findInvalid("a\xC3"), 1u);            // truncated at the end
  EXPECT_EQ(utf8::findInvalid("\xC0\x80"), 0u);         // overlong NUL
  EXPECT_EQ(utf8::findInvalid("x\xE0\x80\x80"), 1u);    // overlong 3-byte
  EXPECT_EQ(utf8::findInvalid("xy\xED\xA0\x80"), 2u);   // surrogate U+D800
  EXPECT_EQ(utf8::findInvalid("\xF4\x90\x80\x80"), 0u); // above U+10FFFF
  EXPECT_EQ(utf8::findInvalid("\xC3\xA9\x80"), 2u);     // stray continuation
  EXPECT_EQ(utf8::findInvalid("\xE2\x82\x61"), 0u);     // interrupted sequence
}

TEST(Utf8, MaximalSubparts) {
  auto check = [](std::string_view s) {
    return utf8::checkSequence(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  EXPECT_EQ(check("\xE2\x82\x61").status, utf8::SequenceStatus::Invalid);
  EXPECT_EQ(check("\xE2\x82\x61").length, 2);
  EXPECT_EQ(check("\xF0\x9F\x98").status, utf8::SequenceStatus::Truncated);
  EXPECT_EQ(check("\xF0\x9F\x98").length, 3);
  EXPECT_EQ(check("\xED\xA0\x80").length, 1); // ED A0 is never a valid prefix
  auto euro = check("\xE2\x82\xAC");
  EXPECT_EQ(euro.status, utf8::SequenceStatus::Valid);
  EXPECT_EQ(euro.codePoint, 0x20ACu);
}

TEST(Utf8, AppendRoundTrips) {
  for (char32_t cp : {0x24u, 0xA2u, 0x939u, 0x20ACu, 0xD55Cu, 0x10348u, 0x10FFFFu}) {
    std::string s;
    utf8::append(s, cp);
    size_t length = 0;
    EXPECT_EQ(utf8::findInvalid(s), npos);
    EXPECT_EQ(utf8::decodeValid(s, 0, length), cp);
    EXPECT_EQ(length, s.size());
  }
}

} // namespace
} // namespace ninfer
