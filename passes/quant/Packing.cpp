// Packing and reference decoding (see Packing.h). Rows are copied through
// aligned u32 buffers with memcpy, so the byte buffers are never read through a
// pointer of another type.
#include "Packing.h"

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace ninfer {
namespace quant {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the packed layout is little-endian u32 words, as on the GPU");

namespace {

template <int Bits> void packRowWords(int64_t cols, const uint8_t* codes, uint8_t* rowBytes) {
  using Packing = QuantPacking<Bits>;
  QuantUnit<Bits> unit;
  for (int64_t u = 0; u < cols / kQuantUnitValues; ++u) {
    Packing::packUnit(codes + u * kQuantUnitValues, unit.words);
    std::memcpy(rowBytes + u * Packing::kUnitBytes, unit.words, sizeof(unit));
  }
}

template <int Bits> void unpackRowWords(int64_t cols, const uint8_t* rowBytes, uint8_t* codes) {
  using Packing = QuantPacking<Bits>;
  QuantUnit<Bits> unit;
  for (int64_t u = 0; u < cols / kQuantUnitValues; ++u) {
    std::memcpy(unit.words, rowBytes + u * Packing::kUnitBytes, sizeof(unit));
    Packing::unpackUnit(unit.words, codes + u * kQuantUnitValues);
  }
}

template <int Bits, int Group>
void dequantizeRows(int64_t rows, int64_t cols, const uint8_t* packed, float* out) {
  using Format = QuantFormat<Bits, Group>;
  const int64_t weightBytes = Format::rowWeightBytes(cols);
  const int64_t groups = cols / Group;
  std::vector<unsigned int> words(weightBytes / 4);
  const int64_t scaleBytes = Format::rowScaleBytes(cols);
  std::vector<unsigned short> scales(scaleBytes / 2);
  const uint8_t* scalePlane = packed + quantScalePlaneOffset(Bits, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(words.data(), packed + r * weightBytes, weightBytes);
    std::memcpy(scales.data(), scalePlane + r * scaleBytes, scaleBytes);
    for (int64_t g = 0; g < groups; ++g)
      Format::dequantizeGroup(words.data(), scales.data(), g, out + r * cols + g * Group);
  }
}

template <int Bits>
void dequantizeRowsByGroup(int group, int64_t rows, int64_t cols, const uint8_t* packed,
                           float* out) {
  switch (group) {
  case kQuantK16Group:
    if constexpr (Bits <= 4)
      return dequantizeRows<Bits, kQuantK16Group>(rows, cols, packed, out);
    return;
  case 32:
    return dequantizeRows<Bits, 32>(rows, cols, packed, out);
  case 64:
    return dequantizeRows<Bits, 64>(rows, cols, packed, out);
  default:
    return dequantizeRows<Bits, 128>(rows, cols, packed, out);
  }
}

// Calls f(std::integral_constant<int, bits>) for a supported bit width.
template <typename F> void withBits(int bits, F&& f) {
  switch (bits) {
  case 8:
    return f(std::integral_constant<int, 8>());
  case 6:
    return f(std::integral_constant<int, 6>());
  case 5:
    return f(std::integral_constant<int, 5>());
  case 4:
    return f(std::integral_constant<int, 4>());
  case 3:
    return f(std::integral_constant<int, 3>());
  default:
    return f(std::integral_constant<int, 2>());
  }
}

} // namespace

void packRow(const QuantSpec& spec, int64_t rows, int64_t cols, int64_t row, const uint8_t* codes,
             const uint16_t* scales, uint8_t* packed) {
  uint8_t* rowBytes = packed + row * quantRowWeightBytes(spec.bits, cols);
  withBits(spec.bits,
           [&](auto bits) { packRowWords<decltype(bits)::value>(cols, codes, rowBytes); });
  const int64_t scaleBytes = quantRowScaleBytes(spec.groupSize, cols);
  std::memcpy(packed + quantScalePlaneOffset(spec.bits, rows, cols) + row * scaleBytes, scales,
              scaleBytes);
}

void unpackRow(const QuantSpec& spec, int64_t rows, int64_t cols, int64_t row,
               const uint8_t* packed, uint8_t* codes, uint16_t* scales) {
  const uint8_t* rowBytes = packed + row * quantRowWeightBytes(spec.bits, cols);
  withBits(spec.bits,
           [&](auto bits) { unpackRowWords<decltype(bits)::value>(cols, rowBytes, codes); });
  const int64_t scaleBytes = quantRowScaleBytes(spec.groupSize, cols);
  std::memcpy(scales, packed + quantScalePlaneOffset(spec.bits, rows, cols) + row * scaleBytes,
              scaleBytes);
}

Status dequantizePacked(const QuantSpec& spec, int64_t rows, int64_t cols, const uint8_t* packed,
                        uint64_t packedBytes, float* out) {
  NINFER_RETURN_IF_ERROR(validateSpec(spec, rows, cols));
  const uint64_t expected = quantTensorBytes(spec.bits, spec.groupSize, rows, cols);
  if (packedBytes != expected)
    return Status::error("quant: packed tensor has " + std::to_string(packedBytes) +
                         " bytes, expected " + std::to_string(expected));
  withBits(spec.bits, [&](auto bits) {
    dequantizeRowsByGroup<decltype(bits)::value>(spec.groupSize, rows, cols, packed, out);
  });
  return Status::ok();
}

} // namespace quant
} // namespace ninfer
