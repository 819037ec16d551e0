// ninferc's quantization step (see QuantizeDriver.h): validates the options,
// calibrates on the CPU executor, runs ninfer-quantize with an environment over
// the weight store, and prints what was chosen.
#include "QuantizeDriver.h"

#include "Calibration.h"
#include "ir/NinferDialect.h"
#include "ir/NinferOps.h"
#include "passes/Passes.h"

#include "ninfer/Progress.h"
#include "ninfer/QuantDType.h"
#include "ninfer/QuantFormats.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <cstring>
#include <map>
#include <optional>

namespace ninfer {
namespace {

llvm::Error optionError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

// The weight store seen by the pass.
class StoreEnvironment final : public QuantizeEnvironment {
public:
  StoreEnvironment(WeightStore& weights, CalibrationRunner* runner, const CalibrationData* data,
                   bool quiet)
      : weights_(weights), runner_(runner), data_(data), quiet_(quiet) {}

  llvm::Expected<std::vector<float>> readF32(const std::string& name, int64_t rows,
                                             int64_t cols) override {
    const TensorRef* ref = weights_.find(name);
    if (!ref || !ref->data)
      return optionError("quantization: tensor '" + name + "' has no bytes in the weight store");
    const uint64_t count = uint64_t(rows) * uint64_t(cols);
    if (ref->elements() != count)
      return optionError("quantization: tensor '" + name + "' has " +
                         llvm::Twine(ref->elements()) + " values, expected " + llvm::Twine(count));
    std::vector<float> out(count);
    for (uint64_t i = 0; i < count; ++i) {
      switch (ref->dtype) {
      case WeightDType::F32:
        std::memcpy(&out[i], ref->data + 4 * i, 4);
        break;
      case WeightDType::F16:
      case WeightDType::BF16: {
        uint16_t bits;
        std::memcpy(&bits, ref->data + 2 * i, 2);
        out[i] = ref->dtype == WeightDType::F16 ? halfBitsToFloat(bits)
                                                : bitsToFloat(uint32_t(bits) << 16);
        break;
      }
      default:
        return optionError(llvm::Twine("quantization: tensor '") + name + "' is " +
                           dtypeName(ref->dtype) + ", not a float tensor");
      }
    }
    return out;
  }

  uint64_t storedBytes(const std::string& name) override {
    const TensorRef* ref = weights_.find(name);
    return ref ? tensorBytes(ref->dtype, ref->shape) : 0;
  }

  void storeQuantized(const std::string& name, int formatId, int64_t rows, int64_t cols,
                      std::vector<uint8_t> packed) override {
    weights_.addOwned(name, weightDTypeOfQuantFormat(formatId), {rows, cols}, std::move(packed));
  }

  void storeF32(const std::string& name, std::vector<float> values) override {
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    weights_.addOwned(name, WeightDType::F32, {int64_t(values.size())}, std::move(bytes));
  }

  const CalibrationData* calibration() override { return data_; }

  llvm::Expected<double> klDivergenceWith(const std::string& name,
                                          const std::vector<float>& values) override {
    if (!runner_)
      return optionError("quantization: mixed precision needs calibration");
    return runner_->klDivergenceWith(name, values);
  }

  llvm::Expected<std::shared_ptr<const InputStatistics>>
  sequentialStatistics(const std::string& name, bool floatTarget) override {
    if (!runner_)
      return optionError("quantization: --sequential needs calibration");
    return runner_->sequentialStatistics(name, floatTarget);
  }

  llvm::Error replaceWeight(const std::string& name, std::vector<float> values) override {
    if (!runner_)
      return optionError("quantization: --sequential needs calibration");
    return runner_->replaceWeight(name, std::move(values));
  }

