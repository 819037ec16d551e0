// GPTQ (Gptq.h) and its inverse-Hessian factor (HessianFactor.h): the factor's
// defining identities, GPTQ = RTN when there is nothing to compensate, GPTQ
// beating RTN on correlated inputs, the loss estimate, dead columns, failure
// without aborting, and independence of threads, block size and vector width.
#include "Gptq.h"
#include "HessianFactor.h"
#include "Packing.h"
#include "QuantError.h"
#include "QuantTestUtil.h"
#include "Rtn.h"
#include "SimdLanes.h"

#include <gtest/gtest.h>

#include <cstring>

namespace ninfer {
namespace quant {
namespace {

std::vector<double> randomSpd(test::Rng& rng, int64_t n) {
  const std::vector<double> x = test::lowRankInputs(rng, 3 * n, n, n / 2, 0.3);
  return test::gram(x, 3 * n, n);
}

TEST(HessianFactor, CholeskyUpperIdentity) {
  test::Rng rng(10);
  const int64_t n = 77; // not a multiple of the 32-row panel
  const std::vector<double> a = randomSpd(rng, n);
  std::vector<double> r = a;
  ASSERT_TRUE(choleskyUpper(r.data(), n, 2).isOk());
  double scale = 0.0;
  for (double v : a)
    scale = std::max(scale, std::fabs(v));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) {
      double s = 0.0; // (R^T R)[i][j]
      for (int64_t k = 0; k <= i; ++k)
        s += r[k * n + i] * r[k * n + j];
      ASSERT_NEAR(s, a[i * n + j], 1e-12 * scale) << i << "," << j;
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j)
      ASSERT_EQ(r[i * n + j], a[i * n + j]) << "strict lower triangle changed";
}

// M lower triangular with M^T M = H; M is f32, so the bound is f32 rounding
// (2^-24 relative per entry) summed over n terms: 1e-6 of max |H|.
TEST(HessianFactor, GptqFactorIdentity) {
  test::Rng rng(11);
  const int64_t n = 100;
  const std::vector<double> h = randomSpd(rng, n);
  std::vector<double> work = h;
  std::vector<float> m;
  ASSERT_TRUE(gptqFactor(work, n, 1, m).isOk());
  double scale = 0.0;
  for (double v : h)
    scale = std::max(scale, std::fabs(v));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_GT(m[i * n + i], 0.0f);
    for (int64_t j = i + 1; j < n; ++j)
      ASSERT_EQ(m[i * n + j], 0.0f);
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t p = std::max(i, j); p < n; ++p)
        s += static_cast<double>(m[p * n + i]) * m[p * n + j];
      ASSERT_NEAR(s, h[i * n + j], 1e-6 * scale) << i << "," << j;
    }
  std::vector<double> notSpd(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    notSpd[i * n + i] = i == 40 ? -1.0 : 1.0;
  Status st = gptqFactor(notSpd, n, 1, m);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("column"), std::string::npos);
}

