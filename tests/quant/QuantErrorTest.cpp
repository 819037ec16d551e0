// Output-error measure (QuantError.h): tr(E H E^T) equals ||X E^T||^2 computed
// from explicit activations, the relative form's fixed points, row sampling,
// and thread independence.
#include "QuantError.h"
#include "QuantTestUtil.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace quant {
namespace {

TEST(QuantError, TraceFormEqualsExplicitOutputError) {
  test::Rng rng(30);
  const int64_t rows = 37, cols = 96, samples = 300;
  const std::vector<double> x = test::lowRankInputs(rng, samples, cols, 10, 0.2);
  const std::vector<double> h = test::gram(x, samples, cols);
  const std::vector<float> w = test::gaussian(rng, rows * cols);
  std::vector<float> q = w;
  for (float& v : q)
    v += static_cast<float>(0.01 * rng.normal());
  double explicitError = 0.0; // sum over samples and rows of (x_i . (q_r - w_r))^2
  for (int64_t i = 0; i < samples; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      double y = 0.0;
      for (int64_t c = 0; c < cols; ++c)
        y += x[i * cols + c] * (static_cast<double>(w[r * cols + c]) - q[r * cols + c]);
      explicitError += y * y;
    }
  const double traceError = *outputError(w.data(), q.data(), rows, cols, h.data());
  EXPECT_NEAR(traceError, explicitError, 1e-9 * explicitError);
  EXPECT_EQ(*relativeOutputError(w.data(), w.data(), rows, cols, h.data()), 0.0);
  const std::vector<float> zero(rows * cols, 0.0f);
  EXPECT_DOUBLE_EQ(*relativeOutputError(w.data(), zero.data(), rows, cols, h.data()), 1.0);
  EXPECT_FALSE(relativeOutputError(zero.data(), w.data(), rows, cols, h.data()).isOk());
}

TEST(QuantError, RowSamplingAndThreads) {
  const std::vector<int64_t> picked = sampleRows(1000, 7);
  ASSERT_EQ(picked.size(), 7u);
  EXPECT_EQ(picked[0], 0);
  for (size_t i = 1; i < picked.size(); ++i)
    EXPECT_GT(picked[i], picked[i - 1]);
  EXPECT_LT(picked.back(), 1000);
  EXPECT_EQ(sampleRows(5, 0).size(), 5u);
  EXPECT_EQ(sampleRows(5, 9).size(), 5u);

  test::Rng rng(31);
  const int64_t rows = 100, cols = 64;
  const std::vector<double> h = test::gram(test::lowRankInputs(rng, 200, cols, 5, 0.1), 200, cols);
  const std::vector<float> w = test::gaussian(rng, rows * cols);
  const std::vector<float> q = test::gaussian(rng, rows * cols);
  ErrorOptions all, one, many, sampled;
  all.maxRows = rows;
  one.threads = 1;
  many.threads = 3;
  sampled.maxRows = 50;
  const double full = *outputError(w.data(), q.data(), rows, cols, h.data(), one);
  EXPECT_EQ(*outputError(w.data(), q.data(), rows, cols, h.data(), many), full);
  EXPECT_EQ(*outputError(w.data(), q.data(), rows, cols, h.data(), all), full);
  // Half the rows, scaled by 2: an estimate, close for rows drawn alike.
  EXPECT_NEAR(*outputError(w.data(), q.data(), rows, cols, h.data(), sampled), full, 0.2 * full);
}

} // namespace
} // namespace quant
} // namespace ninfer
