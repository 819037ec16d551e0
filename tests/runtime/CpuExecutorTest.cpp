// The CPU executor on a tiny llama-style plan against the double-precision
// reference model, plus step/thread invariance, dummy weights and errors.
#include "TestModel.h"

#include "ninfer/DummyFill.h"
#include "ninfer/Executor.h"
#include "ninfer/Plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

namespace ninfer {
namespace test {
namespace {

std::vector<int32_t> promptTokens(int count, int vocab) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i)
    tokens.push_back((i * 7 + 3) % vocab);
  return tokens;
}

// Runs the steps and returns each step's logits.
std::vector<std::vector<float>> runSteps(Executor& executor, const std::vector<int32_t>& tokens,
                                         const std::vector<int>& steps, int vocab) {
  std::vector<std::vector<float>> result;
  int pos = 0;
  for (int n : steps) {
    std::vector<float> logits(vocab);
    Status status = executor.forward(tokens.data() + pos, n, pos, logits.data());
    EXPECT_TRUE(status.isOk()) << status.message();
    result.push_back(logits);
    pos += n;
  }
  return result;
}

struct SpecCase {
  const char* name;
  TinyModelSpec spec;
};

class CpuExecutorModel : public ::testing::TestWithParam<SpecCase> {};

TEST_P(CpuExecutorModel, MatchesDoubleReference) {
  TinyModel model = buildTinyModel(GetParam().spec);
  Loaded l = load(model, std::string(GetParam().name) + ".nplan");
  ASSERT_TRUE(l.executor);
  const std::vector<int32_t> tokens = promptTokens(17, model.spec.vocab);
  const std::vector<int> steps = {8, 3, 1, 1, 1, 1, 1, 1};
  const auto actual = runSteps(*l.executor, tokens, steps, model.spec.vocab);
  const auto expected = referenceStepLogits(model, tokens, steps);
  for (size_t s = 0; s < steps.size(); ++s) {
    double maxError = 0, maxValue = 0;
    for (int i = 0; i < model.spec.vocab; ++i) {
      maxError = std::max(maxError, std::fabs(actual[s][i] - expected[s][i]));
      maxValue = std::max(maxValue, std::fabs(expected[s][i]));
    }
    // f32 vs double, with K/V rounded to f16 on both sides (a value on the edge
    // of an f16 rounding step may round differently: allow that much).
    EXPECT_LT(maxError, 2e-3 * std::max(1.0, maxValue)) << "step " << s;
    EXPECT_GT(maxValue, 0.1) << "degenerate logits";
  }
}

SpecCase makeCase(const char* name, void (*edit)(TinyModelSpec&)) {
  SpecCase c{name, TinyModelSpec()};
  edit(c.spec);
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Specs, CpuExecutorModel,
    ::testing::Values(makeCase("plain", [](TinyModelSpec&) {}),
                      makeCase("mha_bias_qknorm",
                               [](TinyModelSpec& s) {
                                 s.kvHeads = 4;
                                 s.qkvBias = true;
                                 s.qkNorm = true;
                               }),
                      makeCase("window", [](TinyModelSpec& s) { s.window = 4; }),
                      makeCase("f16", [](TinyModelSpec& s) { s.weightDtype = plan::DType::F16; }),
                      makeCase("bf16", [](TinyModelSpec& s) { s.weightDtype = plan::DType::BF16; }),
                      makeCase("dynamic_ntk",
                               [](TinyModelSpec& s) {
                                 s.dynamicFactor = 2.0f;
                                 s.originalMaxPositions = 6;
                                 s.headDim = 8;
                                 s.heads = 2;
                                 s.kvHeads = 1;
                               }),
                      makeCase("long_factors",
                               [](TinyModelSpec& s) {
                                 s.longFactors = true;
                                 s.originalMaxPositions = 10;
                                 s.attentionFactor = 1.1f;
                               }),
                      makeCase("attention_factor",
                               [](TinyModelSpec& s) { s.attentionFactor = 1.2f; })),
    [](const ::testing::TestParamInfo<SpecCase>& info) { return std::string(info.param.name); });

TEST(CpuExecutor, DecodeStepsEqualOneShotPrefillAndThreadsDoNotMatter) {
  TinyModelSpec spec;
  spec.window = 5;
  spec.qkvBias = true;
  TinyModel model = buildTinyModel(spec);
  Loaded one = load(model, "steps1.nplan", 1);
  Loaded three = load(model, "steps3.nplan", 3);
  ASSERT_TRUE(one.executor && three.executor);
  const std::vector<int32_t> tokens = promptTokens(8, spec.vocab);
  const auto prefill = runSteps(*one.executor, tokens, {8}, spec.vocab);
  const auto decode = runSteps(*three.executor, tokens, {1, 1, 1, 1, 1, 1, 1, 1}, spec.vocab);
  const auto mixed = runSteps(*one.executor, tokens, {3, 4, 1}, spec.vocab);
  EXPECT_EQ(prefill[0], decode.back());
  EXPECT_EQ(prefill[0], mixed.back());
  // A second run from position 0 overwrites the cache and repeats itself.
  EXPECT_EQ(runSteps(*three.executor, tokens, {8}, spec.vocab)[0], prefill[0]);
}

// Steps that are chunks of one forward pass (Executor::setSequenceLength) scale RoPE by the
// whole pass's length, as one step over all of it would: dynamic NTK and LongRoPE past the
// original 10 positions, a prompt of 12 in steps of 8 and 4.
TEST(CpuExecutor, ChunksOfOneForwardPassTakeItsLength) {
  for (const bool longFactors : {false, true}) {
    TinyModelSpec spec;
    spec.originalMaxPositions = 10;
    spec.headDim = 8;
    spec.heads = 2;
    spec.kvHeads = 1;
    spec.longFactors = longFactors;
    spec.dynamicFactor = longFactors ? 0.0f : 8.0f;
    TinyModel model = buildTinyModel(spec);
    Loaded l = load(model, longFactors ? "chunks_long.nplan" : "chunks_ntk.nplan");
    ASSERT_TRUE(l.executor);
    const std::vector<int32_t> tokens = promptTokens(12, spec.vocab);
    const std::vector<double> whole = referenceStepLogits(model, tokens, {12})[0];
    const std::vector<double> chunked = referenceStepLogits(model, tokens, {8, 4})[1];
    l.executor->setSequenceLength(0, 12);
    const std::vector<float> actual = runSteps(*l.executor, tokens, {8, 4}, spec.vocab)[1];
    l.executor->setSequenceLength(0, 0);
    const std::vector<float> own = runSteps(*l.executor, tokens, {8, 4}, spec.vocab)[1];
    double wholeError = 0, ownError = 0, apart = 0;
    for (int i = 0; i < spec.vocab; ++i) {
      wholeError = std::max(wholeError, std::fabs(actual[i] - whole[i]));
      ownError = std::max(ownError, std::fabs(own[i] - chunked[i]));
      apart = std::max(apart, std::fabs(whole[i] - chunked[i]));
    }
    SCOPED_TRACE(longFactors ? "LongRoPE" : "dynamic NTK");
    // f32 against double: about 1e-6 apart (K/V rounded to f16 on both sides).
    EXPECT_LT(wholeError, 1e-4);
    EXPECT_LT(ownError, 1e-4); // cleared: each step its own end again
    EXPECT_GT(apart, 1e-2) << "the test cannot tell the two apart";
  }
}

TEST(CpuExecutor, RejectsBadSteps) {
  TinyModel model = buildTinyModel(TinyModelSpec());
  Loaded l = load(model, "errors.nplan");
  ASSERT_TRUE(l.executor);
  std::vector<int32_t> tokens(64, 1);
  std::vector<float> logits(model.spec.vocab);
  auto message = [&](int n, int pos) {
    Status s = l.executor->forward(tokens.data(), n, pos, logits.data());
    EXPECT_FALSE(s.isOk()) << "n " << n << " pos " << pos;
    return s.message();
  };
  EXPECT_NE(message(0, 0).find("a step takes 1 to 8 tokens, got 0"), std::string::npos);
  EXPECT_NE(message(9, 0).find("got 9"), std::string::npos);
  EXPECT_NE(message(2, 39).find("exceed the plan's context of 40"), std::string::npos);
  EXPECT_FALSE(message(1, -1).empty());
  tokens[1] = model.spec.vocab;
  EXPECT_NE(message(2, 0).find("token id 37 is outside the vocabulary (37)"), std::string::npos);
  tokens[1] = -5;
  EXPECT_NE(message(2, 0).find("token id -5"), std::string::npos);
  tokens[1] = 1;
  EXPECT_NE(l.executor->forward(tokens.data(), 1, 0, nullptr).message().find("logits must not be"),
            std::string::npos);
  EXPECT_NE(l.executor->forward(nullptr, 1, 0, logits.data()).message().find("tokens must not be"),
            std::string::npos);
  EXPECT_TRUE(l.executor->forward(tokens.data(), 1, 39, logits.data()).isOk());
  EXPECT_NE(l.executor->name().find("cpu"), std::string::npos);
}

float roundBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Embedding of a dummy table through an identity lm_head: the logits are the
// table row, which must equal the documented fill rounded through the dtype.
TEST(CpuExecutor, FillsDummyWeightsRoundedThroughTheirDtype) {
  for (plan::DType dtype : {plan::DType::F32, plan::DType::F16, plan::DType::BF16}) {
    const int vocab = 6;
    const uint32_t seed = 42;
    const float scale = 0.02f, offset = 1.0f;
    PlanMaker pm(vocab, 4, 2);
    const uint32_t table = pm.addDummyWeight("table", dtype, {vocab, vocab}, seed, scale, offset);
    std::vector<float> identity(vocab * vocab, 0.0f);
    for (int i = 0; i < vocab; ++i)
      identity[i * vocab + i] = 1.0f;
    const uint32_t head = pm.addWeight("head", plan::DType::F32, {vocab, vocab}, identity);
    const uint32_t x = pm.addActivation("x", vocab);
    plan::EmbeddingAttrsT e;
    e.dim = vocab;
    e.vocab = vocab;
    pm.addOp("embed", e, {pm.tokens(), table}, {x});
    plan::LinearAttrsT lin;
    lin.in_features = vocab;
    lin.out_features = vocab;
    lin.last_row_only = true;
    pm.addOp("head", lin, {x, head}, {pm.logits()});
    auto file = PlanFile::open(pm.write("dummy_exec.nplan"));
    ASSERT_TRUE(file.isOk()) << file.status().message();
    auto executor = createCpuExecutor(*file.value(), 2);
    ASSERT_TRUE(executor.isOk()) << executor.status().message();
    const int32_t tokens[2] = {0, 4};
    std::vector<float> logits(vocab);
    ASSERT_TRUE(executor.value()->forward(tokens, 2, 0, logits.data()).isOk());
    for (int i = 0; i < vocab; ++i) {
      const float value = dummyUniform(seed, uint64_t(4 * vocab + i)) * scale + offset;
      const float expected = dtype == plan::DType::F16    ? float(static_cast<_Float16>(value))
                             : dtype == plan::DType::BF16 ? roundBf16(value)
                                                          : value;
      EXPECT_EQ(logits[i], expected) << "dtype " << int(dtype) << " element " << i;
      EXPECT_GE(value, offset - scale);
      EXPECT_LT(value, offset + scale);
    }
  }
}

// An int8 KV cache changes the logits by the quantization error only: close to
// the f16-cache plan's, not equal, and the same for any step split.
TEST(CpuExecutor, Q8KvCacheStaysCloseToF16Cache) {
  TinyModelSpec spec;
  spec.headDim = 8;
  spec.hidden = 32;
  TinyModel f16Model = buildTinyModel(spec);
  spec.kvDtype = plan::DType::Q8_KV;
  TinyModel q8Model = buildTinyModel(spec);
  Loaded f16 = load(f16Model, "kv_f16.nplan");
  Loaded q8 = load(q8Model, "kv_q8.nplan");
  ASSERT_TRUE(f16.executor && q8.executor);
  const std::vector<int32_t> tokens = promptTokens(20, spec.vocab);
  const std::vector<int> steps = {8, 1, 1, 8, 1, 1};
  const auto a = runSteps(*f16.executor, tokens, steps, spec.vocab);
  const auto b = runSteps(*q8.executor, tokens, steps, spec.vocab);
  double worst = 0.0, scale = 0.0;
  for (size_t s = 0; s < a.size(); ++s)
    for (int i = 0; i < spec.vocab; ++i) {
      worst = std::max(worst, std::fabs(double(a[s][size_t(i)]) - double(b[s][size_t(i)])));
      scale = std::max(scale, std::fabs(double(a[s][size_t(i)])));
    }
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, 0.02 * scale);
  Loaded again = load(q8Model, "kv_q8_again.nplan");
  const auto c = runSteps(*again.executor, tokens, {1, 1, 1, 1, 8, 8}, spec.vocab);
  EXPECT_EQ(c.back(), b.back()); // quantization is per row: step splits do not matter
}

} // namespace
} // namespace test
} // namespace ninfer
