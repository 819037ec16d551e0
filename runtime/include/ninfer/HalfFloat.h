// f32 bit casts and f16 <-> f32 conversions (round to nearest even, bit for bit like
// cvt.rn.f16.f32) for the headers shared by the host (compiler, CPU executor) and NVRTC
// device code: no standard header, integer bit manipulation only.
#pragma once

#include "HostDevice.h"

namespace ninfer {

NINFER_HD inline unsigned int floatToBits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  unsigned int bits;
  __builtin_memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

NINFER_HD inline float bitsToFloat(unsigned int bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  __builtin_memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

NINFER_HD inline float halfBitsToFloat(unsigned short h) {
  const unsigned int sign = static_cast<unsigned int>(h & 0x8000u) << 16;
  const unsigned int exponent = (h >> 10) & 0x1Fu;
  const unsigned int mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) // inf and nan (payload kept)
    return bitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) // normal: rebias 15 -> 127
    return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24 is exact in f32 (at most 10 significant bits).
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return bitsToFloat(sign | floatToBits(magnitude));
}

NINFER_HD inline unsigned short floatToHalfBits(float value) {
  const unsigned int bits = floatToBits(value);
  const unsigned int sign = (bits >> 16) & 0x8000u;
  const unsigned int magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) // nan: a quiet nan
    return static_cast<unsigned short>(sign | 0x7E00u);
  if (magnitude >= 0x477FF000u) // >= 65520 rounds past the largest half (65504): inf
    return static_cast<unsigned short>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) { // >= 2^-14: normal half
    // Adding 0xFFF plus the lowest kept bit rounds the 13 dropped bits to nearest
    // even; a carry out of the mantissa correctly bumps the exponent.
    const unsigned int rounded = magnitude + 0xFFFu + ((magnitude >> 13) & 1u);
    return static_cast<unsigned short>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (magnitude <= 0x33000000u) // <= 2^-25: half of the smallest subnormal, ties to 0
    return static_cast<unsigned short>(sign);
  // Subnormal half: count units of 2^-24. value = m * 2^(e - 150) with the
  // implicit bit in m, so units = m >> (126 - e), rounded to nearest even.
  const unsigned int exponent = magnitude >> 23; // 102..112
  const unsigned int m = (magnitude & 0x7FFFFFu) | 0x800000u;
  const unsigned int shift = 126u - exponent; // 14..24
  const unsigned int kept = m >> shift;
  const unsigned int rest = m & ((1u << shift) - 1u);
  const unsigned int halfway = 1u << (shift - 1u);
  const unsigned int units =
      kept + ((rest > halfway || (rest == halfway && (kept & 1u))) ? 1u : 0u);
  return static_cast<unsigned short>(sign | units);
}

NINFER_HD inline float roundToHalf(float value) { return halfBitsToFloat(floatToHalfBits(value)); }

} // namespace ninfer
