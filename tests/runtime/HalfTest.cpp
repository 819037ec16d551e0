// f16/bf16 conversions against the compiler's _Float16 and against the
// definition of round-to-nearest-even.
#include "Half.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>

namespace ninfer {
namespace {

uint16_t referenceHalf(float v) {
  const _Float16 h = static_cast<_Float16>(v);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

TEST(Half, HalfToFloatIsExactForEveryPattern) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    _Float16 h;
    const uint16_t b = uint16_t(bits);
    std::memcpy(&h, &b, 2);
    const float expected = float(h);
    const float actual = halfBitsToFloat(b);
    if (std::isnan(expected))
      EXPECT_TRUE(std::isnan(actual)) << bits;
    else
      EXPECT_EQ(floatToBits(expected), floatToBits(actual)) << "half bits " << bits;
  }
}

TEST(Half, FloatToHalfRoundsLikeTheCompiler) {
  std::mt19937 rng(7);
  std::vector<float> values = {0.0f,  -0.0f,    1.0f,     65504.0f, 65519.0f, 65520.0f, 1e9f,
                               -1e9f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f,  INFINITY, -INFINITY};
  // Every half value, the midpoints between neighbours (ties) and points just off them.
  for (uint32_t bits = 0; bits < 0x7C00; ++bits) {
    const float lo = halfBitsToFloat(uint16_t(bits)), hi = halfBitsToFloat(uint16_t(bits + 1));
    const float mid = lo + (hi - lo) / 2;
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  for (int i = 0; i < 100000; ++i)
    values.push_back(bitsToFloat(rng()));
  for (float v : values) {
    if (std::isnan(v))
      continue;
    ASSERT_EQ(floatToHalfBits(v), referenceHalf(v)) << "value " << v;
  }
  EXPECT_TRUE(std::isnan(halfBitsToFloat(floatToHalfBits(NAN))));
}

TEST(Half, FloatToHalfAtTheRoundingEdges) {
  auto check = [](uint32_t bits) {
    const float v = bitsToFloat(bits);
    if (!std::isnan(v)) {
      ASSERT_EQ(floatToHalfBits(v), referenceHalf(v)) << std::hex << bits;
    }
  };
  // Ties in the normal and subnormal ranges, the overflow threshold, the smallest
  // subnormal and its half, inf.
  const uint32_t edges[] = {0x00000000, 0x33000000, 0x33000001, 0x337FFFFF, 0x33800000,
                            0x33C00000, 0x387FC000, 0x387FE000, 0x387FF000, 0x38800000,
                            0x38801000, 0x38803000, 0x3F800000, 0x3F801000, 0x3F803000,
                            0x477FE000, 0x477FEFFF, 0x477FF000, 0x7F7FFFFF, 0x7F800000};
  for (uint32_t e : edges) {
    check(e);
    check(e ^ 0x80000000u);
  }
  // Dense sweep of the subnormal and low normal range, where the rounding paths meet.
  for (uint32_t bits = 0x33000000; bits < 0x39000000; bits += 97)
    check(bits);
}

TEST(Half, Bf16RoundsToNearestEven) {
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const float v = bitsToFloat(rng());
    if (!std::isfinite(v))
      continue;
    const uint16_t b = floatToBf16(v);
    const double rounded = bf16ToFloat(b);
    // The two bf16 neighbours of v (truncation and one step away from zero).
    const uint16_t truncated = uint16_t(floatToBits(v) >> 16);
    const double down = bf16ToFloat(truncated);
    // One bf16 step away from zero; past the largest finite value that is 2^128.
    double up = bf16ToFloat(uint16_t(truncated + 1));
    if (std::isinf(up))
      up = std::copysign(std::ldexp(1.0, 128), up);
    const double dDown = std::fabs(double(v) - down), dUp = std::fabs(double(v) - up);
    if (dDown < dUp)
      ASSERT_EQ(rounded, down) << v;
    else if (dUp < dDown)
      ASSERT_EQ(rounded, std::isinf(rounded) ? std::copysign(INFINITY, up) : up) << v;
    else
      ASSERT_EQ(b % 2, 0) << "tie must go to even: " << v;
  }
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16ToFloat(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
}

} // namespace
} // namespace ninfer
