// w' = w + Hd^-1 D w (see FloatTarget.h): one Cholesky of Hd, then per row
// b = D w and two triangular solves, rows spread over threads.
#include "FloatTarget.h"

#include "HessianFactor.h"
#include "QuantCommon.h"

namespace ninfer {
namespace quant {

Result<std::vector<float>> shiftToFloatTarget(const float* w, int64_t rows, int64_t cols,
                                              const double* h, double damp, const double* d,
                                              int threads) {
  std::vector<double> r(h, h + cols * cols);
  for (int64_t i = 0; i < cols; ++i)
    r[size_t(i * cols + i)] = r[size_t(i * cols + i)] > 0 ? r[size_t(i * cols + i)] + damp : 1.0;
  Status factored = choleskyUpper(r.data(), cols, threads); // R^T R = Hd, R upper
  if (!factored.isOk())
    return Status::error("float target: " + factored.message());
  std::vector<double> lower(size_t(cols * cols), 0.0); // R^T, rows contiguous for the forward solve
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t k = 0; k <= i; ++k)
      lower[size_t(i * cols + k)] = r[size_t(k * cols + i)];
  std::vector<float> out(w, w + rows * cols);
  parallelFor(rows, threads, [&](int64_t row) {
    const float* wr = w + row * cols;
    std::vector<double> z(size_t(cols), 0.0);
    for (int64_t i = 0; i < cols; ++i) { // b = D w
      double s = 0;
      for (int64_t j = 0; j < cols; ++j)
        s += d[i * cols + j] * double(wr[j]);
      z[size_t(i)] = s;
    }
    for (int64_t i = 0; i < cols; ++i) { // R^T y = b
      double s = z[size_t(i)];
      for (int64_t k = 0; k < i; ++k)
        s -= lower[size_t(i * cols + k)] * z[size_t(k)];
      z[size_t(i)] = s / lower[size_t(i * cols + i)];
    }
    for (int64_t i = cols - 1; i >= 0; --i) { // R z = y
      double s = z[size_t(i)];
      for (int64_t k = i + 1; k < cols; ++k)
        s -= r[size_t(i * cols + k)] * z[size_t(k)];
      z[size_t(i)] = s / r[size_t(i * cols + i)];
    }
    for (int64_t j = 0; j < cols; ++j)
      out[size_t(row * cols + j)] = float(double(wr[j]) + z[size_t(j)]);
  });
  return out;
}

} // namespace quant
} // namespace ninfer