// The algorithm as the paper writes it, in f64 and without blocks: U = upper
// Cholesky factor of Hd^-1 (explicit inverse), w_j -= (w_p - q_p) / U_pp * U_pj.
// Natural column order, group scales from the updated weights at the group's
// start with the same scale search.
std::vector<float> textbookGptq(const std::vector<float>& w, int64_t rows, int64_t k,
                                const std::vector<double>& h, double damp, int bits, int group) {
  std::vector<double> hd = h;
  for (int64_t i = 0; i < k; ++i)
    hd[i * k + i] += damp;
  // Inverse via Gauss-Jordan, then the upper Cholesky factor of the inverse.
  std::vector<double> inv(k * k, 0.0), a = hd;
  for (int64_t i = 0; i < k; ++i)
    inv[i * k + i] = 1.0;
  for (int64_t c = 0; c < k; ++c) {
    const double pivot = a[c * k + c];
    for (int64_t j = 0; j < k; ++j) {
      a[c * k + j] /= pivot;
      inv[c * k + j] /= pivot;
    }
    for (int64_t r = 0; r < k; ++r) {
      if (r == c)
        continue;
      const double f = a[r * k + c];
      for (int64_t j = 0; j < k; ++j) {
        a[r * k + j] -= f * a[c * k + j];
        inv[r * k + j] -= f * inv[c * k + j];
      }
    }
  }
  std::vector<double> u(k * k, 0.0); // U^T U = inv: U[i][j] for j >= i
  for (int64_t i = 0; i < k; ++i) {
    double d = inv[i * k + i];
    for (int64_t t = 0; t < i; ++t)
      d -= u[t * k + i] * u[t * k + i];
    u[i * k + i] = std::sqrt(d);
    for (int64_t j = i + 1; j < k; ++j) {
      double s = inv[i * k + j];
      for (int64_t t = 0; t < i; ++t)
        s -= u[t * k + i] * u[t * k + j];
      u[i * k + j] = s / u[i * k + i];
    }
  }
  std::vector<float> importance(k), q(rows * k);
  for (int64_t j = 0; j < k; ++j)
    importance[j] = static_cast<float>(h[j * k + j]);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> x(w.begin() + r * k, w.begin() + (r + 1) * k);
    uint16_t scale = 0;
    for (int64_t p = 0; p < k; ++p) {
      if (p % group == 0) {
        std::vector<float> values(x.begin() + p, x.begin() + p + group);
        scale = searchGroupScale(values.data(), &importance[p], group, bits, {});
      }
      uint8_t code;
      float dq;
      const float xp = static_cast<float>(x[p]);
      quantizeGroup(&xp, 1, bits, scale, &code, &dq);
      q[r * k + p] = dq;
      const double e = (x[p] - dq) / u[p * k + p];
      for (int64_t j = p + 1; j < k; ++j)
        x[j] -= e * u[p * k + j];
    }
  }
  return q;
}

// Our formulation (M instead of U, lazy blocks, f32 updates) against the
// textbook one: identical values except where f32 vs f64 arithmetic moves a
// value across a rounding boundary (none in this case at the time of writing),
// which then changes the later columns of that row a little. Demand 99%
// identical values and the same output error within 1%, for block sizes that
// do and do not align with the groups.
TEST(Gptq, MatchesTextbookAlgorithm) {
  test::Rng rng(17);
  const int64_t rows = 24, k = 256;
  const std::vector<float> w = test::gaussian(rng, rows * k, 0.05);
  const std::vector<double> h = test::gram(test::lowRankInputs(rng, 1024, k, 12, 0.1), 1024, k);
  for (int bits : {4, 3, 2}) {
    for (int block : {32, 48, 128}) {
      SCOPED_TRACE("bits " + std::to_string(bits) + " block " + std::to_string(block));
      GptqOptions options;
      options.blockSize = block;
      Result<GptqResult> ours = quantizeGptq(w.data(), rows, k, h.data(), {bits, 32}, options);
      ASSERT_TRUE(ours.isOk());
      const std::vector<float> ref = textbookGptq(w, rows, k, h, ours->damp, bits, 32);
      int64_t same = 0;
      for (int64_t i = 0; i < rows * k; ++i)
        same += ours->tensor.dequantized[i] == ref[i];
      EXPECT_GE(same, rows * k * 99 / 100);
      const double a = *outputError(w.data(), ours->tensor.dequantized.data(), rows, k, h.data());
      const double b = *outputError(w.data(), ref.data(), rows, k, h.data());
      EXPECT_NEAR(a, b, 0.01 * b);
    }
  }
}

