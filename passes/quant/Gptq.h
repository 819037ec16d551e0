// GPTQ (Frantar et al., 2022): quantize W column by column and push each
// column's rounding error onto the columns not yet quantized, weighted by the
// inverse Hessian of the layer's squared output error, so the layer output
// X W^T stays close even where single weights cannot.
//
// Method, per output row (rows are independent given H):
//   H <- H + damp I, damp = percDamp * mean(diag H)   (dead columns, diag 0: W col
//        := 0, H diag := 1, as in the reference implementation)
//   optional act-order: columns in order of descending diag(H)
//   for column p in order: q_p = Q(w~_p), where w~_p is w_p plus the
//        compensation for every earlier column's rounding error.
// The reference implementation keeps w~ up to date with rows of U (U^T U =
// H^-1); this one computes the same w~ from M (M^T M = H, lower triangular; see
// HessianFactor.h for why they agree):
//   w~_p = w_p + (1 / M_pp) sum_{t<p} (w_t - q_t) M_pt.
// "Lazy batch" as in the paper: the terms of a finished block of blockSize
// columns are added to every later column's sum once per block, the current
// block's terms when a column needs them; every sum is added up in increasing
// t, so the block size does not change the result (Gptq.cpp).
//
// Groups. The format's groups are contiguous runs of the original columns, so
// no group index table is needed at run time. In natural order a group's scale
// is chosen when its first column is reached, as in the reference, from the
// group's current values: the original weights plus the optimal compensation
// for the errors made so far. With M that is, for the not yet quantized columns
// F and the quantized ones A, w_F + M_FF^-1 M_FA (w_A - q_A): a forward
// substitution over the group's rows of M. (This is not the per-column formula
// above applied to later columns: that one predicts a column's value if no
// further errors were made, and scored 30% worse in tests.) With act-order the
// group's columns are scattered over the order, so the scales are chosen once
// from the original weights ("static groups", as AutoGPTQ does for act-order
// with contiguous groups). Either way the search is GroupQuant.h's with
// importance diag(H); each column is rounded with its group's scale. K16
// (QuantFormats.h): when a unit's first column is reached, the current values of
// the whole unit (the same substitution over its 128 rows of M) choose the unit
// scale d, and each 16-value group's sub-scale is then chosen like a group scale,
// among fp16(d * s).
//
// The loss estimate sum_p ((w~_p - q_p) M_pp)^2 equals tr(E Hd E^T), E = Q - W,
// Hd = damped H (each step of the sequence is an exact optimal-brain-surgeon
// update), so it costs nothing to get the output error of the result.
#pragma once

#include "GroupQuant.h"
#include "QuantCommon.h"

#include <vector>

namespace ninfer {
namespace quant {

struct GptqOptions {
  double percDamp = 0.01; // damping, as a fraction of mean(diag H)
  int dampRetries = 3;    // if H + damp I is not positive definite: damp *= 10, retry
  bool actOrder = false;  // columns by descending diag(H)
  int blockSize = 128;    // lazy-batch block (columns)
  int threads = 0;        // 0 = all hardware threads
  int lanes = 0;          // SIMD lanes of the tile kernel: 0 = the widest this CPU has;
                          // 4, 8 (AVX2) or 16 (AVX-512) for tests. Same bytes for all.
  ScaleSearchOptions search;
  bool keepDequantized = true;
};

struct GptqResult {
  QuantizedTensor tensor;
  double lossEstimate = 0.0; // tr(E Hd E^T), Hd = damped H; see above
  double damp = 0.0;         // absolute value added to the diagonal of H
  int64_t deadColumns = 0;   // columns with diag(H) = 0, quantized as zeros
};

// What GPTQ derives from H alone (column order, dead columns, damping, the
// factor M): computed once, it serves every tensor that reads the same input
// and every format tried for them (mixed precision tries many).
struct GptqFactor {
  int64_t cols = 0;
  std::vector<int64_t> perm;     // processing order -> column
  std::vector<int64_t> pos;      // column -> processing order
  std::vector<char> dead;        // diag(H) = 0
  std::vector<float> importance; // diag(H), 0 for dead columns (scale search weights)
  std::vector<float> m;          // lower triangular, M^T M = damped H in `perm` order
  double damp = 0.0;
  int64_t deadColumns = 0;
  bool actOrder = false;
};

// Shrinkage of an estimated H toward its diagonal: off-diagonal entries times
// (1 - lambda), the diagonal kept. H from a few thousand calibration tokens is
// a noisy estimate of the input's second moments (an FFN input of 1536
// channels gets only ~5 tokens per channel from 8192), and GPTQ fitted to the
// noise moves errors into directions the sample happens not to excite; the
// shrunk matrix stays positive semidefinite (a convex combination of H and
// diag(H), both PSD). lambda in [0, 1]; 0 returns H unchanged.
std::vector<double> shrinkHessian(const double* h, int64_t cols, double lambda);

// H f64 [cols, cols] symmetric positive semidefinite; uses percDamp,
// dampRetries, actOrder and threads of `options`.
Result<GptqFactor> factorGptq(const double* h, int64_t cols, const GptqOptions& options = {});

// W f32 [rows, cols] with a factor of its input's H.
Result<GptqResult> quantizeGptq(const float* w, int64_t rows, const GptqFactor& factor,
                                const QuantSpec& spec, const GptqOptions& options = {});

// Both steps at once.
Result<GptqResult> quantizeGptq(const float* w, int64_t rows, int64_t cols, const double* h,
                                const QuantSpec& spec, const GptqOptions& options = {});

} // namespace quant
} // namespace ninfer
