// The CUDA ternary linears (TQ2: codegen/kernels/linear_ternary.cuh, TQ1:
// linear_tq1.cuh, its sm_80+ decode GEMV gemv_tq1_mma.cuh and its tensor-core GEMMs)
// against the CPU executor on the same plan: tokens -> Embedding (random f32 table) -> Linear
// with a TQ2 or TQ1 weight (+ a fused residual from a second embedding) -> an
// all-rows logits buffer, run over a prefill step of 64 tokens (tiled path) and
// steps of 1..8 tokens (GEMV), swept over model-like shapes K 256..14336 (TQ1
// steps of 1, 2 and 4 words a lane) and N up to 14336, odd shapes for the TQ1
// tensor-core GEMV (K 16..96 and 4096 with padded last chunks, several chunks
// per lane, N not a multiple of 16, N >= 8192 and >= 32768 for 2 and 4 row
// tiles a block), with and without bias, residual, last_row_only, and
// dummy-filled weights (GPU fill vs CPU fill). nMSE = sum((gpu - cpu)^2) /
// sum(cpu^2) must stay below 1e-9 where the two differ only in summation order;
// the TQ1 GEMV on sm_80+ rounds x to f16 (relative 2^-11, weights exact, f32
// accumulation), so its steps (1..8 tokens, last_row_only) are held to 1e-6, and so are
// the longer steps where K is a multiple of 64 (gemm_ternary.cuh's tensor-core GEMMs, which
// round x and the scale to f16). On an sm_90 GPU the cases run twice: plans for sm_90
// (mma.sync GEMM) and for sm_90a (wgmma GEMM).
// (tests/gpu/OpParityTest.cpp sweeps odd shapes and step sizes.)
// The NVRTC test runs anywhere; the parity tests skip (GTEST_SKIP) without a GPU.
#include "CudaDriver.h"
#include "TestPlan.h"
#include "ninfer/Executor.h"
#include "ninfer/Plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

namespace ninfer {
namespace {

using plan::DType;
using test::TestPlan;

constexpr int kVocab = 37;
constexpr int kMaxStep = 64;
constexpr double kBound = 1e-9;
constexpr int kGemvMaxRows = 8; // steps of at most this many tokens take the GEMV (KernelEmitter)
constexpr double kTq1GemvBound = 1e-6; // x in f16 on the tensor cores
constexpr int kGemmTileK = 64; // GEMMs on tensor cores where K is a multiple of this

std::string gpuArch(std::string* why) {
  Result<const CudaDriver*> driver = CudaDriver::get();
  if (!driver) {
    *why = driver.status().message();
    return "";
  }
  const CudaDriver& cu = **driver;
  int count = 0, major = 0, minor = 0;
  CUdevice device;
  if (cu.deviceGetCount(&count) != CUDA_SUCCESS || count == 0 ||
      cu.deviceGet(&device, 0) != CUDA_SUCCESS ||
      cu.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) !=
          CUDA_SUCCESS ||
      cu.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) !=
          CUDA_SUCCESS) {
    *why = "no usable CUDA device";
    return "";
  }
  return "sm_" + std::to_string(major * 10 + minor);
}

struct Case {
  int k;
  int n;
  bool bias;
  bool lastRowOnly;
  bool dummy;
  bool residual = false; // y = x W^T (+ bias) + residual, the add fused into the linear
  DType dtype = DType::TQ2;
};

std::string caseName(const Case& c) {
  return std::string(plan::EnumNameDType(c.dtype)) + " K" + std::to_string(c.k) + " N" +
         std::to_string(c.n) + (c.bias ? " bias" : "") + (c.lastRowOnly ? " last_row_only" : "") +
         (c.dummy ? " dummy" : "") + (c.residual ? " residual" : "");
}

