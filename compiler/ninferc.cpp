// ninferc: compiles a Hugging Face checkpoint or a GGUF file (or a config.json with
// --dummy-weights) into one .nplan file for a GPU target and context length.
// The steps are compileModel() (CompileDriver.h); this file holds the options,
// the messages (memory report and refusal, ternary and final lines) and the
// progress display.
#include "CompileDriver.h"
#include "MemoryFit.h"
#include "Targets.h"

#include "ninfer/GemvShapes.h"
#include "ninfer/Progress.h"
#include "ninfer/StepAbi.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace ninfer;

namespace {

constexpr const char* kVersion = "0.1.0";
// CUDA context, module images and allocator slack the runtime needs beyond the plan's buffers.

struct Options {
  std::string input;
  std::string output;
  std::vector<std::string> targetSpecs;
  int context = 4096;
  int maxStepTokens = 512;
  plan::DType kvDType = plan::DType::F16;
  int maxBatch = 1;
  bool dummyWeights = false;
  bool embedPtx = true;
  bool fuse = true;
  bool trace = false;
  bool quiet = false;
  std::string emitMlir;
  QuantOptions quant;
  TernaryFormat ternaryFormat = TernaryFormat::TQ1;
};

void printHelp() {
  std::printf(R"(ninferc %s - ahead-of-time compiler for LLM inference plans

usage: ninferc <model-dir | model.gguf | config.json> --target T -o OUT.nplan [options]

  <model-dir>            Hugging Face checkpoint: config.json + model.safetensors (or a sharded
                         model.safetensors.index.json); tokenizer.json when present
  model.gguf             llama.cpp GGUF file with its tokenizer and chat template
                         (architectures %s):
                         F32/F16/BF16 weights as they are, Q8_0/Q4_0/Q5_0 as
                         q8/q4/q5_g32 (the same values), Q4_1, Q5_1, Q2_K..Q6_K decoded to
                         f16 (pack them again with --quant, which decodes all of them)
  config.json            with --dummy-weights: compile the shape alone
  -o, --output FILE      the plan to write (written to a temporary name, renamed when complete)
  --target T             card or architecture; repeat or comma-separate for several (a cubin each)
  --ctx N                context length the KV cache is sized for (default 4096; a warning
                         where it is past the model's max_position_embeddings)
  --max-step-tokens N    tokens per prefill step (default 512)
  --kv-dtype T           KV cache element type: f16 (default) or int8 (one f32 scale per
                         position and KV head; about half the bytes)
  --batch N              sequences the plan holds, 1 (default) to 8: a KV cache of --ctx
                         positions each, and decode steps of up to N sequences at once that read
                         the weights once for all of them (ninfer bench --batch)
  --dummy-weights        no weights needed: the runtime fills deterministic pseudo-random weights
                         (fp16; ternary with --quant ternary; q8..q2 with --quant qN [--group N])
                         on the device; for checking fit and speed before downloading
  --no-ptx               do not embed PTX (the plan then runs only on the listed architectures)
  --no-fusion            keep residual adds as separate ops and give every op its own
                         launches (no grouped GEMVs/GEMMs, no SwiGLU in the gate/up GEMV or
                         GEMM, no RMSNorm in the GEMVs that read it, no fused RoPE + KV append;
                         A/B timing)
  --trace                every kernel block records when it starts, waits and ends, for
                         `ninfer bench --timeline` (a diagnostic plan: the events slow a decode
                         step by 2-12 percent)
  --emit-mlir FILE       also write the ninfer dialect program after the pass pipeline
  -q, --quiet            no progress display or memory report
  -h, --help             this text
  --version              print the version

quantization:
  --quant MODE           auto (default): pack exactly-ternary linear weights losslessly (1.6-1.75
                         bits with TQ1), keep the rest; none: keep the checkpoint's dtypes;
                         ternary: require every block linear to be ternary (refuses other
                         models); q8|q6|q5|q4|q3|q2: GPTQ group quantization of every linear,
                         embedding and lm_head weight
  --ternary-format F     tq1 (default: base 3, five weights a byte, rows padded to 16 bytes) or
                         tq2 (2-bit codes); both with one f32 scale per tensor (docs/ternary.md)
  --bpw X                mixed formats chosen per tensor by measured sensitivity to hit X bits per
                         weight over the whole model (scales and norms counted)
  --group N              group size 32|64|128 (default 64); 16: K16 (q4|q3|q2), a 6-bit scale
                         per 16 values under an fp16 scale per 128, the bytes of group 32
  --calib FILE           calibration text (default examples/data/calib_python.txt)
  --calib-tokens N       calibration tokens (default 8192)
  --sensitivity-tokens N with --bpw: tokens each per-tensor sensitivity is measured on (default 512)
  --sensitivity-format F with --bpw: the format each sensitivity is measured at (default q3_g64)
  --hessian-shrink X     GPTQ: off-diagonal calibration H entries times 1 - X (default 0.25;
                         0 = plain GPTQ): less fitting to the noise of a small calibration sample
  --quant-method M       gptq (default) or rtn
  --awq                  also search AWQ per-channel scales, folded into the preceding RMSNorm
  --act-order            GPTQ: columns by descending diag(H), group scales from the original weights
  --sequential T         GPTQ in model order, each tensor on the H of its input measured with the
                         tensors before it already quantized (one more calibration pass); T:
                         quantized (fit the tensor's output on that input) or float (fit the float
                         model's output: twice the pass)
  --code-descent N       GPTQ: N sweeps of coordinate descent on the codes after GPTQ, each code
                         moved to the level of least output error given the others (4: GPTQ's
                         error 5 percent lower at 3 bits; every candidate of --bpw, so slower)

families: %s (bf16, f16, f32 weights)
targets:
%s
example:
  ninferc examples/pycode-llama-3m --target h200 --ctx 2048 -o pycode.nplan
)",
              kVersion, supportedFamiliesList(true).c_str(), supportedFamiliesList(false).c_str(),
              knownTargetsHelp().c_str());
}

[[noreturn]] void fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "ninferc: error: %s\n", message.c_str());
  std::exit(code);
}

