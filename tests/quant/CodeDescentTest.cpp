// Coordinate descent on codes (CodeDescent.h), checked against the output
// error of the decoded bytes (QuantError.h): the returned error is tr(E Hd E^T) of the
// result, it is below GPTQ's on correlated inputs, no single code moved by
// one level lowers it further, the scales are untouched, and with a diagonal
// H the nearest levels RTN picks are left as they are.
#include "CodeDescent.h"
#include "Gptq.h"
#include "Packing.h"
#include "QuantError.h"
#include "QuantTestUtil.h"
#include "Rtn.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace quant {
namespace {

// tr(E Hd E^T) of the decoded tensor, Hd = h + damp I (QuantError.h's measure).
double outputError(const QuantizedTensor& t, const std::vector<float>& w,
                   const std::vector<double>& h, double damp) {
  std::vector<float> q(size_t(t.rows * t.cols));
  EXPECT_TRUE(
      dequantizePacked(t.spec, t.rows, t.cols, t.packed.data(), t.packed.size(), q.data()).isOk());
  std::vector<double> hd = h;
  for (int64_t j = 0; j < t.cols; ++j)
    hd[size_t(j * t.cols + j)] += damp;
  Result<double> error = quant::outputError(w.data(), q.data(), t.rows, t.cols, hd.data());
  EXPECT_TRUE(error.isOk());
  return error.isOk() ? *error : 0.0;
}

std::vector<uint16_t> rowScales(const QuantizedTensor& t, int64_t row) {
  std::vector<uint8_t> codes(static_cast<size_t>(t.cols));
  std::vector<uint16_t> scales(size_t(t.cols / 16 + 8), 0);
  unpackRow(t.spec, t.rows, t.cols, row, t.packed.data(), codes.data(), scales.data());
  return scales;
}

TEST(CodeDescent, LowersGptqErrorToALocalMinimumKeepingScales) {
  test::Rng rng(21);
  const int64_t rows = 3, cols = 128, n = 600;
  const std::vector<double> x = test::lowRankInputs(rng, n, cols, 16, 0.2);
  const std::vector<double> h = test::gram(x, n, cols);
  const std::vector<float> w = test::gaussian(rng, rows * cols);
  for (QuantSpec spec : {QuantSpec{2, 64}, QuantSpec{3, 16}}) {
    SCOPED_TRACE(spec.bits);
    GptqOptions options;
    options.threads = 1;
    Result<GptqResult> g = quantizeGptq(w.data(), rows, cols, h.data(), spec, options);
    ASSERT_TRUE(g.isOk()) << g.status().message();
    const double damp = g->damp;
    QuantizedTensor refined = g->tensor;
    Result<double> loss = refineCodes(w.data(), h.data(), damp, 50, 2, refined);
    ASSERT_TRUE(loss.isOk()) << loss.status().message();
    const double direct = outputError(refined, w, h, damp);
    EXPECT_NEAR(*loss, direct, 1e-6 * direct);
    EXPECT_LT(direct, 0.97 * outputError(g->tensor, w, h, damp));
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(rowScales(refined, r), rowScales(g->tensor, r));
    // Refined dequantized values are the decoded bytes.
    std::vector<float> decoded(refined.dequantized.size());
    ASSERT_TRUE(dequantizePacked(spec, rows, cols, refined.packed.data(), refined.packed.size(),
                                 decoded.data())
                    .isOk());
    EXPECT_EQ(refined.dequantized, decoded);
    // No single move of one level lowers the error.
    const QuantRange range = quantRange(spec.bits);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<uint8_t> codes(static_cast<size_t>(cols));
      std::vector<uint16_t> scales(size_t(cols / 16 + 8));
      unpackRow(spec, rows, cols, r, refined.packed.data(), codes.data(), scales.data());
      for (int64_t j = 0; j < cols; j += 7)
        for (int k : {-1, 1}) {
          const int code = int(codes[size_t(j)]) + k;
          if (code < 0 || code > range.qmax + range.codeOffset)
            continue;
          QuantizedTensor moved = refined;
          std::vector<uint8_t> changed = codes;
          changed[size_t(j)] = uint8_t(code);
          packRow(spec, rows, cols, r, changed.data(), scales.data(), moved.packed.data());
          EXPECT_GE(outputError(moved, w, h, damp), direct * (1 - 1e-9)) << r << " " << j;
        }
    }
  }
}

TEST(CodeDescent, DiagonalHessianKeepsTheNearestLevels) {
  test::Rng rng(22);
  const int64_t rows = 4, cols = 256;
  const std::vector<float> w = test::gaussian(rng, rows * cols);
  std::vector<double> h(size_t(cols * cols), 0.0);
  std::vector<float> importance(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j)
    importance[size_t(j)] = float(h[size_t(j * cols + j)] = 0.5 + rng.uniform());
  RtnOptions options;
  options.threads = 1;
  Result<QuantizedTensor> rtn =
      quantizeRtn(w.data(), rows, cols, QuantSpec{3, 64}, importance.data(), options);
  ASSERT_TRUE(rtn.isOk());
  QuantizedTensor refined = *rtn;
  ASSERT_TRUE(refineCodes(w.data(), h.data(), 0.0, 5, 1, refined).isOk());
  EXPECT_EQ(refined.packed, rtn->packed);
}

} // namespace
} // namespace quant
} // namespace ninfer