TestPlan ternaryPlan(const Case& c, std::mt19937& rng) {
  TestPlan t(kMaxStep, 2 * kMaxStep);
  const uint32_t table = t.addWeight("table", DType::F32, {kVocab, c.k},
                                     test::randomValues(size_t(kVocab) * c.k, 1.0f, rng));
  const uint32_t x = t.addActivation("x", c.k);
  plan::EmbeddingAttrsT embedding;
  embedding.dim = c.k;
  embedding.vocab = kVocab;
  t.addOp("embed", embedding, {t.tokens, table}, {x});
  const uint32_t w =
      t.addTernaryWeight("w", c.dtype, c.n, c.k, c.dummy ? 0.02f : 0.0213623046875f, rng, c.dummy);
  std::vector<uint32_t> inputs = {x, w};
  if (c.bias)
    inputs.push_back(
        t.addWeight("bias", DType::BF16, {c.n}, test::randomValues(size_t(c.n), 0.5f, rng)));
  if (c.residual) {
    const uint32_t residualTable = t.addWeight("residual.table", DType::F32, {kVocab, c.n},
                                               test::randomValues(size_t(kVocab) * c.n, 1.0f, rng));
    inputs.push_back(t.addEmbedding("residual", residualTable, kVocab, c.n));
  }
  t.addLogits(c.lastRowOnly ? 1 : kMaxStep, c.n);
  plan::LinearAttrsT linear;
  linear.in_features = c.k;
  linear.out_features = c.n;
  linear.has_bias = c.bias;
  linear.last_row_only = c.lastRowOnly;
  linear.residual = c.residual;
  t.addOp("linear_ternary", linear, inputs, {t.logits});
  return t;
}

// Emits every plan's kernels for `arch`, the plans spread over the host's cores: NVRTC takes
// a few seconds a plan, and one after another the plans took most of the sweep's time.
std::vector<Status> emitInParallel(std::vector<TestPlan>& plans, const std::string& arch) {
  std::vector<Status> emitted(plans.size(), Status::ok());
  std::atomic<size_t> next{0};
  const size_t workers =
      std::min<size_t>(plans.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (size_t i = next++; i < plans.size(); i = next++) {
        KernelOptions options;
        options.archs = {arch};
        options.embedPtx = false;
        emitted[i] = emitKernels(plans[i].plan, options);
      }
    });
  for (std::thread& thread : threads)
    thread.join();
  return emitted;
}

// Worst nMSE over the steps of a plan whose kernels are emitted, or INFINITY after a reported
// failure. Steps of at most kGemvMaxRows tokens (the GEMV path) are held to gemvBound, the
// others to gemmBound.
double runParity(TestPlan& t, const std::string& what, double gemvBound, double gemmBound) {
  const std::string path = test::tempPlanPath("ternary");
  Status written = t.write(path);
  EXPECT_TRUE(written.isOk()) << what << ": " << written.message();
  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(path);
  std::remove(path.c_str());
  EXPECT_TRUE(file.isOk()) << what << ": " << file.status().message();
  if (!written.isOk() || !file.isOk())
    return INFINITY;
  Result<std::unique_ptr<Executor>> cpu = createCpuExecutor(**file, 0);
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(**file, 0);
  EXPECT_TRUE(cpu.isOk()) << what << ": " << cpu.status().message();
  EXPECT_TRUE(cuda.isOk()) << what << ": " << cuda.status().message();
  if (!cpu.isOk() || !cuda.isOk())
    return INFINITY;
  const size_t vocab = size_t(t.plan.model->vocab_size);
  std::vector<float> expected(vocab), actual(vocab);
  std::mt19937 rng(99);
  int pos = 0;
  double worst = 0;
  for (int n : {kMaxStep, 1, 2, 3, 4, 5, 6, 7, 8}) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids)
      id = int32_t(rng() % kVocab);
    std::fill(actual.begin(), actual.end(), NAN);
    Status a = (*cpu)->forward(ids.data(), n, pos, expected.data());
    Status b = (*cuda)->forward(ids.data(), n, pos, actual.data());
    EXPECT_TRUE(a.isOk() && b.isOk()) << what << ": " << a.message() << " " << b.message();
    if (!a.isOk() || !b.isOk())
      return INFINITY;
    const size_t compared = t.comparedValues(n);
    double err = 0, ref = 0;
    for (size_t i = 0; i < compared; ++i) {
      const double d = double(actual[i]) - double(expected[i]);
      err += d * d;
      ref += double(expected[i]) * expected[i];
    }
    const double nmse = ref > 0 ? err / ref : err;
    const bool gemv = n <= kGemvMaxRows || !t.logitsAllRows;
    EXPECT_TRUE(nmse < (gemv ? gemvBound : gemmBound))
        << what << " step of " << n << " tokens: nMSE " << nmse;
    EXPECT_GT(ref, 0.0) << what << ": the reference output is all zero";
    worst = std::max(worst, std::isnan(nmse) ? INFINITY : nmse);
    pos += n;
  }
  return worst;
}

