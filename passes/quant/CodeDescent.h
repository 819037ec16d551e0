// Coordinate descent on the codes of a quantized tensor (as QuantEase does
// after GPTQ): with every scale kept, each code in turn is moved to the level
// that minimizes the output error tr(E Hd E^T) given all the others, sweep
// after sweep. GPTQ fixes each column once, in order, against the columns not
// yet quantized; a later sweep can still trade a column's rounding against the
// columns after it. Every accepted move lowers the error, so the result is
// never worse than its start.
//
// Per row, with e = q - w and the gradient g = Hd e: moving column j by k
// levels of its step s_j changes the error by 2 k s_j g_j + Hd_jj s_j^2 k^2,
// so the best level is round(level_j - g_j / (Hd_jj s_j)) within the format's
// range, and g moves by Hd[:, j] s_j k.
#pragma once

#include "QuantCommon.h"

namespace ninfer {
namespace quant {

// Refines `tensor` (packed; its dequantized values too when present) of the
// weights w f32 [rows, cols] against Hd = h + damp I (h f64 [cols, cols]
// symmetric; a zero diagonal entry, a dead input channel, is taken as 1 with
// the weight 0, as GPTQ does). Returns tr(E Hd E^T) after `sweeps` sweeps.
Result<double> refineCodes(const float* w, const double* h, double damp, int sweeps, int threads,
                           QuantizedTensor& tensor);

} // namespace quant
} // namespace ninfer
