// The CPU reference kernels against naive double-precision implementations
// written here from the op definitions in plan.fbs.
#include "CpuOps.h"
#include "Half.h"
#include "ninfer/KvFormat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <vector>

namespace ninfer {
namespace {

std::vector<float> randomValues(size_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::vector<float> v(count);
  for (float& x : v)
    x = lo + (hi - lo) * float(rng() >> 8) / 16777216.0f;
  return v;
}

void expectClose(const std::vector<float>& actual, const std::vector<double>& expected,
                 double tolerance, const char* what) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], tolerance * std::max(1.0, std::fabs(expected[i])))
        << what << " element " << i;
}

TEST(CpuOps, EmbeddingCopiesRows) {
  const std::vector<float> table = randomValues(5 * 3, 1);
  const int32_t tokens[3] = {4, 0, 4};
  std::vector<float> out(9);
  cpu::embedding(tokens, 3, table.data(), 3, out.data());
  for (int t = 0; t < 3; ++t)
    for (int d = 0; d < 3; ++d)
      EXPECT_EQ(out[t * 3 + d], table[tokens[t] * 3 + d]);
}

TEST(CpuOps, RmsNormOverGroups) {
  CpuThreadPool pool(3);
  const int rows = 5, width = 12, dim = 4;
  const float eps = 1e-6f;
  std::vector<float> x = randomValues(rows * width, 2, -3.0f, 3.0f);
  const std::vector<float> w = randomValues(dim, 3, 0.5f, 1.5f);
  std::vector<double> expected(x.size());
  for (int g = 0; g < rows * width / dim; ++g) {
    double ss = 0;
    for (int i = 0; i < dim; ++i)
      ss += double(x[g * dim + i]) * x[g * dim + i];
    for (int i = 0; i < dim; ++i)
      expected[g * dim + i] = x[g * dim + i] / std::sqrt(ss / dim + eps) * w[i];
  }
  std::vector<float> y(x.size());
  cpu::rmsNorm(pool, x.data(), w.data(), y.data(), rows, width, dim, eps);
  expectClose(y, expected, 1e-6, "rmsnorm");
  // In place gives the same values.
  cpu::rmsNorm(pool, x.data(), w.data(), x.data(), rows, width, dim, eps);
  EXPECT_EQ(x, y);
}

TEST(CpuOps, LinearWithBiasMatchesDoubleAndIgnoresThreadCount) {
  const int rows = 3, in = 37, out = 29;
  const std::vector<float> x = randomValues(rows * in, 4);
  const std::vector<float> w = randomValues(out * in, 5);
  const std::vector<float> b = randomValues(out, 6);
  std::vector<double> expected(rows * out);
  for (int t = 0; t < rows; ++t)
    for (int o = 0; o < out; ++o) {
      double s = b[o];
      for (int i = 0; i < in; ++i)
        s += double(x[t * in + i]) * w[o * in + i];
      expected[t * out + o] = s;
    }
  std::vector<float> y1(rows * out), y4(rows * out);
  CpuThreadPool one(1), four(4);
  cpu::linear(one, x.data(), rows, w.data(), b.data(), in, out, y1.data());
  cpu::linear(four, x.data(), rows, w.data(), b.data(), in, out, y4.data());
  expectClose(y1, expected, 1e-5, "linear");
  EXPECT_EQ(y1, y4);
  // Without bias.
  cpu::linear(one, x.data(), rows, w.data(), nullptr, in, out, y1.data());
  for (int t = 0; t < rows; ++t)
    for (int o = 0; o < out; ++o)
      expected[t * out + o] -= b[o];
  expectClose(y1, expected, 1e-5, "linear without bias");
}

TEST(CpuOps, LinearWithFusedResidualEqualsLinearThenAddEvenInPlace) {
  const int rows = 2, in = 19, out = 23;
  const std::vector<float> x = randomValues(rows * in, 7);
  const std::vector<float> w = randomValues(out * in, 8);
  const std::vector<float> residual = randomValues(rows * out, 9);
  CpuThreadPool pool(3);
  std::vector<float> plain(rows * out), separate(rows * out);
  cpu::linear(pool, x.data(), rows, w.data(), nullptr, in, out, plain.data());
  cpu::add(residual.data(), plain.data(), separate.data(), rows * out);
  std::vector<float> inPlace = residual; // output aliases the residual, as fused plans do
  cpu::linear(pool, x.data(), rows, w.data(), nullptr, in, out, inPlace.data(), inPlace.data());
  EXPECT_EQ(inPlace, separate);
  EXPECT_NE(inPlace, plain);
}

