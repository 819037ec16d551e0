// X^T X accumulation (Gram.h): every vector width and thread count gives the
// bits of the plain scalar loop (f32 sum over the tokens in order, added to the
// f64 entry), the entries below the diagonal are left alone, and shapes with
// tails (columns not a multiple of any vector, rows not a multiple of a block)
// are covered. A^T B: every entry is the scalar loop's, and with A = B the
// upper triangle is X^T X's bit for bit.
#include "Gram.h"
#include "SimdLanes.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace ninfer {
namespace quant {
namespace {

TEST(Gram, EveryWidthAndThreadCountGivesTheScalarBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t cols : {int64_t(77), int64_t(128), int64_t(300)}) {
    const int n = 37;
    std::vector<float> x(size_t(n) * size_t(cols));
    for (float& v : x)
      v = normal(rng);
    // Earlier steps: the f64 totals the step is added to (below the diagonal: a sentinel).
    std::vector<double> start(size_t(cols * cols));
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j)
        start[size_t(i * cols + j)] = j >= i ? double(normal(rng)) : -7.0;
    std::vector<double> expected = start;
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = i; j < cols; ++j) {
        float s = 0.0f;
        for (int t = 0; t < n; ++t)
          s += x[size_t(t * cols + i)] * x[size_t(t * cols + j)];
        expected[size_t(i * cols + j)] += double(s);
      }
    for (int lanes : {4, 8, 16})
      for (int threads : {1, 3}) {
        SCOPED_TRACE("cols " + std::to_string(cols) + " lanes " + std::to_string(lanes) +
                     " threads " + std::to_string(threads));
        std::vector<double> h = start;
        Status st = accumulateGram(x.data(), n, cols, h.data(), threads, lanes);
        if (lanes > widestLanes()) {
          EXPECT_FALSE(st.isOk());
          continue;
        }
        ASSERT_TRUE(st.isOk()) << st.message();
        EXPECT_EQ(h, expected);
      }
  }
}


TEST(Gram, CrossProductGivesTheScalarBitsAndMatchesTheGram) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t cols : {int64_t(77), int64_t(128)}) {
    const int n = 29;
    std::vector<float> a(size_t(n) * size_t(cols)), b(a.size());
    for (float& v : a)
      v = normal(rng);
    for (float& v : b)
      v = normal(rng);
    std::vector<double> start(size_t(cols * cols));
    for (double& v : start)
      v = double(normal(rng));
    std::vector<double> expected = start;
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float s = 0.0f;
        for (int t = 0; t < n; ++t)
          s += a[size_t(t * cols + i)] * b[size_t(t * cols + j)];
        expected[size_t(i * cols + j)] += double(s);
      }
    for (int lanes : {4, 8, 16})
      for (int threads : {1, 3}) {
        if (lanes > widestLanes())
          continue;
        SCOPED_TRACE("cols " + std::to_string(cols) + " lanes " + std::to_string(lanes) +
                     " threads " + std::to_string(threads));
        std::vector<double> out = start;
        Status st = accumulateCrossGram(a.data(), b.data(), n, cols, out.data(), threads, lanes);
        ASSERT_TRUE(st.isOk()) << st.message();
        EXPECT_EQ(out, expected);
        // A = B: the upper triangle of X^T X.
        std::vector<double> cross(size_t(cols * cols), 0.0), gram = cross;
        ASSERT_TRUE(accumulateCrossGram(a.data(), a.data(), n, cols, cross.data(), threads, lanes)
                        .isOk());
        ASSERT_TRUE(accumulateGram(a.data(), n, cols, gram.data(), threads, lanes).isOk());
        for (int64_t i = 0; i < cols; ++i)
          for (int64_t j = i; j < cols; ++j)
            ASSERT_EQ(cross[size_t(i * cols + j)], gram[size_t(i * cols + j)]);
      }
  }
}

} // namespace
} // namespace quant
} // namespace ninfer
