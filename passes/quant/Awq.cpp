// AWQ scale search (see Awq.h). Each alpha re-quantizes only the scored rows
// (RTN is row-local), so maxRows bounds the whole search's cost.
#include "Awq.h"

#include "QuantError.h"
#include "Rtn.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ninfer {
namespace quant {

std::vector<float> awqScales(const std::vector<float>& stat, float alpha) {
  const size_t n = stat.size();
  std::vector<double> s(n);
  double lo = 0.0, hi = 0.0;
  for (size_t j = 0; j < n; ++j) {
    // Floor the statistic so a dead channel does not give a zero (or, for a
    // zero alpha, an undefined) scale.
    s[j] = std::pow(std::max(static_cast<double>(stat[j]), 1e-4), static_cast<double>(alpha));
    lo = j == 0 ? s[j] : std::min(lo, s[j]);
    hi = j == 0 ? s[j] : std::max(hi, s[j]);
  }
  const double norm = std::sqrt(lo * hi);
  std::vector<float> out(n);
  for (size_t j = 0; j < n; ++j)
    out[j] = static_cast<float>(s[j] / norm);
  return out;
}

std::vector<float> scaleColumns(const float* w, int64_t rows, int64_t cols, const float* s) {
  std::vector<float> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = w[r * cols + c] * s[c];
  return out;
}

std::vector<double> scaleHessian(const double* h, int64_t cols, const float* s) {
  std::vector<double> out(cols * cols);
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[i * cols + j] = h[i * cols + j] / (static_cast<double>(s[i]) * s[j]);
  return out;
}

Result<AwqResult> searchAwqScales(const std::vector<AwqTensor>& tensors, int64_t cols,
                                  const double* h, const float* meanAbsX, const QuantSpec& spec,
                                  const AwqOptions& options) {
  if (tensors.empty())
    return Status::error("quant: AWQ search needs at least one tensor");
  if (options.grid < 1)
    return Status::error("quant: AWQ grid must be >= 1");
  for (const AwqTensor& t : tensors) {
    NINFER_RETURN_IF_ERROR(validateSpec(spec, t.rows, cols));
    NINFER_RETURN_IF_ERROR(checkFinite(t.weights, t.rows * cols, "weight"));
  }
  NINFER_RETURN_IF_ERROR(checkFinite(h, cols * cols, "Hessian"));
  std::vector<float> stat(cols), diag(cols);
  for (int64_t j = 0; j < cols; ++j) {
    diag[j] = static_cast<float>(h[j * cols + j]);
    if (!(diag[j] >= 0.0f))
      return Status::error("quant: Hessian has a negative diagonal entry at column " +
                           std::to_string(j));
    stat[j] = meanAbsX ? meanAbsX[j] : std::sqrt(diag[j]);
  }
  if (meanAbsX)
    NINFER_RETURN_IF_ERROR(checkNonNegative(meanAbsX, cols, "mean |x|"));

  // The scored rows of each tensor, gathered once.
  struct Sampled {
    std::vector<float> w;
    int64_t rows;
  };
  std::vector<Sampled> sampled;
  for (const AwqTensor& t : tensors) {
    const std::vector<int64_t> picked = sampleRows(t.rows, options.maxRows);
    Sampled s{std::vector<float>(picked.size() * cols), static_cast<int64_t>(picked.size())};
    for (size_t i = 0; i < picked.size(); ++i)
      std::copy_n(t.weights + picked[i] * cols, cols, s.w.begin() + i * cols);
    sampled.push_back(std::move(s));
  }

  AwqResult result;
  std::vector<float> importance(cols);
  for (int a = 0; a < options.grid; ++a) {
    const float alpha = static_cast<float>(a) / static_cast<float>(options.grid);
    const std::vector<float> s = awqScales(stat, alpha);
    for (int64_t j = 0; j < cols; ++j)
      importance[j] = diag[j] / (s[j] * s[j]);
    double error = 0.0;
    for (const Sampled& t : sampled) {
      const std::vector<float> scaled = scaleColumns(t.w.data(), t.rows, cols, s.data());
      std::vector<float> effective(t.rows * cols);
      parallelFor(t.rows, options.threads, [&](int64_t r) {
        std::vector<uint8_t> codes(cols);
        std::vector<uint16_t> scales(cols / spec.groupSize);
        float* row = &effective[r * cols];
        quantizeRowRtn(&scaled[r * cols], cols, spec, importance.data(), options.search,
                       codes.data(), scales.data(), row);
        for (int64_t j = 0; j < cols; ++j)
          row[j] /= s[j];
      });
      error += weightedSquaredNorm(t.w.data(), effective.data(), cols, h, sampleRows(t.rows, 0),
                                   options.threads);
    }
    result.errorByAlpha.push_back(error);
    if (a == 0) {
      result.baseError = error;
      result.bestError = error;
      result.scales = s;
    } else if (error < result.bestError) {
      result.bestError = error;
      result.alpha = alpha;
      result.scales = s;
    }
  }
  return result;
}

} // namespace quant
} // namespace ninfer
