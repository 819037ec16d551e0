// The ninfer pass order, in one place. ninferc runs buildNinferPipeline();
// ninfer-opt exposes the same order as `--ninfer-pipeline`.
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace ninfer {

void buildNinferPipeline(mlir::OpPassManager& pm, const PipelineOptions& options) {
  // Drop ops whose results are unused (pure ops only: attention stays, it
  // writes the KV cache), then merge duplicate weight references (the table a
  // tied lm_head shares with the embedding) so no slot is planned for dead
  // values and each tensor is laid out once in the weight area.
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createCanonicalizerPass());
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createCSEPass());
  // Memory planning goes last: any rewrite after it would invalidate offsets.
  PlanMemoryOptions memory;
  memory.maxStepTokens = options.maxStepTokens;
  pm.addPass(createPlanMemory(memory));
}

namespace {
struct PipelineCommandLineOptions : mlir::PassPipelineOptions<PipelineCommandLineOptions> {
  Option<int64_t> maxStepTokens{*this, "max-step-tokens",
                                llvm::cl::desc("rows of every activation buffer"),
                                llvm::cl::init(512)};
};
} // namespace

void registerNinferPassesAndPipelines() {
  registerNinferPasses();
  mlir::PassPipelineRegistration<PipelineCommandLineOptions>(
      "ninfer-pipeline", "the full ninfer pass pipeline (as ninferc runs it)",
      [](mlir::OpPassManager& pm, const PipelineCommandLineOptions& cl) {
        PipelineOptions options;
        options.maxStepTokens = cl.maxStepTokens;
        buildNinferPipeline(pm, options);
      });
}

} // namespace ninfer