// H = c I: the factor is diagonal, no error is propagated, every group's scale
// is searched on the original weights with importance c, exactly as RTN with
// importance c does: identical bytes, with and without act-order.
TEST(Gptq, IdentityHessianEqualsRtn) {
  test::Rng rng(12);
  const int64_t rows = 40, cols = 256;
  const std::vector<float> w = test::gaussian(rng, rows * cols, 0.05);
  std::vector<double> h(cols * cols, 0.0);
  for (int64_t j = 0; j < cols; ++j)
    h[j * cols + j] = 3.0;
  const std::vector<float> importance(cols, 3.0f);
  for (int bits : {8, 6, 5, 4, 3, 2}) {
    for (int group : {32, 64, 128, kQuantK16Group}) {
      if (quantFormatIndex(bits, group) < 0)
        continue;
      for (bool actOrder : {false, true}) {
        SCOPED_TRACE("q" + std::to_string(bits) + "_g" + std::to_string(group) +
                     (actOrder ? " act-order" : ""));
        GptqOptions options;
        options.actOrder = actOrder;
        Result<GptqResult> g = quantizeGptq(w.data(), rows, cols, h.data(), {bits, group}, options);
        Result<QuantizedTensor> r =
            quantizeRtn(w.data(), rows, cols, {bits, group}, importance.data());
        ASSERT_TRUE(g.isOk()) << g.status().message();
        ASSERT_TRUE(r.isOk());
        EXPECT_EQ(g->tensor.packed, r->packed);
        EXPECT_EQ(g->tensor.dequantized, r->dequantized);
      }
    }
  }
}

struct Correlated {
  int64_t rows = 64, cols = 256, samples = 2048;
  std::vector<float> w;
  std::vector<double> h;
};

// Inputs with rank-8 structure plus 10% noise.
Correlated correlatedProblem(uint64_t seed) {
  Correlated p;
  test::Rng rng(seed);
  p.w = test::gaussian(rng, p.rows * p.cols, 0.05);
  const std::vector<double> x = test::lowRankInputs(rng, p.samples, p.cols, 8, 0.1);
  p.h = test::gram(x, p.samples, p.cols);
  return p;
}

// Why GPTQ must win by a wide margin here. With rounding errors of variance
// s^2/12, independent across weights, RTN leaves about (s^2/12) tr(H) output
// error per row, i.e. sum_j Var(x_j). GPTQ leaves about (s^2/12) sum_p U_pp^-2 =
// (s^2/12) sum_p Var(x_p | x_1..x_{p-1}): once the 8 latent directions are
// explained, each further column only has its noise variance left. With
// per-channel variance 1 + 0.01 and rank 8 of 256 columns, that predicts a ratio
// near (8 + 248 * 0.01) / (256 * 1.01) ~ 0.04 (measured: 0.02 to 0.06).
// Error-updated weights need somewhat larger scales and clipping breaks the
// independence at 2 bits, so the test demands a ratio below 0.15 (4, 3 bits)
// and 0.25 (2 bits): loose against the prediction, far below what a GPTQ
// without (or with partial) error propagation reaches.
TEST(Gptq, BeatsRtnOnCorrelatedInputs) {
  const Correlated p = correlatedProblem(13);
  const std::vector<float> importance = test::diagonal(p.h, p.cols);
  for (int bits : {4, 3, 2}) {
    for (bool actOrder : {false, true}) {
      for (int group : {32, kQuantK16Group}) {
        SCOPED_TRACE("bits " + std::to_string(bits) + (actOrder ? " act-order" : "") + " group " +
                     std::to_string(group));
        const QuantSpec spec{bits, group};
        Result<QuantizedTensor> r =
            quantizeRtn(p.w.data(), p.rows, p.cols, spec, importance.data());
        GptqOptions options;
        options.actOrder = actOrder;
        Result<GptqResult> g = quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), spec, options);
        ASSERT_TRUE(r.isOk() && g.isOk());
        const double rtnError =
            *relativeOutputError(p.w.data(), r->dequantized.data(), p.rows, p.cols, p.h.data());
        const double gptqError = *relativeOutputError(p.w.data(), g->tensor.dequantized.data(),
                                                      p.rows, p.cols, p.h.data());
        RecordProperty("ratio_q" + std::to_string(bits) + (actOrder ? "_act" : "") + "_g" +
                           std::to_string(group),
                       std::to_string(gptqError / rtnError));
        EXPECT_LT(gptqError, (bits == 2 ? 0.25 : 0.15) * rtnError)
            << "rtn " << rtnError << " gptq " << gptqError;
      }
    }
  }
}

