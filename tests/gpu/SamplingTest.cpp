// Sampling on the GPU: the greedy tokens the CUDA executor picks itself
// (codegen/kernels/argmax.cuh: forwardSequenceGreedy, forwardBatchGreedy) against argmaxToken
// (runtime/src/Sampler.cpp) of the same rows on the host, and the top-k candidates it picks
// (codegen/kernels/topk.cuh: forwardSequenceTopK) against a sort of the same rows
// (tests/common/TopKReference.h).
//   GreedyTokens.CraftedLogits: an exact f32 lm_head puts crafted rows in the logits (ties
//     across and within the kernel's slices, the first and last ids, huge and tiny values,
//     a row of NaN only, NaN then +inf), in single-sequence and batch steps, twice over
//     (the kernel's tickets must come back to zero).
//   GreedyTokens.TinyModel: a two-layer model's batch and single-sequence steps, each run
//     for its logits and then again for its tokens.
//   TopKCandidates.CraftedLogits: the crafted rows, and 200,000-wide ones (49 slices), for
//     k of 1 to 64; TopKCandidates.TinyModel: a two-layer model's steps.
//   TemperatureTokens.CraftedLogits, TinyModel: the tokens drawn with a temperature
//     (codegen/kernels/sample.cuh: forwardSequenceSample) against Sampler::sampleWith of the
//     same rows and uniforms.
//   NucleusTokens.CraftedLogits, TinyModel: top-p's candidates and mass
//     (forwardSequenceNucleus) against the host's, and the tokens Sampler::sampleTopP draws
//     from them (or from lastLogits() where the nucleus reaches past them) against
//     Sampler::sampleWith of the same rows and uniforms; CraftedLogits also the draws over
//     the whole row on the device (codegen/kernels/nucleus.cuh: drawLastNucleus) of every
//     row, with three uniforms each.
// Skips (GTEST_SKIP) when libcuda.so.1 cannot be loaded or there is no GPU.
#include "GpuParity.h"
#include "TinyModelPlan.h"
#include "TopKReference.h"
#include "ninfer/Sampler.h"
#include "ninfer/StepAbi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

