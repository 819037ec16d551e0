// The weight quantization pass, programmatic side: what the pass needs from
// outside the IR (weights, calibration statistics, a way to run the model with
// one tensor replaced) and what it reports. Weights never enter the IR, so the
// compiler hands the pass an environment that reads and writes its weight
// store; this keeps passes/ free of the compiler's checkpoint code.
//
// What the pass does (see Passes.td, `ninfer-quantize`): every weight read by
// ninfer.linear, ninfer.lm_head or ninfer.embedding whose columns are a
// multiple of 128 is quantized to one group format of ninfer/QuantFormats.h
// (uniform, or mixed to a bit budget), stored packed in the weight store, and
// its ninfer.weight op gets `ninfer.storage = "q4_g64"` etc.; the IR type stays
// the logical tensor. With AWQ, the per-channel scales are folded into the
// RMSNorm weight that feeds the quantized layers (a new f32 store tensor).
#pragma once

#include "mlir/Pass/Pass.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ninfer {

// Second moments of one linear layer input over the calibration tokens.
struct InputStatistics {
  int64_t cols = 0;
  int64_t tokens = 0;
  std::vector<double> h;       // X^T X, cols x cols, both triangles
  std::vector<float> meanAbs;  // mean |x| per channel
  // Sequential calibration with the float target only: D = X^T (X_float - X),
  // cols x cols (D[i][j] = sum_t x_ti (xf_tj - x_tj)), X the input with the
  // tensors before quantized, X_float the float model's.
  std::vector<double> floatShift;
};

struct CalibrationData {
  // By weight name (e.g. "model.layers.0.self_attn.q_proj.weight"); layers
  // that read the same input share one entry (q/k/v, gate/up).
  std::map<std::string, std::shared_ptr<const InputStatistics>> inputs;
  int64_t tokens = 0;
};

// What the pass reads and writes outside the IR. Implemented by the compiler
// (compiler/QuantizeDriver.cpp) over its weight store and calibration runner.
class QuantizeEnvironment {
public:
  virtual ~QuantizeEnvironment() = default;
  // The weight `name` as f32 [rows, cols] (the shape the IR declares).
  virtual llvm::Expected<std::vector<float>> readF32(const std::string& name, int64_t rows,
                                                     int64_t cols) = 0;
  // Bytes the store holds for `name` as it is now (for bpw accounting).
  virtual uint64_t storedBytes(const std::string& name) = 0;
  // Replaces `name` in the store with packed bytes of format `formatId`.
  virtual void storeQuantized(const std::string& name, int formatId, int64_t rows, int64_t cols,
                              std::vector<uint8_t> packed) = 0;
  // Adds a new f32 vector tensor (a folded norm weight).
  virtual void storeF32(const std::string& name, std::vector<float> values) = 0;
  // Calibration statistics; nullptr when none were collected (then RTN with
  // plain squared error is the only method).
  virtual const CalibrationData* calibration() = 0;
  // Mean KL divergence of the model's next-token distribution on calibration
  // text when only `name` is replaced by `values` (f32, its shape); an error
  // when the environment cannot run the model.
  virtual llvm::Expected<double> klDivergenceWith(const std::string& name,
                                                  const std::vector<float>& values) = 0;
  // Sequential quantization: the statistics of `name`'s input measured with
  // every tensor given to replaceWeight in place of its values, with
  // floatShift when floatTarget. Asked for in model order. An error when the
  // environment cannot run the model.
  virtual llvm::Expected<std::shared_ptr<const InputStatistics>>
  sequentialStatistics(const std::string& name, bool floatTarget) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "sequential quantization needs the calibration runner");
  }
  // Runs every later sequentialStatistics with `values` (f32, its shape) for `name`.
  virtual llvm::Error replaceWeight(const std::string& name, std::vector<float> values) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "sequential quantization needs the calibration runner");
  }
  // Progress lines ("quantizing 12/44"); may ignore them.
  virtual void progress(const std::string& what, int done, int total) {}
};

struct QuantizeSettings {
  bool gptq = true;         // else RTN (importance diag(H) when calibrated)
  int bits = 4;             // uniform format bits (8, 4, 3, 2); ignored when bpw > 0
  int groupSize = 64;       // 32, 64 or 128
  double bpw = 0.0;         // > 0: mixed formats to this many bits per weight, all weights
  bool awq = false;         // AWQ scales folded into the preceding RMSNorm
  bool actOrder = false;    // GPTQ columns by descending diag(H), static group scales
  // The final formats quantized in model order, each GPTQ on the H of its input
  // measured with the tensors before it already quantized (not the float model).
  bool sequential = false;
  // With sequential: GPTQ's target is the float model's output (FloatTarget.h),
  // not the tensor's output on its quantized input.
  bool floatTarget = false;
  int codeSweeps = 0;       // GPTQ: sweeps of coordinate descent on the codes (CodeDescent.h)
  std::string sensitivityFormat = "q3_g64"; // where per-tensor sensitivity is measured
  double hessianShrink = 0.0; // off-diagonal H entries times (1 - this) (Gptq.h shrinkHessian)
  int threads = 0;          // 0 = all hardware threads
  // Mixed: the packed bytes of every candidate are kept for the final store
  // while they total at most this; beyond it the chosen format of each tensor
  // is quantized again (the same bytes, at the cost of a second GPTQ factor and
  // run per tensor).
  uint64_t keepCandidateBytes = uint64_t(1) << 30;
};

struct QuantizedTensorInfo {
  std::string name;
  std::string format;       // "q4_g64", or the unchanged dtype name
  int64_t rows = 0, cols = 0;
  uint64_t bytes = 0;
  double relativeError = 0; // tr(E H E^T) / tr(W H W^T) (or squared error without H)
  double sensitivity = 0;   // measured weight of the allocator (mixed only)
};

struct QuantizeReport {
  std::vector<QuantizedTensorInfo> tensors; // quantized ones, program order
  uint64_t parameters = 0;  // every weight element except RoPE tables
  uint64_t totalBytes = 0;  // every weight byte: packed, scales, norms, embeddings
  double bitsPerWeight() const {
    return parameters ? 8.0 * double(totalBytes) / double(parameters) : 0.0;
  }
  double seconds = 0;
  double sensitivitySeconds = 0; // of `seconds`: the model runs measuring sensitivity
};

// Checks a settings value set (group, bits, budget) and says what is wrong.
llvm::Error validateQuantizeSettings(const QuantizeSettings& settings);

// The pass over a module, for the compiler. `environment` and `report` must
// outlive the pass run; report may be null.
std::unique_ptr<mlir::Pass> createQuantizePass(const QuantizeSettings& settings,
                                               QuantizeEnvironment* environment,
                                               QuantizeReport* report);

} // namespace ninfer
