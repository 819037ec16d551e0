// Lowers the ninfer dialect module (after the pass pipeline) to the plan's
// object form: buffers (weights with their segment offsets, activations at
// the arena offsets memory planning chose, KV caches, tokens, logits) and the
// op list. Kernels are added afterwards by the kernel emitter.
#pragma once

#include "plan_generated.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>

namespace ninfer {

class WeightStore;
struct ModelConfig;

struct PlanOptions {
  int context = 4096;
  int maxStepTokens = 512;
  bool fuse = true; // PlanFusion.h: residual adds into the linear before them
  plan::DType kvDType = plan::DType::F16; // F16 or Q8_KV (ninfer/KvFormat.h)
  // Sequences the KV cache holds and a batch step decodes at most (1..kMaxBatch):
  // a cache slot each, a logits row each, a decode-attention workspace each.
  int maxBatch = 1;
};

llvm::Expected<std::unique_ptr<plan::PlanT>> buildPlan(mlir::ModuleOp module,
                                                       const ModelConfig& config,
                                                       const WeightStore& weights,
                                                       const PlanOptions& options);

} // namespace ninfer
