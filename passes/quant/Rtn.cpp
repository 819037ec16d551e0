// Round-to-nearest tensor quantization (see Rtn.h). Rows are independent, so
// they are spread over threads in chunks; each row is packed as soon as it is
// done.
#include "Rtn.h"

#include "Packing.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ninfer {
namespace quant {

void quantizeRowRtn(const float* w, int64_t cols, const QuantSpec& spec, const float* importance,
                    const ScaleSearchOptions& search, uint8_t* codes, uint16_t* scales,
                    float* dequantized) {
  const int group = spec.groupSize;
  if (spec.isK16()) { // per unit: its scale d, then each group's sub-scale; records out
    for (int64_t u = 0; u < cols / kQuantUnitValues; ++u) {
      const int64_t unitFirst = u * kQuantUnitValues;
      const float* unitImportance = importance ? importance + unitFirst : nullptr;
      const uint16_t unitScale =
          chooseK16UnitScale(w + unitFirst, unitImportance, spec.bits, search);
      int subs[kQuantUnitValues / kQuantK16Group];
      for (int j = 0; j < kQuantUnitValues / kQuantK16Group; ++j) {
        const int64_t first = unitFirst + j * group;
        subs[j] = searchK16SubScale(w + first, importance ? importance + first : nullptr, group,
                                    spec.bits, unitScale, search);
        quantizeGroup(w + first, group, spec.bits, k16Scale(unitScale, subs[j]), codes + first,
                      dequantized ? dequantized + first : nullptr);
      }
      setK16Record(scales + 4 * u, unitScale, subs);
    }
    return;
  }
  for (int64_t g = 0; g < cols / group; ++g) {
    const int64_t first = g * group;
    scales[g] = searchGroupScale(w + first, importance ? importance + first : nullptr, group,
                                 spec.bits, search);
    quantizeGroup(w + first, group, spec.bits, scales[g], codes + first,
                  dequantized ? dequantized + first : nullptr);
  }
}

Status checkNonNegative(const float* values, int64_t count, const char* what) {
  for (int64_t i = 0; i < count; ++i)
    if (!(values[i] >= 0.0f) || !std::isfinite(values[i]))
      return Status::error(std::string("quant: ") + what + " must be finite and >= 0 (index " +
                           std::to_string(i) + ")");
  return Status::ok();
}

Result<QuantizedTensor> quantizeRtn(const float* w, int64_t rows, int64_t cols,
                                    const QuantSpec& spec, const float* importance,
                                    const RtnOptions& options) {
  NINFER_RETURN_IF_ERROR(validateSpec(spec, rows, cols));
  NINFER_RETURN_IF_ERROR(checkFinite(w, rows * cols, "weight"));
  if (importance)
    NINFER_RETURN_IF_ERROR(checkNonNegative(importance, cols, "importance"));

  QuantizedTensor out;
  out.spec = spec;
  out.rows = rows;
  out.cols = cols;
  out.packed.assign(quantTensorBytes(spec.bits, spec.groupSize, rows, cols), 0);
  if (options.keepDequantized)
    out.dequantized.resize(rows * cols);

  constexpr int64_t kRowsPerItem = 16;
  const int64_t items = (rows + kRowsPerItem - 1) / kRowsPerItem;
  parallelFor(items, options.threads, [&](int64_t item) {
    std::vector<uint8_t> codes(cols);
    std::vector<uint16_t> scales(cols / spec.groupSize);
    const int64_t end = std::min(rows, (item + 1) * kRowsPerItem);
    for (int64_t r = item * kRowsPerItem; r < end; ++r) {
      quantizeRowRtn(w + r * cols, cols, spec, importance, options.search, codes.data(),
                     scales.data(), options.keepDequantized ? &out.dequantized[r * cols] : nullptr);
      packRow(spec, rows, cols, r, codes.data(), scales.data(), out.packed.data());
    }
  });
  return out;
}

} // namespace quant
} // namespace ninfer