// The loss estimate is tr(E Hd E^T) with Hd = H + damp I (see Gptq.h). The
// update arithmetic is f32, so agreement is checked to 1e-3 relative.
TEST(Gptq, LossEstimateIsTheDampedOutputError) {
  const Correlated p = correlatedProblem(14);
  for (bool actOrder : {false, true})
    for (const QuantSpec spec : {QuantSpec{3, 64}, QuantSpec{3, kQuantK16Group}}) {
      SCOPED_TRACE("group " + std::to_string(spec.groupSize));
      GptqOptions options;
      options.actOrder = actOrder;
      options.blockSize = 48; // groups straddle blocks: exercises the pending-update path
      Result<GptqResult> g = quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), spec, options);
      ASSERT_TRUE(g.isOk());
      std::vector<double> damped = p.h;
      for (int64_t j = 0; j < p.cols; ++j)
        damped[j * p.cols + j] += g->damp;
      const double measured =
          *outputError(p.w.data(), g->tensor.dequantized.data(), p.rows, p.cols, damped.data());
      EXPECT_NEAR(g->lossEstimate, measured, 1e-3 * measured) << "act-order " << actOrder;
      // And the packed bytes decode to the returned values.
      std::vector<float> decoded(p.rows * p.cols);
      ASSERT_TRUE(dequantizePacked(spec, p.rows, p.cols, g->tensor.packed.data(),
                                   g->tensor.packed.size(), decoded.data())
                      .isOk());
      EXPECT_EQ(0, std::memcmp(decoded.data(), g->tensor.dequantized.data(), decoded.size() * 4));
    }
}

TEST(Gptq, ShrinkHessianScalesTheOffDiagonal) {
  const std::vector<double> h = {4, 1, -2, 1, 9, 3, -2, 3, 16};
  EXPECT_EQ(shrinkHessian(h.data(), 3, 0.0), h);
  const std::vector<double> s = shrinkHessian(h.data(), 3, 0.25);
  const std::vector<double> expected = {4, 0.75, -1.5, 0.75, 9, 2.25, -1.5, 2.25, 16};
  EXPECT_EQ(s, expected);
  std::vector<double> diagonal(9, 0.0);
  diagonal[0] = 4, diagonal[4] = 9, diagonal[8] = 16;
  EXPECT_EQ(shrinkHessian(h.data(), 3, 1.0), diagonal);
}

// H estimated from few tokens (1.5 per input channel) of a low-rank-plus-noise
// input: GPTQ on the sample H fits the sample's noise. Measured on held-out
// inputs of the same distribution (4096 tokens), the weights quantized with the
// sample H shrunk toward its diagonal have the lower output error, and with
// the held-out H itself (the "true" one) shrinking does not help.
TEST(Gptq, ShrunkSampleHessianGeneralizesBetter) {
  const int64_t rows = 64, cols = 128, sample = 192, heldOut = 4096;
  test::Rng rng(31);
  const std::vector<double> x = test::lowRankInputs(rng, sample + heldOut, cols, 16, 0.3);
  const std::vector<double> sampleX(x.begin(), x.begin() + sample * cols);
  const std::vector<double> heldX(x.begin() + sample * cols, x.end());
  const std::vector<double> hSample = test::gram(sampleX, sample, cols);
  const std::vector<double> hHeld = test::gram(heldX, heldOut, cols);
  const std::vector<float> w = test::gaussian(rng, rows * cols);
  const QuantSpec spec{3, 32};
  auto heldOutError = [&](const std::vector<double>& h) {
    Result<GptqResult> g = quantizeGptq(w.data(), rows, cols, h.data(), spec);
    EXPECT_TRUE(g.isOk());
    return g.isOk() ? *relativeOutputError(w.data(), g->tensor.dequantized.data(), rows, cols,
                                           hHeld.data())
                    : 0.0;
  };
  const double plain = heldOutError(hSample);
  const double shrunk = heldOutError(shrinkHessian(hSample.data(), cols, 0.2));
  RecordProperty("plain", std::to_string(plain));
  RecordProperty("shrunk", std::to_string(shrunk));
  EXPECT_LT(shrunk, 0.95 * plain) << "plain " << plain << " shrunk " << shrunk;
  const double truePlain = heldOutError(hHeld);
  const double trueShrunk = heldOutError(shrinkHessian(hHeld.data(), cols, 0.2));
  EXPECT_LT(truePlain, trueShrunk) << "true H " << truePlain << " shrunk " << trueShrunk;
}

