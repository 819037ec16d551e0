// `ninferc --trace` plans (KernelOptions::trace; codegen/kernels/trace.cuh) and the CUDA
// executor's traceStep(): the emitter instruments every wrapper only when asked (no GPU
// needed); on the GPU, a traced plan picks the same tokens as the plain one, and its
// single-sequence and batch steps give one span per launch, in launch order, with every
// wait returning after the previous launch's last warp ended (the kernels' dependency
// chain), the greedy pick last, and every block inside its launch's span. Skips the GPU part
// without a GPU.
#include "BenchTimeline.h"
#include "CountOf.h"
#include "GpuParity.h"
#include "TinyModelPlan.h"

#include <gtest/gtest.h>

#include <random>

namespace ninfer {
namespace {

TEST(Timeline, TraceOptionInstrumentsEveryWrapper) {
  for (bool traced : {false, true}) {
    test::TestPlan t = test::tinyModel(test::TinyModelOptions{});
    KernelOptions options;
    options.archs = {"sm_90"};
    options.embedPtx = false;
    options.trace = traced;
    Status s = emitKernels(t.plan, options);
    ASSERT_TRUE(s.isOk()) << s.message();
    const std::string& source = t.plan.kernels->source;
    const size_t kernels = t.plan.kernels->functions.size();
    EXPECT_EQ(source.find("#define NINFER_TRACE 1") != std::string::npos, traced);
    EXPECT_EQ(test::countOf(source, "ninfer::dev::traceBegin()"), traced ? kernels : 0u);
    EXPECT_EQ(test::countOf(source, "ninfer::dev::traceEnd(traceBlock)"), traced ? kernels : 0u);
  }
}

// Checks the spans of one traced step against its launches.
void expectStepSpans(const plan::Plan& p, const Result<StepTrace>& trace, const std::string& what) {
  ASSERT_TRUE(trace.isOk()) << what << ": " << trace.status().message();
  ASSERT_FALSE(trace.value().launches.empty()) << what;
  Result<std::vector<LaunchSpan>> spans = launchSpans(p, trace.value());
  ASSERT_TRUE(spans.isOk()) << what << ": " << spans.status().message();
  ASSERT_EQ(spans->size(), trace.value().launches.size()) << what;
  for (size_t i = 0; i < spans->size(); ++i) {
    const LaunchSpan& s = (*spans)[i];
    const std::string where = what + ", launch " + std::to_string(i) + " (" + s.kernel + ")";
    EXPECT_EQ(s.kernel, trace.value().launches[i].kernel) << where;
    EXPECT_GT(s.blocks, 0u) << where;
    EXPECT_EQ(s.blockSpans.size(), s.blocks) << where;
    EXPECT_LE(s.start, s.end) << where;
    if (i > 0 && trace.value().launches[i].op == StepTrace::kNotAnOp) {
      // The greedy pick, a plain launch: in stream order after the step's last kernel.
      EXPECT_EQ(s.kernel, "ninfer_argmax_rows") << where;
      EXPECT_GE(s.start, (*spans)[i - 1].end) << where;
    } else if (i > 0) {
      const LaunchSpan& before = (*spans)[i - 1];
      EXPECT_GE(s.start, before.start) << where;
      EXPECT_GE(s.waitDone, 0.0) << where << ": every kernel waits for the one before";
      EXPECT_GE(s.waitDone, before.end)
          << where << ": its wait returned before " << before.kernel << " ended";
      EXPECT_LE(s.waitDone, s.end) << where;
    }
    for (const LaunchSpan::Block& b : s.blockSpans) {
      EXPECT_GE(b.start, s.start) << where;
      EXPECT_LE(b.end, s.end) << where;
    }
  }
}

TEST(Timeline, TracedStepsOnTheGpu) {
  REQUIRE_GPU();
  test::TinyModelOptions options;
  options.maxBatch = 3;
  test::TestPlan plain = test::tinyModel(options), traced = test::tinyModel(options);
  std::unique_ptr<PlanFile> plainFile = test::emittedPlan(plain, "tiny model");
  KernelOptions traceOptions;
  traceOptions.trace = true;
  std::unique_ptr<PlanFile> tracedFile =
      test::emittedPlan(traced, "traced tiny model", traceOptions);
  ASSERT_TRUE(plainFile && tracedFile);
  Result<std::unique_ptr<Executor>> a = createCudaExecutor(*plainFile, 0);
  Result<std::unique_ptr<Executor>> b = createCudaExecutor(*tracedFile, 0);
  ASSERT_TRUE(a.isOk() && b.isOk()) << a.status().message() << b.status().message();
  Executor &untraced = *a.value(), &e = *b.value();
  // The same greedy tokens from both plans over a few steps.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> token(0, test::kTokenVocab - 1);
  for (int pos = 0; pos < 6; ++pos) {
    int32_t id = token(rng), x = -1, y = -2;
    ASSERT_TRUE(untraced.forwardSequenceGreedy(0, &id, 1, pos, &x).isOk());
    ASSERT_TRUE(e.forwardSequenceGreedy(0, &id, 1, pos, &y).isOk());
    EXPECT_EQ(x, y) << "step " << pos;
  }
  const int32_t tokens[3] = {5, 9, 1}, positions[3] = {6, 3, 0}, sequences[3] = {0, 1, 2};
  for (int round = 0; round < 2; ++round) { // the second replays the captured graphs
    const std::string r = ", round " + std::to_string(round);
    expectStepSpans(tracedFile->plan(), e.traceStep(tokens, positions, sequences, 1),
                    "single-sequence step" + r);
    expectStepSpans(tracedFile->plan(), e.traceStep(tokens, positions, sequences, 3),
                    "batch step" + r);
  }
  Result<StepTrace> refused = untraced.traceStep(tokens, positions, sequences, 1);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("ninferc --trace"), std::string::npos)
      << refused.status().message();
}

} // namespace
} // namespace ninfer
