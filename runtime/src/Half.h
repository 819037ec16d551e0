// Host-side bf16 <-> f32 conversions with round-to-nearest-even, bit for bit what
// __float2bfloat16_rn produces, so the CPU executor sees the same rounded values as the
// GPU (f16: ninfer/HalfFloat.h, shared with the device code).
#pragma once

#include "ninfer/HalfFloat.h"

#include <cstdint>

namespace ninfer {

inline float bf16ToFloat(uint16_t b) { return bitsToFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t floatToBf16(float value) {
  const uint32_t bits = floatToBits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) // nan: keep it a quiet nan
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

inline float roundThroughBf16(float value) { return bf16ToFloat(floatToBf16(value)); }

} // namespace ninfer
