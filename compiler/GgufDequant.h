// ggml's tensor encodings decoded to f32, block by block, as ggml's reference
// dequantize_row_* functions decode them: the float types, the legacy block types
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), the K-quants (Q2_K .. Q6_K) and the 4-bit i-quants
// (IQ4_NL, IQ4_XS). The others (IQ1..IQ3, TQ*, MXFP4) are refused by name.
#pragma once

#include <cstdint>

namespace ninfer {

// A block of 32 values of a legacy type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) as unsigned codes:
// value = (code - offset) * d, or with a min (Q4_1, Q5_1) code * d + m (m: the f16 after d).
struct LegacyBlock {
  uint16_t scaleBits = 0; // d, f16
  int offset = 0;
  bool hasMin = false;
};
LegacyBlock ggmlLegacyCodes(uint32_t type, const uint8_t* block, uint8_t* codes);

// Whether dequantizeGgmlRow decodes ggml type `type`.
bool canDequantizeGgml(uint32_t type);

// Decodes `values` values (whole blocks of the type) from `src` into `dst`.
void dequantizeGgmlRow(uint32_t type, const uint8_t* src, float* dst, int64_t values);

} // namespace ninfer
