// The GPTQ target for sequential calibration against the float model (as
// GPTAQ's asymmetric calibration): the tensor's input X comes from the model
// with the tensors before it quantized, X_float from the float model, and the
// output error to minimize is sum_t |W x_float_t - Q x_t|^2. For one row w
// that is q^T H q - 2 q^T (H + D) w + const with H = X^T X and
// D = X^T (X_float - X), i.e. (q - w')^T H (q - w') + const with
//   w' = w + H^-1 D w.
// So GPTQ on H with the weights w' minimizes the asymmetric error: the
// correction is where the errors of the tensors before are undone. H is the
// damped (and shrunk) H GPTQ runs on, which keeps H^-1 of a small sample tame.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>
#include <vector>

namespace ninfer {
namespace quant {

// w' = w + Hd^-1 D w for every row of w (f32 [rows, cols]), Hd = h + damp I
// with a zero diagonal entry (a dead input channel) taken as 1, as GPTQ does.
// h: f64 [cols, cols] symmetric; d: f64 [cols, cols], d[i * cols + j] = D_ij.
// Fails when Hd is not positive definite.
Result<std::vector<float>> shiftToFloatTarget(const float* w, int64_t rows, int64_t cols,
                                              const double* h, double damp, const double* d,
                                              int threads);

} // namespace quant
} // namespace ninfer