// Rows computed together (pairs or, with AVX-512, quads of rows times pairs of
// outputs share loads; blocks of token rows and of weight rows stay in cache)
// equal the same rows computed one at a time, bit for bit: prefill and decode
// agree. Widths with and without a tail past the last 8 values (only those
// without one take the quads); rows span two and a half token blocks, the 131
// outputs (odd) two weight blocks of 64 rows at width 1024.
TEST(CpuOps, LinearRowsAreBitIdenticalToSingleRows) {
  for (int in : {77, 1024}) {
    SCOPED_TRACE("in " + std::to_string(in));
    const int rows = 2 * cpu::linearTokenBlock(in) + 3, out = 131;
    ASSERT_LT(rows, 2000);
    const std::vector<float> x = randomValues(rows * in, 7);
    const std::vector<float> w = randomValues(out * in, 8);
    const std::vector<float> b = randomValues(out, 9);
    CpuThreadPool pool(3);
    std::vector<float> all(rows * out), single(out);
    cpu::linear(pool, x.data(), rows, w.data(), b.data(), in, out, all.data());
    for (int t = 0; t < rows; ++t) {
      cpu::linear(pool, x.data() + t * in, 1, w.data(), b.data(), in, out, single.data());
      for (int o = 0; o < out; ++o)
        ASSERT_EQ(all[t * out + o], single[o]) << "row " << t << " output " << o;
    }
  }
}

// Attention's fast paths (four keys per call; the output row kept in
// registers over the values) give the plain loops' bits: widths with and
// without the vector paths.
TEST(CpuOps, AttentionInnerLoopsGiveThePlainLoopsBits) {
  for (int width : {40, 64, 128}) {
    SCOPED_TRACE("width " + std::to_string(width));
    const int count = 37;
    const std::vector<float> a = randomValues(width, 3);
    const std::vector<float> rows = randomValues(count * 2 * width, 4); // stride 2 * width
    const std::vector<float> weights = randomValues(count, 5);
    // dot1x4 against linear() of one row over four weight rows (dot()'s bits).
    std::vector<float> keys(4 * width);
    for (int k = 0; k < 4; ++k)
      std::copy(rows.begin() + k * 2 * width, rows.begin() + (k * 2 + 1) * width,
                keys.begin() + k * width);
    const float* const b[4] = {&rows[0], &rows[2 * width], &rows[4 * width], &rows[6 * width]};
    float fast[4], plain[4];
    cpu::dot1x4(a.data(), b, width, fast);
    CpuThreadPool pool(1);
    cpu::linear(pool, a.data(), 1, keys.data(), nullptr, width, 4, plain);
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(fast[k], plain[k]) << k;
    std::vector<float> sum(width), expected(width, 0.0f);
    cpu::weightedRowSum(weights.data(), rows.data(), 2 * width, count, width, sum.data());
    for (int j = 0; j < count; ++j)
      for (int d = 0; d < width; ++d)
        expected[d] += weights[j] * rows[j * 2 * width + d];
    EXPECT_EQ(sum, expected);
  }
}

TEST(CpuOps, RopeAtLaterPositions) {
  const int n = 3, heads = 2, headDim = 8, pos = 29;
  const float attentionFactor = 1.25f;
  std::vector<float> invFreq(headDim / 2);
  for (int i = 0; i < headDim / 2; ++i)
    invFreq[i] = float(1.0 / std::pow(10000.0, 2.0 * i / headDim));
  const std::vector<float> x = randomValues(n * heads * headDim, 7);
  std::vector<double> expected(x.size());
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < headDim / 2; ++i) {
        const double angle = double(pos + t) * invFreq[i];
        const double c = std::cos(angle) * attentionFactor, s = std::sin(angle) * attentionFactor;
        const size_t base = size_t(t * heads + h) * headDim;
        const double x1 = x[base + i], x2 = x[base + headDim / 2 + i];
        expected[base + i] = x1 * c - x2 * s;
        expected[base + headDim / 2 + i] = x2 * c + x1 * s;
      }
  std::vector<float> y(x.size()), cosSin(n * headDim);
  cpu::rope(x.data(), y.data(), n, pos, heads, headDim, invFreq.data(), attentionFactor,
            cosSin.data());
  expectClose(y, expected, 1e-5, "rope");
  std::vector<float> inPlace = x;
  cpu::rope(inPlace.data(), inPlace.data(), n, pos, heads, headDim, invFreq.data(), attentionFactor,
            cosSin.data());
  EXPECT_EQ(inPlace, y);
}