TEST(Gptq, DeadColumnsBecomeZero) {
  Correlated p = correlatedProblem(15);
  for (int64_t dead : {5, 130}) // a column with no signal in calibration
    for (int64_t j = 0; j < p.cols; ++j)
      p.h[dead * p.cols + j] = p.h[j * p.cols + dead] = 0.0;
  Result<GptqResult> g = quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), {4, 32});
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(g->deadColumns, 2);
  for (int64_t r = 0; r < p.rows; ++r) {
    EXPECT_EQ(g->tensor.dequantized[r * p.cols + 5], 0.0f);
    EXPECT_EQ(g->tensor.dequantized[r * p.cols + 130], 0.0f);
  }
}

TEST(Gptq, FailsWithAMessageOnBadHessian) {
  const int64_t cols = 128;
  std::vector<float> w(4 * cols, 0.1f);
  std::vector<double> h(cols * cols, 0.0);
  for (int64_t j = 0; j < cols; ++j)
    h[j * cols + j] = 1.0;
  h[3 * cols + 3] = -1.0;
  Result<GptqResult> g = quantizeGptq(w.data(), 4, cols, h.data(), {4, 32});
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.status().message().find("column 3"), std::string::npos);
  // Indefinite with a positive diagonal: damping retries run out.
  h[3 * cols + 3] = 1.0;
  h[3 * cols + 4] = h[4 * cols + 3] = 2.0;
  GptqOptions options;
  options.percDamp = 0.0;
  g = quantizeGptq(w.data(), 4, cols, h.data(), {4, 32}, options);
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.status().message().find("positive definite"), std::string::npos)
      << g.status().message();
  h[0] = std::nan("");
  EXPECT_FALSE(quantizeGptq(w.data(), 4, cols, h.data(), {4, 32}).isOk());
}

// One factor of H serves every tensor reading that input and every format:
// the same bytes and loss as factoring again for each call. A factor made for
// the other column order is refused.
TEST(Gptq, SharedFactorGivesTheSameResult) {
  const Correlated p = correlatedProblem(17);
  test::Rng rng(18);
  const std::vector<float> other = test::gaussian(rng, p.rows * p.cols, 0.05);
  for (bool actOrder : {false, true}) {
    GptqOptions options;
    options.actOrder = actOrder;
    Result<GptqFactor> factor = factorGptq(p.h.data(), p.cols, options);
    ASSERT_TRUE(factor.isOk()) << factor.status().message();
    for (const std::vector<float>* w : {&p.w, &other})
      for (const QuantSpec spec : {QuantSpec{5, 64}, QuantSpec{6, 32}, QuantSpec{2, 128}}) {
        SCOPED_TRACE("q" + std::to_string(spec.bits) + "_g" + std::to_string(spec.groupSize));
        Result<GptqResult> shared = quantizeGptq(w->data(), p.rows, *factor, spec, options);
        Result<GptqResult> alone =
            quantizeGptq(w->data(), p.rows, p.cols, p.h.data(), spec, options);
        ASSERT_TRUE(shared.isOk() && alone.isOk());
        EXPECT_EQ(shared->tensor.packed, alone->tensor.packed);
        EXPECT_EQ(shared->lossEstimate, alone->lossEstimate);
      }
    GptqOptions otherOrder;
    otherOrder.actOrder = !actOrder;
    Result<GptqResult> refused = quantizeGptq(p.w.data(), p.rows, *factor, {4, 64}, otherOrder);
    ASSERT_FALSE(refused.isOk());
    EXPECT_NE(refused.status().message().find("column order"), std::string::npos);
  }
}

