#include "GgufRepack.h"

#include "GgufDequant.h"
#include "GgufFile.h"

#include "QuantCommon.h"
#include "ninfer/QuantFormats.h"

#include <cstring>

namespace ninfer {
namespace {

template <int Bits>
void packRows(uint32_t type, int64_t rows, int64_t cols,
              const std::function<const uint8_t*(int64_t)>& rowData, std::vector<uint8_t>& out) {
  using Packing = quant::QuantPacking<Bits>;
  const int blockBytes = ggmlTypeTraits(type).blockBytes;
  const int64_t rowWeightBytes = quant::quantRowWeightBytes(Bits, cols);
  const int64_t scalePlane = quant::quantScalePlaneOffset(Bits, rows, cols);
  const int64_t groups = cols / 32;
  quant::parallelFor(rows, 0, [&](int64_t r) {
    const uint8_t* blocks = rowData(r);
    uint8_t* weights = out.data() + r * rowWeightBytes;
    uint8_t* scales = out.data() + scalePlane + r * groups * 2;
    uint8_t codes[quant::kQuantUnitValues];
    for (int64_t unit = 0; unit < cols / quant::kQuantUnitValues; ++unit) {
      for (int g = 0; g < 4; ++g) {
        const int64_t group = unit * 4 + g;
        const LegacyBlock block =
            ggmlLegacyCodes(type, blocks + group * blockBytes, codes + 32 * g);
        std::memcpy(scales + group * 2, &block.scaleBits, 2);
      }
      unsigned int words[Packing::kUnitWords];
      Packing::packUnit(codes, words);
      std::memcpy(weights + unit * Packing::kUnitBytes, words, Packing::kUnitBytes);
    }
  });
}

} // namespace

int exactQuantFormatOf(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
  case GgmlType::Q8_0:
    return quant::quantFormatIndex(8, 32);
  case GgmlType::Q5_0:
    return quant::quantFormatIndex(5, 32);
  case GgmlType::Q4_0:
    return quant::quantFormatIndex(4, 32);
  default:
    return -1;
  }
}

std::vector<uint8_t> repackGgmlRows(uint32_t type, int64_t rows, int64_t cols,
                                    const std::function<const uint8_t*(int64_t)>& rowData) {
  const auto traits =
      quant::quantFormatTraits(static_cast<quant::QuantFormatId>(exactQuantFormatOf(type)));
  std::vector<uint8_t> out(quant::quantTensorBytes(traits.bits, 32, rows, cols));
  if (traits.bits == 8)
    packRows<8>(type, rows, cols, rowData, out);
  else if (traits.bits == 5)
    packRows<5>(type, rows, cols, rowData, out);
  else
    packRows<4>(type, rows, cols, rowData, out);
  return out;
}

} // namespace ninfer
