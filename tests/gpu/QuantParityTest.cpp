// Quantized op parity: the CUDA kernels of codegen/kernels/linear_quant.cuh
// (quantized Linear, both paths, and the quantized Embedding lookup) and the
// device fill of dummy quantized weights, against the CPU executor on the same
// plan, for every group-quantized plan dtype (Q8/Q6/Q5/Q4/Q3/Q2 x G32/G64/G128, and
// Q4/Q3/Q2 K16 with random sub-scales).
// Weights are random codes and signed fp16 scales packed by the real packer
// (passes/quant/Packing), so both executors decode the bytes the compiler writes.
//
// Linear: K in {128, 384, 1152, 4096} x N in {1, 7, 64, 1000, 4096}, bias on
// half of them (a checkerboard over K and N, bias dtypes F32/F16/BF16 in turn),
// every row of steps of 1..8 tokens (the fused dequant GEMV) and of 9, 33 and
// 130 tokens (the prefill GEMM: tensor cores on sm_80+, partial tiles in M, N
// and K), plus last_row_only and fused-residual cases over the same steps.
//
// Measure: nMSE = sum((gpu - cpu)^2) / sum(cpu^2) over all values of a case's
// steps on one path (1..8 rows, 9..130 rows), not per step: a step with one
// output value (N 1, one row) measures a single dot product's relative error,
// which has no useful bound when that output happens to be near zero.
// Bounds:
// * Linear 1e-5. Both executors decode a weight to the same f32 (an fp16 scale
//   times a code of at most 8 bits is exact in f32) and accumulate f32 products,
//   so they differ by summation order only (~K * 2^-48, 1e-11 at K 4096) where
//   activations stay f32 (the sm_75 paths). The tensor-core GEMV and GEMM round
//   activations to f16, which adds a relative error of at most
//   2^-11 per product, independent across products: an nMSE around
//   2^-22 / 3 = 8e-8 (emulated on the CPU over this sweep: at most 5.2e-8), and as
//   much again if it also rounds the decoded weights. A decoding bug is orders of
//   magnitude above the bound: a code offset off by one gives ~1/E[q^2] (Q8
//   2e-4, Q4 0.05, Q2 0.7); a wrong scale index, unit offset or bit order moves
//   whole groups and gives ~1 (random codes, signed scales of random magnitude).
//   Emulated on the CPU the same way (the second executor reading a plan with
//   codes + 1 mod 2^bits, codes of value pairs swapped, each group given the
//   next group's scale or each unit the next unit's codes, or one value in 32
//   its neighbour's code), every case such a bug touches failed with >= 2e-2.
// * Embedding 0: the lookup copies decoded values, exact on both executors.
//
// Each test prints one "[parity]" line per case family (what run_on_device.sh
// shows) with its worst nMSE and where it occurred.
// Skips (GTEST_SKIP) when libcuda.so.1 cannot be loaded or there is no GPU.
#include "GpuParity.h"
#include "Packing.h"
#include "ninfer/GemvShapes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace ninfer {
namespace {

using plan::DType;
using test::kTokenVocab;
using test::TestPlan;

constexpr int kMaxStep = 130;
constexpr int kContext = 256;
// Token counts per step: a prefill, decodes (the second one replays the CUDA
// graph of the first), short prefills up to the GEMV limit of 8 rows, then the
// tiled path with partial tiles.
const std::vector<int> kSteps = {130, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 33};
constexpr int kGemvMaxRows = 8;
constexpr double kLinearBound = 1e-5;

const std::vector<int> kInFeatures = {128, 384, 1152, 4096};
const std::vector<int> kOutFeatures = {1, 7, 64, 1000, 4096};

// One family of cases: per case, the steps of minRows..maxRows tokens are
// pooled into one nMSE (a sum over all their compared values) and checked
// against the bound; the worst case is printed as one line.
class Family {
public:
  Family(std::string name, double bound, int minRows, int maxRows)
      : name_(std::move(name)), bound_(bound), minRows_(minRows), maxRows_(maxRows) {}