// NVRTC compiles the TQ2 and TQ1 kernels (every path) for the lowest and the
// H200 arch, TQ1 also for sm_80/86/89 (its tensor-core GEMV is sm_80+, the
// select/add one sm_75).
TEST(TernaryKernels, CompileWithNvrtc) {
  std::mt19937 rng(1);
  for (DType dtype : {DType::TQ2, DType::TQ1})
    for (Case c : {Case{256, 100, true, false, false}, Case{4096, 4096, false, false, true},
                   Case{1536, 512, false, true, false}, Case{8192, 512, false, false, false},
                   Case{96, 7, true, false, false, true}}) {
      c.dtype = dtype;
      if (dtype == DType::TQ2 && c.k % 64 != 0)
        continue;
      TestPlan t = ternaryPlan(c, rng);
      KernelOptions options;
      options.archs = {"sm_75", "sm_90"};
      if (dtype == DType::TQ1)
        options.archs = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"};
      Status emitted = emitKernels(t.plan, options);
      ASSERT_TRUE(emitted.isOk()) << caseName(c) << ": " << emitted.message();
      const std::string kernel = dtype == DType::TQ1 ? "linear_tq1" : "linear_tq2";
      bool found = false;
      for (const std::string& name : t.plan.kernels->functions)
        found = found || name.find(kernel) != std::string::npos;
      EXPECT_TRUE(found) << caseName(c);
    }
}

// Ternary prefill takes the tensor-core GEMMs where K is a multiple of 64 (every TQ2 shape),
// the tiled GEMM otherwise: on sm_90a the wgmma GEMM with its x rounded to f16 first, on
// sm_80 mma.sync (the GEMM launch has dynamic shared memory; the tiled one has none).
TEST(TernaryKernels, PrefillTakesTensorCoreGemms) {
  std::mt19937 rng(3);
  for (const char* arch : {"sm_80", "sm_90a"})
    for (Case c : {Case{4096, 1024, true, false, false, false, DType::TQ2},
                   Case{4096, 1024, true, false, false, false, DType::TQ1},
                   Case{96, 512, false, false, false, false, DType::TQ1}}) {
      TestPlan t = ternaryPlan(c, rng);
      KernelOptions options;
      options.archs = {arch};
      Status emitted = emitKernels(t.plan, options);
      ASSERT_TRUE(emitted.isOk()) << arch << " " << caseName(c) << ": " << emitted.message();
      const bool tensorCores = c.k % kGemmTileK == 0;
      const std::string gemmName = c.dtype == DType::TQ1 ? "linear_tq1_gemm" : "linear_tq2_gemm";
      bool rounds = false, gemmShared = false, gemm = false;
      for (const auto& op : t.plan.ops)
        for (const auto& launch : op->launches) {
          const std::string& name = t.plan.kernels->functions[launch->function];
          rounds = rounds || name.find("round_x16") != std::string::npos;
          if (name.find(gemmName) != std::string::npos) {
            gemm = true;
            gemmShared = launch->shared_bytes > 0;
          }
        }
      EXPECT_TRUE(gemm) << arch << " " << caseName(c);
      EXPECT_EQ(gemmShared, tensorCores) << arch << " " << caseName(c);
      EXPECT_EQ(rounds, tensorCores && std::string(arch) == "sm_90a") << arch << " " << caseName(c);
    }
}