void failOn(llvm::Error error) {
  if (error)
    fail(llvm::toString(std::move(error)));
}

int parseInt(const std::string& flag, const std::string& value, int low, int high) {
  long long parsed = 0;
  if (llvm::StringRef(value).getAsInteger(10, parsed) || parsed < low || parsed > high)
    fail(llvm::formatv("{0} expects an integer in [{1}, {2}], got '{3}'", flag, low, high, value)
             .str(),
         2);
  return static_cast<int>(parsed);
}

Options parseArgs(int argc, char** argv) {
  Options options;
  auto next = [&](int& i, const std::string& flag) -> std::string {
    if (i + 1 >= argc)
      fail(flag + " needs a value", 2);
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      printHelp();
      std::exit(0);
    } else if (arg == "--version") {
      std::printf("ninferc %s\n", kVersion);
      std::exit(0);
    } else if (arg == "-o" || arg == "--output") {
      options.output = next(i, arg);
    } else if (arg == "--target") {
      options.targetSpecs.push_back(next(i, arg));
    } else if (arg == "--ctx") {
      options.context = parseInt(arg, next(i, arg), 1, 1 << 22);
    } else if (arg == "--max-step-tokens") {
      options.maxStepTokens = parseInt(arg, next(i, arg), 1, 65536);
    } else if (arg == "--batch") {
      options.maxBatch = parseInt(arg, next(i, arg), 1, kMaxBatch);
    } else if (arg == "--kv-dtype") {
      const std::string value = next(i, arg);
      if (value == "f16")
        options.kvDType = plan::DType::F16;
      else if (value == "int8")
        options.kvDType = plan::DType::Q8_KV;
      else
        fail("--kv-dtype expects f16 or int8, got '" + value + "'", 2);
    } else if (arg == "--dummy-weights") {
      options.dummyWeights = true;
    } else if (arg == "--no-ptx") {
      options.embedPtx = false;
    } else if (arg == "--no-fusion") {
      options.fuse = false;
    } else if (arg == "--trace") {
      options.trace = true;
    } else if (isQuantSwitch(arg) || isQuantFlag(arg)) {
      if (llvm::Error error =
              applyQuantFlag(arg, isQuantSwitch(arg) ? "" : next(i, arg), options.quant))
        fail(llvm::toString(std::move(error)), 2);
    } else if (arg == "--ternary-format") {
      llvm::Expected<TernaryFormat> format = parseTernaryFormat(next(i, arg));
      if (!format)
        fail(llvm::toString(format.takeError()), 2);
      options.ternaryFormat = *format;
    } else if (arg == "--emit-mlir") {
      options.emitMlir = next(i, arg);
    } else if (arg == "-q" || arg == "--quiet") {
      options.quiet = true;
    } else if (!arg.empty() && arg[0] == '-') {
      fail("unknown option '" + arg + "' (see ninferc --help)", 2);
    } else if (options.input.empty()) {
      options.input = arg;
    } else {
      fail("more than one input given ('" + options.input + "' and '" + arg + "')", 2);
    }
  }
  if (options.input.empty())
    fail("no model given (see ninferc --help)", 2);
  if (options.output.empty())
    fail("no output file given: use -o FILE.nplan", 2);
  if (options.targetSpecs.empty())
    fail("no target given: use --target <card or sm_XX> (see ninferc --help)", 2);
  if (options.quant.mode == "ternary" && options.quant.bpw > 0)
    fail("--quant ternary and --bpw exclude each other", 2);
  options.maxStepTokens = std::min(options.maxStepTokens, options.context);
  if (options.maxBatch > options.maxStepTokens)
    fail(llvm::formatv("--batch {0} needs steps of at least {0} tokens (--max-step-tokens, "
                       "capped at --ctx), got {1}",
                       options.maxBatch, options.maxStepTokens)
             .str(),
         2);
  return options;
}

