// The compiler's steps as a library, so ninferc, calibration and the tests run
// the same sequence:
//
//   config.json + weights (checkpoint with BitNet import, or dummy), or a GGUF file -> importer
//   -> weight transforms (lossless ternary packing, then q8..q2 / --bpw
//   quantization) -> pass pipeline -> PlanBuilder -> tokenizer -> chat template
//   -> [check] -> kernel emission (NVRTC) -> plan writer (temp file, rename)
//
// compileModel() runs all of it; lowerToPlan() is the part from a transformed
// module to a plan, which calibration uses on a copy of the module.
#pragma once

#include "BitNetImport.h"
#include "GgufImport.h"
#include "ModelConfig.h"
#include "QuantizeDriver.h"
#include "TernaryPacking.h"
#include "WeightStore.h"

#include "KernelEmitter.h"
#include "passes/Quantize.h"
#include "plan_generated.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>

namespace ninfer {

struct LowerOptions {
  int context = 4096;       // positions the KV cache holds
  int maxStepTokens = 512;  // tokens per step (pipeline and plan)
  bool fuse = true;         // PlanOptions::fuse
  plan::DType kvDType = plan::DType::F16; // PlanOptions::kvDType: F16 or Q8_KV
  int maxBatch = 1;                       // PlanOptions::maxBatch: sequences (KV-cache slots)
  const plan::TokenizerT* tokenizer = nullptr; // copied into the plan (none: kind None)
  std::string emitMlir;     // when set, the module after the pipeline is written there
};

// module (imported, weights transformed) -> pass pipeline -> plan with the
// tokenizer. `module` is changed by the pipeline.
llvm::Expected<std::unique_ptr<plan::PlanT>> lowerToPlan(mlir::ModuleOp module,
                                                         const ModelConfig& config,
                                                         const WeightStore& weights,
                                                         const LowerOptions& options);

// Writes `plan` with the weight bytes of `weights` (dummy weights have none).
Status writePlanWithWeights(const std::string& path, plan::PlanT& plan, const WeightStore& weights);

struct CompileOptions {
  std::string input;         // checkpoint directory or GGUF file, or config.json with dummyWeights
  bool dummyWeights = false; // compile the shape alone (the runtime fills the weights)
  QuantOptions quant;        // --quant and friends (quant.tokenizer is set from input)
  TernaryFormat ternaryFormat = TernaryFormat::TQ1; // for --quant auto/ternary
  int context = 4096;
  int maxStepTokens = 512;
  bool fuse = true;
  plan::DType kvDType = plan::DType::F16; // KV cache dtype (--kv-dtype)
  int maxBatch = 1;                       // sequences decoded together at most (--batch)
  std::string emitMlir;      // see LowerOptions
  std::string compiler;      // plan metadata: the compiler's name and version
  std::string target;        // plan metadata: the targets as given
  KernelOptions kernels;     // no archs: no kernels (plans for the CPU executor)
  std::string output;        // the plan file to write; empty: not written
  // Optional, for the command line: after a Hugging Face BitNet checkpoint's
  // weights were imported, after ternary packing (before quantization starts),
  // and once the kernels' launches and workspace are final, before NVRTC compiles them and
  // before the plan is written (an error refuses it).
  std::function<void(const BitNetImport&)> bitnetImported;
  // For a GGUF input: while its tensors are read (bytes done, total), and after.
  std::function<void(uint64_t, uint64_t)> ggufProgress;
  std::function<void(const GgufModel&)> ggufImported;
  std::function<void(const TernaryReport&)> ternaryPacked;
  std::function<llvm::Error(const plan::PlanT&)> checkPlan;
  // Optional: a line that warns of a choice that compiles but may not serve the user (a
  // context longer than the model was trained for), once the input's config is read.
  std::function<void(const std::string&)> warn;
};

struct CompiledModel {
  std::unique_ptr<plan::PlanT> plan; // as written
  TernaryReport ternary;
  QuantizeReport quantization;
};

llvm::Expected<CompiledModel> compileModel(const CompileOptions& options);

} // namespace ninfer
