// The float target of sequential GPTQ (FloatTarget.h): the shifted weights w'
// are the least-squares fit of the float model's outputs X_float w from the
// quantized-prefix input X. Checked against the normal equations built
// directly from the token rows (X^T X w' = X^T X_float w), independently of H
// and D as the pass gets them; with damping, against (X^T X + damp I) w' =
// X^T X_float w + damp w; and the asymmetric output error of w' is below that
// of w and of a perturbed w'.
#include "FloatTarget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ninfer {
namespace quant {
namespace {

struct Sample {
  int64_t tokens = 0, cols = 0;
  std::vector<double> x, xf; // [tokens, cols]: quantized-prefix and float inputs
};

Sample makeSample(int64_t tokens, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  Sample s;
  s.tokens = tokens;
  s.cols = cols;
  s.x.resize(size_t(tokens * cols));
  s.xf.resize(s.x.size());
  for (size_t i = 0; i < s.x.size(); ++i) {
    s.xf[i] = normal(rng) * (1.0 + double(i % size_t(cols)) / double(cols));
    s.x[i] = s.xf[i] + 0.1 * normal(rng); // the quantized prefix's error
  }
  return s;
}

// sum_t (w . xf_t - v . x_t)^2
double asymmetricError(const Sample& s, const std::vector<float>& w, const std::vector<float>& v) {
  double total = 0;
  for (int64_t t = 0; t < s.tokens; ++t) {
    double e = 0;
    for (int64_t j = 0; j < s.cols; ++j)
      e += double(w[size_t(j)]) * s.xf[size_t(t * s.cols + j)] -
           double(v[size_t(j)]) * s.x[size_t(t * s.cols + j)];
    total += e * e;
  }
  return total;
}

TEST(FloatTarget, ShiftedWeightsSolveTheAsymmetricLeastSquares) {
  std::mt19937 rng(3);
  const int64_t cols = 24, rows = 5;
  const Sample s = makeSample(400, cols, rng);
  std::vector<double> h(size_t(cols * cols), 0.0), d(h.size(), 0.0);
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const double xi = s.x[size_t(t * cols + i)];
        h[size_t(i * cols + j)] += xi * s.x[size_t(t * cols + j)];
        d[size_t(i * cols + j)] += xi * (s.xf[size_t(t * cols + j)] - s.x[size_t(t * cols + j)]);
      }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(size_t(rows * cols));
  for (float& v : w)
    v = normal(rng);
  const double damp = 5.0;
  for (double dampUsed : {0.0, damp}) {
    SCOPED_TRACE(dampUsed);
    Result<std::vector<float>> shifted = shiftToFloatTarget(w.data(), rows, cols, h.data(),
                                                            dampUsed, d.data(), 2);
    ASSERT_TRUE(shifted.isOk()) << shifted.status().message();
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> wr(w.begin() + r * cols, w.begin() + (r + 1) * cols);
      const std::vector<float> wp(shifted->begin() + r * cols, shifted->begin() + (r + 1) * cols);
      // Normal equations from the rows: X^T (X w' - X_float w) + damp (w' - w) = 0.
      double worst = 0, scale = 0;
      for (int64_t i = 0; i < cols; ++i) {
        double g = dampUsed * (double(wp[size_t(i)]) - wr[size_t(i)]), size = 0;
        for (int64_t t = 0; t < s.tokens; ++t) {
          double fit = 0, target = 0;
          for (int64_t j = 0; j < cols; ++j) {
            fit += s.x[size_t(t * cols + j)] * wp[size_t(j)];
            target += s.xf[size_t(t * cols + j)] * wr[size_t(j)];
          }
          g += s.x[size_t(t * cols + i)] * (fit - target);
          size += std::fabs(s.x[size_t(t * cols + i)] * target);
        }
        worst = std::max(worst, std::fabs(g));
        scale = std::max(scale, size);
      }
      EXPECT_LT(worst, 1e-5 * scale); // f32 weights: ~1e-7 relative
      if (dampUsed == 0) {
        const double best = asymmetricError(s, wr, wp);
        EXPECT_LT(best, asymmetricError(s, wr, wr));
        std::vector<float> nudged = wp;
        nudged[size_t(r % cols)] += 0.01f;
        EXPECT_LT(best, asymmetricError(s, wr, nudged));
      }
    }
  }
  // No shift (D = 0): the weights come back unchanged.
  std::vector<double> zero(d.size(), 0.0);
  Result<std::vector<float>> same =
      shiftToFloatTarget(w.data(), rows, cols, h.data(), damp, zero.data(), 1);
  ASSERT_TRUE(same.isOk());
  EXPECT_EQ(*same, w);
}

} // namespace
} // namespace quant
} // namespace ninfer
