// Host-side f16 / bf16 <-> f32 conversions with round-to-nearest-even, bit for
// bit what the CUDA intrinsics (__float2half_rn, __float2bfloat16_rn) produce, so
// the CPU executor sees the same rounded values as the GPU.
#pragma once

#include <cstdint>
#include <cstring>

namespace ninfer {

inline uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) // inf / nan: keep the payload
    return bitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0)
    return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0)
    return bitsToFloat(sign);
  // Subnormal half: normalize into a regular float.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3FFu;
  return bitsToFloat(sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13));
}

inline uint16_t floatToHalf(float value) {
  const uint32_t bits = floatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t absBits = bits & 0x7FFFFFFFu;
  if (absBits >= 0x7F800000u) // inf or nan (nan stays a quiet nan)
    return sign | (absBits > 0x7F800000u ? 0x7E00u : 0x7C00u);
  if (absBits >= 0x477FF000u) // rounds to >= 65520: overflows to inf
    return sign | 0x7C00u;
  const int exponent = static_cast<int>(absBits >> 23) - 127;
  if (exponent >= -14) {
    // Normal half: drop 13 mantissa bits with round-to-nearest-even; a carry into
    // the exponent is exactly right.
    uint32_t rounded = absBits + 0xFFFu + ((absBits >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
  }
  if (exponent < -25) // below half the smallest subnormal: rounds to zero
    return sign;
  // Subnormal half: value = m * 2^-24 with m = full mantissa >> shift.
  const uint32_t mantissa = (absBits & 0x7FFFFFu) | 0x800000u;
  const int shift = -exponent - 1; // 14..24
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  uint32_t result = kept;
  if (rest > halfway || (rest == halfway && (kept & 1u)))
    ++result;
  return sign | static_cast<uint16_t>(result);
}

inline float bf16ToFloat(uint16_t b) { return bitsToFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t floatToBf16(float value) {
  const uint32_t bits = floatBits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) // nan: keep it a quiet nan
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

inline float roundThroughHalf(float value) { return halfToFloat(floatToHalf(value)); }
inline float roundThroughBf16(float value) { return bf16ToFloat(floatToBf16(value)); }

} // namespace ninfer
