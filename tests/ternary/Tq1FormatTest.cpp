// The TQ1 format header (base 3, five values a byte): sizes and bits per weight
// including padding and scale, the multiply-and-shift decode of every byte
// (one at a time and two at a time in 16-bit lanes, as the GPU does), value
// positions, lossless pack -> dequantize round trips with padded rows, and the
// dummy fill shared by the CUDA fill kernel and the CPU executor.
#include "ninfer/TernaryDType.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace ninfer {
namespace {

double bitsPerWeight(long long rows, long long cols) {
  return 8.0 * double(tq1::tensorBytes(rows, cols)) / double(rows * cols);
}

TEST(Tq1Format, SizesAndBitsPerWeight) {
  EXPECT_TRUE(tq1::isPackableCols(16));
  EXPECT_TRUE(tq1::isPackableCols(4096));
  EXPECT_FALSE(tq1::isPackableCols(8));
  EXPECT_FALSE(tq1::isPackableCols(0));
  EXPECT_EQ(tq1::rowBytes(16), 16);
  EXPECT_EQ(tq1::rowBytes(80), 16);
  EXPECT_EQ(tq1::rowBytes(96), 32);
  EXPECT_EQ(tq1::rowBytes(14336), 16 * 180); // 179.2 chunks
  EXPECT_EQ(tq1::scaleOffset(3, 512), 3 * 112);
  EXPECT_EQ(tq1::tensorBytes(4096, 4096), 4096ll * 832 + 4);
  // 1.6 bits when rows are whole chunks; padding and the scale counted.
  EXPECT_NEAR(bitsPerWeight(4096, 4000), 1.6, 1e-5); // + 32 scale bits
  EXPECT_NEAR(bitsPerWeight(4096, 4096), 1.625, 1e-5);
  EXPECT_NEAR(bitsPerWeight(14336, 4096), 1.625, 1e-5);
  EXPECT_NEAR(bitsPerWeight(4096, 14336), 8.0 * 2880 / 14336, 1e-5);
  EXPECT_NEAR(bitsPerWeight(512, 512), 1.75, 1e-3);
  EXPECT_LE(bitsPerWeight(1536, 512), 2.0);
  // The plan dtype helpers pick the TQ1 rules for DType 17 and TQ2 for 16.
  EXPECT_EQ(ternary::tensorBytesOf(ternary::kPlanDTypeTq1, 7, 96), tq1::tensorBytes(7, 96));
  EXPECT_EQ(ternary::tensorBytesOf(ternary::kPlanDTypeTq2, 7, 128), ternary::tensorBytes(7, 128));
  EXPECT_TRUE(ternary::isPackableColsOf(ternary::kPlanDTypeTq1, 96));
  EXPECT_FALSE(ternary::isPackableColsOf(ternary::kPlanDTypeTq2, 96));
  EXPECT_FALSE(ternary::isTernaryPlanDType(15));
}

TEST(Tq1Format, EveryByteDecodes) {
  // All 3^5 digit strings survive encode -> decode.
  for (unsigned int v = 0; v < 243; ++v) {
    const unsigned int d[5] = {v / 81, v / 27 % 3, v / 9 % 3, v / 3 % 3, v % 3};
    const unsigned int b = tq1::encodeDigits(d);
    ASSERT_LE(b, 255u);
    for (int i = 0; i < 5; ++i)
      ASSERT_EQ(tq1::digitAt(b, i), d[i]) << "v " << v << " digit " << i;
  }
  // Any byte (also 243..255, never written) decodes to digits 0..2.
  for (unsigned int b = 0; b < 256; ++b)
    for (int i = 0; i < 5; ++i)
      ASSERT_LE(tq1::digitAt(b, i), 2u);
}

// The two-bytes-a-register decode gives digitAt's digits for every pair.
TEST(Tq1Format, LaneDecodeMatchesByteDecode) {
  for (unsigned int lo = 0; lo < 256; ++lo)
    for (unsigned int hi = 0; hi < 256; ++hi) {
      const unsigned int word = lo | (hi << 8) | (hi << 16) | (lo << 24);
      unsigned int even = tq1::evenLanes(word); // bytes 0 (lo), 2 (hi)
      unsigned int odd = tq1::oddLanes(word);   // bytes 1 (hi), 3 (lo)
      for (int i = 0; i < 5; ++i) {
        even *= 3;
        odd *= 3;
        ASSERT_EQ((even >> 8) & 3u, tq1::digitAt(lo, i));
        ASSERT_EQ((even >> 24) & 3u, tq1::digitAt(hi, i));
        ASSERT_EQ((odd >> 8) & 3u, tq1::digitAt(hi, i));
        ASSERT_EQ((odd >> 24) & 3u, tq1::digitAt(lo, i));
        even &= tq1::kLaneMask;
        odd &= tq1::kLaneMask;
      }
    }
}

// The tensor-core GEMMs' decode: digit i of a chunk's four words, as f16 pairs, is the
// chunk's run of 16 values 80 c + 16 i .. +15 in order (-s, 0, +s; padding 0).
TEST(Tq1Format, DigitPairsAreARunOfAChunk) {
  const long long cols = 4096; // 52 chunks, the last one 16 values and 64 of padding
  const unsigned int scaleBits = 0x2570u; // an f16 near 0.0215
  std::mt19937 rng(7);
  std::vector<signed char> t(static_cast<size_t>(cols));
  for (auto& v : t)
    v = static_cast<signed char>(int(rng() % 3) - 1);
  std::vector<unsigned char> row(size_t(tq1::rowBytes(cols)));
  tq1::packRow(t.data(), cols, row.data());
  const auto expected = [&](long long k) -> unsigned int {
    const int v = k < cols ? t[size_t(k)] : 0;
    return v == 0 ? 0u : v > 0 ? scaleBits : scaleBits | 0x8000u;
  };
  for (long long c = 0; c < tq1::chunks(cols); ++c)
    for (int i = 0; i < tq1::kDigits; ++i)
      for (int q = 0; q < tq1::kWordsPerChunk; ++q) {
        unsigned int word;
        std::memcpy(&word, row.data() + c * tq1::kChunkBytes + 4 * q, 4);
        unsigned int pairs[2];
        tq1::digitPairsF16(word, i, scaleBits, pairs);
        const long long k = tq1::valueIndex(c, 4 * q, i);
        for (int e = 0; e < 4; ++e)
          ASSERT_EQ((pairs[e / 2] >> (16 * (e % 2))) & 0xFFFFu, expected(k + e))
              << "chunk " << c << " digit " << i << " value " << k + e;
      }
}

// A single non-zero value lands in byte 16 c + j, digit i of k = 80 c + 16 i + j.
TEST(Tq1Format, ValuePositions) {
  const long long cols = 176; // 3 chunks, the last one 16 values
  for (long long k : {0ll, 5ll, 16ll, 79ll, 80ll, 95ll, 143ll, 160ll, 175ll}) {
    std::vector<signed char> t(size_t(cols), 0);
    t[size_t(k)] = -1;
    std::vector<unsigned char> row(size_t(tq1::rowBytes(cols)));
    tq1::packRow(t.data(), cols, row.data());
    const long long chunk = k / 80, digit = (k % 80) / 16, byte = k % 16;
    ASSERT_EQ(tq1::valueIndex(chunk, int(byte), int(digit)), k);
    for (size_t b = 0; b < row.size(); ++b)
      for (int i = 0; i < 5; ++i) {
        const bool target = (long long)b == chunk * 16 + byte && i == digit;
        EXPECT_EQ(tq1::digitAt(row[b], i), target ? 0u : 1u) << "k " << k << " byte " << b;
      }
  }
}

TEST(Tq1Format, PackDequantizeRoundTrip) {
  std::mt19937 rng(11);
  for (long long cols : {16ll, 80ll, 96ll, 512ll, 4096ll, 14336ll}) {
    const long long rows = 5;
    const float scale = 0.0213623046875f;
    std::vector<signed char> t(size_t(rows * cols));
    for (auto& v : t)
      v = static_cast<signed char>(int(rng() % 3) - 1);
    std::vector<unsigned char> bytes(size_t(tq1::tensorBytes(rows, cols)), 0xAB);
    for (long long r = 0; r < rows; ++r)
      tq1::packRow(t.data() + r * cols, cols, bytes.data() + r * tq1::rowBytes(cols));
    tq1::writeScale(bytes.data(), rows, cols, scale);
    EXPECT_EQ(tq1::readScale(bytes.data(), rows, cols), scale);
    float bits;
    std::memcpy(&bits, bytes.data() + tq1::scaleOffset(rows, cols), 4);
    EXPECT_EQ(bits, scale);
    std::vector<float> out(static_cast<size_t>(cols));
    for (long long r = 0; r < rows; ++r) {
      ternary::dequantizeRowOf(ternary::kPlanDTypeTq1, bytes.data(), rows, cols, r, out.data());
      for (long long k = 0; k < cols; ++k)
        ASSERT_EQ(out[size_t(k)], float(t[size_t(r * cols + k)]) * scale)
            << "cols " << cols << " [" << r << ", " << k << "]";
      // Padding digits are written as t = 0.
      const unsigned char* row = bytes.data() + r * tq1::rowBytes(cols);
      for (long long c = 0; c < tq1::chunks(cols); ++c)
        for (int j = 0; j < 16; ++j)
          for (int i = 0; i < 5; ++i)
            if (tq1::valueIndex(c, j, i) >= cols) {
              ASSERT_EQ(tq1::digitAt(row[c * 16 + j], i), 1u);
            }
    }
  }
}

TEST(Tq1Format, DummyFillIsValidTernary) {
  const long long rows = 64, cols = 4096;
  const unsigned long long units = (unsigned long long)tq1::tensorBytes(rows, cols) / 2;
  std::vector<unsigned char> bytes(size_t(units * 2));
  const float scale = 0.03125f;
  for (unsigned long long u = 0; u < units; ++u) {
    const unsigned short unit = ternary::dummyUnitOf(ternary::kPlanDTypeTq1, 5, u, units, scale);
    std::memcpy(bytes.data() + 2 * u, &unit, 2);
  }
  EXPECT_EQ(tq1::readScale(bytes.data(), rows, cols), scale);
  long long counts[3] = {0, 0, 0};
  std::vector<float> out(static_cast<size_t>(cols));
  for (long long r = 0; r < rows; ++r) {
    tq1::dequantizeRow(bytes.data(), rows, cols, r, out.data());
    for (float v : out) {
      ASSERT_TRUE(v == scale || v == -scale || v == 0.0f) << v;
      ++counts[v > 0 ? 2 : v < 0 ? 0 : 1];
    }
  }
  for (long long count : counts) // about a third each
    EXPECT_NEAR(double(count) / double(rows * cols), 1.0 / 3.0, 0.01);
}

} // namespace
} // namespace ninfer
