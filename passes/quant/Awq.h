// AWQ-style activation-aware scaling (Lin et al., 2023): scale input channel j
// of the weights up by s_j and the activation down by 1/s_j (folded into the
// previous op, e.g. the RMSNorm weight), which leaves the float layer unchanged
// but gives channels with large activations finer quantization steps.
//
// Search, as in the paper: s_j = stat_j^alpha with stat_j = mean |x_j| over
// calibration tokens (or sqrt(H_jj) when mean |x| is not given), normalized by
// sqrt(max(s) min(s)), for alpha = 0, 1/grid, ..., (grid-1)/grid. Every
// candidate quantizes W diag(s) with RTN (importance H_jj / s_j^2: the diagonal
// of the scaled problem's Hessian) and is scored by the output error it leaves,
//   sum over the tensors of tr(E H E^T),  E = Q_s diag(1/s) - W,
// on the same calibration statistics H. alpha = 0 (s = 1, plain RTN) is the first
// candidate and only a strictly smaller error replaces it, so the search never
// does worse than no scaling on this measure.
//
// Several tensors that read the same input (q/k/v after the attention norm,
// gate/up after the MLP norm) share one scale vector: pass them together.
//
// Folding: with g the previous op's per-channel weight, the plan stores
// g' = g / s and the linear layers quantize W diag(s). When g' is rounded to a
// storage dtype, quantize W diag(g / g') instead so the product stays exact.
#pragma once

#include "GroupQuant.h"
#include "QuantCommon.h"

#include <vector>

namespace ninfer {
namespace quant {

struct AwqTensor {
  const float* weights; // f32 [rows, cols]
  int64_t rows;
};

struct AwqOptions {
  int grid = 20;       // alphas 0, 1/grid, ..., (grid-1)/grid
  int64_t maxRows = 0; // rows per tensor scored (evenly spaced); 0 = all
  int threads = 0;     // 0 = all hardware threads
  ScaleSearchOptions search;
};

struct AwqResult {
  std::vector<float> scales;        // s, per input channel (multiply W's columns by it)
  float alpha = 0.0f;               // chosen exponent
  double baseError = 0.0;           // summed tr(E H E^T) at alpha = 0 (plain RTN)
  double bestError = 0.0;           // the same at the chosen alpha (<= baseError)
  std::vector<double> errorByAlpha; // grid entries, for reports
};

// meanAbsX: cols values (mean |x| per input channel) or nullptr. h: f64 [cols, cols].
Result<AwqResult> searchAwqScales(const std::vector<AwqTensor>& tensors, int64_t cols,
                                  const double* h, const float* meanAbsX, const QuantSpec& spec,
                                  const AwqOptions& options = {});

// Per-channel scales s for one alpha (the candidate formula above).
std::vector<float> awqScales(const std::vector<float>& stat, float alpha);

// W diag(s): column j of every row multiplied by s_j (what gets quantized after folding).
std::vector<float> scaleColumns(const float* w, int64_t rows, int64_t cols, const float* s);

// diag(1/s) H diag(1/s): the Hessian of the scaled layer's input x / s, for GPTQ
// on W diag(s).
std::vector<double> scaleHessian(const double* h, int64_t cols, const float* s);

} // namespace quant
} // namespace ninfer