TEST(TernaryKernels, ParityWithCpuExecutor) {
  std::string why;
  const std::string arch = gpuArch(&why);
  if (arch.empty())
    GTEST_SKIP() << "no usable GPU: " << why;
  const std::vector<Case> cases = {
      {256, 64, false, false, false},     {256, 1000, true, false, false},
      {512, 512, false, false, false},    {512, 256, false, false, false},
      {1536, 512, false, false, false},   {512, 1536, false, false, false},
      {2048, 2048, false, false, false},  {4096, 1024, false, false, false},
      {4096, 4096, false, false, false},  {4096, 14336, false, false, false},
      {14336, 4096, false, false, false}, {4096, 4096, true, true, false},
      {4096, 14336, false, false, true},  {512, 1536, false, false, true},
      {8192, 1024, false, false, false},  {11008, 4096, false, false, true},
      {4096, 4096, true, false, false, true},
      {4096, 1024, false, false, false, true},
  };
  // TQ1 only (K a multiple of 16): padded last chunks (K % 80 != 0; K = 16, 32:
  // one chunk, most warps of a tile without work), one whole chunk (K = 80; 16 outputs, since
  // with x in f16 the nMSE of one output exceeds 1e-6 when its sum cancels: 1.5e-6 and 2.0e-6
  // on two draws on the H200, alike on both archs, against 2.8e-8 on a third), many
  // chunks per lane (K = 14336 over 8 K splits: 6 quads), N not a multiple of 16,
  // 2 row tiles a block (N >= 8192) and 4 (N >= 32768), the last block partial.
  const std::vector<Case> tq1Cases = {
      {16, 64, false, false, false},      {32, 7, true, false, false},
      {80, 16, false, false, false},      {96, 1000, true, false, false},
      {96, 1000, false, false, false, true},
      {96, 33, false, true, false},       {400, 8200, false, false, false},
      {1600, 100, true, false, true},     {4096, 4096, false, true, true},
      {96, 32800, true, false, false},    {176, 32800, false, true, false},
      {14336, 1000, false, false, false}, {4096, 8200, false, false, false, true},
  };
  std::vector<std::string> archs = {arch};
  if (arch == "sm_90")
    archs.push_back("sm_90a");
  std::printf("%-56s %12s\n", "ternary linear (steps 64, 1..8)", "worst nMSE");
  for (const std::string& target : archs)
    for (DType dtype : {DType::TQ2, DType::TQ1}) {
      std::vector<Case> all = cases;
      if (dtype == DType::TQ1)
        all.insert(all.end(), tq1Cases.begin(), tq1Cases.end());
      std::vector<TestPlan> plans;
      for (size_t i = 0; i < all.size(); ++i) {
        all[i].dtype = dtype;
        // Each case draws the same data for every arch, so that the archs' figures differ by
        // their kernels alone.
        std::mt19937 rng(uint32_t(2024 + i + (dtype == DType::TQ1 ? 1000 : 0)));
        plans.push_back(ternaryPlan(all[i], rng));
      }
      const std::vector<Status> emitted = emitInParallel(plans, target);
      for (size_t i = 0; i < all.size(); ++i) {
        const Case& c = all[i];
        const std::string what = target + " " + caseName(c);
        EXPECT_TRUE(emitted[i].isOk()) << what << ": " << emitted[i].message();
        const double worst =
            !emitted[i].isOk()
                ? INFINITY
                : runParity(plans[i], what, dtype == DType::TQ1 ? kTq1GemvBound : kBound,
                            c.k % kGemmTileK == 0 ? kTq1GemvBound : kBound);
        std::printf("%-56s %12.3g\n", what.c_str(), worst);
      }
    }
}

} // namespace
} // namespace ninfer
