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
// Text is cut into chunks of chunkTokens, each starting at position 0 with BOS
// (when the model has one), as the evaluation tools score. Deterministic: the
// same text and options give the same statistics bit for bit.
#pragma once

#include "ModelConfig.h"
#include "WeightStore.h"
#include "passes/Quantize.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace ninfer {

struct CalibrationOptions {
  std::string textPath;          // calibration text (UTF-8)
  std::string modelDir;          // for the tokenizer
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