// Every compensation is one running sum per row, added up in column order
// whenever it is brought up to date (Gptq.cpp), so the block size of the lazy
// batch update does not change a bit: block 1 (every update applied at once, the
// unblocked algorithm), sizes that split groups (7, 48), the default, and one
// block for the whole row. 45 rows: the last tile has padding rows.
TEST(Gptq, BlockSizeDoesNotChangeABit) {
  Correlated p = correlatedProblem(21);
  p.rows = 45;
  p.w.resize(size_t(p.rows * p.cols));
  for (bool actOrder : {false, true})
    for (int group : {32, 128, kQuantK16Group}) {
      SCOPED_TRACE(std::string(actOrder ? "act-order" : "natural") + " group " +
                   std::to_string(group));
      GptqOptions unblocked;
      unblocked.actOrder = actOrder;
      unblocked.blockSize = 1;
      Result<GptqResult> ref =
          quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), {3, group}, unblocked);
      ASSERT_TRUE(ref.isOk());
      for (int block : {7, 48, 128, 100000}) {
        SCOPED_TRACE("block " + std::to_string(block));
        GptqOptions options = unblocked;
        options.blockSize = block;
        Result<GptqResult> g =
            quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), {3, group}, options);
        ASSERT_TRUE(g.isOk());
        EXPECT_EQ(g->tensor.packed, ref->tensor.packed);
        EXPECT_EQ(g->tensor.dequantized, ref->tensor.dequantized);
        EXPECT_EQ(g->lossEstimate, ref->lossEstimate);
      }
    }
}

// The rows of a tile are the SIMD lanes and no sum is split across lanes, so
// the 4-lane (SSE), 8-lane (AVX2) and 16-lane (AVX-512) kernels give the same
// bytes; the widths this CPU lacks are refused with a message.
TEST(Gptq, SameBytesForEveryVectorWidth) {
  Correlated p = correlatedProblem(22);
  p.rows = 50;
  p.w.resize(size_t(p.rows * p.cols));
  for (bool actOrder : {false, true}) {
    GptqOptions narrow;
    narrow.actOrder = actOrder;
    narrow.lanes = 4;
    for (const QuantSpec spec : {QuantSpec{4, 64}, QuantSpec{4, kQuantK16Group}}) {
      Result<GptqResult> ref = quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), spec, narrow);
      ASSERT_TRUE(ref.isOk());
      for (int lanes : {8, 16}) {
        SCOPED_TRACE(std::to_string(lanes) + " lanes" + (actOrder ? " act-order" : ""));
        GptqOptions options = narrow;
        options.lanes = lanes;
        Result<GptqResult> g = quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), spec, options);
        if (lanes > widestLanes()) {
          ASSERT_FALSE(g.isOk());
          EXPECT_NE(g.status().message().find("lane"), std::string::npos);
          continue;
        }
        ASSERT_TRUE(g.isOk());
        EXPECT_EQ(g->tensor.packed, ref->tensor.packed);
        EXPECT_EQ(g->tensor.dequantized, ref->tensor.dequantized);
        EXPECT_EQ(g->lossEstimate, ref->lossEstimate);
      }
    }
  }
}

TEST(Gptq, SameBytesForAnyThreadCount) {
  const Correlated p = correlatedProblem(16);
  GptqOptions one, many;
  one.threads = 1;
  many.threads = 3;
  one.actOrder = many.actOrder = true;
  Result<GptqResult> a = quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), {4, 64}, one);
  Result<GptqResult> b = quantizeGptq(p.w.data(), p.rows, p.cols, p.h.data(), {4, 64}, many);
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_EQ(a->tensor.packed, b->tensor.packed);
  EXPECT_EQ(a->lossEstimate, b->lossEstimate);
}

} // namespace
} // namespace quant
} // namespace ninfer
