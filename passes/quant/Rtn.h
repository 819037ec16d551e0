// Round-to-nearest quantization of a weight tensor, group by group, with the
// scale search of GroupQuant.h. The baseline every other method is measured
// against, and the inner quantizer of the AWQ scale search. With importance =
// diag(H) it minimizes the error each group adds to the layer output when input
// channels are uncorrelated (the "imatrix" idea of llama.cpp).
#pragma once

#include "GroupQuant.h"
#include "QuantCommon.h"

namespace ninfer {
namespace quant {

struct RtnOptions {
  ScaleSearchOptions search;
  int threads = 0;             // 0 = all hardware threads
  bool keepDequantized = true; // fill QuantizedTensor::dequantized
};

// One row of cols values: codes [cols], scales [cols / groupSize] fp16 bits (K16:
// the row's records, cols / 32 units),
// dequantized [cols] (may be null). importance: per column, may be null.
void quantizeRowRtn(const float* w, int64_t cols, const QuantSpec& spec, const float* importance,
                    const ScaleSearchOptions& search, uint8_t* codes, uint16_t* scales,
                    float* dequantized);

// W f32 [rows, cols] -> packed tensor. importance: cols values >= 0 (e.g. the
// diagonal of H), or nullptr for plain squared error.
Result<QuantizedTensor> quantizeRtn(const float* w, int64_t rows, int64_t cols,
                                    const QuantSpec& spec, const float* importance,
                                    const RtnOptions& options = {});

// Checks an importance / statistics vector: finite and >= 0.
Status checkNonNegative(const float* values, int64_t count, const char* what);

} // namespace quant
} // namespace ninfer