  void progress(const std::string& what, int done, int total) override {
    if (quiet_)
      return;
    if (!bar_ || what != label_) {
      if (bar_)
        bar_->finish();
      label_ = what;
      bar_.emplace(what, uint64_t(total));
    }
    bar_->update(uint64_t(done));
    if (done >= total)
      bar_->finish();
  }

private:
  WeightStore& weights_;
  CalibrationRunner* runner_;
  const CalibrationData* data_;
  bool quiet_;
  std::string label_;
  std::optional<Progress> bar_;
};

bool fileExists(const std::string& path) {
  return llvm::sys::fs::exists(path) && !llvm::sys::fs::is_directory(path);
}

// --calib, else the shipped text relative to the working directory, else
// relative to the source tree the compiler was built from.
llvm::Expected<std::string> calibrationPath(const QuantOptions& options) {
  if (!options.calibPath.empty()) {
    if (!fileExists(options.calibPath))
      return optionError("--calib: cannot read '" + options.calibPath + "'");
    return options.calibPath;
  }
  if (fileExists(kDefaultCalibration))
    return std::string(kDefaultCalibration);
#ifdef NINFER_SOURCE_DIR
  llvm::SmallString<256> shipped(NINFER_SOURCE_DIR);
  llvm::sys::path::append(shipped, kDefaultCalibration);
  if (fileExists(shipped.str().str()))
    return shipped.str().str();
#endif
  return optionError(llvm::Twine("no calibration text: give --calib FILE (the default ") +
                     kDefaultCalibration + " was not found)");
}

// --dummy-weights --quant qN: no values to quantize, so every weight the pass
// would quantize (read only as the weight of linear / lm_head / embedding, a
// matrix with a multiple of 128 columns, not already packed) is declared in
// the store in the format, without bytes, and marked like the pass marks it;
// the plan builder gives it a DummyFill and the executors generate the packed
// bytes (quant::dummyUnit).
llvm::Error declareDummyQuantized(mlir::ModuleOp module, WeightStore& weights,
                                  const QuantOptions& options, int bits) {
  if (options.bpw > 0)
    return optionError("--bpw is not supported with --dummy-weights (mixed formats are chosen by "
                       "measuring real weights): use --quant q8, q4, q3 or q2");
  if (options.awq)
    return optionError("--awq is not supported with --dummy-weights (AWQ needs real weights)");
  const int format = quant::quantFormatIndex(bits, options.group);
  if (format < 0)
    return optionError("no quantized format with " + llvm::Twine(bits) + " bits and group " +
                       llvm::Twine(options.group));
  const char* formatName = quant::quantFormatTraits(quant::QuantFormatId(format)).name;
  llvm::MapVector<llvm::StringRef, llvm::SmallVector<WeightOp, 2>> byName;
  module.walk([&](WeightOp op) { byName[op.getName()].push_back(op); });
  int declared = 0;
  uint64_t bytes = 0;
  for (auto& [name, ops] : byName) {
    mlir::RankedTensorType type = ops.front().getOutput().getType();
    bool matrixUse = true, anyUse = false;
    for (WeightOp op : ops)
      for (mlir::OpOperand& use : op.getOutput().getUses()) {
        anyUse = true;
        if (!(mlir::isa<LinearOp, LmHeadOp, EmbeddingOp>(use.getOwner()) &&
              use.getOperandNumber() == 1))
          matrixUse = false;
      }
    if (!anyUse || !matrixUse || type.getRank() != 2 || ops.front()->hasAttr(kStorageAttr) ||
        !quant::isQuantizableCols(type.getDimSize(1)))
      continue;
    const TensorRef* ref = weights.find(name.str());
    if (!ref)
      return optionError("weight '" + name + "' is not in the weight store");
    if (ref->data)
      continue; // bytes the compiler computed are never replaced by noise
    const TensorRef& packed = weights.addDummy(name.str(), weightDTypeOfQuantFormat(format),
                                               {type.getDimSize(0), type.getDimSize(1)});
    bytes += packed.bytes;
    ++declared;
    for (WeightOp op : ops)
      op->setAttr(kStorageAttr, mlir::StringAttr::get(op->getContext(), formatName));
  }
  if (declared == 0)
    return optionError("no weight can be quantized (linear/lm_head/embedding weights whose "
                       "columns are a multiple of 128)");
  if (!options.quiet)
    std::fprintf(stderr, "dummy weights: %d tensors declared %s (%.1f MiB, filled at load)\n",
                 declared, formatName, double(bytes) / (1024.0 * 1024.0));
  return llvm::Error::success();
}

} // namespace

bool isQuantFlag(llvm::StringRef flag) {
  return flag == "--quant" || flag == "--bpw" || flag == "--group" || flag == "--calib" ||
         flag == "--calib-tokens" || flag == "--sensitivity-tokens" ||
         flag == "--sensitivity-format" || flag == "--quant-method" || flag == "--hessian-shrink" ||
         flag == "--sequential" || flag == "--code-descent";
}

bool isQuantSwitch(llvm::StringRef flag) { return flag == "--awq" || flag == "--act-order"; }

llvm::Error applyQuantFlag(llvm::StringRef flag, llvm::StringRef value, QuantOptions& options) {
  if (flag == "--awq") {
    options.awq = true;
  } else if (flag == "--act-order") {
    options.actOrder = true;
  } else if (flag == "--code-descent") {
    int sweeps = -1;
    if (value.getAsInteger(10, sweeps) || sweeps < 0 || sweeps > 100)
      return optionError("--code-descent expects a number of sweeps in [0, 100], got '" + value +
                         "'");
    options.codeSweeps = sweeps;
  } else if (flag == "--sequential") {
    if (value != "quantized" && value != "float")
      return optionError("--sequential expects quantized or float, got '" + value + "'");
    options.sequential = true;
    options.floatTarget = value == "float";
  } else if (flag == "--quant") {
    if (value != "auto" && value != "none" && value != "ternary" && value != "q8" &&
        value != "q6" && value != "q5" && value != "q4" && value != "q3" && value != "q2")
      return optionError("--quant expects auto, none, ternary, q8, q6, q5, q4, q3 or q2, got '" +
                         value + "'");
    options.mode = value.str();
  } else if (flag == "--bpw") {
    double bpw = 0;
    if (value.getAsDouble(bpw) || !(bpw >= 2.25 && bpw <= 16.0))
      return optionError("--bpw expects bits per weight between 2.25 (all q2_g64) and 16, got '" +
                         value + "'");
    options.bpw = bpw;
  } else if (flag == "--group") {
    int group = 0;
    if (value.getAsInteger(10, group) || !quant::isQuantFormatGroup(group))
      return optionError("--group expects 32, 64, 128 or 16 (K16), got '" + value + "'");
    options.group = group;
  } else if (flag == "--calib") {
    options.calibPath = value.str();
  } else if (flag == "--calib-tokens") {
    long long tokens = 0;
    if (value.getAsInteger(10, tokens) || tokens < 512 || tokens > (1ll << 24))
      return optionError("--calib-tokens expects an integer in [512, 16777216], got '" + value +
                         "'");
    options.calibTokens = tokens;
  } else if (flag == "--sensitivity-tokens") {
    long long tokens = 0;
    if (value.getAsInteger(10, tokens) || tokens < 256 || tokens > (1ll << 20))
      return optionError("--sensitivity-tokens expects an integer in [256, 1048576], got '" +
                         value + "'");
    options.sensitivityTokens = tokens;
  } else if (flag == "--sensitivity-format") {
    const int format = quant::formatOfName(value.str().c_str());
    if (format < 0)
      return optionError("--sensitivity-format expects a format name such as q3_g64, got '" +
                         value + "'");
    options.sensitivityFormat = value.str();
  } else if (flag == "--hessian-shrink") {
    double shrink = -1;
    if (value.getAsDouble(shrink) || !(shrink >= 0.0 && shrink <= 1.0))
      return optionError("--hessian-shrink expects a number between 0 and 1, got '" + value + "'");
    options.hessianShrink = shrink;
  } else if (flag == "--quant-method") {
    if (value != "gptq" && value != "rtn")
      return optionError("--quant-method expects gptq or rtn, got '" + value + "'");
    options.method = value.str();
  } else {
    return optionError("not a quantization option: " + flag);
  }
  return llvm::Error::success();
}

llvm::Error runQuantization(mlir::ModuleOp module, WeightStore& weights, const ModelConfig& config,
                            const QuantOptions& options, QuantizeReport* reportOut) {
  if (!options.enabled())
    return llvm::Error::success();
  const auto start = std::chrono::steady_clock::now();
  QuantizeSettings settings;
  settings.gptq = options.method == "gptq";
  settings.bits = options.mode.size() == 2 ? options.mode[1] - '0' : 4;
  settings.groupSize = options.group;
  settings.bpw = options.bpw;
  settings.awq = options.awq;
  settings.actOrder = options.actOrder;
  settings.sequential = options.sequential;
  settings.floatTarget = options.floatTarget;
  settings.codeSweeps = options.codeSweeps;
  settings.threads = options.threads;
  settings.sensitivityFormat = options.sensitivityFormat;
  settings.hessianShrink = options.hessianShrink;
  settings.keepCandidateBytes = options.keepCandidateBytes;
  if (llvm::Error error = validateQuantizeSettings(settings))
    return error;
  if (weights.isDummy())
    return declareDummyQuantized(module, weights, options, settings.bits);

  // Calibration: needed by GPTQ, AWQ, importance-weighted RTN and the
  // sensitivity measure of mixed precision.
  llvm::Expected<std::string> calib = calibrationPath(options);
  if (!calib)
    return calib.takeError();
  CalibrationOptions calibOptions;
  calibOptions.textPath = *calib;
  calibOptions.tokenizer = options.tokenizer;
  calibOptions.maxTokens = options.calibTokens;
  calibOptions.sensitivityTokens = options.sensitivityTokens;
  calibOptions.threads = options.threads;
  calibOptions.progress = !options.quiet;
  auto runner = CalibrationRunner::create(module, weights, config, calibOptions);
  if (!runner)
    return runner.takeError();
  CalibrationData data;
  if (llvm::Error error = (*runner)->collect(data))
    return error;
  const double calibSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  StoreEnvironment environment(weights, runner->get(), &data, options.quiet);
  QuantizeReport report;
  mlir::PassManager passManager(module.getContext());
  passManager.addPass(createQuantizePass(settings, &environment, &report));
  std::string diagnostics;
  {
    mlir::ScopedDiagnosticHandler handler(module.getContext(), [&](mlir::Diagnostic& diag) {
      diagnostics += diagnostics.empty() ? diag.str() : "; " + diag.str();
      return mlir::success();
    });
    if (mlir::failed(passManager.run(module)))
      return optionError(diagnostics.empty() ? "quantization failed" : diagnostics);
  }
  if (!options.quiet) {
    std::map<std::string, int> counts;
    for (const QuantizedTensorInfo& t : report.tensors)
      ++counts[t.format];
    std::string formats;
    for (const auto& [format, count] : counts)
      formats += llvm::formatv("{0}{1} x{2}", formats.empty() ? "" : ", ", format, count).str();
    std::fprintf(stderr,
                 "quantized %zu tensors (%s): %.3f bits per weight over %.2fM parameters; "
                 "calibration %lld tokens %.1f s, quantization %.1f s (sensitivity runs "
                 "%.1f s)\n",
                 report.tensors.size(), formats.c_str(), report.bitsPerWeight(),
                 double(report.parameters) / 1e6, static_cast<long long>(data.tokens),
                 calibSeconds, report.seconds, report.sensitivitySeconds);
  }
  if (reportOut)
    *reportOut = std::move(report);
  return llvm::Error::success();
}

} // namespace ninfer
