// The compiler's plan check (ninferc's memory check and report) sees the workspace that kernel
// emission adds (the sm_90a GEMMs' 16-bit activations) and runs before NVRTC: a plan it
// refuses is refused without compiling a kernel and without writing a file. An output it
// cannot write is refused before anything else.
#include "CompileDriver.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace ninfer {
namespace {

const std::string kModel =
    std::string(NINFER_COMPILER_TEST_DIR) + "/../../examples/pycode-llama-3m";

TEST(PlanCheck, RefusedPlanStopsBeforeNvrtcAndWritesNothing) {
  CompileOptions options;
  options.input = kModel;
  options.quant.mode = "none";
  options.context = 96;
  options.maxStepTokens = 32; // GEMM steps: on sm_90a they read 16-bit copies of x
  options.kernels.archs = {"sm_90a"};
  options.output = ::testing::TempDir() + "/plan_check_refused.nplan";
  std::remove(options.output.c_str());
  int compiledKernels = 0;
  options.kernels.progress = [&](int, int) { ++compiledKernels; };
  uint64_t workspace = 0, sixteenBit = 0;
  options.checkPlan = [&](const plan::PlanT& plan) -> llvm::Error {
    workspace = plan.memory ? plan.memory->workspace_bytes : 0;
    for (const auto& buffer : plan.buffers)
      if (buffer && (buffer->name == "gemm.x16" || buffer->name == "gemm.act16")) {
        EXPECT_LE(buffer->offset + buffer->size_bytes, workspace) << buffer->name;
        sixteenBit += buffer->size_bytes;
      }
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the plan needs 9.00 GiB but the test GPU has 1.00 GiB");
  };
  auto compiled = compileModel(options);
  ASSERT_FALSE(bool(compiled));
  const std::string message = llvm::toString(compiled.takeError());
  EXPECT_NE(message.find("needs 9.00 GiB"), std::string::npos) << message;
  EXPECT_EQ(compiledKernels, 0) << "NVRTC ran before the check";
  // x16 (32 rows of K up to 768) and act16 (32 rows of 768) in 16 bits.
  EXPECT_GE(sixteenBit, uint64_t(2) * 32 * 768 * 2);
  std::FILE* file = std::fopen(options.output.c_str(), "rb");
  EXPECT_EQ(file, nullptr) << "a refused plan was written";
  if (file)
    std::fclose(file);
}

// An output the compiler cannot write is refused before the model is imported: the plan
// check (after lowering) never runs, and nothing is left in the output's directory.
TEST(PlanCheck, UnwritableOutputIsRefusedFirst) {
  const std::string dir = ::testing::TempDir() + "/plan_check_output";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(std::filesystem::create_directory(dir));
  const struct {
    std::string output, expected;
  } cases[] = {
      {dir + "/missing/plan.nplan",
       "cannot write " + dir + "/missing/plan.nplan: No such file or directory"},
      {dir, "cannot write " + dir + ": it is a directory"},
  };
  for (const auto& c : cases) {
    CompileOptions options;
    options.input = kModel;
    options.quant.mode = "none";
    options.output = c.output;
    bool checked = false;
    options.checkPlan = [&](const plan::PlanT&) -> llvm::Error {
      checked = true;
      return llvm::Error::success();
    };
    auto compiled = compileModel(options);
    ASSERT_FALSE(bool(compiled)) << c.output;
    const std::string message = llvm::toString(compiled.takeError());
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    EXPECT_FALSE(checked) << "the model was lowered before the output was checked";
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a probe file was left behind";
}

} // namespace
} // namespace ninfer
