// Output-error measurement (see QuantError.h). Rows are processed in tiles of
// 32 so each row of H is loaded once per tile; per-tile partial sums are added
// in tile order, so the result does not depend on the thread count.
#include "QuantError.h"

#include <algorithm>
#include <string>

namespace ninfer {
namespace quant {

namespace {

constexpr int64_t kTileRows = 32;

inline double dot(const double* __restrict a, const double* __restrict b, int64_t n) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

} // namespace

std::vector<int64_t> sampleRows(int64_t rows, int64_t maxRows) {
  const int64_t count = (maxRows <= 0 || maxRows >= rows) ? rows : maxRows;
  std::vector<int64_t> out(count);
  for (int64_t i = 0; i < count; ++i)
    out[i] = i * rows / count;
  return out;
}

double weightedSquaredNorm(const float* a, const float* b, int64_t cols, const double* h,
                           const std::vector<int64_t>& rowIndices, int threads) {
  const int64_t n = static_cast<int64_t>(rowIndices.size());
  const int64_t tiles = (n + kTileRows - 1) / kTileRows;
  std::vector<double> partial(tiles, 0.0);
  parallelFor(tiles, threads, [&](int64_t tile) {
    const int64_t first = tile * kTileRows;
    const int64_t count = std::min(kTileRows, n - first);
    std::vector<double> e(count * cols);
    for (int64_t t = 0; t < count; ++t) {
      const int64_t r = rowIndices[first + t];
      for (int64_t c = 0; c < cols; ++c)
        e[t * cols + c] = static_cast<double>(a[r * cols + c]) - (b ? b[r * cols + c] : 0.0f);
    }
    // e^T H e = sum_k e_k (H_kk e_k + 2 sum_{j>k} H_kj e_j): the upper triangle only.
    double sum = 0.0;
    for (int64_t k = 0; k < cols; ++k) {
      const double* hk = h + k * cols;
      for (int64_t t = 0; t < count; ++t) {
        const double* et = &e[t * cols];
        sum += et[k] * (hk[k] * et[k] + 2.0 * dot(hk + k + 1, et + k + 1, cols - k - 1));
      }
    }
    partial[tile] = sum;
  });
  double total = 0.0;
  for (double p : partial)
    total += p;
  return total;
}

Result<double> outputError(const float* w, const float* q, int64_t rows, int64_t cols,
                           const double* h, const ErrorOptions& options) {
  if (rows <= 0 || cols <= 0)
    return Status::error("quant: empty tensor");
  const std::vector<int64_t> picked = sampleRows(rows, options.maxRows);
  const double sum = weightedSquaredNorm(w, q, cols, h, picked, options.threads);
  return sum * static_cast<double>(rows) / static_cast<double>(picked.size());
}

Result<double> relativeOutputError(const float* w, const float* q, int64_t rows, int64_t cols,
                                   const double* h, const ErrorOptions& options) {
  if (rows <= 0 || cols <= 0)
    return Status::error("quant: empty tensor");
  const std::vector<int64_t> picked = sampleRows(rows, options.maxRows);
  const double reference = weightedSquaredNorm(w, nullptr, cols, h, picked, options.threads);
  if (!(reference > 0.0))
    return Status::error("quant: tr(W H W^T) is " + std::to_string(reference) +
                         ": no output signal to compare against");
  return weightedSquaredNorm(w, q, cols, h, picked, options.threads) / reference;
}

} // namespace quant
} // namespace ninfer
