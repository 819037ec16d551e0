// The TQ2 format header: exact sizes and offsets, lossless pack -> dequantize
// round trips, the meaning of every code (11 included), scale placement, and the
// dummy fill the CUDA fill kernel and the CPU executor share.
#include "ninfer/TernaryFormat.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace ninfer {
namespace {

TEST(TernaryFormat, SizesAndOffsets) {
  EXPECT_TRUE(ternary::isPackableCols(64));
  EXPECT_TRUE(ternary::isPackableCols(14336));
  EXPECT_FALSE(ternary::isPackableCols(96));
  EXPECT_FALSE(ternary::isPackableCols(0));
  EXPECT_EQ(ternary::rowBytes(4096), 1024);
  EXPECT_EQ(ternary::scaleOffset(14336, 4096), 14336ll * 1024);
  EXPECT_EQ(ternary::tensorBytes(512, 1536), 512ll * 384 + 4);
  // 2 bits per weight plus 32 bits per tensor.
  const long long rows = 4096, cols = 4096;
  EXPECT_EQ(ternary::tensorBytes(rows, cols) * 8, rows * cols * 2 + 32);
}

TEST(TernaryFormat, CodeValues) {
  EXPECT_EQ(ternary::codeValue(0), 0);
  EXPECT_EQ(ternary::codeValue(1), 1);
  EXPECT_EQ(ternary::codeValue(2), -1);
  EXPECT_EQ(ternary::codeValue(3), 0); // never written, reads as zero
  for (int t = -1; t <= 1; ++t)
    EXPECT_EQ(ternary::codeValue(ternary::encode(t)), t);
}

// Random ternary rows, packed and read back through both accessors.
TEST(TernaryFormat, PackDequantizeRoundTrip) {
  std::mt19937 rng(7);
  for (long long cols : {64ll, 512ll, 1536ll, 4096ll}) {
    const long long rows = 5;
    const float scale = 0.0213623046875f; // a bf16 value
    std::vector<signed char> t(size_t(rows * cols));
    for (auto& v : t)
      v = static_cast<signed char>(int(rng() % 3) - 1);
    std::vector<unsigned char> bytes(size_t(ternary::tensorBytes(rows, cols)), 0xAB);
    for (long long r = 0; r < rows; ++r) {
      std::vector<unsigned int> words(size_t(ternary::rowWords(cols)));
      ternary::packRow(t.data() + r * cols, cols, words.data());
      std::memcpy(bytes.data() + r * ternary::rowBytes(cols), words.data(),
                  size_t(ternary::rowBytes(cols)));
    }
    ternary::writeScale(bytes.data(), rows, cols, scale);
    EXPECT_EQ(ternary::readScale(bytes.data(), rows, cols), scale);
    std::vector<float> row(static_cast<size_t>(cols));
    for (long long r = 0; r < rows; ++r) {
      ternary::dequantizeRow(bytes.data(), rows, cols, r, row.data());
      std::vector<unsigned int> words(size_t(ternary::rowWords(cols)));
      std::memcpy(words.data(), bytes.data() + r * ternary::rowBytes(cols),
                  size_t(ternary::rowBytes(cols)));
      for (long long k = 0; k < cols; ++k) {
        const int expected = t[size_t(r * cols + k)];
        ASSERT_EQ(row[size_t(k)], expected * scale) << "cols " << cols << " r " << r << " k " << k;
        ASSERT_EQ(ternary::codeValue(ternary::codeAt(words.data(), k)), expected);
      }
    }
  }
}

// The documented bit position: value k in word k/16, bits 2*(k%16), little-endian.
TEST(TernaryFormat, BitPositions) {
  std::vector<signed char> t(64, 0);
  t[0] = 1;   // word 0 bits 0-1: 01
  t[17] = -1; // word 1 bits 2-3: 10
  t[63] = 1;  // word 3 bits 30-31: 01
  unsigned int words[4];
  ternary::packRow(t.data(), 64, words);
  EXPECT_EQ(words[0], 0x1u);
  EXPECT_EQ(words[1], 0x8u);
  EXPECT_EQ(words[2], 0x0u);
  EXPECT_EQ(words[3], 0x40000000u);
}

// The tensor-core GEMMs' decode: pair m of a word is values 2m, 2m + 1 of its 16 as f16
// bits of -s, 0, +s (the code 11, never written, as 0).
TEST(TernaryFormat, CodePairsAreAdjacentValues) {
  const long long cols = 1024;
  const unsigned int scaleBits = 0x2570u; // an f16 near 0.0215
  std::mt19937 rng(5);
  std::vector<signed char> t(static_cast<size_t>(cols));
  for (auto& v : t)
    v = static_cast<signed char>(int(rng() % 3) - 1);
  std::vector<unsigned int> words(static_cast<size_t>(ternary::rowWords(cols)));
  ternary::packRow(t.data(), cols, words.data());
  const auto f16 = [&](int v) { return v == 0 ? 0u : v > 0 ? scaleBits : scaleBits | 0x8000u; };
  for (long long w = 0; w < ternary::rowWords(cols); ++w)
    for (int m = 0; m < 8; ++m) {
      const unsigned int pair = ternary::codePairF16(words[size_t(w)], m, scaleBits);
      const long long k = w * ternary::kValuesPerWord + 2 * m;
      ASSERT_EQ(pair & 0xFFFFu, f16(t[size_t(k)])) << "value " << k;
      ASSERT_EQ(pair >> 16, f16(t[size_t(k + 1)])) << "value " << k + 1;
    }
  EXPECT_EQ(ternary::codePairF16(0xFu, 0, scaleBits), 0u); // 11 11
}

TEST(TernaryFormat, DummyFillIsValidTernary) {
  const long long rows = 64, cols = 256;
  const unsigned long long units =
      static_cast<unsigned long long>(ternary::tensorBytes(rows, cols)) / 2;
  std::vector<unsigned short> buffer(static_cast<size_t>(units));
  for (unsigned long long u = 0; u < units; ++u)
    buffer[size_t(u)] = ternary::dummyUnit(42, u, units, 0.02f);
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(buffer.data());
  EXPECT_EQ(ternary::readScale(bytes, rows, cols), 0.02f);
  int counts[3] = {0, 0, 0};
  for (long long i = 0; i < rows * cols; ++i) {
    const unsigned int code = (bytes[i / 4] >> (2 * (i % 4))) & 3u;
    ASSERT_NE(code, 3u) << "value " << i;
    EXPECT_EQ(code, ternary::dummyCode(42, static_cast<unsigned long long>(i)));
    ++counts[ternary::codeValue(code) + 1];
  }
  for (int c : counts) // 16384 values, about a third each
    EXPECT_NEAR(c, rows * cols / 3.0, rows * cols * 0.03);
}

} // namespace
} // namespace ninfer