std::string mib(uint64_t bytes) {
  return llvm::formatv("{0,10:F1} MiB", static_cast<double>(bytes) / (1 << 20)).str();
}

// Prints the memory report and refuses plans that do not fit a target's VRAM.
void checkMemory(const plan::PlanT& plan, const std::vector<Target>& targets, bool quiet) {
  const plan::MemoryPlanT& memory = *plan.memory;
  const uint64_t total = planDeviceBytes(plan);
  const plan::ModelInfoT& model = *plan.model;
  if (!quiet) {
    std::fprintf(
        stderr, "memory plan (context %d, %d-token steps%s):\n", plan.context, plan.max_step_tokens,
        plan.max_batch > 1 ? llvm::formatv(", {0} sequences", plan.max_batch).str().c_str() : "");
    double params = static_cast<double>(model.parameters);
    std::fprintf(stderr, "  weights     %s  (%.2f%s parameters%s)\n",
                 mib(memory.weight_bytes).c_str(),
                 params >= 1e9 ? params / 1e9 : params / 1e6, params >= 1e9 ? "B" : "M",
                 plan.dummy_weights ? ", dummy" : "");
    const bool int8Kv = hasInt8Kv(plan);
    const std::string sequences =
        plan.max_batch > 1 ? llvm::formatv(" x {0} sequences", plan.max_batch).str() : "";
    std::fprintf(stderr, "  KV cache    %s  (%s, %d layers x %d KV heads x %d x %d positions%s)\n",
                 mib(memory.kv_bytes).c_str(), int8Kv ? "int8 + f32 scales" : "fp16", model.layers,
                 model.kv_heads, model.head_dim, plan.context, sequences.c_str());
    std::fprintf(stderr, "  activations %s\n", mib(memory.activation_bytes).c_str());
    std::fprintf(stderr, "  workspace   %s\n", mib(memory.workspace_bytes).c_str());
    std::fprintf(stderr, "  runtime     %s  (CUDA context and module reserve)\n",
                 mib(kRuntimeReserveBytes).c_str());
    std::fprintf(stderr, "  total       %s\n", mib(total).c_str());
  }
  for (const Target& target : targets) {
    const std::string error = memoryFitError(plan, target);
    if (!error.empty())
      fail(error);
  }
}

} // namespace