struct NtkCase {
  float theta, factor;
  int originalMax, headDim, seqLen;
  std::vector<float> expected;
};

// Values printed by tests/runtime/make_dynamic_ntk_golden.py from transformers.
TEST(CpuOps, DynamicNtkMatchesTransformers) {
  const std::vector<NtkCase> cases = {
      // clang-format off
{10000.0f, 2.0f, 16, 8, 17, {1.000000000e+00f, 9.614997357e-02f, 9.244817309e-03f, 8.888888988e-04f}},
{10000.0f, 2.0f, 16, 8, 40, {1.000000000e+00f, 6.299605221e-02f, 3.968502861e-03f, 2.500000119e-04f}},
{500000.0f, 4.0f, 64, 16, 1000, {1.000000000e+00f, 1.081748605e-01f, 1.170179993e-02f, 1.265840488e-03f, 1.369321108e-04f, 1.481261188e-05f, 1.602352086e-06f, 1.733342145e-07f}},
      // clang-format on
  };
  for (const NtkCase& c : cases) {
    std::vector<float> inv(c.headDim / 2);
    cpu::dynamicNtkInvFreq(c.theta, c.factor, c.originalMax, c.headDim, c.seqLen, inv.data());
    for (size_t i = 0; i < inv.size(); ++i)
      EXPECT_NEAR(inv[i], c.expected[i], 2e-7 * c.expected[i])
          << "seq_len " << c.seqLen << " i " << i;
  }
  // Up to the original length the base is theta itself.
  std::vector<float> inv(4);
  cpu::dynamicNtkInvFreq(10000.0f, 2.0f, 16, 8, 16, inv.data());
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(inv[i], 1.0 / std::pow(10000.0, 2.0 * i / 8), 1e-7);
}

// Naive attention over k/v (rounded to f16 first when `half`) for every query
// of a sequence.
std::vector<double> referenceAttention(const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v, int length,
                                       const cpu::AttentionShape& s, bool half = true) {
  const int qWidth = s.heads * s.headDim, kvWidth = s.kvHeads * s.headDim;
  std::vector<double> out(size_t(length) * qWidth, 0.0);
  auto f16 = [half](float x) { return half ? double(float(static_cast<_Float16>(x))) : double(x); };
  for (int p = 0; p < length; ++p)
    for (int h = 0; h < s.heads; ++h) {
      const int kvh = h / (s.heads / s.kvHeads);
      std::vector<double> scores;
      std::vector<int> keys;
      for (int j = 0; j <= p; ++j) {
        if (s.window > 0 && !(p - j < s.window))
          continue;
        double dot = 0;
        for (int d = 0; d < s.headDim; ++d)
          dot +=
              double(q[p * qWidth + h * s.headDim + d]) * f16(k[j * kvWidth + kvh * s.headDim + d]);
        scores.push_back(s.scale * dot);
        keys.push_back(j);
      }
      double mx = -INFINITY, sum = 0;
      for (double x : scores)
        mx = std::max(mx, x);
      for (double& x : scores)
        sum += (x = std::exp(x - mx));
      for (size_t i = 0; i < keys.size(); ++i)
        for (int d = 0; d < s.headDim; ++d)
          out[p * qWidth + h * s.headDim + d] +=
              scores[i] / sum * f16(v[keys[i] * kvWidth + kvh * s.headDim + d]);
    }
  return out;
}

class AttentionTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(AttentionTest, MatchesReferenceAndStepsEqualOneShot) {
  const auto [heads, kvHeads, window] = GetParam();
  const int headDim = 8, length = 13, context = 16;
  const cpu::AttentionShape shape{heads, kvHeads, headDim, window, 1.0f / std::sqrt(8.0f)};
  const int qWidth = heads * headDim, kvWidth = kvHeads * headDim;
  const std::vector<float> q = randomValues(size_t(length) * qWidth, 11, -2.0f, 2.0f);
  const std::vector<float> k = randomValues(size_t(length) * kvWidth, 12, -2.0f, 2.0f);
  const std::vector<float> v = randomValues(size_t(length) * kvWidth, 13);
  const std::vector<double> expected = referenceAttention(q, k, v, length, shape);

  CpuThreadPool pool(3);
  std::vector<float> scratch(size_t(pool.size()) * context);
  // One shot: all rows in one step.
  std::vector<uint16_t> kCache(context * kvWidth), vCache(context * kvWidth);
  std::vector<float> oneShot(size_t(length) * qWidth);
  const cpu::KvCache kc{kCache.data(), false, context}, vc{vCache.data(), false, context};
  cpu::appendKv(k.data(), v.data(), length, 0, kvHeads, headDim, kc, vc);
  cpu::attention(pool, q.data(), length, 0, kc, vc, shape, scratch.data(), context,
                 oneShot.data());
  expectClose(oneShot, expected, 2e-5, "attention");

