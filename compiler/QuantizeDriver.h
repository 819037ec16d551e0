// ninferc's quantization step: option parsing (--quant, --bpw, --group,
// --calib, --calib-tokens, --quant-method, --awq, --act-order, --sequential),
// calibration on the CPU executor and the ninfer-quantize pass over the
// imported module, with a report of formats, bits per weight and time. Runs
// between import and the pass pipeline.
#pragma once

#include "ModelConfig.h"
#include "WeightStore.h"
#include "plan_generated.h"
#include "passes/Quantize.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace ninfer {

struct QuantOptions {
  // --quant auto|none|ternary|q8|q6|q5|q4|q3|q2; auto/none/ternary are lossless
  // (see TernaryPacking.h), q8..q2 quantize uniformly.
  std::string mode = "auto";
  double bpw = 0.0;            // --bpw X: mixed formats to this budget (overrides --quant)
  int group = 64;              // --group 32|64|128
  std::string method = "gptq"; // --quant-method gptq|rtn
  bool awq = false;            // --awq
  bool actOrder = false;       // --act-order
  bool sequential = false;     // --sequential quantized|float
  bool floatTarget = false;    // --sequential float
  int codeSweeps = 0;          // --code-descent N
  std::string calibPath;       // --calib FILE (default: kDefaultCalibration next to the tools)
  int64_t calibTokens = 8192;  // --calib-tokens N
  int64_t sensitivityTokens = 512; // --sensitivity-tokens N (mixed precision only)
  std::string sensitivityFormat = "q3_g64"; // --sensitivity-format F (a mixed candidate)
  double hessianShrink = 0.25; // --hessian-shrink X (GPTQ's H toward its diagonal)
  const plan::TokenizerT* tokenizer = nullptr; // the model's (calibration tokenizes with it)
  // QuantizeSettings::keepCandidateBytes (no flag; tests set 0 to check that
  // quantizing the chosen formats again gives the kept bytes).
  uint64_t keepCandidateBytes = uint64_t(1) << 30;
  int threads = 0;
  bool quiet = false;
  bool enabled() const { return (mode.size() == 2 && mode[0] == 'q') || bpw > 0; }
};

// The calibration text shipped with the sources.
inline constexpr const char* kDefaultCalibration = "examples/data/calib_python.txt";

// True when `flag` is one of the options above; then `value` (the next
// argument) is parsed into `options` (errors name the flag and the value).
bool isQuantFlag(llvm::StringRef flag);
llvm::Error applyQuantFlag(llvm::StringRef flag, llvm::StringRef value, QuantOptions& options);
// Flags that take no value (--awq).
bool isQuantSwitch(llvm::StringRef flag);

// Quantizes `module`'s weights in `weights` as `options` say (nothing when
// !options.enabled()). report: optional, filled on success.
llvm::Error runQuantization(mlir::ModuleOp module, WeightStore& weights, const ModelConfig& config,
                            const QuantOptions& options, QuantizeReport* report = nullptr);

} // namespace ninfer