namespace ninfer {
namespace {

using plan::DType;
using test::gpu;

// Logits rows of 5,000: the kernel's 32 slices of 157 ids, the last of 133.
constexpr int kWidth = 5000;
constexpr int kCrafted = 10;          // finite rows, one per token 0..9
constexpr int kTokens = kCrafted + 2; // and two whose rows hold NaN
constexpr int kDim = kTokens;         // token t's embedding is e_t (times inf for 10, 11)

// Token t's logits for t < kCrafted.
std::vector<float> craftedRows() {
  std::mt19937 rng(7);
  std::vector<float> v = test::randomValues(size_t(kCrafted) * kWidth, 4.0f, rng);
  auto row = [&](int r) { return v.data() + size_t(r) * kWidth; };
  auto fill = [&](int r, float value) { std::fill(row(r), row(r) + kWidth, value); };
  row(1)[4000] = row(1)[700] = row(1)[2501] = 50.0f; // a tie across slices: 700
  fill(2, -1e30f);                                   // the lowest floats but one: 42
  row(2)[42] = -1e29f;
  row(3)[4999] = 60.0f;             // the last id
  row(4)[0] = row(4)[4998] = 70.0f; // the first id, tied with the last slice
  fill(5, 1.0f);                    // all equal: 0
  row(6)[156] = row(6)[3] = 80.0f;  // a tie within slice 0: 3
  row(7)[2000] = 3e38f;             // near the largest float
  return v;
}

// The step's logits are its token's embedding e_t times an f32 weight (exact: one product
// of 1 and the rest of 0): W[j][t] = crafted[t][j]. Tokens 10 and 11 embed as inf e_t, and
// their columns of W are 0 (every logit NaN: 0) and 0 below id 100, 1 from it (NaN, then
// +inf from 100: 100).
// crafted: kCrafted rows of `width`.
std::unique_ptr<PlanFile> craftedPlan(const std::vector<float>& crafted, int width = kWidth) {
  test::TestPlan t(kMaxBatch, 16, kMaxBatch);
  std::vector<float> table(size_t(kTokens) * kDim, 0.0f), w(size_t(width) * kDim, 0.0f);
  for (int k = 0; k < kTokens; ++k)
    table[size_t(k) * kDim + k] = k < kCrafted ? 1.0f : INFINITY;
  for (int j = 0; j < width; ++j) {
    for (int k = 0; k < kCrafted; ++k)
      w[size_t(j) * kDim + k] = crafted[size_t(k) * width + j];
    w[size_t(j) * kDim + kCrafted + 1] = j < 100 ? 0.0f : 1.0f;
  }
  const uint32_t x =
      t.addEmbedding("x", t.addWeight("table", DType::F32, {kTokens, kDim}, table), kTokens, kDim);
  const uint32_t weight = t.addWeight("w", DType::F32, {width, kDim}, w);
  t.addLmHeadLogits(width);
  plan::LinearAttrsT a;
  a.in_features = kDim;
  a.out_features = width;
  t.addOp("lm_head", a, {x, weight}, {t.logits});
  return test::emittedPlan(t, "crafted-logits plan");
}

// Token t's logits in craftedPlan(crafted, width).
std::vector<float> craftedLogits(const std::vector<float>& crafted, int width, int t) {
  if (t < kCrafted)
    return std::vector<float>(crafted.begin() + size_t(t) * width,
                              crafted.begin() + size_t(t + 1) * width);
  std::vector<float> row(size_t(width), std::numeric_limits<float>::quiet_NaN());
  if (t == kCrafted + 1)
    std::fill(row.begin() + 100, row.end(), INFINITY);
  return row;
}

// The CUDA executor of an emitted plan (the file must outlive it), or null with the failure
// recorded.
std::unique_ptr<Executor> openOnGpu(const std::unique_ptr<PlanFile>& file) {
  if (!file) {
    ADD_FAILURE() << "the plan did not open";
    return nullptr;
  }
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(*file, 0);
  if (!cuda.isOk()) {
    ADD_FAILURE() << cuda.status().message();
    return nullptr;
  }
  return std::move(*cuda);
}

void expectCandidates(const TopKCandidates& actual, const TopKCandidates& expected,
                      const std::string& what) {
  EXPECT_EQ(actual.valid, expected.valid) << what;
  ASSERT_EQ(actual.count, expected.count) << what;
  for (int i = 0; i < expected.count; ++i) {
    EXPECT_EQ(actual.ids[i], expected.ids[i]) << what << ", candidate " << i;
    EXPECT_EQ(actual.values[i], expected.values[i]) << what << ", candidate " << i;
  }
}

// The top-k candidates of every crafted row against topKReference, for several k, twice
// over (the kernel's tickets must come back to zero); the second plan's 200,000-wide rows
// take 49 slices.
void expectTopKOfCraftedRows(const std::vector<float>& crafted, int width) {
  std::unique_ptr<PlanFile> file = craftedPlan(crafted, width);
  std::unique_ptr<Executor> cuda = openOnGpu(file);
  ASSERT_TRUE(cuda);
  Executor& e = *cuda;
  ASSERT_EQ(e.maxTopKCandidates(), kMaxTopKCandidates);
  for (int round = 0; round < 2; ++round)
    for (int k : {1, 7, 40, kMaxTopKCandidates})
      for (int32_t r = 0; r < kTokens; ++r) {
        TopKCandidates c;
        Status s = e.forwardSequenceTopK(r % kMaxBatch, &r, 1, r, k, &c);
        ASSERT_TRUE(s.isOk()) << s.message();
        const std::vector<float> row = craftedLogits(crafted, width, r);
        expectCandidates(c, test::topKReference(row.data(), width, k),
                         "width " + std::to_string(width) + ", k " + std::to_string(k) + ", row " +
                             std::to_string(r) + ", round " + std::to_string(round));
      }
  TopKCandidates c;
  int32_t token = 0;
  EXPECT_FALSE(e.forwardSequenceTopK(0, &token, 1, 0, kMaxTopKCandidates + 1, &c).isOk());
}

TEST(GreedyTokens, CraftedLogits) {
  REQUIRE_GPU();
  const std::vector<float> crafted = craftedRows();
  std::vector<int32_t> expected(kTokens);
  for (int r = 0; r < kCrafted; ++r)
    expected[size_t(r)] = argmaxToken(crafted.data() + size_t(r) * kWidth, kWidth);
  expected[kCrafted] = 0;
  expected[kCrafted + 1] = 100;
  // The crafted cases are what they say (argmaxToken itself: tests/runtime/SamplerTest.cpp).
  ASSERT_EQ(std::vector<int32_t>(expected.begin() + 1, expected.begin() + 8),
            (std::vector<int32_t>{700, 42, 4999, 0, 0, 3, 2000}));

  std::unique_ptr<PlanFile> file = craftedPlan(crafted);
  std::unique_ptr<Executor> cuda = openOnGpu(file);
  ASSERT_TRUE(cuda);
  Executor& e = *cuda;
  ASSERT_TRUE(e.picksGreedyTokens());
  std::vector<float> logits(size_t(kMaxBatch) * kWidth);
  for (int round = 0; round < 2; ++round) {
    for (int32_t r = 0; r < kTokens; ++r) {
      int32_t id = -1;
      Status s = e.forwardSequenceGreedy(r % kMaxBatch, &r, 1, r, &id);
      ASSERT_TRUE(s.isOk()) << s.message();
      EXPECT_EQ(id, expected[size_t(r)]) << "round " << round << ", single-sequence row " << r;
      s = e.forwardSequence(r % kMaxBatch, &r, 1, r, logits.data());
      ASSERT_TRUE(s.isOk()) << s.message();
      EXPECT_EQ(argmaxToken(logits.data(), kWidth), expected[size_t(r)]) << "logits of row " << r;
    }
    for (int batch = 1; batch <= kMaxBatch; ++batch) {
      std::vector<int32_t> tokens(static_cast<size_t>(batch)),
          positions(static_cast<size_t>(batch), 3), sequences(static_cast<size_t>(batch)),
          ids(static_cast<size_t>(batch), -1);
      for (int t = 0; t < batch; ++t) {
        tokens[size_t(t)] = (t * 5 + batch + round) % kTokens;
        sequences[size_t(t)] = t;
      }
      Status s = e.forwardBatchGreedy(tokens.data(), positions.data(), sequences.data(), batch,
                                      ids.data());
      ASSERT_TRUE(s.isOk()) << s.message();
      for (int t = 0; t < batch; ++t)
        EXPECT_EQ(ids[size_t(t)], expected[size_t(tokens[size_t(t)])])
            << "round " << round << ", batch " << batch << ", row " << t << " (token "
            << tokens[size_t(t)] << ")";
    }
  }
}

TEST(TopKCandidates, CraftedLogits) {
  REQUIRE_GPU();
  expectTopKOfCraftedRows(craftedRows(), kWidth);
  const int wide = 200000;
  std::mt19937 rng(8);
  std::vector<float> crafted = test::randomValues(size_t(kCrafted) * wide, 4.0f, rng);
  crafted[5] = crafted[wide - 1] = crafted[123456] = 100.0f;           // a tie across three slices
  std::fill(crafted.begin() + wide, crafted.begin() + 2 * wide, 2.0f); // all equal
  expectTopKOfCraftedRows(crafted, wide);
}

// The tokens the executor draws with a temperature (forwardSequenceSample) from every
// crafted row against Sampler::sampleWith of the same row and uniform, for several
// temperatures and uniforms (0, the largest below 1, and seeded ones), twice over (the
// kernel's tickets must come back to zero).
void expectDrawsOfCraftedRows(const std::vector<float>& crafted, int width) {
  std::unique_ptr<PlanFile> file = craftedPlan(crafted, width);
  std::unique_ptr<Executor> cuda = openOnGpu(file);
  ASSERT_TRUE(cuda);
  Executor& e = *cuda;
  ASSERT_TRUE(e.samplesTokens());
  std::mt19937_64 rng(3);
  for (int round = 0; round < 2; ++round)
    for (float temperature : {0.3f, 1.0f, 4.0f}) {
      SamplingParams params;
      params.temperature = temperature;
      Sampler host(params);
      for (int32_t r = 0; r < kTokens; ++r) {
        const std::vector<float> row = craftedLogits(crafted, width, r);
        for (int i = 0; i < 12; ++i) {
          const double u = i == 0   ? 0.0
                           : i == 1 ? 1.0 - 1.0 / 9007199254740992.0
                                    : double(rng() >> 11) * (1.0 / 9007199254740992.0);
          int32_t id = -1;
          Status s = e.forwardSequenceSample(r % kMaxBatch, &r, 1, r, temperature, u, &id);
          ASSERT_TRUE(s.isOk()) << s.message();
          EXPECT_EQ(id, host.sampleWith(row.data(), width, u))
              << "width " << width << ", temperature " << temperature << ", row " << r
              << ", uniform " << u << ", round " << round;
        }
      }
    }
  int32_t token = 0, id = 0;
  EXPECT_FALSE(e.forwardSequenceSample(0, &token, 1, 0, 0.0f, 0.5, &id).isOk());
  EXPECT_FALSE(e.forwardSequenceSample(0, &token, 1, 0, 1.0f, 1.0, &id).isOk());
}

TEST(TemperatureTokens, CraftedLogits) {
  REQUIRE_GPU();
  expectDrawsOfCraftedRows(craftedRows(), kWidth);
  const int wide = 200000;
  std::mt19937 rng(9);
  std::vector<float> crafted = test::randomValues(size_t(kCrafted) * wide, 4.0f, rng);
  std::fill(crafted.begin() + wide, crafted.begin() + 2 * wide, 2.0f); // all equal
  expectDrawsOfCraftedRows(crafted, wide);
}

// Top-p's candidates and mass (forwardSequenceNucleus) of every crafted row against
// topKReference and nucleusMass, and the token Sampler::sampleTopP draws from them, or where
// the nucleus reaches past the candidates sampleWith() of the logits lastLogits() gives,
// against sampleWith() of the row with the same uniform; several temperatures and top-p,
// twice over (the kernels' tickets must come back to zero). Counts the draws of each kind.
void expectNucleusOfCraftedRows(const std::vector<float>& crafted, int width, int& fromCandidates,
                                int& fromLogits) {
  std::unique_ptr<PlanFile> file = craftedPlan(crafted, width);
  std::unique_ptr<Executor> cuda = openOnGpu(file);
  ASSERT_TRUE(cuda);
  Executor& e = *cuda;
  ASSERT_TRUE(e.picksNucleus());
  ASSERT_TRUE(e.drawsNucleus());
  std::mt19937_64 rng(5);
  for (int round = 0; round < 2; ++round)
    for (float temperature : {0.3f, 1.0f, 4.0f})
      for (float topP : {0.9f, 0.3f, 0.999f}) {
        SamplingParams params;
        params.temperature = temperature;
        params.topP = topP;
        Sampler host(params);
        for (int32_t r = 0; r < kTokens; ++r) {
          const std::vector<float> row = craftedLogits(crafted, width, r);
          const std::string what = "width " + std::to_string(width) + ", temperature " +
                                   std::to_string(temperature) + ", top-p " +
                                   std::to_string(topP) + ", row " + std::to_string(r);
          TopKCandidates c;
          double mass = -1.0;
          Status s = e.forwardSequenceNucleus(r % kMaxBatch, &r, 1, r, temperature, &c, &mass);
          ASSERT_TRUE(s.isOk()) << s.message();
          expectCandidates(c, test::topKReference(row.data(), width, kMaxTopKCandidates), what);
          const double expected = test::nucleusMass(row.data(), width, temperature);
          EXPECT_NEAR(mass, expected, 1e-12 * expected) << what;
          const double u = double(rng() >> 11) * (1.0 / 9007199254740992.0);
          // The draw over the whole row on the device, with this uniform and the extremes.
          for (double du : {u, 0.0, 1.0 - 1.0 / 9007199254740992.0}) {
            int32_t drawn = -2;
            ASSERT_TRUE(e.drawLastNucleus(temperature, topP, du, &drawn).isOk()) << what;
            EXPECT_EQ(drawn, host.sampleWith(row.data(), width, du)) << what << ", u " << du;
          }
          int32_t id = host.sampleTopP(c, mass, u);
          if (id < 0) {
            ++fromLogits;
            std::vector<float> logits(size_t(width), 0.0f);
            ASSERT_TRUE(e.lastLogits(logits.data()).isOk());
            for (int i = 0; i < width; ++i) {
              if (!std::isnan(row[size_t(i)])) {
                ASSERT_EQ(logits[size_t(i)], row[size_t(i)]) << what << ", id " << i;
              }
            }
            id = host.sampleWith(logits.data(), width, u);
          } else {
            ++fromCandidates;
          }
          EXPECT_EQ(id, host.sampleWith(row.data(), width, u)) << what;
        }
      }
  TopKCandidates c;
  double mass = 0.0;
  int32_t token = 0;
  EXPECT_FALSE(e.forwardSequenceNucleus(0, &token, 1, 0, 0.0f, &c, &mass).isOk());
  EXPECT_FALSE(e.drawLastNucleus(0.0f, 0.9f, 0.5, &token).isOk());
}

TEST(NucleusTokens, CraftedLogits) {
  REQUIRE_GPU();
  int fromCandidates = 0, fromLogits = 0;
  expectNucleusOfCraftedRows(craftedRows(), kWidth, fromCandidates, fromLogits);
  const int wide = 200000;
  std::mt19937 rng(9);
  std::vector<float> crafted = test::randomValues(size_t(kCrafted) * wide, 4.0f, rng);
  std::fill(crafted.begin() + wide, crafted.begin() + 2 * wide, 2.0f); // all equal
  expectNucleusOfCraftedRows(crafted, wide, fromCandidates, fromLogits);
  EXPECT_GT(fromCandidates, 0);
  EXPECT_GT(fromLogits, 0); // the rows of equal logits, at least
}

TEST(GreedyTokens, TinyModel) {
  REQUIRE_GPU();
  test::TinyModelOptions options;
  options.maxBatch = 4;
  test::TestPlan t = test::tinyModel(options);
  std::unique_ptr<PlanFile> file = test::emittedPlan(t, "tiny model");
  std::unique_ptr<Executor> cuda = openOnGpu(file);
  ASSERT_TRUE(cuda);
  Executor& e = *cuda;
  const int vocab = file->plan().model()->vocab_size();
  std::vector<float> logits(size_t(options.maxBatch) * size_t(vocab));
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> token(0, test::kTokenVocab - 1);
  // The same step twice (the second writes the same cache entries): for its logits, then
  // for its tokens.
  for (int pos = 0; pos < 6; ++pos) {
    int32_t id = token(rng), picked = -1;
    Status s = e.forwardSequence(0, &id, 1, pos, logits.data());
    ASSERT_TRUE(s.isOk()) << s.message();
    s = e.forwardSequenceGreedy(0, &id, 1, pos, &picked);
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_EQ(picked, argmaxToken(logits.data(), vocab)) << "single-sequence step " << pos;
    for (int batch = 1; batch <= options.maxBatch; ++batch) {
      std::vector<int32_t> tokens(static_cast<size_t>(batch)),
          positions(static_cast<size_t>(batch), pos), sequences(static_cast<size_t>(batch)),
          ids(static_cast<size_t>(batch), -1);
      for (int r = 0; r < batch; ++r) {
        tokens[size_t(r)] = token(rng);
        sequences[size_t(r)] = batch - 1 - r;
      }
      ASSERT_TRUE(
          e.forwardBatch(tokens.data(), positions.data(), sequences.data(), batch, logits.data())
              .isOk());
      ASSERT_TRUE(
          e.forwardBatchGreedy(tokens.data(), positions.data(), sequences.data(), batch, ids.data())
              .isOk());
      for (int r = 0; r < batch; ++r)
        EXPECT_EQ(ids[size_t(r)], argmaxToken(logits.data() + size_t(r) * vocab, vocab))
            << "step " << pos << ", batch " << batch << ", row " << r;
    }
  }
}

// Single-sequence steps of a two-layer model on the GPU, each run twice (the second writes the
// same cache entries): for its logits, then in `check` (with the step's token, position and
// logits) for what the executor picks from them.
void checkTinyModelSteps(
    uint32_t seed, int steps,
    const std::function<void(Executor&, int32_t, int, const std::vector<float>&)>& check) {
  test::TestPlan t = test::tinyModel(test::TinyModelOptions{});
  std::unique_ptr<PlanFile> file = test::emittedPlan(t, "tiny model");
  std::unique_ptr<Executor> cuda = openOnGpu(file);
  ASSERT_TRUE(cuda);
  std::vector<float> logits(static_cast<size_t>(file->plan().model()->vocab_size()));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, test::kTokenVocab - 1);
  for (int pos = 0; pos < steps; ++pos) {
    int32_t id = token(rng);
    Status s = cuda->forwardSequence(0, &id, 1, pos, logits.data());
    ASSERT_TRUE(s.isOk()) << s.message();
    check(*cuda, id, pos, logits);
  }
}

TEST(TopKCandidates, TinyModel) {
  REQUIRE_GPU();
  checkTinyModelSteps(6, 8, [](Executor& e, int32_t id, int pos, const std::vector<float>& logits) {
    const int k = std::vector<int>{1, 20, kMaxTopKCandidates}[size_t(pos % 3)];
    TopKCandidates c;
    Status s = e.forwardSequenceTopK(0, &id, 1, pos, k, &c);
    ASSERT_TRUE(s.isOk()) << s.message();
    expectCandidates(c, test::topKReference(logits.data(), int(logits.size()), k),
                     "step " + std::to_string(pos) + ", k " + std::to_string(k));
  });
}

TEST(TemperatureTokens, TinyModel) {
  REQUIRE_GPU();
  SamplingParams params;
  params.temperature = 0.8f;
  params.seed = 4;
  Sampler host(params), device(params);
  checkTinyModelSteps(10, 8, [&](Executor& e, int32_t id, int pos, const std::vector<float>& logits) {
    int32_t drawn = -1;
    Status s = e.forwardSequenceSample(0, &id, 1, pos, device.temperature(), device.nextUniform(),
                                       &drawn);
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_EQ(drawn, host.sample(logits.data(), int(logits.size()))) << "step " << pos;
  });
}

TEST(NucleusTokens, TinyModel) {
  REQUIRE_GPU();
  SamplingParams params;
  params.temperature = 0.8f;
  params.topP = 0.9f;
  params.seed = 4;
  Sampler host(params), device(params);
  checkTinyModelSteps(11, 8, [&](Executor& e, int32_t id, int pos, const std::vector<float>& logits) {
    TopKCandidates c;
    double mass = 0.0;
    Status s = e.forwardSequenceNucleus(0, &id, 1, pos, device.temperature(), &c, &mass);
    ASSERT_TRUE(s.isOk()) << s.message();
    const double u = device.nextUniform();
    int32_t drawn = device.sampleTopP(c, mass, u);
    if (drawn < 0) {
      std::vector<float> last(logits.size());
      ASSERT_TRUE(e.lastLogits(last.data()).isOk());
      EXPECT_EQ(last, logits) << "step " << pos;
      drawn = device.sampleWith(last.data(), int(last.size()), u);
    }
    EXPECT_EQ(drawn, host.sample(logits.data(), int(logits.size()))) << "step " << pos;
  });
}

} // namespace
} // namespace ninfer
