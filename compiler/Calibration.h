// Calibration: runs the unquantized model on calibration text with the CPU
// executor and collects what quantization needs:
//  * for every distinct linear-layer input (q/k/v share one, gate/up share
//    one, lm_head has its own), H = X^T X accumulated in f64 over the tokens
//    and mean |x| per channel;
//  * reference next-token distributions on the first sensitivityTokens, so the
//    quantization pass can measure the KL divergence the model shows with one
//    tensor replaced (per-tensor sensitivity for mixed precision).
// The model runs from a temporary plan (the module after the pass pipeline,
// no kernels: the CPU executor needs none), removed as soon as it is mapped.
// The reference run saves the activations before the first linear op of every
// input group of the sensitivity chunks (about 25 x 11 MB for the 23M model
// and one 512-token chunk), so a sensitivity run resumes at the tensor's layer
// instead of rerunning the ops before it.
// Sequential calibration (sequentialStatistics / replaceWeight) runs the
// chunks again input group by input group with quantized tensors swapped in, so
// a tensor's H comes from the activations of the already-quantized tensors
// before it; every chunk's arena is kept between groups (about 11 MB per
// 512-token chunk of the 23M model: 2.8 GB for 131072 tokens).
// Text is cut into chunks of chunkTokens, each starting at position 0 with BOS
// (when the model has one), as the evaluation tools score. Deterministic: the
// same text and options give the same statistics bit for bit.
#pragma once

#include "ModelConfig.h"
#include "WeightStore.h"
#include "plan_generated.h"
#include "passes/Quantize.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace ninfer {

struct CalibrationOptions {
  std::string textPath;          // calibration text (UTF-8)
  const plan::TokenizerT* tokenizer = nullptr; // tokenizes the calibration text
  int64_t maxTokens = 16384;     // tokens used for H (whole chunks)
  int chunkTokens = 512;         // tokens per chunk (the executor's context)
  int64_t sensitivityTokens = 512; // tokens scored per sensitivity measurement (a chunk
                                   // is cut short where this ends inside it)
  int threads = 0;               // 0 = all hardware threads
  bool progress = true;
};

class CalibrationRunner {
public:
  // Builds and maps the temporary plan of `module` (not modified) and
  // tokenizes the text. Errors: no tokenizer, text shorter than one chunk,
  // a module the pipeline or plan builder rejects.
  static llvm::Expected<std::unique_ptr<CalibrationRunner>>
  create(mlir::ModuleOp module, const WeightStore& weights, const ModelConfig& config,
         const CalibrationOptions& options);
  ~CalibrationRunner();

  // Runs every calibration chunk: fills `data` and records the reference
  // distributions used by klDivergenceWith.
  llvm::Error collect(CalibrationData& data);

  // Mean KL(reference || model with `weightName` replaced by `values`) over the
  // sensitivity tokens. values: f32 in the weight's [rows, cols] shape.
  llvm::Expected<double> klDivergenceWith(const std::string& weightName,
                                          const std::vector<float>& values);

  // Sequential calibration: the statistics of the input of `weightName` over
  // every calibration chunk, measured with every tensor given to replaceWeight
  // in place of its values. Inputs must be asked for in model order (tensors
  // reading one input get the same statistics); each call runs only the ops
  // from the previous call's input to this one, every chunk resumed from the
  // arena the previous call saved. floatTarget (the same in every call): also
  // X^T (X_float - X) against the float model's input (InputStatistics), which
  // runs alongside with its own arenas (twice the work and memory).
  llvm::Expected<std::shared_ptr<const InputStatistics>>
  sequentialStatistics(const std::string& weightName, bool floatTarget);
  // Runs every later sequential step with `values` (f32, the weight's shape)
  // for `weightName`. Errors: an unknown tensor, or one read by an op the
  // sequential runs have already passed. Sensitivity runs are refused after it.
  llvm::Error replaceWeight(const std::string& weightName, std::vector<float> values);

  int64_t tokensUsed() const;
  // Tokens each sensitivity measurement scores (whole chunks, the last one
  // possibly cut to the first tokens that sensitivityTokens leaves).
  int64_t sensitivityTokensUsed() const;

  struct Impl;

private:
  explicit CalibrationRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace ninfer
