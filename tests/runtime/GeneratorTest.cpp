// The generation loop with a scripted executor: chunked prefill, decode steps,
// stopping at EOS / -n / the context, and the prompt-length error.
#include "TestModel.h"
#include "TopKReference.h"

#include "ninfer/DecodeStep.h"
#include "ninfer/Generator.h"
#include "ninfer/Plan.h"

#include <algorithm>
#include <gtest/gtest.h>

namespace ninfer {
namespace {

// Predicts token (last id + 1) % vocab at every step, so greedy decoding of a
// prompt ending in t yields t+1, t+2, ... Records every forward call.
class CountingExecutor : public Executor {
public:
  explicit CountingExecutor(int vocab) : vocab_(vocab) {}
  Status forwardSequence(int /*sequence: one*/, const int32_t* tokens, int n, int pos,
                         float* logits) override {
    calls.push_back({n, pos});
    forwardEnds.push_back(forwardEnd(0));
    std::fill(logits, logits + vocab_, 0.0f);
    logits[(tokens[n - 1] + 1) % vocab_] = 1.0f;
    logits[0] = 0.5f + 0.001f * float(pos); // marks which step produced these logits
    return Status::ok();
  }
  std::string name() const override { return "counting"; }
  std::vector<std::pair<int, int>> calls;
  std::vector<int> forwardEnds; // setSequenceLength's length at each call

private:
  int vocab_;
};

GenerationConfig config(int context, int maxStep, int vocab, int maxNew) {
  GenerationConfig c;
  c.context = context;
  c.maxStepTokens = maxStep;
  c.vocabSize = vocab;
  c.maxNewTokens = maxNew;
  return c;
}

std::vector<int32_t> collect(Generator& generator, const std::vector<int32_t>& prompt,
                             GenerationStats* stats = nullptr,
                             const SamplingParams& params = SamplingParams{}) {
  Sampler sampler(params);
  std::vector<int32_t> out;
  auto result = generator.generate(prompt, sampler, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (stats && result.isOk())
    *stats = result.value();
  return out;
}

// What `executor` generates after the prompt 1, 2, 3 with `params`: at most maxNew tokens
// (context 64, steps of 8, vocab 100).
std::vector<int32_t> sampledTokens(CountingExecutor& executor, const SamplingParams& params,
                                   int maxNew) {
  Generator generator(executor, config(64, 8, 100, maxNew));
  return collect(generator, {1, 2, 3}, nullptr, params);
}

TEST(Generator, PrefillsInChunksThenDecodesOneTokenPerStep) {
  CountingExecutor executor(100);
  Generator generator(executor, config(64, 4, 100, 5));
  GenerationStats stats;
  const std::vector<int32_t> out = collect(generator, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, &stats);
  EXPECT_EQ(out, (std::vector<int32_t>{11, 12, 13, 14, 15}));
  // Prefill 4 + 4 + 2, then one step per generated token except the last.
  const std::vector<std::pair<int, int>> expected = {{4, 0},  {4, 4},  {2, 8}, {1, 10},
                                                     {1, 11}, {1, 12}, {1, 13}};
  EXPECT_EQ(executor.calls, expected);
  EXPECT_EQ(stats.promptTokens, 10);
  EXPECT_EQ(stats.generatedTokens, 5);
  EXPECT_EQ(stats.decodeSteps, 4);
  EXPECT_FALSE(stats.stoppedAtEos);
  // The prompt logits are those of the last prefill chunk (pos 8).
  ASSERT_EQ(generator.promptLogits().size(), 100u);
  EXPECT_FLOAT_EQ(generator.promptLogits()[0], 0.508f);
  EXPECT_FLOAT_EQ(generator.promptLogits()[11], 1.0f);
}

// The prompt's chunks are one forward pass: each step sees the prompt's length.
TEST(Generator, PrefillChunksTakeThePromptsLength) {
  CountingExecutor executor(100);
  Generator generator(executor, config(64, 4, 100, 3));
  collect(generator, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_EQ(executor.forwardEnds, (std::vector<int>{10, 10, 10, 0, 0}));
}

// LongRoPE (original length 6): the step whose token takes the sequence past 6 positions
// computes the whole sequence again, one forward pass from position 0, then decoding goes
// on; a prompt already past 6 positions never does.
TEST(Generator, LongRopeComputesTheSequenceAgainPastTheOriginalLength) {
  CountingExecutor executor(100);
  GenerationConfig c = config(64, 4, 100, 7);
  c.longRopeLength = 6;
  Generator generator(executor, c);
  GenerationStats stats;
  EXPECT_EQ(collect(generator, {1, 2, 3}, &stats), (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10}));
  const std::vector<std::pair<int, int>> expected = {{3, 0}, {1, 3}, {1, 4}, {1, 5},
                                                     {4, 0}, {3, 4}, {1, 7}, {1, 8}};
  EXPECT_EQ(executor.calls, expected);
  EXPECT_EQ(executor.forwardEnds, (std::vector<int>{3, 0, 0, 0, 7, 7, 0, 0}));
  EXPECT_EQ(stats.decodeSteps, 6);
  // The prompt's logits stay those of the prompt.
  EXPECT_FLOAT_EQ(generator.promptLogits()[0], 0.5f);

  CountingExecutor longPrompt(100);
  Generator past(longPrompt, c);
  EXPECT_EQ(collect(past, {1, 2, 3, 4, 5, 6, 7}), (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14}));
  for (const auto& [n, pos] : longPrompt.calls)
    EXPECT_TRUE(pos > 0 || n == 4) << "a second pass at " << pos;
}

TEST(Generator, StopsAtEosWithoutEmittingIt) {
  CountingExecutor executor(100);
  GenerationConfig c = config(64, 8, 100, 50);
  c.eosIds = {99, 7};
  Generator generator(executor, c);
  GenerationStats stats;
  EXPECT_EQ(collect(generator, {3}, &stats), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_TRUE(stats.stoppedAtEos);
  // --ignore-eos goes on.
  c.ignoreEos = true;
  Generator ignoring(executor, c);
  EXPECT_EQ(collect(ignoring, {3}).size(), 50u);
}

TEST(Generator, StopsAtMaxNewTokensAndZeroMeansPrefillOnly) {
  CountingExecutor executor(100);
  Generator three(executor, config(64, 8, 100, 3));
  EXPECT_EQ(collect(three, {20, 21}), (std::vector<int32_t>{22, 23, 24}));
  executor.calls.clear();
  Generator none(executor, config(64, 8, 100, 0));
  EXPECT_TRUE(collect(none, {20, 21}).empty());
  EXPECT_EQ(executor.calls.size(), 1u);
  EXPECT_FLOAT_EQ(none.promptLogits()[22], 1.0f);
}

TEST(Generator, StopsAtTheContext) {
  CountingExecutor executor(100);
  Generator generator(executor, config(8, 4, 100, 100));
  GenerationStats stats;
  // Positions 5, 6, 7 are left for generated tokens.
  EXPECT_EQ(collect(generator, {1, 2, 3, 4, 5}, &stats), (std::vector<int32_t>{6, 7, 8}));
  EXPECT_TRUE(stats.stoppedAtContext);
  for (const auto& [n, pos] : executor.calls)
    EXPECT_LE(pos + n, 8);
}

TEST(Generator, CallbackCanStop) {
  CountingExecutor executor(100);
  Generator generator(executor, config(64, 8, 100, 20));
  Sampler greedy(SamplingParams{});
  int seen = 0;
  auto result = generator.generate({1}, greedy, [&](int32_t) { return ++seen < 2; });
  ASSERT_TRUE(result.isOk());
  EXPECT_EQ(result.value().generatedTokens, 2);
}

TEST(Generator, RejectsTooLongAndEmptyPrompts) {
  CountingExecutor executor(100);
  Generator generator(executor, config(4, 4, 100, 1));
  Sampler greedy(SamplingParams{});
  auto tooLong = generator.generate({1, 2, 3, 4, 5}, greedy, nullptr);
  ASSERT_FALSE(tooLong.isOk());
  EXPECT_EQ(tooLong.status().message(), "prompt has 5 tokens but the plan's context is 4");
  EXPECT_FALSE(generator.generate({}, greedy, nullptr).isOk());
  EXPECT_TRUE(executor.calls.empty());
}

// Picks greedy tokens itself, as the CUDA executor does on the GPU: (last id + 2) % vocab,
// unlike its logits (last id + 1), so the test sees which path each step took.
class PickingExecutor : public CountingExecutor {
public:
  using CountingExecutor::CountingExecutor;
  bool picksGreedyTokens() const override { return true; }
  Status forwardSequenceGreedy(int /*sequence*/, const int32_t* tokens, int n, int pos,
                               int32_t* id) override {
    picks.push_back({n, pos});
    *id = (tokens[n - 1] + 2) % 100;
    return Status::ok();
  }
  std::vector<std::pair<int, int>> picks;
};

TEST(Generator, GreedyDecodeStepsLetTheExecutorPick) {
  PickingExecutor executor(100);
  Generator generator(executor, config(64, 8, 100, 4));
  const std::vector<int32_t> out = collect(generator, {1, 2, 3});
  // The first token from the prompt's logits (3 + 1), the rest picked (+ 2 each).
  EXPECT_EQ(out, (std::vector<int32_t>{4, 6, 8, 10}));
  EXPECT_EQ(executor.calls, (std::vector<std::pair<int, int>>{{3, 0}}));
  EXPECT_EQ(executor.picks, (std::vector<std::pair<int, int>>{{1, 3}, {1, 4}, {1, 5}}));

  // Sampling with a temperature reads the logits at every step.
  PickingExecutor sampled(100);
  Generator other(sampled, config(64, 8, 100, 3));
  SamplingParams params;
  params.temperature = 0.01f;
  EXPECT_EQ(collect(other, {1, 2, 3}, nullptr, params), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_TRUE(sampled.picks.empty());
}

// Hands back top-k candidates of CountingExecutor's logits (up to 8), as the CUDA executor
// does on the GPU.
class CandidateExecutor : public CountingExecutor {
public:
  using CountingExecutor::CountingExecutor;
  int maxTopKCandidates() const override { return 8; }
  Status forwardSequenceTopK(int sequence, const int32_t* tokens, int n, int pos, int k,
                             TopKCandidates* c) override {
    std::vector<float> logits(100);
    NINFER_RETURN_IF_ERROR(forwardSequence(sequence, tokens, n, pos, logits.data()));
    *c = test::topKReference(logits.data(), 100, k);
    ++topKSteps;
    return Status::ok();
  }
  int topKSteps = 0;
};

TEST(Generator, TopKDecodeStepsLetTheExecutorPickTheCandidates) {
  SamplingParams params;
  params.temperature = 1.0f;
  params.topK = 3;
  params.seed = 11;
  CountingExecutor logits(100);
  CandidateExecutor candidates(100);
  const std::vector<int32_t> expected = sampledTokens(logits, params, 12);
  EXPECT_EQ(sampledTokens(candidates, params, 12), expected); // the same draws from the same seed
  EXPECT_EQ(candidates.topKSteps, 11);
  // Top-k past what the executor picks reads the logits.
  params.topK = 9;
  CandidateExecutor tooMany(100);
  sampledTokens(tooMany, params, 12);
  EXPECT_EQ(tooMany.topKSteps, 0);
}

// Draws with a temperature itself, from CountingExecutor's logits and the uniform it is
// given, as the CUDA executor does on the GPU.
class SamplingExecutor : public CountingExecutor {
public:
  using CountingExecutor::CountingExecutor;
  bool samplesTokens() const override { return true; }
  Status forwardSequenceSample(int sequence, const int32_t* tokens, int n, int pos,
                               float temperature, double uniform, int32_t* id) override {
    std::vector<float> logits(100);
    NINFER_RETURN_IF_ERROR(forwardSequence(sequence, tokens, n, pos, logits.data()));
    SamplingParams params;
    params.temperature = temperature;
    *id = Sampler(params).sampleWith(logits.data(), 100, uniform);
    ++sampleSteps;
    return Status::ok();
  }
  int sampleSteps = 0;
};

TEST(Generator, TemperatureDecodeStepsLetTheExecutorDraw) {
  SamplingParams params;
  params.temperature = 1.0f; // CountingExecutor's logits: every token about as likely
  params.seed = 12;
  CountingExecutor logits(100);
  SamplingExecutor drawing(100);
  const std::vector<int32_t> expected = sampledTokens(logits, params, 40);
  EXPECT_EQ(sampledTokens(drawing, params, 40), expected); // the same draws from the same seed
  EXPECT_EQ(drawing.sampleSteps, 39);
  // With top-k or top-p the executor does not draw.
  for (int k : {0, 50}) {
    params.topK = k;
    params.topP = k ? 1.0f : 0.9f;
    SamplingExecutor other(100);
    sampledTokens(other, params, 40);
    EXPECT_EQ(other.sampleSteps, 0) << "top-k " << k;
  }
}

// Hands back top-p's candidates and mass of CountingExecutor's logits, and those logits
// after the step, as the CUDA executor does on the GPU.
class NucleusExecutor : public CountingExecutor {
public:
  using CountingExecutor::CountingExecutor;
  bool picksNucleus() const override { return true; }
  Status forwardSequenceNucleus(int sequence, const int32_t* tokens, int n, int pos,
                                float temperature, TopKCandidates* c, double* mass) override {
    NINFER_RETURN_IF_ERROR(forwardSequence(sequence, tokens, n, pos, last_.data()));
    *c = test::topKReference(last_.data(), 100, kMaxTopKCandidates);
    *mass = test::nucleusMass(last_.data(), 100, temperature);
    ++nucleusSteps;
    return Status::ok();
  }
  Status lastLogits(float* logits) override {
    std::copy(last_.begin(), last_.end(), logits);
    ++logitsCopies;
    return Status::ok();
  }
  int nucleusSteps = 0, logitsCopies = 0;

private:
  std::vector<float> last_ = std::vector<float>(100);
};

// Top-p 0.9 sampling at `temperature`, seeded.
SamplingParams topP90(float temperature, uint64_t seed) {
  SamplingParams params;
  params.temperature = temperature;
  params.topP = 0.9f;
  params.seed = seed;
  return params;
}

TEST(Generator, TopPDecodeStepsLetTheExecutorPickTheCandidates) {
  for (float temperature : {0.02f, 1.0f}) {
    const SamplingParams params = topP90(temperature, 13);
    CountingExecutor logits(100);
    NucleusExecutor nucleus(100);
    EXPECT_EQ(sampledTokens(nucleus, params, 30), sampledTokens(logits, params, 30))
        << "temperature " << temperature; // the same draws
    EXPECT_EQ(nucleus.nucleusSteps, 29);
    // CountingExecutor's logits at temperature 0.02: the nucleus is their 1; at 1 it holds
    // about 90 of the 100 ids, past the 64 candidates, so every draw reads the logits.
    EXPECT_EQ(nucleus.logitsCopies, temperature < 0.5f ? 0 : 29) << "temperature " << temperature;
  }
}

// NucleusExecutor that draws top-p over its last logits itself (Sampler::sampleWith of them
// standing in for the CUDA executor's kernel) where the candidates do not hold the nucleus.
class RowDrawingExecutor : public NucleusExecutor {
public:
  using NucleusExecutor::NucleusExecutor;
  bool drawsNucleus() const override { return true; }
  Status drawLastNucleus(float temperature, float topP, double uniform, int32_t* id) override {
    std::vector<float> logits(100);
    NINFER_RETURN_IF_ERROR(lastLogits(logits.data()));
    SamplingParams params;
    params.temperature = temperature;
    params.topP = topP;
    *id = Sampler(params).sampleWith(logits.data(), 100, uniform);
    ++rowDraws;
    return Status::ok();
  }
  int rowDraws = 0;
};

// Runs `steps` decode steps of both, each step fed the first one's last pick, and expects the
// same picks.
void expectSamePicks(DecodeStep& first, DecodeStep& second, int steps, const std::string& what) {
  int32_t id = 1, a = 0, b = 0;
  for (int pos = 0; pos < steps; ++pos) {
    ASSERT_TRUE(first.run(id, pos, a).isOk()) << what << ", step " << pos;
    ASSERT_TRUE(second.run(id, pos, b).isOk()) << what << ", step " << pos;
    EXPECT_EQ(a, b) << what << ", step " << pos;
    id = a;
  }
}

// Where the executor draws top-p over the whole row, DecodeStep lets it (no logits come to the
// host) where the nucleus reaches past the candidates, with the uniform sampleWith would take.
TEST(DecodeStep, LetsTheExecutorDrawTopPOverTheRow) {
  for (float temperature : {0.02f, 1.0f}) {
    Sampler deviceSampler(topP90(temperature, 21)), hostSampler(topP90(temperature, 21));
    RowDrawingExecutor device(100);
    CountingExecutor host(100);
    DecodeStep onDevice(device, deviceSampler, 100), onHost(host, hostSampler, 100);
    expectSamePicks(onDevice, onHost, 5, "temperature " + std::to_string(temperature));
    const int pastCandidates = temperature < 0.5f ? 0 : 5;
    EXPECT_EQ(onDevice.rowDrawSteps(), pastCandidates);
    EXPECT_EQ(device.rowDraws, pastCandidates);
    EXPECT_EQ(onDevice.logitsSteps(), 0);
    EXPECT_EQ(onHost.rowDrawSteps(), 0);
  }
}

// NucleusExecutor whose row draw fails once and is then given up (drawsNucleus() false), as
// the CUDA executor's is where the GPU cannot keep the draw's blocks resident.
class GivingUpExecutor : public NucleusExecutor {
public:
  using NucleusExecutor::NucleusExecutor;
  bool drawsNucleus() const override { return !gaveUp; }
  Status drawLastNucleus(float, float, double, int32_t*) override {
    gaveUp = true;
    return Status::error("cannot keep the draw's blocks resident");
  }
  bool gaveUp = false;
};

// Where the executor gives its row draw up, DecodeStep brings the logits and draws on the host,
// in that step and the later ones.
TEST(DecodeStep, DrawsOnTheHostWhereTheExecutorGivesTheRowDrawUp) {
  Sampler deviceSampler(topP90(1.0f, 22)), hostSampler(topP90(1.0f, 22));
  GivingUpExecutor device(100);
  CountingExecutor host(100);
  DecodeStep onDevice(device, deviceSampler, 100), onHost(host, hostSampler, 100);
  expectSamePicks(onDevice, onHost, 5, "top-p");
  EXPECT_TRUE(device.gaveUp);
  EXPECT_EQ(onDevice.rowDrawSteps(), 0);
  EXPECT_EQ(onDevice.logitsSteps(), 5); // every step's nucleus reaches past the candidates
  EXPECT_EQ(device.logitsCopies, 5);
}

// DecodeStep counts the steps whose pick read the logits on the host: every step without the
// executor's pick, and top-p's steps whose nucleus reaches past the candidates.
TEST(DecodeStep, CountsTheStepsThatBringTheLogits) {
  for (float temperature : {0.02f, 1.0f}) {
    Sampler nucleusSampler(topP90(temperature, 0)), logitsSampler(topP90(temperature, 0));
    NucleusExecutor nucleus(100);
    CountingExecutor logits(100);
    DecodeStep onDevice(nucleus, nucleusSampler, 100), onHost(logits, logitsSampler, 100);
    EXPECT_TRUE(onDevice.onDevice());
    EXPECT_FALSE(onHost.onDevice());
    expectSamePicks(onDevice, onHost, 5, "temperature " + std::to_string(temperature));
    EXPECT_EQ(onDevice.logitsSteps(), temperature < 0.5f ? 0 : 5);
    EXPECT_EQ(onDevice.logitsSteps(), nucleus.logitsCopies);
    EXPECT_EQ(onHost.logitsSteps(), 5);
  }
}

TEST(Generator, ConfigFromPlanAndRealExecutor) {
  test::TinyModelSpec spec;
  test::TinyModel model = test::buildTinyModel(spec);
  model.maker.plan.tokenizer->eos_ids = {5, 9};
  auto file = PlanFile::open(model.maker.write("generator.nplan"));
  ASSERT_TRUE(file.isOk()) << file.status().message();
  const GenerationConfig c = GenerationConfig::fromPlan(*file.value());
  EXPECT_EQ(c.context, spec.context);
  EXPECT_EQ(c.maxStepTokens, spec.maxStepTokens);
  EXPECT_EQ(c.vocabSize, spec.vocab);
  EXPECT_EQ(c.eosIds, (std::vector<int32_t>{5, 9}));
  auto executor = createCpuExecutor(*file.value(), 2);
  ASSERT_TRUE(executor.isOk());
  GenerationConfig run = c;
  run.maxNewTokens = 6;
  run.ignoreEos = true;
  Generator generator(*executor.value(), run);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const std::vector<int32_t> out = collect(generator, prompt);
  ASSERT_EQ(out.size(), 6u);
  // Greedy continuation from the reference model, step by step.
  std::vector<int32_t> tokens = prompt;
  std::vector<int> steps = {8, 3};
  for (int i = 0; i < 6; ++i) {
    std::vector<double> logits = test::referenceStepLogits(model, tokens, steps).back();
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const double best = logits[next];
    logits[next] = -1e300;
    // Near-ties may legitimately flip between f32 and double; the rest must agree.
    if (best - *std::max_element(logits.begin(), logits.end()) > 1e-3) {
      EXPECT_EQ(out[i], next) << "token " << i;
    }
    tokens.push_back(out[i]);
    steps.push_back(1);
  }
}

} // namespace
} // namespace ninfer
