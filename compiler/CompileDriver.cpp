// The compile sequence (see CompileDriver.h).
#include "CompileDriver.h"

#include "ChatTemplateImport.h"
#include "Importer.h"
#include "Phi3Import.h"
#include "TokenizerImport.h"

#include "PlanBuilder.h"
#include "PlanWriter.h"
#include "ir/NinferDialect.h"
#include "ninfer/AtomicFile.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace ninfer {
namespace {

llvm::Error compileError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error toError(const Status& status) {
  return status.isOk() ? llvm::Error::success() : compileError(status.message());
}

// The checkpoint directory, also when the input names config.json itself.
std::string modelDirectory(const std::string& input) {
  if (llvm::sys::fs::is_directory(input))
    return input;
  std::string parent = llvm::sys::path::parent_path(input).str();
  return parent.empty() ? "." : parent;
}

llvm::Expected<ModelSource> openHuggingFace(const CompileOptions& options) {
  ModelSource source;
  auto config = loadModelConfig(options.input);
  if (!config)
    return config.takeError();
  source.config = std::move(*config);
  const std::string modelDir = modelDirectory(options.input);
  if (options.dummyWeights) {
    source.weights = WeightStore::createDummy();
  } else {
    if (!llvm::sys::fs::is_directory(options.input))
      return compileError("'" + options.input +
                          "' is a file: give the checkpoint directory or a GGUF file, or add "
                          "--dummy-weights to compile the shape alone");
    auto weights = WeightStore::openCheckpoint(modelDir);
    if (!weights)
      return weights.takeError();
    llvm::Expected<BitNetImport> bitnet = importBitNetWeights(modelDir, **weights);
    if (!bitnet)
      return bitnet.takeError();
    if (bitnet->bitnet && options.bitnetImported)
      options.bitnetImported(*bitnet);
    if (source.config.family == "phi3")
      if (llvm::Error error = splitPhi3Projections(source.config, **weights))
        return error;
    source.weights = std::move(*weights);
  }
  auto tokenizer = importTokenizer(modelDir, source.config);
  if (!tokenizer)
    return tokenizer.takeError();
  if (llvm::Error error = importChatTemplate(modelDir, **tokenizer))
    return error;
  source.tokenizer = std::move(*tokenizer);
  return source;
}

llvm::Expected<ModelSource> openSource(const CompileOptions& options) {
  // A .gguf name is taken at its word, so a file that is not one is refused as such.
  if (!isGgufFile(options.input) && !llvm::StringRef(options.input).ends_with_insensitive(".gguf"))
    return openHuggingFace(options);
  if (options.dummyWeights)
    return compileError("--dummy-weights takes a config.json, not a GGUF file");
  GgufReadOptions read;
  read.keepExactFormats = !options.quant.enabled();
  read.progress = options.ggufProgress;
  auto gguf = importGguf(options.input, read);
  if (!gguf)
    return gguf.takeError();
  if (options.ggufImported)
    options.ggufImported(*gguf);
  return ModelSource(std::move(*gguf));
}

} // namespace

llvm::Expected<std::unique_ptr<plan::PlanT>> lowerToPlan(mlir::ModuleOp module,
                                                         const ModelConfig& config,
                                                         const WeightStore& weights,
                                                         const LowerOptions& options) {
  mlir::PassManager passManager(module.getContext());
  PipelineOptions pipelineOptions;
  pipelineOptions.maxStepTokens = options.maxStepTokens;
  buildNinferPipeline(passManager, pipelineOptions);
  if (mlir::failed(passManager.run(module)))
    return compileError("the pass pipeline failed (see the diagnostics above)");

  if (!options.emitMlir.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(options.emitMlir, ec);
    if (ec)
      return compileError("cannot write '" + options.emitMlir + "': " + ec.message());
    module->print(out);
  }

  PlanOptions planOptions;
  planOptions.context = options.context;
  planOptions.maxStepTokens = options.maxStepTokens;
  planOptions.fuse = options.fuse;
  planOptions.kvDType = options.kvDType;
  planOptions.maxBatch = options.maxBatch;
  auto plan = buildPlan(module, config, weights, planOptions);
  if (!plan)
    return plan.takeError();

  (*plan)->tokenizer = options.tokenizer ? std::make_unique<plan::TokenizerT>(*options.tokenizer)
                                         : std::make_unique<plan::TokenizerT>();
  return plan;
}

