// Host-side packing into (and reference decoding of) the tensor layout of
// ninfer/QuantFormats.h: per row, codes in 128-value units in the weight plane
// and fp16 scales in the scale plane. All bit-level work is done by the header's
// templates, so the packer and the device/CPU readers share one definition.
#pragma once

#include "QuantCommon.h"

#include <cstdint>

namespace ninfer {
namespace quant {

// Writes row `row` of a [rows, cols] tensor: `codes` holds cols codes (each below
// 2^bits), `scales` the row's scale plane as 16-bit units: cols / groupSize fp16
// bit patterns, or for K16 one 4-unit record per 128 values. `packed` has
// quantTensorBytes(...) bytes. The spec and shape must be valid (validateSpec).
void packRow(const QuantSpec& spec, int64_t rows, int64_t cols, int64_t row, const uint8_t* codes,
             const uint16_t* scales, uint8_t* packed);

// The codes and scales of row `row`, read back through the header's accessors.
void unpackRow(const QuantSpec& spec, int64_t rows, int64_t cols, int64_t row,
               const uint8_t* packed, uint8_t* codes, uint16_t* scales);

// Reference decoding of a whole tensor to f32 [rows, cols] with the header's
// dequantizeGroup (what a CPU executor does). Checks the spec, shape and size.
Status dequantizePacked(const QuantSpec& spec, int64_t rows, int64_t cols, const uint8_t* packed,
                        uint64_t packedBytes, float* out);

} // namespace quant
} // namespace ninfer
