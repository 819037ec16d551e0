// Plans of several sequences from the compiler (ninferc --batch) on the shipped
// 4M model (examples/pycode-llama-3m), run by the CPU executor: batch steps of
// sequences at different positions give, row by row, the logits each sequence
// gets alone, bit for bit, with f16 and int8 KV caches; a plan of one sequence
// (--batch 1, the default) keeps its layout and runs as the batch plan's
// single-sequence steps do; bad batch sizes are refused.
#include "BatchRun.h"
#include "CompileDriver.h"

#include "ninfer/Executor.h"
#include "ninfer/Plan.h"

#include <gtest/gtest.h>

#include <string>

namespace ninfer {
namespace {

const std::string kModel =
    std::string(NINFER_COMPILER_TEST_DIR) + "/../../examples/pycode-llama-3m";

// Unique per test: ctest runs the tests of this file in parallel processes.
std::string tempPlan(const std::string& tag) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(test->test_suite_name()) + "_" + test->name();
  for (char& c : name)
    if (c == '/')
      c = '_';
  return ::testing::TempDir() + "/" + name + "_" + tag + ".nplan";
}

// Compiles the model for the CPU executor (no kernels) and opens the plan.
std::unique_ptr<PlanFile> compile(int maxBatch, plan::DType kv, const std::string& tag) {
  CompileOptions options;
  options.input = kModel;
  options.quant.mode = "none";
  options.context = 96;
  options.maxStepTokens = 32;
  options.maxBatch = maxBatch;
  options.kvDType = kv;
  options.output = tempPlan(tag);
  auto compiled = compileModel(options);
  EXPECT_TRUE(bool(compiled)) << (compiled ? "" : llvm::toString(compiled.takeError()));
  if (!compiled)
    return nullptr;
  auto file = PlanFile::open(options.output);
  EXPECT_TRUE(file.isOk()) << file.status().message();
  return file.isOk() ? std::move(*file) : nullptr;
}

std::unique_ptr<Executor> cpu(const PlanFile& file) {
  auto executor = createCpuExecutor(file, 2);
  EXPECT_TRUE(executor.isOk()) << executor.status().message();
  return executor.isOk() ? std::move(*executor) : nullptr;
}

class BatchPlan : public ::testing::TestWithParam<plan::DType> {};

TEST_P(BatchPlan, BatchRowsEqualEachSequenceAlone) {
  std::unique_ptr<PlanFile> many = compile(4, GetParam(), "many");
  std::unique_ptr<PlanFile> one = compile(1, GetParam(), "one");
  ASSERT_TRUE(many && one);
  std::unique_ptr<Executor> batched = cpu(*many), alone = cpu(*many), single = cpu(*one);
  ASSERT_TRUE(batched && alone && single);
  const int vocab = many->plan().model()->vocab_size();
  for (int batch : {1, 3, 4}) {
    const test::BatchSchedule s = test::makeBatchSchedule(batch, 4, vocab, 96, 3, batch);
    std::vector<std::vector<float>> rows, bySlot, byPlanOfOne;
    ASSERT_TRUE(test::runBatched(*batched, s, vocab, 32, rows).isOk());
    ASSERT_TRUE(test::runAlone(*alone, s, vocab, 32, false, bySlot).isOk());
    ASSERT_TRUE(test::runAlone(*single, s, vocab, 32, true, byPlanOfOne).isOk());
    const test::LogitsGap slotGap = test::logitsGap(rows, bySlot);
    const test::LogitsGap oneGap = test::logitsGap(rows, byPlanOfOne);
    EXPECT_EQ(slotGap.differing, 0u) << "batch " << batch << ": max |diff| " << slotGap.maxAbs;
    EXPECT_EQ(oneGap.differing, 0u) << "batch " << batch << ": max |diff| " << oneGap.maxAbs;
  }
}

INSTANTIATE_TEST_SUITE_P(Kv, BatchPlan, ::testing::Values(plan::DType::F16, plan::DType::Q8_KV),
                         [](const ::testing::TestParamInfo<plan::DType>& info) {
                           return std::string(info.param == plan::DType::F16 ? "f16" : "int8");
                         });

// --batch 1 keeps the layout of a plan of one sequence (format version 1, 3-D
// caches, one logits row, one decode workspace); --batch 4 multiplies exactly
// the KV arena, the logits and the workspace by 4, and nothing else.
TEST(BatchPlanLayout, OneSequenceLayoutIsUnchanged) {
  std::unique_ptr<PlanFile> one = compile(1, plan::DType::F16, "layout1");
  std::unique_ptr<PlanFile> four = compile(4, plan::DType::F16, "layout4");
  ASSERT_TRUE(one && four);
  const plan::Plan &a = one->plan(), &b = four->plan();
  EXPECT_EQ(a.format_version(), 1u);
  EXPECT_EQ(a.max_batch(), 1);
  EXPECT_EQ(b.format_version(), 2u);
  EXPECT_EQ(b.max_batch(), 4);
  EXPECT_EQ(b.memory()->weight_bytes(), a.memory()->weight_bytes());
  EXPECT_EQ(b.memory()->activation_bytes(), a.memory()->activation_bytes());
  EXPECT_EQ(b.memory()->kv_bytes(), 4 * a.memory()->kv_bytes());
  ASSERT_EQ(a.buffers()->size(), b.buffers()->size());
  for (uint32_t i = 0; i < a.buffers()->size(); ++i) {
    const plan::Buffer *x = a.buffers()->Get(i), *y = b.buffers()->Get(i);
    std::vector<int64_t> shape(x->shape()->begin(), x->shape()->end());
    const std::vector<int64_t> batchShape(y->shape()->begin(), y->shape()->end());
    switch (x->kind()) {
    case plan::BufferKind::KvCache:
      EXPECT_EQ(shape.size(), 3u) << x->name()->str();
      shape.insert(shape.begin(), 4);
      EXPECT_EQ(batchShape, shape) << x->name()->str();
      EXPECT_EQ(y->size_bytes(), 4 * x->size_bytes()) << x->name()->str();
      break;
    case plan::BufferKind::Logits:
      EXPECT_EQ(shape, (std::vector<int64_t>{1, a.model()->vocab_size()}));
      EXPECT_EQ(batchShape, (std::vector<int64_t>{4, a.model()->vocab_size()}));
      break;
    case plan::BufferKind::Workspace:
      EXPECT_EQ(y->size_bytes(), 4 * x->size_bytes());
      break;
    default:
      EXPECT_EQ(batchShape, shape) << x->name()->str();
      EXPECT_EQ(y->size_bytes(), x->size_bytes()) << x->name()->str();
      EXPECT_EQ(y->offset(), x->offset()) << x->name()->str();
    }
  }
}

TEST(BatchPlanLayout, RefusesBadBatchSizes) {
  for (int bad : {0, 9}) {
    CompileOptions options;
    options.input = kModel;
    options.context = 64;
    options.maxStepTokens = 16;
    options.maxBatch = bad;
    auto compiled = compileModel(options);
    ASSERT_FALSE(bool(compiled));
    const std::string message = llvm::toString(compiled.takeError());
    EXPECT_NE(message.find("batch " + std::to_string(bad) + " is not supported: 1 to 8 sequences"),
              std::string::npos)
        << message;
  }
  CompileOptions options;
  options.input = kModel;
  options.context = 64;
  options.maxStepTokens = 4;
  options.maxBatch = 8;
  auto compiled = compileModel(options);
  ASSERT_FALSE(bool(compiled));
  EXPECT_NE(llvm::toString(compiled.takeError()).find("at most the step tokens (4)"),
            std::string::npos);
}

} // namespace
} // namespace ninfer
