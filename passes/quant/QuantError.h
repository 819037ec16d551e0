// How much a quantized weight tensor changes the layer output, measured on the
// calibration statistics: for W -> Q with E = Q - W and H = X^T X,
//   ||X E^T||_F^2 = tr(E H E^T)   (summed squared output error over calibration
//                                  tokens), and
//   relative error = tr(E H E^T) / tr(W H W^T),
// the number the bit allocator compares across tensors and formats (scale-free:
// it does not depend on the number of calibration tokens).
//
// Cost is rows * cols^2 / 2 multiply-adds; maxRows evaluates an evenly spaced
// subset of rows instead (the same rows for both traces of a ratio), which is an
// unbiased estimate when rows are alike.
#pragma once

#include "QuantCommon.h"

#include <vector>

namespace ninfer {
namespace quant {

struct ErrorOptions {
  int64_t maxRows = 0; // 0 = every row
  int threads = 0;     // 0 = all hardware threads
};

// The rows used when at most maxRows of `rows` are evaluated (0 = all), in order.
std::vector<int64_t> sampleRows(int64_t rows, int64_t maxRows);

// sum over the given rows r of (a_r - b_r)^T H (a_r - b_r); b may be null (then
// a_r^T H a_r). a, b f32 [*, cols] row-major; H f64 [cols, cols] symmetric (only
// its upper triangle is read).
double weightedSquaredNorm(const float* a, const float* b, int64_t cols, const double* h,
                           const std::vector<int64_t>& rowIndices, int threads);

// tr(E H E^T) over the sampled rows, scaled by rows / sampled rows.
Result<double> outputError(const float* w, const float* q, int64_t rows, int64_t cols,
                           const double* h, const ErrorOptions& options = {});

// tr(E H E^T) / tr(W H W^T) over the same sampled rows. Fails if W H W^T is 0.
Result<double> relativeOutputError(const float* w, const float* q, int64_t rows, int64_t cols,
                                   const double* h, const ErrorOptions& options = {});

} // namespace quant
} // namespace ninfer