  // A 5-token prefill, then one token per step.
  std::vector<uint16_t> kSteps(context * kvWidth), vSteps(context * kvWidth);
  std::vector<float> stepped(size_t(length) * qWidth);
  const cpu::KvCache ks{kSteps.data(), false, context}, vs{vSteps.data(), false, context};
  int pos = 0;
  while (pos < length) {
    const int n = pos == 0 ? 5 : 1;
    cpu::appendKv(k.data() + pos * kvWidth, v.data() + pos * kvWidth, n, pos, kvHeads, headDim,
                  ks, vs);
    cpu::attention(pool, q.data() + pos * qWidth, n, pos, ks, vs, shape, scratch.data(), context,
                   stepped.data() + pos * qWidth);
    pos += n;
  }
  EXPECT_EQ(stepped, oneShot);

  // With the cache rows converted to f32 once per step: the same bits, in one
  // shot and in steps (the buffer is filled with garbage first: only rows the
  // step converts may be read).
  std::vector<float> decoded(size_t(2) * context * kvWidth);
  std::vector<float> fastOneShot(size_t(length) * qWidth);
  std::fill(decoded.begin(), decoded.end(), NAN);
  cpu::attention(pool, q.data(), length, 0, kc, vc, shape, scratch.data(), context,
                 fastOneShot.data(), decoded.data());
  EXPECT_EQ(fastOneShot, oneShot);
  std::vector<float> fastStepped(size_t(length) * qWidth);
  for (pos = 0; pos < length;) {
    const int n = pos == 0 ? 5 : 1;
    std::fill(decoded.begin(), decoded.end(), NAN);
    cpu::attention(pool, q.data() + pos * qWidth, n, pos, ks, vs, shape, scratch.data(), context,
                   fastStepped.data() + pos * qWidth, decoded.data());
    pos += n;
  }
  EXPECT_EQ(fastStepped, oneShot);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(std::make_tuple(4, 4, 0), // multi-head
                                           std::make_tuple(4, 2, 0), // GQA
                                           std::make_tuple(6, 1, 0), // MQA
                                           std::make_tuple(4, 2, 3), // GQA + sliding window
                                           std::make_tuple(2, 2, 1)));

TEST(CpuOps, AttentionCacheHoldsRoundedHalves) {
  const float k[2] = {0.1f, 70000.0f}, v[2] = {-1.0f / 3.0f, 1e-8f};
  uint16_t kCache[4] = {}, vCache[4] = {};
  cpu::appendKv(k, v, 1, 1, 1, 2, cpu::KvCache{kCache, false, 2}, cpu::KvCache{vCache, false, 2});
  EXPECT_EQ(kCache[0], 0);
  EXPECT_EQ(halfBitsToFloat(kCache[2]), float(static_cast<_Float16>(0.1f)));
  EXPECT_TRUE(std::isinf(halfBitsToFloat(kCache[3])));
  EXPECT_EQ(halfBitsToFloat(vCache[2]), float(static_cast<_Float16>(-1.0f / 3.0f)));
  EXPECT_EQ(halfBitsToFloat(vCache[3]), 0.0f);
}

// An int8 cache as KvFormat.h lays it out: codes, then f32 scales.
struct Q8Cache {
  Q8Cache(int context, int kvHeads, int headDim)
      : bytes(size_t(kv::q8CacheBytes(context, kvHeads, headDim)), 0),
        view{bytes.data(), true, context}, kvHeads(kvHeads), headDim(headDim) {}
  int8_t code(int64_t row, int d) const { return int8_t(bytes[size_t(row * headDim + d)]); }
  float scale(int64_t row) const {
    float s;
    std::memcpy(&s,
                bytes.data() + kv::q8ScaleOffset(view.context, kvHeads, headDim) + row * 4, 4);
    return s;
  }
  std::vector<uint8_t> bytes;
  cpu::KvCache view;
  int kvHeads, headDim;
};

