// Batched decode on the CPU executor (the reference): a batch step of several
// sequences at different positions gives, row by row, the same logits as each
// sequence run alone in single-sequence steps, bit for bit (every row-wise op
// computes a row the same way whatever the other rows are, and RoPE, the KV
// append and attention run per row with a one-token step's kernels). Also: a
// plan of several sequences runs single-sequence steps as a plan of one does,
// the decoded logits match the double-precision reference, and bad batch steps
// are refused with one clear message.
#include "BatchRun.h"
#include "TestModel.h"

#include "ninfer/Executor.h"
#include "ninfer/Plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace ninfer {
namespace test {
namespace {

TinyModelSpec batchSpec(plan::DType kvDtype, int maxBatch) {
  TinyModelSpec spec;
  spec.kvDtype = kvDtype;
  spec.maxBatch = maxBatch;
  spec.context = 24;
  return spec;
}

struct KvCase {
  const char* name;
  plan::DType dtype;
};

class CpuBatch : public ::testing::TestWithParam<KvCase> {};

// Every batch size 1..8 over an 8-sequence plan, rows at different positions
// and in an order other than the slots', against each sequence alone.
TEST_P(CpuBatch, RowsEqualSequencesRunAlone) {
  TinyModel model = buildTinyModel(batchSpec(GetParam().dtype, 8));
  Loaded batched = load(model, std::string("batch_") + GetParam().name + ".nplan");
  Loaded alone = load(model, std::string("alone_") + GetParam().name + ".nplan", 3);
  ASSERT_TRUE(batched.executor && alone.executor);
  EXPECT_EQ(batched.executor->maxBatch(), 8);
  const int vocab = model.spec.vocab, maxStep = model.spec.maxStepTokens;
  for (int batch = 1; batch <= 8; ++batch) {
    const BatchSchedule s = makeBatchSchedule(batch, 8, vocab, model.spec.context, 4, batch);
    std::vector<std::vector<float>> rows, reference;
    Status a = runBatched(*batched.executor, s, vocab, maxStep, rows);
    Status b = runAlone(*alone.executor, s, vocab, maxStep, false, reference);
    ASSERT_TRUE(a.isOk()) << a.message();
    ASSERT_TRUE(b.isOk()) << b.message();
    const LogitsGap gap = logitsGap(rows, reference);
    EXPECT_EQ(gap.differing, 0u) << "batch " << batch << ": max |diff| " << gap.maxAbs;
  }
}

// A plan of one sequence runs each sequence alone in its one slot; the
// 8-sequence plan's batch steps give the same bits.
TEST_P(CpuBatch, RowsEqualAPlanOfOneSequence) {
  TinyModel many = buildTinyModel(batchSpec(GetParam().dtype, 8));
  TinyModel one = buildTinyModel(batchSpec(GetParam().dtype, 1));
  Loaded batched = load(many, std::string("many_") + GetParam().name + ".nplan");
  Loaded single = load(one, std::string("one_") + GetParam().name + ".nplan");
  ASSERT_TRUE(batched.executor && single.executor);
  EXPECT_EQ(single.file->plan().format_version(), 1u);
  EXPECT_EQ(batched.file->plan().format_version(), 2u);
  const int vocab = many.spec.vocab, maxStep = many.spec.maxStepTokens;
  const BatchSchedule s = makeBatchSchedule(5, 8, vocab, many.spec.context, 3, 2);
  std::vector<std::vector<float>> rows, reference;
  ASSERT_TRUE(runBatched(*batched.executor, s, vocab, maxStep, rows).isOk());
  ASSERT_TRUE(runAlone(*single.executor, s, vocab, maxStep, true, reference).isOk());
  EXPECT_EQ(logitsGap(rows, reference).differing, 0u);
}

INSTANTIATE_TEST_SUITE_P(Kv, CpuBatch,
                         ::testing::Values(KvCase{"f16", plan::DType::F16},
                                           KvCase{"int8", plan::DType::Q8_KV}),
                         [](const ::testing::TestParamInfo<KvCase>& info) {
                           return std::string(info.param.name);
                         });

// Batch rows against the double-precision model (which knows nothing of
// batching): row r of each step is sequence r's next token.
TEST(CpuBatch, RowsMatchTheDoubleReference) {
  TinyModelSpec spec = batchSpec(plan::DType::F16, 4);
  spec.window = 5;
  TinyModel model = buildTinyModel(spec);
  Loaded l = load(model, "batch_reference.nplan");
  ASSERT_TRUE(l.executor);
  const BatchSchedule s = makeBatchSchedule(4, 4, spec.vocab, spec.context, 3, 1);
  std::vector<std::vector<float>> rows;
  ASSERT_TRUE(runBatched(*l.executor, s, spec.vocab, spec.maxStepTokens, rows).isOk());
  for (size_t r = 0; r < s.sequences.size(); ++r) {
    // The sequence alone as the reference sees it: its prompt, then one token a step.
    std::vector<int32_t> tokens = s.prompts[r];
    std::vector<int> steps = {int(tokens.size())};
    for (size_t step = 0; step < s.decoded.size(); ++step) {
      tokens.push_back(s.decoded[step][r]);
      steps.push_back(1);
    }
    const auto expected = referenceStepLogits(model, tokens, steps);
    for (size_t step = 0; step < s.decoded.size(); ++step) {
      double maxError = 0, maxValue = 0;
      for (int i = 0; i < spec.vocab; ++i) {
        const double e = expected[step + 1][size_t(i)];
        maxError = std::max(maxError, std::fabs(rows[step][r * spec.vocab + i] - e));
        maxValue = std::max(maxValue, std::fabs(e));
      }
      // The bound of CpuExecutorModel.MatchesDoubleReference (f32 against double).
      EXPECT_LT(maxError, 2e-3 * std::max(1.0, maxValue)) << "row " << r << " step " << step;
    }
  }
}

TEST(CpuBatch, RejectsBadBatchSteps) {
  TinyModel model = buildTinyModel(batchSpec(plan::DType::F16, 4));
  Loaded l = load(model, "batch_errors.nplan");
  TinyModel one = buildTinyModel(batchSpec(plan::DType::F16, 1));
  Loaded single = load(one, "batch_errors_one.nplan");
  ASSERT_TRUE(l.executor && single.executor);
  std::vector<int32_t> tokens(8, 1), positions(8, 0), sequences = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<float> logits(8 * size_t(model.spec.vocab));
  auto message = [&](Executor& e, int batch) {
    Status s =
        e.forwardBatch(tokens.data(), positions.data(), sequences.data(), batch, logits.data());
    EXPECT_FALSE(s.isOk()) << "batch " << batch;
    return s.message();
  };
  EXPECT_NE(message(*l.executor, 5)
                .find("a batch step takes 1 to 4 sequences (the plan's max "
                      "batch), got 5: compile the plan with ninferc --batch 5"),
            std::string::npos);
  EXPECT_NE(message(*l.executor, 0).find("got 0"), std::string::npos);
  EXPECT_NE(message(*single.executor, 2).find("takes 1 to 1 sequences"), std::string::npos);
  positions[2] = model.spec.context;
  EXPECT_NE(message(*l.executor, 3)
                .find("position 24 of sequence 2 exceeds the plan's context "
                      "of 24"),
            std::string::npos);
  positions[2] = -1;
  EXPECT_NE(message(*l.executor, 3).find("position -1"), std::string::npos);
  positions[2] = 0;
  sequences[2] = 0;
  EXPECT_NE(message(*l.executor, 3)
                .find("sequence 0 appears twice in one batch step (rows 0 and "
                      "2)"),
            std::string::npos);
  sequences[2] = 4;
  EXPECT_NE(message(*l.executor, 3).find("sequence 4 does not exist: the plan holds 4 sequences"),
            std::string::npos);
  sequences[2] = 2;
  tokens[1] = model.spec.vocab;
  EXPECT_NE(message(*l.executor, 3).find("token id 37 is outside the vocabulary"),
            std::string::npos);
  tokens[1] = 1;
  EXPECT_NE(l.executor->forwardBatch(tokens.data(), positions.data(), nullptr, 2, logits.data())
                .message()
                .find("tokens, positions and sequences must not be null"),
            std::string::npos);
  EXPECT_NE(l.executor->forwardBatch(tokens.data(), positions.data(), sequences.data(), 2, nullptr)
                .message()
                .find("forwardBatch: logits must not be null"),
            std::string::npos);
  // Single-sequence steps name a slot of the plan.
  Status slot = l.executor->forwardSequence(4, tokens.data(), 1, 0, logits.data());
  EXPECT_NE(slot.message().find("sequence 4 does not exist"), std::string::npos);
  Status slotOfOne = single.executor->forwardSequence(1, tokens.data(), 1, 0, logits.data());
  EXPECT_NE(slotOfOne.message().find("the plan holds 1 sequence (compile it with ninferc "
                                     "--batch N for more)"),
            std::string::npos);
  // The good step after all of them.
  EXPECT_TRUE(
      l.executor->forwardBatch(tokens.data(), positions.data(), sequences.data(), 4, logits.data())
          .isOk());
}

} // namespace
} // namespace test
} // namespace ninfer
