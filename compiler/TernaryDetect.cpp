// Exact ternary detection over the raw bit patterns of a tensor: a value's
// magnitude is its pattern without the sign bit, so "all values in {-s, 0, +s}"
// is "every non-zero magnitude pattern is the same one". No float compare, no
// tolerance: what is detected packs losslessly.
#include "TernaryDetect.h"

#include <cstring>
#include <unordered_set>
#include <vector>

namespace ninfer {
namespace {

// f16 pattern -> f32 (exact: every f16 is an f32).
float halfPatternToFloat(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1Fu) {
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else {
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f; // 2^-24
    std::memcpy(&bits, &magnitude, 4);
    bits |= sign;
  }
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// Format facts for the scan: element size, sign bit, exponent mask.
struct Pattern {
  int bytes;
  uint32_t signBit;
  uint32_t exponentMask;
};

Pattern patternOf(WeightDType dtype) {
  switch (dtype) {
  case WeightDType::F32:
    return {4, 0x80000000u, 0x7F800000u};
  case WeightDType::F16:
    return {2, 0x8000u, 0x7C00u};
  case WeightDType::BF16:
    return {2, 0x8000u, 0x7F80u};
  default:
    return {0, 0, 0};
  }
}

float patternToFloat(WeightDType dtype, uint32_t bits) {
  float value = 0.0f;
  if (dtype == WeightDType::F32) {
    std::memcpy(&value, &bits, 4);
  } else if (dtype == WeightDType::BF16) {
    const uint32_t wide = bits << 16;
    std::memcpy(&value, &wide, 4);
  } else {
    value = halfPatternToFloat(bits);
  }
  return value;
}

} // namespace

const char* ternaryKindName(TernaryKind kind) {
  switch (kind) {
  case TernaryKind::NotTernary:
    return "not ternary";
  case TernaryKind::PerTensor:
    return "ternary (one scale per tensor)";
  case TernaryKind::PerRow:
    return "ternary per row (one scale per row)";
  }
  return "?";
}

TernaryInfo detectTernary(const TensorRef& tensor) {
  TernaryInfo info;
  const Pattern pattern = patternOf(tensor.dtype);
  if (!tensor.data || pattern.bytes == 0 || tensor.shape.size() != 2 || tensor.shape[0] <= 0 ||
      tensor.shape[1] <= 0)
    return info;
  const uint64_t rows = static_cast<uint64_t>(tensor.shape[0]);
  const uint64_t cols = static_cast<uint64_t>(tensor.shape[1]);
  if (tensor.bytes < rows * cols * static_cast<uint64_t>(pattern.bytes))
    return info;

  // Distinct values: a bitmap for 16-bit patterns, a capped set for f32.
  std::vector<bool> seen16(pattern.bytes == 2 ? 65536 : 0, false);
  std::unordered_set<uint32_t> seen32;
  auto noteDistinct = [&](uint32_t bits) {
    if (pattern.bytes == 2) {
      if (!seen16[bits]) {
        seen16[bits] = true;
        ++info.distinctValues;
      }
    } else if (!info.distinctCapped && seen32.insert(bits).second) {
      ++info.distinctValues;
      info.distinctCapped = info.distinctValues >= kDistinctCap;
    }
  };

  bool finite = true;
  bool tensorUniform = true; // one magnitude over the whole tensor
  bool rowsUniform = true;   // one magnitude within every row
  uint32_t tensorMagnitude = 0;
  uint64_t zeros = 0;
  const uint8_t* data = tensor.data;
  for (uint64_t r = 0; r < rows; ++r) {
    uint32_t rowMagnitude = 0;
    for (uint64_t c = 0; c < cols; ++c) {
      uint32_t bits = 0;
      const uint8_t* p = data + (r * cols + c) * static_cast<uint64_t>(pattern.bytes);
      if (pattern.bytes == 2)
        bits = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
      else
        std::memcpy(&bits, p, 4);
      if ((bits & pattern.exponentMask) == pattern.exponentMask)
        finite = false;
      const uint32_t magnitude = bits & ~pattern.signBit;
      noteDistinct(magnitude == 0 ? 0 : bits); // -0 and +0 are one value
      if (magnitude == 0) {
        ++zeros;
        continue;
      }
      if (rowMagnitude == 0)
        rowMagnitude = magnitude;
      else if (magnitude != rowMagnitude)
        rowsUniform = false;
      if (tensorMagnitude == 0)
        tensorMagnitude = magnitude;
      else if (magnitude != tensorMagnitude)
        tensorUniform = false;
    }
  }
  if (!finite || tensorMagnitude == 0 || !rowsUniform)
    return info;
  info.kind = tensorUniform ? TernaryKind::PerTensor : TernaryKind::PerRow;
  info.scale = tensorUniform ? patternToFloat(tensor.dtype, tensorMagnitude) : 0.0f;
  info.zeroFraction = static_cast<double>(zeros) / static_cast<double>(rows * cols);
  return info;
}

} // namespace ninfer