TEST(CpuOps, Q8KvRowsRoundTripWithinHalfAScale) {
  const int kvHeads = 3, headDim = 24, n = 5, pos = 2, context = 8;
  std::vector<float> k = randomValues(size_t(n) * kvHeads * headDim, 31, -3.0f, 3.0f);
  std::vector<float> v = randomValues(size_t(n) * kvHeads * headDim, 32, -0.01f, 0.01f);
  std::fill(v.begin() + headDim, v.begin() + 2 * headDim, 0.0f); // an all-zero row
  Q8Cache kc(context, kvHeads, headDim), vc(context, kvHeads, headDim);
  cpu::appendKv(k.data(), v.data(), n, pos, kvHeads, headDim, kc.view, vc.view);
  for (const auto& [cache, x] : {std::make_pair(&kc, &k), std::make_pair(&vc, &v)})
    for (int r = 0; r < n * kvHeads; ++r) {
      const int64_t row = int64_t(pos) * kvHeads + r;
      float absMax = 0.0f;
      for (int d = 0; d < headDim; ++d)
        absMax = std::max(absMax, std::fabs((*x)[size_t(r * headDim + d)]));
      const float scale = cache->scale(row);
      EXPECT_EQ(scale, absMax / 127.0f) << "row " << r;
      int largest = 0;
      for (int d = 0; d < headDim; ++d) {
        const float value = (*x)[size_t(r * headDim + d)];
        const int code = cache->code(row, d);
        largest = std::max(largest, std::abs(code));
        EXPECT_LE(std::fabs(value - float(code) * scale), scale * 0.5f * (1.0f + 1e-6f))
            << "row " << r << " dim " << d;
      }
      EXPECT_EQ(largest, absMax > 0.0f ? 127 : 0) << "row " << r;
    }
  // Rows before pos stay untouched.
  for (int64_t row = 0; row < int64_t(pos) * kvHeads; ++row) {
    EXPECT_EQ(kc.scale(row), 0.0f);
    EXPECT_EQ(kc.code(row, 0), 0);
  }
}

TEST(CpuOps, Q8KvAttentionReadsDequantizedRows) {
  const int heads = 4, kvHeads = 2, headDim = 16, length = 11, context = 12;
  const cpu::AttentionShape shape{heads, kvHeads, headDim, 0, 0.25f};
  const int qWidth = heads * headDim, kvWidth = kvHeads * headDim;
  const std::vector<float> q = randomValues(size_t(length) * qWidth, 41, -2.0f, 2.0f);
  const std::vector<float> k = randomValues(size_t(length) * kvWidth, 42, -2.0f, 2.0f);
  const std::vector<float> v = randomValues(size_t(length) * kvWidth, 43);
  CpuThreadPool pool(2);
  std::vector<float> scratch(size_t(pool.size()) * context);
  Q8Cache kc(context, kvHeads, headDim), vc(context, kvHeads, headDim);
  std::vector<float> out(size_t(length) * qWidth);
  cpu::appendKv(k.data(), v.data(), length, 0, kvHeads, headDim, kc.view, vc.view);
  cpu::attention(pool, q.data(), length, 0, kc.view, vc.view, shape, scratch.data(), context,
                 out.data());
  // The reference over the cache's dequantized values agrees to f32 rounding;
  // the one over the original values only to the quantization error.
  std::vector<float> kDeq(k.size()), vDeq(v.size());
  for (int64_t row = 0; row < int64_t(length) * kvHeads; ++row)
    for (int d = 0; d < headDim; ++d) {
      kDeq[size_t(row * headDim + d)] = float(kc.code(row, d)) * kc.scale(row);
      vDeq[size_t(row * headDim + d)] = float(vc.code(row, d)) * vc.scale(row);
    }
  expectClose(out, referenceAttention(q, kDeq, vDeq, length, shape, false), 2e-6,
              "q8 attention");
  const std::vector<double> exact = referenceAttention(q, k, v, length, shape, false);
  double worst = 0.0;
  for (size_t i = 0; i < out.size(); ++i)
    worst = std::max(worst, std::fabs(double(out[i]) - exact[i]));
  EXPECT_GT(worst, 1e-5); // int8 is lossy...
  EXPECT_LT(worst, 2e-2); // ...by about a code step
}

TEST(CpuOps, SwiGluAndAdd) {
  const std::vector<float> g = randomValues(50, 21, -8.0f, 8.0f);
  const std::vector<float> u = randomValues(50, 22);
  std::vector<float> y(50);
  cpu::swiGlu(g.data(), u.data(), y.data(), 50);
  std::vector<double> expected(50);
  for (int i = 0; i < 50; ++i)
    expected[i] = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i];
  expectClose(y, expected, 1e-6, "swiglu");
  cpu::add(g.data(), u.data(), y.data(), 50);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(y[i], g[i] + u[i]);
}

} // namespace
} // namespace ninfer