int main(int argc, char** argv) {
  Options options = parseArgs(argc, argv);
  Progress total("", 0, false);

  auto targets = parseTargets(llvm::join(options.targetSpecs, ","));
  failOn(targets.takeError());

  CompileOptions compile;
  compile.input = options.input;
  compile.dummyWeights = options.dummyWeights;
  compile.quant = options.quant;
  compile.quant.quiet = options.quiet;
  compile.ternaryFormat = options.ternaryFormat;
  compile.context = options.context;
  compile.maxStepTokens = options.maxStepTokens;
  compile.fuse = options.fuse;
  compile.kvDType = options.kvDType;
  compile.maxBatch = options.maxBatch;
  compile.emitMlir = options.emitMlir;
  compile.compiler = std::string("ninferc ") + kVersion;
  compile.target = llvm::join(options.targetSpecs, ",");
  compile.output = options.output;
  compile.warn = [](const std::string& warning) {
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
  };
  compile.bitnetImported = [](const BitNetImport& bitnet) {
    std::fprintf(stderr,
                 "warning: Hugging Face BitNet checkpoint: %d packed linear weights imported "
                 "exactly (t %s weight_scale); its BitLinear layers also quantize activations "
                 "to int8 per token, ninfer keeps them in f32, so logits are close to, not "
                 "equal to, transformers'\n",
                 bitnet.unpacked, bitnet.divideScale ? "/" : "*");
  };
  std::optional<Progress> ggufProgress;
  compile.ggufProgress = [&](uint64_t done, uint64_t total) {
    if (!ggufProgress)
      ggufProgress.emplace("reading GGUF", total, !options.quiet);
    ggufProgress->update(done);
    if (done == total)
      ggufProgress->finish();
  };
  compile.ggufImported = [&](const GgufModel& gguf) {
    auto tensors = [](size_t n) { return std::to_string(n) + (n == 1 ? " tensor" : " tensors"); };
    if (!options.quiet)
      std::fprintf(stderr, "%s\n", gguf.summary.c_str());
    if (!options.quiet && gguf.exactTensors > 0)
      std::fprintf(stderr,
                   "GGUF: %s of Q8_0/Q4_0/Q5_0 kept as q8_g32/q4_g32/q5_g32 (the same values)\n",
                   tensors(gguf.exactTensors).c_str());
    if (!options.quiet && gguf.decodedTensors > 0 && !compile.quant.enabled())
      std::fprintf(stderr,
                   "note: %s of other GGUF quantized types decoded to f16, and f16 in the plan; "
                   "add --quant q4 (or q8, q6, q5, q3, q2, --bpw X) to pack them again\n",
                   tensors(gguf.decodedTensors).c_str());
  };
  compile.ternaryPacked = [&](const TernaryReport& ternary) {
    if (!options.quiet && ternary.packed > 0)
      std::fprintf(stderr,
                   "ternary: %d linear weights packed as %s, %.4f bits per weight incl. scales "
                   "(%.1f -> %.1f MiB)\n",
                   ternary.packed, ternaryFormatName(options.ternaryFormat),
                   8.0 * double(ternary.bytesAfter) / double(ternary.values),
                   ternary.bytesBefore / 1048576.0, ternary.bytesAfter / 1048576.0);
  };
  compile.checkPlan = [&](const plan::PlanT& plan) {
    checkMemory(plan, *targets, options.quiet);
    return llvm::Error::success();
  };
  for (const Target& target : *targets)
    if (std::find(compile.kernels.archs.begin(), compile.kernels.archs.end(), target.arch) ==
        compile.kernels.archs.end())
      compile.kernels.archs.push_back(target.arch);
  // Cards that stream at H200 rates keep more bytes in flight in the wide one-token GEMVs
  // (GemvShapes.h bulkLayout's deepRing); NINFER_NO_DEEP_RING=1 keeps the shallower ring, as
  // an A/B switch (docs/performance.md).
  compile.kernels.deepBulkRing =
      !abSwitchSet("NINFER_NO_DEEP_RING") && everyTargetStreams(*targets, gemv::kDeepRingBandwidth);
  bool tookDeepRing = false; // whether some launch took it (the summary says so)
  compile.kernels.report = [&](const KernelReport& report) { tookDeepRing = report.deepBulkRing; };
  compile.kernels.embedPtx = options.embedPtx;
  compile.kernels.fuseLaunches = options.fuse;
  compile.kernels.trace = options.trace;
  std::optional<Progress> nvrtcProgress;
  compile.kernels.progress = [&](int done, int count) {
    if (!nvrtcProgress)
      nvrtcProgress.emplace("compiling kernels", count, !options.quiet);
    nvrtcProgress->update(done);
    if (done == count)
      nvrtcProgress->finish();
  };
  auto compiled = compileModel(compile);
  if (nvrtcProgress)
    nvrtcProgress->finish();
  failOn(compiled.takeError());

  if (!options.quiet) {
    const plan::PlanT& planT = *compiled->plan;
    uint64_t size = 0;
    llvm::sys::fs::file_size(options.output, size);
    std::fprintf(stderr, "wrote %s: %.1f MiB, %zu ops, %zu kernels, archs %s%s%s, %.2f s\n",
                 options.output.c_str(), size / 1048576.0, planT.ops.size(),
                 planT.kernels ? planT.kernels->functions.size() : 0,
                 llvm::join(compile.kernels.archs, ",").c_str(), options.embedPtx ? " + PTX" : "",
                 tookDeepRing ? " (deep ring)" : "", total.seconds());
  }
  return 0;
}