  // errors: one per step of `stepRows` (the token counts stepErrors ran).
  void check(const std::vector<test::StepError> &errors, const std::string &what,
             const std::vector<int> &stepRows = kSteps) {
    test::StepError pooled{0.0, 0.0};
    std::string steps;
    ASSERT_EQ(errors.size(), stepRows.size()) << what;
    for (size_t s = 0; s < stepRows.size(); ++s)
      if (stepRows[s] >= minRows_ && stepRows[s] <= maxRows_) {
        pooled += errors[s];
        char step[48];
        std::snprintf(step, sizeof(step), " %d:%.2g", stepRows[s], errors[s].nmse());
        steps += step;
      }
    EXPECT_LE(pooled.nmse(), bound_) << name_ << ": " << what << " (nMSE by step rows:" << steps
                                     << ")";
    ++cases_;
    if (pooled.nmse() > worst_) {
      worst_ = pooled.nmse();
      worstCase_ = what;
    }
  }

  void print() const {
    std::printf("[parity] %-36s %2d cases  worst nMSE %-9.3g (bound %.0e)  at %s\n",
                name_.c_str(), cases_, worst_, bound_, worstCase_.c_str());
  }

private:
  std::string name_;
  double bound_;
  int minRows_, maxRows_;
  int cases_ = 0;
  double worst_ = 0.0;
  std::string worstCase_ = "-";
};

class QuantParity : public ::testing::TestWithParam<int> {
protected:
  quant::QuantFormatId format() const { return static_cast<quant::QuantFormatId>(GetParam()); }
  quant::QuantSpec spec() const {
    const quant::QuantFormatTraits traits = quant::quantFormatTraits(format());
    return {traits.bits, traits.groupSize};
  }
  DType dtype() const { return static_cast<DType>(quant::planDTypeOfFormat(format())); }
  std::string typeName() const { return plan::EnumNameDType(dtype()); }
};

// Random codes over the whole range and fp16 scales of random sign and
// magnitude in [0.5, 1] / (sqrt(cols) * 2^(bits-1)) (weights O(1/sqrt(cols)),
// outputs O(1)), packed by the compiler's packer.
std::vector<uint8_t> randomPacked(const quant::QuantSpec &spec, int64_t rows, int64_t cols,
                                  std::mt19937 &rng) {
  std::vector<uint8_t> packed(
      size_t(quant::quantTensorBytes(spec.bits, spec.groupSize, rows, cols)));
  std::vector<uint8_t> codes(static_cast<size_t>(cols));
  std::vector<uint16_t> scales(static_cast<size_t>(cols / spec.groupSize));
  std::uniform_int_distribution<int> code(0, (1 << spec.bits) - 1);
  std::uniform_real_distribution<float> magnitude(0.5f, 1.0f);
  const float unit = 1.0f / (std::sqrt(float(cols)) * float(1 << (spec.bits - 1)));
  for (int64_t r = 0; r < rows; ++r) {
    for (uint8_t &c : codes)
      c = static_cast<uint8_t>(code(rng));
    if (spec.isK16()) { // records: d of random sign, sub-scales over the whole 6-bit range
      std::uniform_int_distribution<int> sub(-32, 31);
      for (size_t u = 0; u < scales.size() / 2; u += 4) {
        int subs[8];
        for (int& v : subs)
          v = sub(rng);
        quant::setK16Record(
            &scales[u], floatToHalfBits((rng() & 1 ? -unit : unit) * magnitude(rng) / 16.0f),
            subs);
      }
    } else {
      for (uint16_t& s : scales)
        s = floatToHalfBits((rng() & 1 ? -unit : unit) * magnitude(rng));
    }
    quant::packRow(spec, rows, cols, r, codes.data(), scales.data(), packed.data());
  }
  return packed;
}

struct LinearCase {
  int k, n;
  bool lastRowOnly;
  DType biasType; // F32/F16/BF16, or I32 for no bias
  bool residual = false; // y = x W^T (+ bias) + residual, the add fused into the linear
};

std::string caseName(const std::string &type, const LinearCase &c) {
  std::string name = type + " " + std::to_string(c.k) + "->" + std::to_string(c.n);
  if (c.biasType != DType::I32)
    name += std::string(" bias ") + plan::EnumNameDType(c.biasType);
  return name + (c.lastRowOnly ? " last_row_only" : "") + (c.residual ? " residual" : "");
}

// tokens -> Embedding (random f32 table) -> quantized Linear (+ a residual
// from another random table) -> logits (all rows, or the last row for
// last_row_only).
TestPlan linearPlan(const quant::QuantSpec &spec, DType dtype, const LinearCase &c) {
  std::mt19937 rng(static_cast<uint32_t>(c.k * 31 + c.n));
  TestPlan t(kMaxStep, kContext);
  const uint32_t x = test::inputRows(t, "x", c.k, rng);
  const uint32_t w = t.addWeightBytes("w", dtype, {c.n, c.k}, randomPacked(spec, c.n, c.k, rng));
  std::vector<uint32_t> inputs = {x, w};
  const bool bias = c.biasType != DType::I32;
  if (bias)
    inputs.push_back(
        t.addWeight("b", c.biasType, {c.n}, test::randomValues(size_t(c.n), 0.5f, rng)));
  if (c.residual)
    inputs.push_back(test::inputRows(t, "residual", c.n, rng));
  t.addLogits(c.lastRowOnly ? 1 : kMaxStep, c.n);
  plan::LinearAttrsT a;
  a.in_features = c.k;
  a.out_features = c.n;
  a.has_bias = bias;
  a.last_row_only = c.lastRowOnly;
  a.residual = c.residual;
  t.addOp("linear", a, inputs, {t.logits});
  return t;
}

TEST_P(QuantParity, Linear) {
  REQUIRE_GPU();
  const DType biasTypes[] = {DType::F32, DType::F16, DType::BF16};
  Family gemv(typeName() + " linear, 1-8 rows", kLinearBound, 1, kGemvMaxRows);
  Family tiled(typeName() + " linear, 9-130 rows", kLinearBound, kGemvMaxRows + 1, kMaxStep);
  int biased = 0;
  for (size_t i = 0; i < kInFeatures.size(); ++i)
    for (size_t j = 0; j < kOutFeatures.size(); ++j) {
      const bool bias = (i + j) % 2 == 1;
      const LinearCase c{kInFeatures[i], kOutFeatures[j], false,
                         bias ? biasTypes[biased++ % 3] : DType::I32};
      TestPlan t = linearPlan(spec(), dtype(), c);
      const std::string what = caseName(typeName(), c);
      const std::vector<test::StepError> errors = test::stepErrors(t, kSteps, what);
      gemv.check(errors, what);
      tiled.check(errors, what);
    }
  gemv.print();
  tiled.print();
}

TEST_P(QuantParity, LinearLastRowOnly) {
  REQUIRE_GPU();
  Family family(typeName() + " linear, last_row_only", kLinearBound, 1, kMaxStep);
  for (const LinearCase &c : {LinearCase{128, 7, true, DType::I32},
                              LinearCase{384, 1000, true, DType::BF16},
                              LinearCase{1152, 64, true, DType::F16},
                              LinearCase{4096, 4096, true, DType::I32}}) {
    TestPlan t = linearPlan(spec(), dtype(), c);
    const std::string what = caseName(typeName(), c);
    family.check(test::stepErrors(t, kSteps, what), what);
  }
  family.print();
}

// The residual add fused into the linear (PlanFusion), on both paths.
TEST_P(QuantParity, LinearResidual) {
  REQUIRE_GPU();
  Family family(typeName() + " linear + residual", kLinearBound, 1, kMaxStep);
  for (const LinearCase &c : {LinearCase{128, 7, false, DType::I32, true},
                              LinearCase{384, 1000, false, DType::BF16, true},
                              LinearCase{4096, 4096, false, DType::I32, true}}) {
    TestPlan t = linearPlan(spec(), dtype(), c);
    const std::string what = caseName(typeName(), c);
    family.check(test::stepErrors(t, kSteps, what), what);
  }
  family.print();
}

// Wide layers, whose steps of 2..8 rows take the multi-row bulk GEMV on sm_90
// (gemv_quant_rows.cuh; GemvShapes.h rowsPays; Nvrtc.WideQuantLinearTakesRowsKernelOnSm90
// checks the launches): K 4224 in three parts of K (the last one unit: the parts' sums
// meet in global memory), K 2176 in one part where its code rows fit a TMA box (a block
// per SM; else two parts) and K 1024 in one part, each with a bias and the residual fused
// (the kernel loads both for a batch of tiles before it stores any output), and K 1024
// without either; and K 4096 with 16,896 outputs, whose one-token steps take the bulk
// GEMV's wide chunks (GemvShapes.h kBulkWideTiles) in formats of 4 bits or fewer.
// Steps of 1..8 rows only (the CPU reference of a 130-row step of these is slow). Bound
// 1e-6: every format measured 3.4e-8 to 7.1e-8 on the H200, and a barrier race that
// spoiled some rows of blocks' first tiles showed as 2e-6 to 3e-6 for Q3_K16 and Q4_K16
// (Q2_K16: 1e-5 to 1e-3), under kLinearBound.
TEST_P(QuantParity, LinearWide) {
  REQUIRE_GPU();
  Family family(typeName() + " wide linear, 1-8 rows", 1e-6, 1, kGemvMaxRows);
  for (const LinearCase &c : {LinearCase{4224, 8448, false, DType::F32, true},
                              LinearCase{2176, 25600, false, DType::F16, true},
                              LinearCase{1024, 51200, false, DType::BF16, true},
                              LinearCase{1024, 51200, false, DType::I32},
                              LinearCase{4096, 16896, false, DType::F16, true}}) {
    TestPlan t = linearPlan(spec(), dtype(), c);
    const std::string what = caseName(typeName(), c);
    const std::vector<int> steps = {1, 2, 3, 5, 8, 1};
    family.check(test::stepErrors(t, steps, what), what, steps);
  }
  // The last case's one-token launch in the deep ring's layout (plans for cards of
  // H200-class bandwidth: GemvShapes.h bulkLayout), in the formats that take it.
  const LinearCase c{4096, 16896, false, DType::F16, true};
  if (gemv::bulkLayout(spec().bits, spec().groupSize, c.k, c.n, false, true).scaleBuffers ==
      gemv::kBulkDeepScaleBuffers) {
    TestPlan t = linearPlan(spec(), dtype(), c);
    const std::string what = caseName(typeName(), c) + ", deep ring";
    const std::vector<int> steps = {1, 2, 1};
    KernelOptions options;
    options.deepBulkRing = true;
    family.check(test::stepErrors(t, steps, what, options), what, steps);
  }
  family.print();
}

// tokens -> quantized Embedding -> f32 identity readout (exact) -> all-rows
// logits; real packed tables of several widths, and a dummy table (filled on
// each executor: the device fill must equal the host fill bit for bit).
TEST_P(QuantParity, Embedding) {
  REQUIRE_GPU();
  Family family(typeName() + " embedding", 0.0, 1, kMaxStep);
  struct Table {
    int dim;
    bool dummy;
  };
  for (Table table : {Table{128, false}, Table{1152, false}, Table{4096, false}, Table{384, true}}) {
    const int dim = table.dim;
    std::mt19937 rng(static_cast<uint32_t>(dim));
    TestPlan t(kMaxStep, kContext);
    const uint32_t w =
        table.dummy ? t.addDummyWeight("table", dtype(), {kTokenVocab, dim}, 17, 0.5f, 0.0f)
                    : t.addWeightBytes("table", dtype(), {kTokenVocab, dim},
                                       randomPacked(spec(), kTokenVocab, dim, rng));
    t.addReadout(t.addEmbedding("x", w, kTokenVocab, dim), dim);
    const std::string what =
        typeName() + " embedding dim " + std::to_string(dim) + (table.dummy ? " dummy" : "");
    family.check(test::stepErrors(t, kSteps, what), what);
  }
  family.print();
}

INSTANTIATE_TEST_SUITE_P(AllFormats, QuantParity, ::testing::Range(0, quant::kQuantFormatCount),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(plan::EnumNameDType(static_cast<DType>(
                               quant::planDTypeOfFormat(quant::QuantFormatId(info.param)))));
                         });

} // namespace
} // namespace ninfer
