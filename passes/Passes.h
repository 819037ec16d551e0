// The ninfer passes and the compilation pipeline (see Passes.td for what each
// pass does, Pipelines.cpp for their order).
#pragma once

#include "ir/NinferDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <memory>

namespace ninfer {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

// The quantization pass as the compiler creates it, with its weight store
// (passes/Quantize.h declares these types).
struct QuantizeSettings;
class QuantizeEnvironment;
struct QuantizeReport;
std::unique_ptr<mlir::Pass> createQuantizePass(const QuantizeSettings& settings,
                                               QuantizeEnvironment* environment,
                                               QuantizeReport* report);

// True for the ops whose result lives in the activation arena.
bool producesActivation(mlir::Operation* op);

// Every activation buffer is aligned to this in the arena.
inline constexpr int64_t kActivationAlignment = 256;

struct PipelineOptions {
  int64_t maxStepTokens = 512;
};

// The whole pass order from an imported module to one ready for buildPlan().
void buildNinferPipeline(mlir::OpPassManager& pm, const PipelineOptions& options);

// Registers every ninfer pass and the `ninfer-pipeline` pipeline for
// ninfer-opt-style tools.
void registerNinferPassesAndPipelines();

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace ninfer