Status writePlanWithWeights(const std::string& path, plan::PlanT& plan,
                            const WeightStore& weights) {
  return writePlan(path, plan, [&](const plan::BufferT& buffer) {
    const TensorRef* tensor = weights.find(buffer.name);
    return tensor ? tensor->data : nullptr;
  });
}

llvm::Expected<CompiledModel> compileModel(const CompileOptions& options) {
  if (!options.output.empty())
    // Before minutes of import, quantization and NVRTC, not after them.
    if (llvm::Error error = toError(AtomicFile::probe(options.output)))
      return error;
  auto source = openSource(options);
  if (!source)
    return source.takeError();
  const ModelConfig& config = source->config;
  WeightStore& weights = *source->weights;
  // Dummy weights compile a shape for speed, whatever the context does to quality.
  if (const std::string warning = contextWarning(config, options.context);
      options.warn && !options.dummyWeights && !warning.empty())
    options.warn(warning);

  mlir::DialectRegistry registry;
  registry.insert<ninfer::NinferDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto module = importModel(context, config, weights);
  if (!module)
    return module.takeError();

  // Lossless ternary packing (auto/ternary), or lossy quantization (q8..q2, --bpw).
  CompiledModel compiled;
  QuantMode ternaryMode = QuantMode::None;
  if (options.quant.mode == "auto" || options.quant.mode == "ternary") {
    auto mode = parseQuantMode(options.quant.mode);
    if (!mode)
      return mode.takeError();
    ternaryMode = *mode;
  }
  if (llvm::Error error =
          applyTernary(weights, **module, ternaryMode, options.ternaryFormat, &compiled.ternary))
    return error;
  if (options.ternaryPacked)
    options.ternaryPacked(compiled.ternary);
  QuantOptions quant = options.quant;
  quant.tokenizer = source->tokenizer.get();
  if (llvm::Error error = runQuantization(**module, weights, config, quant, &compiled.quantization))
    return error;

  LowerOptions lower;
  lower.context = options.context;
  lower.maxStepTokens = options.maxStepTokens;
  lower.fuse = options.fuse;
  lower.kvDType = options.kvDType;
  lower.maxBatch = options.maxBatch;
  lower.tokenizer = source->tokenizer.get();
  lower.emitMlir = options.emitMlir;
  auto plan = lowerToPlan(**module, config, weights, lower);
  if (!plan)
    return plan.takeError();
  plan::PlanT& planT = **plan;
  planT.compiler = options.compiler;
  planT.target = options.target;
  planT.dummy_weights = options.dummyWeights;
  planT.model->source = options.input;

  // The check and report see the final memory plan (kernel emission may grow the workspace:
  // the sm_90a GEMMs' 16-bit copies of x) and come before NVRTC, so a plan that does not
  // fit is refused without waiting for its kernels.
  if (!options.kernels.archs.empty()) {
    KernelOptions kernels = options.kernels;
    if (options.checkPlan)
      kernels.beforeCompile = [&options](const plan::PlanT& checked) {
        if (llvm::Error error = options.checkPlan(checked))
          return Status::error(llvm::toString(std::move(error)));
        return Status::ok();
      };
    if (llvm::Error error = toError(emitKernels(planT, kernels)))
      return error;
  } else if (options.checkPlan) {
    if (llvm::Error error = options.checkPlan(planT))
      return error;
  }
  if (!options.output.empty())
    if (llvm::Error error = toError(writePlanWithWeights(options.output, planT, weights)))
      return error;
  compiled.plan = std::move(*plan);
  return compiled;
}

} // namespace ninfer
