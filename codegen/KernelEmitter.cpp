// Kernel emitter: validates each plan op against the buffers it names, writes
// an extern "C" wrapper per distinct launch that calls the templated device
// functions of codegen/kernels/*.cuh with every shape, dtype and constant baked
// in (buffer addresses are kernel arguments, so the layers of a model share
// kernels), compiles the module with NVRTC for each requested architecture (in
// parallel) plus PTX for the lowest one, and records the launches of every op.
//
// Plans of several sequences (max_batch > 1) also run batch steps: one token of
// each of up to max_batch sequences. Every launch of such a plan says which
// steps it runs in (Launch.steps). Row-wise kernels (embedding, norms, linears
// and their grouped GEMVs, SwiGLU, adds) and the RoPE/KV-append kernels, which
// read each row's position and sequence from the StepState, run in both; two
// ops get launches of their own for batch steps: the lm_head computes every row
// (the ROWS = GEMV kernel into a max_batch-row logits buffer) instead of the
// last, and the decode attention runs one grid layer (z) per row. The prefill
// attention runs in single-sequence steps only. A plan of one sequence has no
// batch launches and every launch is marked single-sequence (the default).
#include "KernelEmitter.h"

#include "LaunchFusion.h"
#include "Nvrtc.h"

#include "ninfer/AttentionShapes.h"
#include "ninfer/GemvShapes.h"
#include "ninfer/KvFormat.h"
#include "ninfer/PlanDType.h"
#include "ninfer/QuantDType.h"
#include "ninfer/StepAbi.h"
#include "ninfer/TernaryDType.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace ninfer {
namespace {

using plan::BufferKind;
using plan::BufferT;
using plan::DType;
using plan::OpAttrs;
using plan::OpT;

constexpr int kThreads = 256;     // block size of every elementwise/row kernel
constexpr int kMaxRowBlocks = 32; // cap on blocks per row for row-stride kernels
constexpr int kMaxHeadDim = 256;
static_assert(kMaxBatch <= kLinearGemvRows, "a batch step runs the GEMV kernels (rows <= 8)");
// Attention block sizes, keys per split and tile (ninfer/AttentionShapes.h).
using attn::decodeHeadChunks;
using attn::decodeHeadsPerBlock;
using attn::decodeMmaSharedBytes;
using attn::kDecodeMinKeys;
using attn::kDecodeThreads;
using attn::kMaxDecodeSplits;
using attn::kPrefillKeys;
using attn::kPrefillThreads;
static_assert(int(plan::DType::F16) == 1 && int(plan::DType::Q8_KV) == 18,
              "attention.cuh's kKvF16 and kKvQ8 name these plan dtypes");

const char *dtypeName(DType dtype) { return plan::EnumNameDType(dtype); }

// Exact float literal for generated code.
std::string floatLiteral(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  std::ostringstream out;
  out << "__int_as_float(0x" << std::hex << bits << std::dec << ") /* " << value << " */";
  return out.str();
}

int ceilDiv(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

struct LaunchShape {
  uint32_t gridBase[3];
  uint32_t gridPerToken[3];
  uint32_t block[3];
  uint32_t sharedBytes = 0;
  uint32_t minTokens = 0; // the launch runs in steps of minTokens..maxTokens tokens
  uint32_t maxTokens = 0; // 0: no limit
  uint32_t minBlocksPerSm = 0; // __launch_bounds__ occupancy hint (0: none)
  // The kernel waits for the previous one itself (gridDependencyWait), after work that
  // does not read its results (the bulk GEMV's weight copies); other wrappers wait first.
  bool waitsItself = false;
  // The wrapper lets the next launch start early in batch steps too, not in one-token steps
  // only (gridDependencyTrigger): the batch steps' RoPE and KV append, whose successor (the
  // batch decode attention) copies cache tiles before its wait.
  bool triggersInBatch = false;
  // The steps it runs in, in plans of several sequences (plans of one have
  // single-sequence steps only).
  plan::LaunchSteps steps = plan::LaunchSteps::Any;
};

// Queries per warp of the prefill kernel: at most 32 accumulators per lane, and
// shared memory within the 64 KiB every target (sm_75 too) can opt into.
int prefillQueriesPerWarp(int headDim) { return headDim <= 128 ? 8 : 2; }

uint32_t prefillSharedBytes(int headDim) {
  const int rows = (kPrefillThreads / 32) * prefillQueriesPerWarp(headDim);
  return static_cast<uint32_t>(rows * headDim * 4 + kPrefillKeys * (headDim + 4) * 2 +
                               kPrefillKeys * headDim * 2 + 2 * kPrefillKeys * 4);
}

// Blocks along x for a row of `width` handled by `threads` per block.
uint32_t rowBlocks(int64_t width) {
  return static_cast<uint32_t>(std::max(1, std::min(kMaxRowBlocks, ceilDiv(width, kThreads))));
}

LaunchShape perTokenRows(uint32_t blocksX) {
  return {{blocksX, 0, 1}, {0, 1, 0}, {kThreads, 1, 1}};
}

// ROWS of a linear kernel function (codegen/kernels/common.cuh).
constexpr int kRowsGemv = 1, kRowsGemm = 2, kRowsLast = 3, kRowsGemmX16 = 4,
              kRowsGemmX16Tall = 5;

class Emitter : PlanQueries {
public:
  // choices.tensorCoreGemm: every target is sm_80+, so prefill GEMMs may use gemm_mma.cuh
  // and decode attention attentionDecodeMma. choices.bulkGemv: every target is sm_90+, so
  // one-token steps of quantized linears may use gemv_quant_bulk.cuh. The fusions the
  // choices allow: LaunchFusion.h.
  Emitter(plan::PlanT& plan, const FusionChoices& choices, bool trace)
      : PlanQueries(plan), plan_(plan), choices_(choices), trace_(trace) {}

  Status emitAll() {
    source_ << "// Generated by the ninfer kernel emitter: one wrapper per launch.\n";
    // Timeline events of every block (ninfer/TraceAbi.h); the define precedes common.cuh.
    if (trace_)
      source_ << "#define NINFER_TRACE 1\n";
    // The tensor-core prefill GEMM needs sm_80 and its launches' dynamic shared memory;
    // the define precedes the includes that test it.
    if (!choices_.tensorCoreGemm)
      source_ << "#define NINFER_LINEAR_MMA 0\n";
    // Plans of several sequences stage x of multi-row GEMV steps in shared memory
    // (gemv_quant_mma.cuh); one-sequence plans keep the GEMV without it.
    if (maxBatch() > 1)
      source_ << "#define NINFER_GEMV_STAGE_X 1\n";
    // The wide one-token GEMVs' ring for cards of H200-class bandwidth (GemvShapes.h
    // bulkLayout): the kernels and the launches' shared memory take the same layouts.
    if (choices_.deepBulkRing)
      source_ << "#define NINFER_DEEP_BULK_RING 1\n";
    source_ << "#include \"common.cuh\"\n#include \"embedding.cuh\"\n#include \"rmsnorm.cuh\"\n"
            << "#include \"linear.cuh\"\n#include \"rope.cuh\"\n#include \"attention.cuh\"\n"
            << "#include \"swiglu.cuh\"\n#include \"add.cuh\"\n#include \"fill.cuh\"\n"
            << "#include \"argmax.cuh\"\n#include \"sample.cuh\"\n#include \"topk.cuh\"\n"
            << "#include \"nucleus.cuh\"\n"
            << "#include \"linear_ternary.cuh\"\n#include \"linear_tq1.cuh\"\n"
            << "#include \"linear_quant.cuh\"\n\n"
            << "using ninfer::KernelArgs;\nusing ninfer::StepState;\n\n";
    for (size_t i = 0; i < plan_.ops.size(); ++i)
      if (!plan_.ops[i])
        return Status::error("op " + std::to_string(i) + " is missing");
    fusions_ = findLaunchFusions(plan_, choices_);
    for (size_t i = 0; i < plan_.ops.size(); ++i)
      opIndices_[plan_.ops[i].get()] = i;
    for (size_t i = 0; i < plan_.ops.size(); ++i) {
      opIndex_ = i;
      plan_.ops[i]->launches.clear();
      NINFER_RETURN_IF_ERROR(emitOp(*plan_.ops[i]));
    }
    placeX16();
    return Status::ok();
  }

  std::string source() const { return source_.str(); }
  const std::vector<plan::TensorMapT> &tensorMaps() const { return tensorMaps_; }
  std::vector<std::string> &functions() { return functions_; }
  const KernelReport &report() const { return report_; }

private:
  // Only the deep ring's layout has its barrier block (gemv::bulkLayoutOf with deep).
  void noteDeepRing(const gemv::BulkLayout &layout) {
    report_.deepBulkRing |= layout.barrierSlots == gemv::kBulkDeepMaxSlots;
  }

  std::string label(const OpT &op) const {
    return "op " + std::to_string(opIndex_) + " '" + op.name + "' (" +
           plan::EnumNameOpAttrs(op.attrs.type) + ")";
  }

  Status fail(const OpT &op, const std::string &what) const {
    return Status::error(label(op) + ": " + what);
  }

  Status checkArity(const OpT &op, size_t minIn, size_t maxIn, size_t outs) const {
    if (op.inputs.size() < minIn || op.inputs.size() > maxIn)
      return fail(op, "has " + std::to_string(op.inputs.size()) + " inputs, expected " +
                          std::to_string(minIn) +
                          (maxIn != minIn ? "-" + std::to_string(maxIn) : std::string()));
    if (op.outputs.size() != outs)
      return fail(op, "has " + std::to_string(op.outputs.size()) + " outputs, expected " +
                          std::to_string(outs));
    for (uint32_t index : op.inputs)
      if (index >= plan_.buffers.size() || !plan_.buffers[index])
        return fail(op, "input buffer " + std::to_string(index) + " does not exist");
    for (uint32_t index : op.outputs)
      if (index >= plan_.buffers.size() || !plan_.buffers[index])
        return fail(op, "output buffer " + std::to_string(index) + " does not exist");
    return Status::ok();
  }

  // An f32 row buffer (activation, or the logits) holding `rows` rows of `width`.
  Status checkRows(const OpT &op, uint32_t index, int64_t rows, int64_t width,
                   const char *role) const {
    const BufferT &b = buf(index);
    if (b.kind == BufferKind::Weight || b.kind == BufferKind::Tokens ||
        b.kind == BufferKind::KvCache)
      return fail(op, std::string(role) + " buffer " + std::to_string(index) + " '" + b.name +
                          "' is a " + plan::EnumNameBufferKind(b.kind) + " buffer, expected rows");
    if (b.dtype != DType::F32)
      return fail(op, std::string(role) + " buffer '" + b.name + "' is " + dtypeName(b.dtype) +
                          ", expected F32");
    const uint64_t need = static_cast<uint64_t>(rows) * static_cast<uint64_t>(width) * 4;
    if (b.size_bytes < need)
      return fail(op, std::string(role) + " buffer '" + b.name + "' holds " +
                          std::to_string(b.size_bytes) + " bytes, needs " + std::to_string(need) +
                          " (" + std::to_string(rows) + " rows of " + std::to_string(width) + ")");
    return Status::ok();
  }

  Status checkWeight(const OpT &op, uint32_t index, int64_t elements, const char *role,
                     bool floatOnly = true) const {
    const BufferT &b = buf(index);
    if (b.kind != BufferKind::Weight)
      return fail(op, std::string(role) + " buffer '" + b.name + "' is not a weight");
    if (floatOnly && !isFloatWeightType(b.dtype))
      return fail(op, std::string(role) + " dtype " + dtypeName(b.dtype) + " is not supported");
    const uint64_t need = static_cast<uint64_t>(elements) * dtypeBytes(b.dtype);
    if (b.size_bytes < need)
      return fail(op, std::string(role) + " '" + b.name + "' holds " +
                          std::to_string(b.size_bytes) + " bytes, needs " + std::to_string(need));
    return Status::ok();
  }

  // Row width of an activation buffer from its shape [rows, ...].
  Result<int64_t> rowWidth(const OpT &op, uint32_t index) const {
    const BufferT &b = buf(index);
    if (b.shape.size() < 2 || b.shape[0] <= 0)
      return fail(op, "buffer '" + b.name + "' has no [rows, width] shape");
    int64_t width = 1;
    for (size_t i = 1; i < b.shape.size(); ++i)
      width *= b.shape[i];
    if (width <= 0)
      return fail(op, "buffer '" + b.name + "' has an empty row");
    return width;
  }

  // The address of buffer `index` inside the wrapper being written: a slot of
  // the launch's KernelArgs (one slot per distinct buffer).
  std::string raw(uint32_t index) {
    auto slot = std::find(args_.begin(), args_.end(), index);
    if (slot == args_.end())
      slot = args_.insert(args_.end(), index);
    return "args.buffers[" + std::to_string(slot - args_.begin()) + "]";
  }
  std::string ptr(const char *type, uint32_t index) {
    return "static_cast<" + std::string(type) + ">(" + raw(index) + ")";
  }

  // Records a launch of `call` (which used raw()/ptr() for its buffers). Launches
  // whose wrapper text and block are equal share one kernel.
  Status addKernel(OpT &op, const std::string &suffix, const std::string &call,
                   const LaunchShape &shape) {
    std::vector<uint32_t> args;
    args.swap(args_);
    if (args.size() > static_cast<size_t>(kMaxKernelArgs))
      return fail(op, "needs " + std::to_string(args.size()) + " buffers, the kernel ABI has " +
                          std::to_string(kMaxKernelArgs));
    const uint32_t threads = shape.block[0] * shape.block[1] * shape.block[2];
    const std::string bounds =
        std::to_string(threads) +
        (shape.minBlocksPerSm ? ", " + std::to_string(shape.minBlocksPerSm) : std::string());
    const std::string body =
        bounds + "|" + suffix + "|" + (shape.waitsItself ? "w|" : "") +
        (shape.triggersInBatch ? "b|" : "") + call;
    auto [it, added] = kernelByBody_.try_emplace(body, static_cast<uint32_t>(functions_.size()));
    if (added) {
      std::string name = "k" + std::to_string(functions_.size()) + "_" + suffix;
      source_ << "// first used by " << label(op) << "\nextern \"C\" __global__ void "
              << "__launch_bounds__(" << bounds << ") " << name
              << "(const StepState* state, KernelArgs args) {\n"
              << (trace_
                      ? "  const ninfer::dev::TraceBlock traceBlock = ninfer::dev::traceBegin();\n"
                      : "")
              << (shape.waitsItself ? std::string("  ")
                                    : std::string("  const bool early = state->nTokens == 1") +
                                          (shape.triggersInBatch ? " || state->batch > 0" : "") +
                                          ";\n  ninfer::dev::gridDependencyWait();\n"
                                          "  ninfer::dev::gridDependencyTrigger(early);\n  ")
              << call << ";\n"
              << (trace_ ? "  ninfer::dev::traceEnd(traceBlock);\n" : "") << "}\n\n";
      functions_.push_back(std::move(name));
    }
    auto launch = std::make_unique<plan::LaunchT>();
    launch->function = it->second;
    launch->grid_base.assign(shape.gridBase, shape.gridBase + 3);
    launch->grid_per_token.assign(shape.gridPerToken, shape.gridPerToken + 3);
    launch->block.assign(shape.block, shape.block + 3);
    launch->shared_bytes = shape.sharedBytes;
    launch->min_tokens = shape.minTokens;
    launch->max_tokens = shape.maxTokens;
    launch->steps = maxBatch() > 1 ? shape.steps : plan::LaunchSteps::Sequence;
    launch->args = std::move(args);
    op.launches.push_back(std::move(launch));
    return Status::ok();
  }

  Status emitOp(OpT &op) {
    switch (op.attrs.type) {
    case OpAttrs::EmbeddingAttrs:
      return emitEmbedding(op, *op.attrs.AsEmbeddingAttrs());
    case OpAttrs::RmsNormAttrs:
      return emitRmsNorm(op, *op.attrs.AsRmsNormAttrs());
    case OpAttrs::LinearAttrs:
      return emitLinear(op, *op.attrs.AsLinearAttrs());
    case OpAttrs::RopeAttrs:
      return emitRope(op, *op.attrs.AsRopeAttrs());
    case OpAttrs::AttentionAttrs:
      return emitAttention(op, *op.attrs.AsAttentionAttrs());
    case OpAttrs::SwiGluAttrs:
      return emitSwiGlu(op, *op.attrs.AsSwiGluAttrs());
    case OpAttrs::AddAttrs:
      return emitAdd(op, *op.attrs.AsAddAttrs());
    case OpAttrs::NONE:
      break;
    }
    return fail(op, "has no attributes (unknown op kind)");
  }

  Status emitEmbedding(OpT &op, const plan::EmbeddingAttrsT &a) {
    NINFER_RETURN_IF_ERROR(checkArity(op, 2, 2, 1));
    if (a.dim <= 0 || a.vocab <= 0)
      return fail(op, "dim and vocab must be positive");
    const BufferT &tokens = buf(op.inputs[0]);
    if (tokens.dtype != DType::I32)
      return fail(op, "token buffer '" + tokens.name + "' must be I32");
    if (quant::formatOfPlanDType(int(buf(op.inputs[1]).dtype)) >= 0)
      return emitEmbeddingQuant(op, a);
    NINFER_RETURN_IF_ERROR(checkWeight(op, op.inputs[1], int64_t(a.vocab) * a.dim, "table"));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.outputs[0], maxRows(), a.dim, "output"));
    std::ostringstream call;
    call << "ninfer::dev::embedding<" << int(buf(op.inputs[1]).dtype) << ", " << a.dim << ", "
         << a.vocab << ", " << kThreads << ">(" << ptr("const int*", op.inputs[0]) << ", "
         << raw(op.inputs[1]) << ", " << ptr("float*", op.outputs[0]) << ", state)";
    return addKernel(op, "embedding", call.str(), perTokenRows(rowBlocks(a.dim)));
  }

  Status emitRmsNorm(OpT &op, const plan::RmsNormAttrsT &a) {
    NINFER_RETURN_IF_ERROR(checkArity(op, 2, 2, 1));
    if (a.dim <= 0)
      return fail(op, "dim must be positive");
    Result<int64_t> width = rowWidth(op, op.inputs[0]);
    if (!width)
      return width.status();
    if (*width % a.dim != 0)
      return fail(op, "row width " + std::to_string(*width) + " is not a multiple of dim " +
                          std::to_string(a.dim));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.inputs[0], maxRows(), *width, "input"));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.outputs[0], maxRows(), *width, "output"));
    NINFER_RETURN_IF_ERROR(checkWeight(op, op.inputs[1], a.dim, "weight"));
    // Fused into its readers (LaunchFusion.cpp): only the steps they do not cover, if any.
    const uint32_t minTokens = fusions_.normRunsFrom[opIndex_];
    if (minTokens == kEveryStep || minTokens > maxRows())
      return Status::ok();
    const int64_t groups = *width / a.dim;
    // rmsNormBlock keeps dim / threads values per thread in registers (at most 64).
    const bool blockPerGroup = a.dim >= 512 && a.dim <= 64 * kThreads;
    std::ostringstream call;
    call << "ninfer::dev::" << (blockPerGroup ? "rmsNormBlock<" : "rmsNormWarp<")
         << int(buf(op.inputs[1]).dtype) << ", " << a.dim << ", " << *width << ", " << kThreads
         << x16Type() << ">(" << ptr("const float*", op.inputs[0]) << ", " << raw(op.inputs[1])
         << ", " << ptr("float*", op.outputs[0]) << ", " << floatLiteral(a.eps) << ", state"
         << x16Argument(*width) << ")";
    const uint32_t blocks = blockPerGroup ? static_cast<uint32_t>(groups)
                                          : static_cast<uint32_t>(ceilDiv(groups, kThreads / 32));
    LaunchShape shape = perTokenRows(blocks);
    shape.minTokens = minTokens;
    return addKernel(op, "rmsnorm", call.str(), shape);
  }

  // How a linear op's kernels are written: the call for ROWS = rows (slice: a
  // BlockSlice argument for a grouped launch, or empty), the GEMV grid, its
  // occupancy hint (0: none) and the kernel name.
  struct LinearKernel {
    std::string suffix;
    uint32_t blocks = 0;
    uint32_t gemvBlocksPerSm = 0;
    uint32_t swiGluBlocksPerSm = 0; // the gate/up GEMV's where its SwiGLU needs other
    bool mmaGemm = false; // the GEMM runs gemm_mma.cuh where the targets allow it
    int gemmDType = 0;    // the 16-bit type its operands are rounded to (plan.fbs DType)
    // The GEMV waits for the previous kernel itself, after its first weight loads
    // (linear.cuh's f16/bf16/f32 GEMV).
    bool gemvWaitsItself = false;
    std::function<std::string(int rows, const std::string &slice)> call;
    // One-token steps through gemv_quant_bulk.cuh (null where it does not apply): the
    // call, its dynamic shared memory, and the 16-row tiles of both bulk kernels.
    std::function<std::string(int rows, const std::string &slice)> oneTokenCall;
    uint32_t bulkTiles = 0;
    uint32_t oneTokenShared = 0;
    uint32_t oneTokenPerSm = gemv::kBulkBlocksPerSm; // blocks per SM of the one-token launch
    // Steps of 2..8 rows through gemv_quant_rows.cuh (null where it does not apply): the
    // call (its slice argument goes on with the partial sums', the tickets' and the code
    // map's pointers: rowsTail), the weight's bits, the parts of K, the blocks per SM and
    // the most blocks of a launch (GemvShapes.h rowsParts, rowsBlocksPerSm, rowsGridBlocks),
    // its dynamic shared memory and the code plane's tensor map (made where a launch takes it).
    std::function<std::string(int rows, const std::string &slice)> rowsCall;
    int rowsBits = 0;
    uint32_t rowsParts = 0, rowsPerSm = 0, rowsGrid = 0;
    uint32_t rowsShared = 0;
    std::function<uint32_t()> rowsMap;
  };

  // The grid of a one-token bulk GEMV at `perSm` blocks per SM (an H100/H200's 132 SMs).
  static uint32_t oneTokenGrid(uint32_t perSm) {
    return gemv::kBulkGridBlocks / gemv::kBulkBlocksPerSm * perSm;
  }

  // The launch of a one-token bulk GEMV (gemv_quant_bulk.cuh, gemv_tq1_bulk.cuh): `blocks`
  // blocks (at most `perSm` per SM, tiles strided), `shared` bytes; steps of one token.
  static LaunchShape oneTokenShape(uint32_t blocks, uint32_t shared,
                                   uint32_t perSm = gemv::kBulkBlocksPerSm) {
    LaunchShape shape{{blocks, 1, 1}, {0, 0, 0}, {gemv::kBulkThreads, 1, 1}};
    shape.sharedBytes = shared;
    shape.minBlocksPerSm = perSm;
    shape.maxTokens = 1;
    shape.waitsItself = true;
    return shape;
  }

  // The launch of gemv_quant_rows.cuh's GEMV for k: `blocks` blocks (whole groups of K's
  // parts), `shared` bytes; steps of 2..8 rows.
  static LaunchShape rowsShape(const LinearKernel &k, uint32_t blocks, uint32_t shared) {
    LaunchShape shape = oneTokenShape(blocks, shared);
    shape.block[0] = gemv::kRowsThreads;
    shape.minBlocksPerSm = k.rowsPerSm;
    shape.minTokens = 2;
    shape.maxTokens = kLinearGemvRows;
    return shape;
  }

  // The arguments after a gemv_quant_rows.cuh call's slice: its partial sums and tickets
  // for `tiles` tiles after the first `tileOffset` of the launch (the emitter's workspaces
  // kSplitPartialsName and kSplitTicketsName, sized for the largest launch; nulls where K
  // has one part), then the code plane's tensor map.
  std::string rowsTail(const LinearKernel &k, uint32_t tileOffset) {
    return ", " + rowsSplit(k.rowsParts, k.bulkTiles, tileOffset) + ", " + raw(k.rowsMap());
  }
  std::string rowsSplit(uint32_t parts, uint32_t tiles, uint32_t tileOffset) {
    if (parts <= 1)
      return "nullptr, nullptr";
    const uint64_t end = uint64_t(tileOffset) + tiles;
    const uint64_t tileFloats = uint64_t(parts) * gemv::kRowsTileFloats;
    reserveWorkspace(splitPartials_, kSplitPartialsName, end * tileFloats * 4);
    reserveWorkspace(splitTickets_, kSplitTicketsName, end * 4);
    return ptr("float*", *splitPartials_) + " + " + std::to_string(tileOffset * tileFloats) +
           ", " + ptr("unsigned int*", *splitTickets_) + " + " + std::to_string(tileOffset);
  }

  // A rows launch's blocks for members (of k's K) of `tiles` tiles each: whole groups of
  // K's parts, the groups (at most a block per SM's share) in proportion to the tiles.
  static std::vector<uint32_t> rowsBlocks(const std::vector<uint32_t> &tiles,
                                          const LinearKernel &k) {
    uint32_t total = 0;
    for (uint32_t t : tiles)
      total += t;
    const uint32_t parts = k.rowsParts;
    const uint32_t groups = std::min<uint32_t>(k.rowsGrid / parts, total);
    std::vector<uint32_t> blocks;
    for (uint32_t t : tiles)
      blocks.push_back(parts * std::clamp<uint32_t>(static_cast<uint32_t>(
                                                        (uint64_t(groups) * t + total / 2) / total),
                                                    1u, t));
    return blocks;
  }

  Status emitLinear(OpT &op, const plan::LinearAttrsT &a) {
    LinearKernel k;
    NINFER_RETURN_IF_ERROR(describeLinear(op, a, k));
    const LinearGroup group = fusions_.linearGroups[opIndex_];
    if (group.size <= 1)
      return addLinearKernels(op, a, k);
    std::vector<LinearKernel> members;
    NINFER_RETURN_IF_ERROR(describeGroup(group, members));
    // The GEMM is grouped too where every member runs the tensor-core GEMM (its tiles are
    // strided over a BlockSlice); then the members have no launches of their own.
    bool groupGemm = choices_.tensorCoreGemm;
    for (const LinearKernel &member : members)
      groupGemm = groupGemm && member.mmaGemm;
    if (group.head != opIndex_) // it runs in the head's grouped launches
      return groupGemm ? Status::ok() : addLinearGemm(op, k);
    // One grid per path for the group: block b runs the member whose range holds it.
    std::vector<uint32_t> gemvBlocks;
    std::vector<int64_t> outs;
    for (size_t m = 0; m < members.size(); ++m) {
      gemvBlocks.push_back(members[m].blocks);
      outs.push_back(plan_.ops[group.head + m]->attrs.AsLinearAttrs()->out_features);
    }
    const std::string name = k.suffix + "_group" + std::to_string(group.size);
    LaunchShape gemv{{0, 1, 1}, {0, 0, 0}, {kThreads, 1, 1}};
    gemv.minBlocksPerSm = k.gemvBlocksPerSm;
    if (fusions_.swiGluOfGroup[opIndex_] >= 0 && k.swiGluBlocksPerSm)
      gemv.minBlocksPerSm = k.swiGluBlocksPerSm;
    gemv.maxTokens = kLinearGemvRows;
    gemv.waitsItself = true;
    for (const LinearKernel &member : members)
      gemv.waitsItself = gemv.waitsItself && member.gemvWaitsItself;
    NINFER_RETURN_IF_ERROR(addOneTokenGroup(op, group, members, name, gemv));
    const int swiGlu = fusions_.swiGluOfGroup[opIndex_];
    bool rows = true;
    uint32_t groupTiles = 0;
    for (const LinearKernel &member : members) {
      rows = rows && member.rowsCall && member.rowsParts == k.rowsParts;
      groupTiles += member.bulkTiles;
    }
    rows = rows && gemv::rowsPays(k.rowsBits, int(op.attrs.AsLinearAttrs()->in_features),
                                  int(groupTiles));
    if (rows && swiGlu >= 0) { // tiles of 8 gate and 8 up rows: as many as the pair's 16-row tiles
      const uint32_t blocks = rowsBlocks({groupTiles}, k)[0];
      LaunchShape shape = rowsShape(k, blocks, k.rowsShared);
      shape.minTokens = gemv.minTokens;
      NINFER_RETURN_IF_ERROR(
          addKernel(op, k.suffix + "_swiglu_rows", swiGluRowsCall(group, k, groupTiles), shape));
    } else if (rows) {
      std::vector<uint32_t> tiles;
      uint32_t shared = 0;
      for (const LinearKernel &member : members) {
        tiles.push_back(member.bulkTiles);
        shared = std::max(shared, member.rowsShared);
      }
      std::vector<std::string> tails;
      uint32_t tileOffset = 0;
      for (const LinearKernel &member : members) {
        tails.push_back(rowsTail(member, tileOffset));
        tileOffset += member.bulkTiles;
      }
      uint32_t total = 0;
      const std::string text = groupCall(members, kRowsGemv, rowsBlocks(tiles, k), total,
                                         &LinearKernel::rowsCall, &tails);
      LaunchShape shape = rowsShape(k, total, shared);
      shape.minTokens = gemv.minTokens;
      NINFER_RETURN_IF_ERROR(addKernel(op, name + "_rows", text, shape));
    } else {
      const std::string gemvText =
          swiGlu >= 0
              ? swiGluCall(group, gemv.gridBase[0])
              : groupCall(members, kRowsGemv, gemvBlocks, gemv.gridBase[0]);
      NINFER_RETURN_IF_ERROR(addKernel(op, name + "_gemv", gemvText, gemv));
    }
    if (!groupGemm)
      return addLinearGemm(op, k);
    bool sameDType = true;
    for (const LinearKernel &member : members)
      sameDType = sameDType && member.gemmDType == k.gemmDType;
    if (swiGlu >= 0 && fusions_.swiGluGemmType[size_t(swiGlu)] != 0) {
      const int64_t both = 2 * op.attrs.AsLinearAttrs()->out_features;
      return addGemm(op, k.suffix + "_swiglu_gemm", {both}, sameDType, k.gemmDType,
                     [&](int rows, const std::vector<uint32_t> &) {
                       return swiGluGemmCall(group, rows);
                     });
    }
    return addGemm(op, name + "_gemm", outs, sameDType, k.gemmDType,
                   [&](int rows, const std::vector<uint32_t> &blocks) {
                     uint32_t total = 0;
                     return groupCall(members, rows, blocks, total);
                   });
  }

  // The tensor-core GEMM launches of a linear op or group (outs: its members' outputs;
  // text(rows, blocks): its call for ROWS = rows, each member striding over its `blocks`), for
  // steps of more than kLinearGemvRows tokens; a block per tile of the longest step. On sm_90a
  // (choices_.wgmmaGemm; wgmmaOk: the members round x to one 16-bit type, `dtype`) a launch
  // first rounds x to it into the x16 workspace (unless its producer wrote it there, or the
  // gate/up GEMM wrote the SwiGLU into the activation workspace) and gemm_wgmma.cuh reads
  // that, with 256-token tiles where those fill the SMs in one wave and 128-token ones would
  // not; elsewhere gemm_mma.cuh reads x itself.
  Status addGemm(OpT &op, const std::string &name, const std::vector<int64_t> &outs, bool wgmmaOk,
                 int dtype,
                 const std::function<std::string(int, const std::vector<uint32_t> &)> &text) {
    const int64_t k = op.attrs.AsLinearAttrs()->in_features;
    const bool wgmma = choices_.wgmmaGemm && wgmmaOk && k % gemm::kTileK == 0;
    const auto tilesOf = [&](int mt) {
      std::vector<uint32_t> blocks;
      for (int64_t n : outs)
        blocks.push_back(static_cast<uint32_t>(gemm::tiles(int(n), int(maxRows()), mt)));
      return blocks;
    };
    const auto sum = [](const std::vector<uint32_t> &blocks) {
      uint32_t total = 0;
      for (uint32_t b : blocks)
        total += b;
      return total;
    };
    const int mt = wgmma && sum(tilesOf(1)) > uint32_t(gemm::kSm90aSms) &&
                           sum(tilesOf(2)) <= uint32_t(gemm::kSm90aSms)
                       ? 2
                       : 1;
    const std::vector<uint32_t> blocks = tilesOf(mt);
    LaunchShape shape{{sum(blocks), 1, 1}, {0, 0, 0}, {kThreads, 1, 1}};
    shape.minTokens = kLinearGemvRows + 1;
    const int swiGluGroup = fusions_.swiGluOfGroup[opIndex_];
    const bool writesSwiGlu =
        swiGluGroup >= 0 && fusions_.swiGluGemmType[size_t(swiGluGroup)] != 0;
    const bool readsSwiGlu = fusions_.swiGluGemmOf[opIndex_] >= 0;
    if (!wgmma) {
      // LaunchFusion.cpp's conditions promised the wgmma path.
      if (writesSwiGlu || readsSwiGlu || fusions_.inputRounded[opIndex_])
        return fail(op, "its x was fused into a 16-bit copy its GEMM does not read");
      shape.sharedBytes = gemm::kSharedBytes;
      return addKernel(op, name, text(kRowsGemm, blocks), shape);
    }
    reserveX16(k);
    shape.sharedBytes = static_cast<uint32_t>(gemm::wgmmaSharedBytes(mt));
    const int rows = mt == 2 ? kRowsGemmX16Tall : kRowsGemmX16;
    // The producer of x wrote it (findProducerRounds, findSwiGluGemms).
    if (fusions_.inputRounded[opIndex_] || readsSwiGlu)
      return addKernel(op, name, text(rows, blocks), shape);
    std::ostringstream round;
    round << "ninfer::dev::roundRows<" << dtype << ", " << k << ", " << kThreads << ">("
          << ptr("const float*", op.inputs[0]) << ", " << ptr("unsigned short*", *x16_)
          << ", state)";
    LaunchShape rounding = perTokenRows(static_cast<uint32_t>(ceilDiv(k, 8 * kThreads)));
    rounding.minTokens = shape.minTokens;
    NINFER_RETURN_IF_ERROR(addKernel(op, "round_x16", round.str(), rounding));
    return addKernel(op, name, text(rows, blocks), shape);
  }

  // The 16-bit workspaces: x16 (see addGemm) and act16, where a gate/up GEMM writes the
  // SwiGLU for the down projection (findSwiGluGemms; its own buffer, as that GEMM reads
  // x16). Workspace buffers after every other one (the attention's counters there must
  // stay zero), each holding maxRows() rows of the widest K of the GEMMs that read it;
  // placeX16 gives them their offsets once every op is emitted.
  void reserveX16(int64_t k) { reserve16(x16_, kX16Name, k); }
  void reserveAct16(int64_t k) { reserve16(act16_, kAct16Name, k); }
  void reserve16(std::optional<uint32_t> &slot, const char *name, int64_t k) {
    // Whole tiles of 128 rows (x16Index in codegen/kernels/common.cuh).
    const uint64_t rows = (uint64_t(maxRows()) + gemm::kTileM - 1) / gemm::kTileM * gemm::kTileM;
    reserveWorkspace(slot, name, rows * uint64_t(k) * 2);
  }
  // An emitter-owned workspace of at least `bytes` (placeX16 places it).
  void reserveWorkspace(std::optional<uint32_t> &slot, const char *name, uint64_t bytes) {
    if (!slot) {
      slot = workspaceBuffer(name);
      plan_.buffers[*slot]->size_bytes = 0;
    }
    BufferT &b = *plan_.buffers[*slot];
    b.size_bytes = std::max(b.size_bytes, bytes);
    b.shape = {static_cast<int64_t>(b.size_bytes / 4)};
  }

  // The Workspace buffer `name` the emitter owns (placeX16 places it): found in the plan (a
  // plan emitted before) or added. Its dtype is the plan's workspace type (f32); the kernels
  // see what they store there.
  uint32_t workspaceBuffer(const std::string &name) {
    for (uint32_t i = 0; i < plan_.buffers.size(); ++i)
      if (plan_.buffers[i] && plan_.buffers[i]->name == name)
        return i;
    auto b = std::make_unique<BufferT>();
    b->name = name;
    b->kind = BufferKind::Workspace;
    b->dtype = DType::F32;
    plan_.buffers.push_back(std::move(b));
    return static_cast<uint32_t>(plan_.buffers.size() - 1);
  }

  // The Workspace buffer that holds the TMA tensor map of weight buffer `weight`
  // (KernelModule.tensor_maps: the executor encodes it at load); one per weight and box.
  // boxBytes 0: a row-major f16/bf16 [rows, cols] weight, boxes of 64 values x boxRows rows;
  // else the code plane of a quantized weight, rows of cols bytes, boxes of boxBytes x boxRows.
  uint32_t tensorMapOf(uint32_t weight, int64_t rows, int64_t cols, int boxRows,
                       int boxBytes = 0) {
    for (const plan::TensorMapT &map : tensorMaps_)
      if (map.weight == weight && int(map.box_rows) == boxRows && int(map.box_bytes) == boxBytes)
        return map.map;
    const uint32_t index = workspaceBuffer(buf(weight).name + ".tmap" + std::to_string(boxRows) +
                                           (boxBytes ? "x" + std::to_string(boxBytes) : ""));
    plan_.buffers[index]->size_bytes = kTensorMapBytes;
    plan_.buffers[index]->shape = {static_cast<int64_t>(kTensorMapBytes / 4)};
    plan::TensorMapT map;
    map.map = index;
    map.weight = weight;
    map.rows = static_cast<uint32_t>(rows);
    map.cols = static_cast<uint32_t>(cols);
    map.box_rows = static_cast<uint32_t>(boxRows);
    map.box_bytes = static_cast<uint32_t>(boxBytes);
    tensorMaps_.push_back(map);
    return index;
  }

  // The template argument and the call argument of an op that writes its output to the x16
  // workspace in long steps (LaunchFusion.cpp's roundsOutput; width: its row), or empty.
  std::string x16Type() const {
    const int type = fusions_.roundsOutput[opIndex_];
    return type ? ", " + std::to_string(type) : std::string();
  }
  std::string x16Argument(int64_t width) {
    if (!fusions_.roundsOutput[opIndex_])
      return "";
    reserveX16(width);
    return ", " + ptr("unsigned short*", *x16_);
  }

  // Places the emitter's own workspaces (x16, act16, the tensor maps) after every other one.
  void placeX16() {
    std::vector<uint32_t> own;
    for (const std::optional<uint32_t> &slot : {x16_, act16_, splitPartials_, splitTickets_})
      if (slot)
        own.push_back(*slot);
    for (const plan::TensorMapT &map : tensorMaps_)
      own.push_back(map.map);
    if (own.empty())
      return;
    uint64_t offset = 0;
    for (uint32_t i = 0; i < plan_.buffers.size(); ++i) {
      const auto &b = plan_.buffers[i];
      if (b && b->kind == BufferKind::Workspace &&
          std::find(own.begin(), own.end(), i) == own.end())
        offset = std::max(offset, b->offset + b->size_bytes);
    }
    for (uint32_t index : own) {
      offset = (offset + 255) / 256 * 256;
      BufferT &b = *plan_.buffers[index];
      b.offset = offset;
      offset += b.size_bytes;
    }
    if (!plan_.memory)
      plan_.memory = std::make_unique<plan::MemoryPlanT>();
    plan_.memory->workspace_bytes =
        std::max(plan_.memory->workspace_bytes, (offset + 255) / 256 * 256);
  }

  // The one-token launch of a group whose members all take gemv_quant_bulk.cuh (with
  // the SwiGLU fused where the group has one), ahead of the group's GEMV launch, which
  // then runs steps of 2 or more tokens (`gemv`'s minTokens). Blocks go to the members
  // in proportion to their tiles. Nothing when a member does not take it.
  Status addOneTokenGroup(OpT &op, const LinearGroup &group,
                          const std::vector<LinearKernel> &members, const std::string &name,
                          LaunchShape &gemv) {
    uint32_t tiles = 0, shared = 0;
    for (const LinearKernel &member : members) {
      if (!member.oneTokenCall)
        return Status::ok();
      tiles += member.bulkTiles;
      shared = std::max(shared, member.oneTokenShared);
    }
    std::string text;
    uint32_t total = 0, perSm = gemv::kBulkBlocksPerSm;
    if (fusions_.swiGluOfGroup[opIndex_] >= 0) {
      text = swiGluCall(group, total, true, &shared);
      if (text.empty())
        return Status::ok();
    } else {
      perSm = members.front().oneTokenPerSm;
      for (const LinearKernel &member : members)
        perSm = std::min(perSm, member.oneTokenPerSm);
      const uint32_t grid = std::min(oneTokenGrid(perSm), tiles);
      std::vector<uint32_t> blocks;
      for (const LinearKernel &member : members)
        blocks.push_back(std::clamp<uint32_t>(
            static_cast<uint32_t>((uint64_t(grid) * member.bulkTiles + tiles / 2) / tiles),
            1u, member.bulkTiles));
      text = groupCall(members, kRowsGemv, blocks, total, &LinearKernel::oneTokenCall);
    }
    NINFER_RETURN_IF_ERROR(addKernel(op, name + "_one", text, oneTokenShape(total, shared, perSm)));
    gemv.minTokens = 2;
    return Status::ok();
  }

  // A gate/up group's ops and the SwiGLU fused into its decode launches.
  struct SwiGluPair {
    const OpT *gate, *up, *swiGlu;
  };
  SwiGluPair swiGluPair(const LinearGroup &group) const {
    const OpT &swiGlu = *plan_.ops[size_t(fusions_.swiGluOfGroup[group.head])];
    const OpT &first = *plan_.ops[group.head], &second = *plan_.ops[group.head + 1];
    const bool firstIsGate = first.outputs[0] == swiGlu.inputs[0];
    return {firstIsGate ? &first : &second, firstIsGate ? &second : &first, &swiGlu};
  }

  // The decode launch of a gate/up group with its SwiGLU fused (LaunchFusion.cpp):
  // the call, and its grid in `blocks`. oneToken: the one-token launch of quantized or TQ1
  // weights (gemv_quant_bulk.cuh, gemv_tq1_bulk.cuh), its shared memory in `shared`; empty
  // when the shape does not take it.
  std::string swiGluCall(const LinearGroup &group, uint32_t &blocks, bool oneToken = false,
                         uint32_t *shared = nullptr) {
    const SwiGluPair pair = swiGluPair(group);
    const OpT &gate = *pair.gate, &up = *pair.up, &swiGlu = *pair.swiGlu;
    const plan::LinearAttrsT &a = *gate.attrs.AsLinearAttrs();
    const DType wType = buf(gate.inputs[1]).dtype;
    std::ostringstream call;
    const int format = quant::formatOfPlanDType(int(wType));
    if (format >= 0) {
      const quant::QuantFormatTraits traits =
          quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format));
      if (oneToken) {
        const gemv::BulkLayout layout =
            gemv::bulkLayout(traits.bits, traits.groupSize, a.in_features, a.out_features, true,
                             choices_.deepBulkRing);
        if (!layout.fits)
          return "";
        noteDeepRing(layout);
        *shared = static_cast<uint32_t>(layout.sharedBytes);
        blocks = std::min<uint32_t>(gemv::kBulkGridBlocks, a.out_features / 8);
      } else {
        blocks = static_cast<uint32_t>(
            ceilDiv(a.out_features, gemv::mmaSwiGluOutputsPerBlock(a.out_features)));
      }
      call << (oneToken ? "ninfer::dev::linearQuantSwiGluOneToken<"
                        : "ninfer::dev::linearQuantSwiGlu<")
           << traits.bits << ", " << traits.groupSize << ", ";
    } else if (wType == DType::TQ1 && oneToken) {
      const gemv::Tq1BulkLayout layout =
          gemv::tq1BulkLayout(int(a.in_features), int(a.out_features), true);
      if (!layout.fits)
        return "";
      *shared = static_cast<uint32_t>(layout.sharedBytes);
      blocks = std::min<uint32_t>(gemv::kBulkGridBlocks, a.out_features / 8);
      call << "ninfer::dev::linearTq1SwiGluOneToken<";
    } else if (wType == DType::TQ1) {
      call << "ninfer::dev::linearTq1SwiGlu<";
      blocks = static_cast<uint32_t>(
          ceilDiv(a.out_features, gemv::mmaSwiGluOutputsPerBlock(a.out_features)));
    } else {
      call << "ninfer::dev::linearSwiGlu<" << int(wType) << ", ";
      blocks = static_cast<uint32_t>(ceilDiv(
          a.out_features, gemv::linearSwiGluOutputsPerBlock(a.out_features, a.in_features,
                                                            16 / dtypeBytes(wType))));
    }
    // The quantized and TQ1 GEMVs of several rows (linearQuantSwiGlu, linearTq1SwiGlu) take
    // normalized rows; the one-token launches and the float GEMV normalize x themselves where
    // LaunchFusion.cpp fused the norm.
    const NormedInput in = normedInput(gate, isFloatWeightType(wType) || oneToken);
    call << a.in_features << ", " << a.out_features << ">(" << in.x << ", "
         << raw(gate.inputs[1]) << ", " << raw(up.inputs[1]) << ", "
         << ptr("float*", swiGlu.outputs[0]) << ", state" << in.norm << ")";
    return call.str();
  }

  // The 2..8-row launch of a gate/up group whose SwiGLU it computes, on gemv_quant_rows.cuh
  // (k: the gate's kernel description; tiles: the pair's tiles of 8 gate and 8 up rows).
  std::string swiGluRowsCall(const LinearGroup &group, const LinearKernel &k, uint32_t tiles) {
    const SwiGluPair pair = swiGluPair(group);
    const OpT &gate = *pair.gate, &up = *pair.up, &swiGlu = *pair.swiGlu;
    const plan::LinearAttrsT &a = *gate.attrs.AsLinearAttrs();
    const quant::QuantFormatTraits traits = quantTraitsOf(gate.inputs[1]);
    std::ostringstream call;
    call << "ninfer::dev::linearQuantRowsSwiGlu<" << traits.bits << ", " << traits.groupSize << ", "
         << a.in_features << ", " << a.out_features << ">(" << ptr("const float*", gate.inputs[0])
         << ", " << raw(gate.inputs[1]) << ", " << raw(up.inputs[1]) << ", "
         << ptr("float*", swiGlu.outputs[0]) << ", state, " << rowsSplit(k.rowsParts, tiles, 0)
         << ", " << raw(rowsCodeMap(gate, 8)) << ", " << raw(rowsCodeMap(up, 8)) << ")";
    return call.str();
  }

  // The format of quantized weight buffer `weight`.
  quant::QuantFormatTraits quantTraitsOf(uint32_t weight) const {
    return quant::quantFormatTraits(
        static_cast<quant::QuantFormatId>(quant::formatOfPlanDType(int(buf(weight).dtype))));
  }

  // The tensor map of quantized linear `op`'s code plane for gemv_quant_rows.cuh: boxes of
  // `boxRows` rows by a part of K (bulkRowsLayout's boxBytes, which depends on K alone).
  uint32_t rowsCodeMap(const OpT &op, int boxRows) {
    const plan::LinearAttrsT &a = *op.attrs.AsLinearAttrs();
    const quant::QuantFormatTraits traits = quantTraitsOf(op.inputs[1]);
    const int box = gemv::bulkRowsLayout(traits.bits, traits.groupSize, int(a.in_features),
                                         int(a.out_features))
                        .boxBytes;
    return tensorMapOf(op.inputs[1], a.out_features,
                       quant::quantRowWeightBytes(traits.bits, a.in_features), boxRows, box);
  }

  // The long-step GEMM of a gate/up group whose SwiGLU it writes as the down projection's
  // x (findSwiGluGemms): linear.cuh's linearSwiGluGemm, or linearQuantSwiGluGemm.
  std::string swiGluGemmCall(const LinearGroup &group, int rows) {
    const SwiGluPair pair = swiGluPair(group);
    const OpT &gate = *pair.gate, &up = *pair.up;
    const plan::LinearAttrsT &a = *gate.attrs.AsLinearAttrs();
    const int wType = int(buf(gate.inputs[1]).dtype);
    const int outType = fusions_.swiGluGemmType[indexOf(*pair.swiGlu)];
    reserveAct16(a.out_features);
    std::ostringstream call;
    const int format = quant::formatOfPlanDType(wType);
    // The quantized and ternary GEMMs decode the weights themselves; the f16/bf16 one reads
    // them through tensor maps, boxes of 64 rows (half a tile each).
    std::string gateW, upW;
    if (format >= 0) {
      const quant::QuantFormatTraits traits =
          quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format));
      call << "ninfer::dev::linearQuantSwiGluGemm<" << traits.bits << ", " << traits.groupSize;
      gateW = raw(gate.inputs[1]);
      upW = raw(up.inputs[1]);
    } else if (wType == int(DType::TQ1)) { // (TQ2 pairs have no fused SwiGLU to extend)
      call << "ninfer::dev::ternarySwiGluGemm<ninfer::dev::Tq1Codes";
      gateW = raw(gate.inputs[1]);
      upW = raw(up.inputs[1]);
    } else {
      call << "ninfer::dev::linearSwiGluGemm<" << wType;
      gateW = raw(tensorMapOf(gate.inputs[1], a.out_features, a.in_features, 64));
      upW = raw(tensorMapOf(up.inputs[1], a.out_features, a.in_features, 64));
    }
    call << ", " << outType << ", " << a.in_features << ", " << a.out_features << ", " << rows
         << ">(" << ptr("const float*", *x16_) << ", " << gateW << ", " << upW << ", "
         << ptr("unsigned short*", *act16_) << ", state)";
    return call.str();
  }

  // The members of a linear group, described.
  // The f16/bf16/f32 GEMVs of a group split their work as one layer of the group's
  // total outputs would (SHAPE_N of linear.cuh).
  Status describeGroup(const LinearGroup &group, std::vector<LinearKernel> &members) {
    int total = 0;
    for (size_t m = group.head; m < group.head + group.size; ++m)
      total += plan_.ops[m]->attrs.AsLinearAttrs()->out_features;
    for (size_t m = group.head; m < group.head + group.size; ++m) {
      OpT &memberOp = *plan_.ops[m];
      members.emplace_back();
      NINFER_RETURN_IF_ERROR(
          describeLinear(memberOp, *memberOp.attrs.AsLinearAttrs(), members.back(), total));
    }
    return Status::ok();
  }

  // The body of a grouped launch: member m runs on blocks[m] blocks after those of the
  // members before it (its BlockSlice, followed by sliceTails[m] where given); `total` gets
  // the grid size.
  std::string groupCall(const std::vector<LinearKernel> &members, int rows,
                        const std::vector<uint32_t> &blocks, uint32_t &total,
                        std::function<std::string(int, const std::string &)>
                            LinearKernel::*call = &LinearKernel::call,
                        const std::vector<std::string> *sliceTails = nullptr) {
    std::ostringstream text;
    uint32_t begin = 0;
    for (size_t m = 0; m < members.size(); ++m) {
      const std::string slice = "ninfer::dev::BlockSlice{static_cast<int>(blockIdx.x) - " +
                                std::to_string(begin) + ", " + std::to_string(blocks[m]) + "}" +
                                (sliceTails ? (*sliceTails)[m] : std::string());
      begin += blocks[m];
      if (m + 1 < members.size())
        text << "if (blockIdx.x < " << begin << "u) " << (members[m].*call)(rows, slice)
             << ";\n  else ";
      else
        text << (members[m].*call)(rows, slice);
    }
    total = begin;
    return text.str();
  }

  // Checks a linear op and says how its kernels are written (shapeN: see describeGroup;
  // 0 for the op's own out_features).
  Status describeLinear(OpT &op, const plan::LinearAttrsT &a, LinearKernel &k, int shapeN = 0) {
    const size_t arity = 2 + (a.has_bias ? 1 : 0) + (a.residual ? 1 : 0);
    NINFER_RETURN_IF_ERROR(checkArity(op, arity, arity, 1));
    if (a.in_features <= 0 || a.out_features <= 0)
      return fail(op, "in_features and out_features must be positive");
    if (a.residual && a.last_row_only)
      return fail(op, "a residual add cannot be fused into a last-row-only linear");
    if (a.residual)
      NINFER_RETURN_IF_ERROR(
          checkRows(op, op.inputs[arity - 1], maxRows(), a.out_features, "residual"));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.inputs[0], maxRows(), a.in_features, "input"));
    // A last-row-only output holds a row per sequence of a batch step.
    NINFER_RETURN_IF_ERROR(checkRows(op, op.outputs[0], a.last_row_only ? maxBatch() : maxRows(),
                                     a.out_features, "output"));
    if (ternary::isTernaryPlanDType(int(buf(op.inputs[1]).dtype)))
      return describeLinearTernary(op, a, k);
    if (quant::formatOfPlanDType(int(buf(op.inputs[1]).dtype)) >= 0)
      return describeLinearQuant(op, a, k);
    NINFER_RETURN_IF_ERROR(
        checkWeight(op, op.inputs[1], int64_t(a.in_features) * a.out_features, "weight"));
    int biasType = 0;
    if (a.has_bias) {
      NINFER_RETURN_IF_ERROR(checkWeight(op, op.inputs[2], a.out_features, "bias"));
      biasType = int(buf(op.inputs[2]).dtype);
    }
    const DType wType = buf(op.inputs[1]).dtype;
    const int elemsPer16 = 16 / dtypeBytes(wType);
    const bool vec = vecGemv(op, op.inputs[0]);
    if (shapeN <= 0)
      shapeN = a.out_features;
    std::ostringstream head;
    head << "ninfer::dev::linear<" << int(wType) << ", " << biasType << ", "
         << (a.has_bias ? "true" : "false") << ", " << a.in_features << ", " << a.out_features;
    k.suffix = "linear";
    k.call = linearCall(op, a, head.str(),
                        std::string(", ") + (vec ? "true" : "false") +
                            (shapeN != a.out_features ? ", " + std::to_string(shapeN) : ""),
                        /*normed=*/true);
    k.mmaGemm = wType != DType::F32 && vec; // linear.cuh's choice of GEMM
    k.gemmDType = int(wType);
    k.gemvWaitsItself = true;
    // The grid does not scale with the token count: the GEMM paths grid-stride over
    // tiles. The GEMV's rows per block: ninfer/GemvShapes.h.
    k.blocks = static_cast<uint32_t>(ceilDiv(
        a.out_features, gemv::linearRowsPerBlock(shapeN, a.in_features, elemsPer16)));
    return Status::ok();
  }

  // The call of a linear kernel function: head (name and template arguments up to
  // N), ", ROWS", tail (more template arguments), then the arguments every linear
  // kernel takes: x, weights, bias or null, the fused residual (the last input) or
  // null, y, state[, slice][, norm]. normed: the function takes a fused RMSNorm in its
  // GEMV rows (not the GEMM's), which it gets where LaunchFusion.cpp fused one. The wgmma
  // GEMMs (ROWS kRowsGemmX16*) of f16/bf16 weights take the weight's tensor map instead of the
  // weight (linear.cuh); quantized ones decode the weight themselves.
  std::function<std::string(int, const std::string &)>
  linearCall(OpT &op, const plan::LinearAttrsT &a, const std::string &head,
             const std::string &tail = "", bool normed = false) {
    OpT *o = &op;
    const bool bias = a.has_bias, residual = a.residual;
    const bool act16 = fusions_.swiGluGemmOf[indexOf(op)] >= 0;
    const DType wType = buf(op.inputs[1]).dtype;
    const bool mapped = wType == DType::F16 || wType == DType::BF16;
    const int64_t outF = a.out_features, inF = a.in_features;
    return [this, o, bias, residual, head, tail, normed, act16, mapped, outF,
            inF](int rows, const std::string &slice) {
      const bool x16 = rows == kRowsGemmX16 || rows == kRowsGemmX16Tall;
      NormedInput in = normedInput(*o, normed && rows != kRowsGemm && !x16);
      if (x16) // x is the step's 16-bit copy (addGemm), or the SwiGLU its gate/up GEMM wrote
        in.x = ptr("const float*", act16 ? *act16_ : *x16_);
      const std::string w =
          x16 && mapped ? raw(tensorMapOf(o->inputs[1], outF, inF, 128)) : raw(o->inputs[1]);
      std::string blocks = slice;
      if (!in.norm.empty() && blocks.empty())
        blocks = "ninfer::dev::wholeGrid()";
      return head + ", " + std::to_string(rows) + tail + ">(" + in.x + ", " + w +
             ", " + (bias ? raw(o->inputs[2]) : std::string("nullptr")) + ", " +
             (residual ? ptr("const float*", o->inputs.back()) : std::string("nullptr")) + ", " +
             ptr("float*", o->outputs[0]) + ", state" + (blocks.empty() ? "" : ", " + blocks) +
             in.norm + ")";
    };
  }

  // The x argument of a linear op's call and its fused-norm argument (", RowNorm<...>{...}"
  // or empty): the norm's input where LaunchFusion.cpp fused one and `normed` (the launch
  // can take it), else the op's own input.
  struct NormedInput {
    std::string x, norm;
  };
  NormedInput normedInput(const OpT &op, bool normed) {
    const int norm = fusions_.normOf[indexOf(op)];
    if (!normed || norm < 0)
      return {ptr("const float*", op.inputs[0]), ""};
    const OpT &n = *plan_.ops[size_t(norm)];
    const uint32_t weight = n.inputs[1];
    return {ptr("const float*", n.inputs[0]),
            ", ninfer::dev::RowNorm<" + std::to_string(int(buf(weight).dtype)) + ">{" +
                raw(weight) + ", " + floatLiteral(n.attrs.AsRmsNormAttrs()->eps) + "}"};
  }

  size_t indexOf(const OpT &op) const { return opIndices_.at(&op); }


  // A linear op's launches (ROWS of codegen/kernels/common.cuh): a GEMV kernel for
  // steps of at most kLinearGemvRows tokens and a GEMM kernel for longer steps, so
  // neither carries the other's registers and shared memory; the lm_head (last row
  // only) has the one-row GEMV in single-sequence steps and, in a plan of several
  // sequences, the GEMV of every row in batch steps (a row per sequence).
  Status addLinearKernels(OpT &op, const plan::LinearAttrsT &a, const LinearKernel &k) {
    LaunchShape shape{{k.blocks, 1, 1}, {0, 0, 0}, {kThreads, 1, 1}};
    shape.minBlocksPerSm = k.gemvBlocksPerSm;
    shape.waitsItself = k.gemvWaitsItself;
    const uint32_t oneTokenBlocks = std::min(oneTokenGrid(k.oneTokenPerSm), k.bulkTiles);
    // The GEMV of 2..8 rows: gemv_quant_rows.cuh where it applies.
    const auto addRowsGemv = [&](LaunchShape gemvShape) {
      if (!k.rowsCall || !gemv::rowsPays(k.rowsBits, int(a.in_features), int(k.bulkTiles)))
        return addKernel(op, k.suffix + "_gemv", k.call(kRowsGemv, ""), gemvShape);
      const uint32_t blocks = rowsBlocks({k.bulkTiles}, k)[0];
      LaunchShape shape = rowsShape(k, blocks, k.rowsShared);
      shape.minTokens = gemvShape.minTokens;
      shape.maxTokens = gemvShape.maxTokens;
      shape.steps = gemvShape.steps;
      return addKernel(op, k.suffix + "_rows",
                       k.rowsCall(kRowsGemv, "ninfer::dev::wholeGrid()" + rowsTail(k, 0)),
                       shape);
    };
    if (a.last_row_only) {
      LaunchShape last = shape;
      if (k.oneTokenCall) { // a row of any step: the one-token kernel without the token limit
        last = oneTokenShape(oneTokenBlocks, k.oneTokenShared, k.oneTokenPerSm);
        last.maxTokens = 0;
      }
      last.steps = plan::LaunchSteps::Sequence;
      NINFER_RETURN_IF_ERROR(
          addKernel(op, k.suffix, (k.oneTokenCall ? k.oneTokenCall : k.call)(kRowsLast, ""), last));
      if (maxBatch() == 1)
        return Status::ok();
      shape.steps = plan::LaunchSteps::Batch;
      shape.maxTokens = static_cast<uint32_t>(maxBatch());
      if (k.oneTokenCall) { // batch steps of one row: the one-token kernel
        LaunchShape one = oneTokenShape(oneTokenBlocks, k.oneTokenShared, k.oneTokenPerSm);
        one.steps = plan::LaunchSteps::Batch;
        NINFER_RETURN_IF_ERROR(
            addKernel(op, k.suffix + "_one", k.oneTokenCall(kRowsGemv, ""), one));
        shape.minTokens = 2;
      }
      return addRowsGemv(shape);
    }
    shape.maxTokens = kLinearGemvRows;
    if (k.oneTokenCall) {
      NINFER_RETURN_IF_ERROR(
          addKernel(op, k.suffix + "_one", k.oneTokenCall(kRowsGemv, ""),
                    oneTokenShape(oneTokenBlocks, k.oneTokenShared, k.oneTokenPerSm)));
      shape.minTokens = 2;
    }
    NINFER_RETURN_IF_ERROR(addRowsGemv(shape));
    return addLinearGemm(op, k);
  }

  // The GEMM launch for steps of more than kLinearGemvRows tokens (none when the
  // plan's steps are never that long).
  Status addLinearGemm(OpT &op, const LinearKernel &k) {
    if (maxRows() <= kLinearGemvRows)
      return Status::ok();
    if (k.mmaGemm && choices_.tensorCoreGemm)
      return addGemm(op, k.suffix + "_gemm", {op.attrs.AsLinearAttrs()->out_features}, true,
                     k.gemmDType, [&](int rows, const std::vector<uint32_t> &) {
                       return k.call(rows, "");
                     });
    LaunchShape shape{{k.blocks, 1, 1}, {0, 0, 0}, {kThreads, 1, 1}};
    shape.minTokens = kLinearGemvRows + 1;
    return addKernel(op, k.suffix + "_gemm", k.call(kRowsGemm, ""), shape);
  }

  // Group-quantized weights (Q8..Q2, plan dtypes of ninfer/QuantDType.h):
  // [rows, cols] packed as QuantFormats.h says, 16-byte aligned.
  Status checkQuantWeight(const OpT &op, uint32_t index, int64_t rows, int64_t cols,
                          quant::QuantFormatTraits &traits) const {
    const BufferT &w = buf(index);
    const int format = quant::formatOfPlanDType(int(w.dtype));
    traits = quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format));
    const uint64_t need =
        uint64_t(quant::quantTensorBytes(traits.bits, traits.groupSize, rows, cols));
    if (w.kind != BufferKind::Weight || !quant::isQuantizableCols(cols) || w.size_bytes != need ||
        !aligned16(index))
      return fail(op, std::string(traits.name) + " weight '" + w.name +
                          "' needs columns a multiple of 128, " + std::to_string(need) +
                          " bytes and a 16-byte aligned segment");
    return Status::ok();
  }

  // codegen/kernels/linear_quant.cuh: GEMV for few rows, dequantized tiles for more.
  Status describeLinearQuant(OpT &op, const plan::LinearAttrsT &a, LinearKernel &k) {
    quant::QuantFormatTraits traits;
    NINFER_RETURN_IF_ERROR(
        checkQuantWeight(op, op.inputs[1], a.out_features, a.in_features, traits));
    if (!aligned16(op.inputs[0]))
      return fail(op, "quantized linear needs a 16-byte aligned input buffer");
    int biasType = 0;
    if (a.has_bias) {
      NINFER_RETURN_IF_ERROR(checkWeight(op, op.inputs[2], a.out_features, "bias"));
      biasType = int(buf(op.inputs[2]).dtype);
    }
    std::ostringstream args; // the template arguments up to N, of both kernel functions
    args << traits.bits << ", " << traits.groupSize << ", " << biasType << ", "
         << (a.has_bias ? "true" : "false") << ", " << a.in_features << ", " << a.out_features;
    k.suffix = "linear_quant";
    k.mmaGemm = true;
    k.gemmDType = int(DType::F16); // QuantTileStager decodes to f16
    k.call = linearCall(op, a, "ninfer::dev::linearQuant<" + args.str());
    // gemv_quant_mma.cuh's rows per block (the sm_75 GEMV and the tiled path
    // grid-stride, so any grid is correct for them). 3 blocks per SM: it fits 80
    // registers without spilling (sm_90). Its wrapper waits for the previous kernel first:
    // waiting after the first weight loads instead (as linear.cuh's GEMV does) took the 8B
    // q4 batch plan's 8-row step from 2.65 to 2.72-2.73 ms, and with every batch-step kernel
    // also triggering early, 2.66 (H200).
    k.blocks =
        static_cast<uint32_t>(ceilDiv(a.out_features, gemv::mmaRowsPerBlock(a.out_features)));
    k.gemvBlocksPerSm = 3;
    const gemv::BulkLayout layout = gemv::bulkLayout(traits.bits, traits.groupSize, a.in_features,
                                                     a.out_features, false, choices_.deepBulkRing);
    if (choices_.bulkGemv && layout.fits) {
      noteDeepRing(layout);
      k.oneTokenCall =
          linearCall(op, a, "ninfer::dev::linearQuantOneToken<" + args.str(), "", true);
      k.bulkTiles = static_cast<uint32_t>(a.out_features / gemv::kBulkTileRows);
      k.oneTokenShared = static_cast<uint32_t>(layout.sharedBytes);
      const gemv::RowsLayout rows =
          gemv::bulkRowsLayout(traits.bits, traits.groupSize, a.in_features, a.out_features);
      if (rows.fits) {
        k.rowsCall = linearCall(op, a, "ninfer::dev::linearQuantRows<" + args.str());
        k.rowsBits = traits.bits;
        k.rowsParts = static_cast<uint32_t>(gemv::rowsParts(traits.bits, int(a.in_features)));
        k.rowsPerSm =
            static_cast<uint32_t>(gemv::rowsBlocksPerSm(traits.bits, int(a.in_features)));
        k.rowsGrid = static_cast<uint32_t>(gemv::rowsGridBlocks(traits.bits, int(a.in_features)));
        k.rowsShared = static_cast<uint32_t>(rows.sharedBytes);
        k.rowsMap = [this, &op] { return rowsCodeMap(op, gemv::kBulkTileRows); };
      }
    }
    return Status::ok();
  }

  Status emitEmbeddingQuant(OpT &op, const plan::EmbeddingAttrsT &a) {
    quant::QuantFormatTraits traits;
    NINFER_RETURN_IF_ERROR(checkQuantWeight(op, op.inputs[1], a.vocab, a.dim, traits));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.outputs[0], maxRows(), a.dim, "output"));
    std::ostringstream call;
    call << "ninfer::dev::embeddingQuant<" << traits.bits << ", " << traits.groupSize << ", "
         << a.dim << ", " << a.vocab << ", " << kThreads << ">(" << ptr("const int*", op.inputs[0])
         << ", " << raw(op.inputs[1]) << ", " << ptr("float*", op.outputs[0]) << ", state)";
    return addKernel(op, "embedding_quant", call.str(), perTokenRows(rowBlocks(a.dim)));
  }

  // Ternary weights: codegen/kernels/linear_ternary.cuh (TQ2) and
  // linear_tq1.cuh (TQ1). Rows and arity were checked by describeLinear.
  Status describeLinearTernary(OpT &op, const plan::LinearAttrsT &a, LinearKernel &k) {
    const BufferT &w = buf(op.inputs[1]);
    const int dtype = int(w.dtype);
    const bool tq1 = w.dtype == DType::TQ1;
    const int64_t need = ternary::tensorBytesOf(dtype, a.out_features, a.in_features);
    if (w.kind != BufferKind::Weight || !ternary::isPackableColsOf(dtype, a.in_features) ||
        w.size_bytes != uint64_t(need) || !aligned16(op.inputs[1]) || !aligned16(op.inputs[0]))
      return fail(op, std::string(plan::EnumNameDType(w.dtype)) + " weight '" + w.name +
                          "' needs in_features a multiple of " +
                          std::to_string(ternary::colsMultipleOf(dtype)) + ", " +
                          std::to_string(need) + " bytes and 16-byte aligned weight and input");
    int biasType = 0;
    if (a.has_bias) {
      NINFER_RETURN_IF_ERROR(checkWeight(op, op.inputs[2], a.out_features, "bias"));
      biasType = int(buf(op.inputs[2]).dtype);
    }
    std::ostringstream head;
    head << (tq1 ? "ninfer::dev::linearTq1<" : "ninfer::dev::linearTernary<") << biasType << ", "
         << (a.has_bias ? "true" : "false") << ", " << a.in_features << ", " << a.out_features;
    k.call = linearCall(op, a, head.str());
    if (tq1) {
      // gemv_tq1_mma.cuh's rows per block, as describeLinearQuant (the sm_75 GEMV and
      // the tiled path grid-stride, so any grid is correct for them). Blocks per SM:
      // GemvShapes.h's tq1MmaBlocksPerSm (2 where the codes of three quads are in flight;
      // at 3 blocks, 85 registers, two quads ahead spilled). 8B TQ1 decode on the H200:
      // 418.7 / 419.1 tok/s with one quad ahead at 3 blocks, 429.9 / 431.4 with two at 3,
      // 462.9 / 462.8 with three at 2 for every shape (all of them ahead: 465.3 / 464.9).
      k.suffix = "linear_tq1";
      k.blocks =
          static_cast<uint32_t>(ceilDiv(a.out_features, gemv::mmaRowsPerBlock(a.out_features)));
      k.gemvBlocksPerSm =
          uint32_t(gemv::tq1MmaBlocksPerSm(int(a.in_features), int(a.out_features)));
      k.swiGluBlocksPerSm =
          uint32_t(gemv::tq1MmaBlocksPerSm(int(a.in_features), int(2 * a.out_features)));
      // One-token steps on sm_90+: gemv_tq1_bulk.cuh, which takes a fused RMSNorm
      // (LaunchFusion.cpp's normRows), at tq1BulkBlocksPerSm blocks per SM.
      const gemv::Tq1BulkLayout layout =
          gemv::tq1BulkLayout(int(a.in_features), int(a.out_features), false);
      if (choices_.bulkGemv && layout.fits) {
        k.oneTokenPerSm = static_cast<uint32_t>(gemv::tq1BulkBlocksPerSm(layout));
        std::ostringstream args;
        args << "ninfer::dev::linearTq1OneToken<" << biasType << ", "
             << (a.has_bias ? "true" : "false") << ", " << a.in_features << ", "
             << a.out_features;
        k.oneTokenCall = linearCall(op, a, args.str(), "", /*normed=*/true);
        k.bulkTiles = static_cast<uint32_t>(a.out_features / gemv::kBulkTileRows);
        k.oneTokenShared = static_cast<uint32_t>(layout.sharedBytes);
      }
    } else {
      k.suffix = "linear_tq2";
      k.blocks = static_cast<uint32_t>(
          ceilDiv(a.out_features, gemv::ternaryRowsPerBlock(a.out_features)));
    }
    // Longer steps on the tensor-core GEMMs where K is whole k-steps (every TQ2 shape;
    // gemm_ternary.cuh decodes the weights to f16), the tiled select/add GEMM otherwise.
    k.mmaGemm = a.in_features % gemm::kTileK == 0;
    k.gemmDType = int(DType::F16);
    return Status::ok();
  }

  // rope.cuh's SCALING argument for a Rope op's attributes.
  static const char *ropeScaling(const plan::RopeAttrsT &a) {
    if (a.dynamic_factor > 0.0f)
      return "ninfer::dev::kRopeDynamicNtk";
    return a.long_factors ? "ninfer::dev::kRopeLongFactors" : "ninfer::dev::kRopeFixed";
  }

  Status emitRope(OpT &op, const plan::RopeAttrsT &a) {
    NINFER_RETURN_IF_ERROR(checkArity(op, 2, 2, 1));
    if (a.heads <= 0 || a.head_dim <= 0 || a.head_dim % 2 != 0)
      return fail(op, "heads must be positive and head_dim positive and even");
    if (a.dynamic_factor > 0.0f && (a.original_max_positions <= 0 || a.head_dim <= 2))
      return fail(op, "dynamic NTK needs original_max_positions > 0 and head_dim > 2");
    if (a.long_factors && (a.dynamic_factor > 0.0f || a.original_max_positions <= 0))
      return fail(op, "LongRoPE's long factors need original_max_positions > 0 and no dynamic NTK");
    const int64_t width = int64_t(a.heads) * a.head_dim;
    NINFER_RETURN_IF_ERROR(checkRows(op, op.inputs[0], maxRows(), width, "input"));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.outputs[0], maxRows(), width, "output"));
    NINFER_RETURN_IF_ERROR(
        checkWeight(op, op.inputs[1], a.head_dim / (a.long_factors ? 1 : 2), "inv_freq"));
    if (buf(op.inputs[1]).dtype != DType::F32)
      return fail(op, "inv_freq must be F32");
    // Fused with the other Rope op and the KV append (LaunchFusion.cpp): the first op carries
    // the one launch, the second has none.
    if (const int fused = fusions_.ropeAppendOf[opIndex_]; fused >= 0)
      return fusions_.ropeAppends[fused].first == opIndex_
                 ? addRopeAppend(op, fusions_.ropeAppends[fused])
                 : Status::ok();
    LaunchShape shape = perTokenRows(rowBlocks(width / 2));
    std::ostringstream call;
    call << "ninfer::dev::rope<" << a.heads << ", " << a.head_dim << ", " << ropeScaling(a) << ", "
         << kThreads << ">(" << ptr("const float*", op.inputs[0]) << ", "
         << ptr("const float*", op.inputs[1]) << ", " << ptr("float*", op.outputs[0]) << ", "
         << floatLiteral(a.attention_factor) << ", " << floatLiteral(a.theta) << ", "
         << floatLiteral(a.dynamic_factor) << ", " << a.original_max_positions << ", state)";
    return addKernel(op, "rope", call.str(), shape);
  }

  // codegen/kernels/rope.cuh ropeAppend for every step, carried by the first of the two
  // Rope ops (LaunchFusion.cpp checked the pattern).
  Status addRopeAppend(OpT &first, const RopeAppend &f) {
    const OpT &attention = *plan_.ops[f.attention];
    const plan::AttentionAttrsT &a = *attention.attrs.AsAttentionAttrs();
    const OpT &ropeQ = plan_.ops[f.first]->outputs[0] == attention.inputs[0] ? *plan_.ops[f.first]
                                                                             : *plan_.ops[f.second];
    const plan::RopeAttrsT &r = *ropeQ.attrs.AsRopeAttrs();
    const int64_t half = a.head_dim / 2;
    const uint32_t qBlocks = rowBlocks(a.heads * half), kBlocks = rowBlocks(a.kv_heads * half);
    const uint32_t vBlocks = rowBlocks(int64_t(a.kv_heads) * a.head_dim);
    std::ostringstream call;
    call << "ninfer::dev::ropeAppend<" << a.heads << ", " << a.kv_heads << ", " << a.head_dim
         << ", " << ropeScaling(r) << ", " << a.context << ", " << qBlocks << ", " << kBlocks
         << ", " << kThreads << ">(" << ptr("float*", attention.inputs[0]) << ", "
         << ptr("float*", attention.inputs[1]) << ", " << ptr("const float*", attention.inputs[2])
         << ", " << ptr("const float*", ropeQ.inputs[1]) << ", " << raw(attention.inputs[3]) << ", "
         << raw(attention.inputs[4]) << ", " << floatLiteral(r.attention_factor) << ", "
         << floatLiteral(r.theta) << ", " << floatLiteral(r.dynamic_factor) << ", "
         << r.original_max_positions << ", state)";
    LaunchShape shape = perTokenRows(qBlocks + kBlocks + vBlocks);
    if (!f.decodeRopes)
      return addKernel(first, "rope_append", call.str(), shape);
    // The decode kernel rotates and appends in single-sequence one-token steps; batch steps
    // keep this launch (see emitAttention).
    shape.minTokens = 2;
    shape.steps = plan::LaunchSteps::Sequence;
    NINFER_RETURN_IF_ERROR(addKernel(first, "rope_append", call.str(), shape));
    if (maxBatch() == 1)
      return Status::ok();
    args_ = first.launches.back()->args;
    shape.minTokens = 0;
    shape.steps = plan::LaunchSteps::Batch;
    shape.triggersInBatch =
        tensorCoreDecode(choices_, buf(attention.inputs[3]).dtype, a.head_dim);
    return addKernel(first, "rope_append", call.str(), shape);
  }

  // The decode kernel's DecodeRope argument (rope.cuh) where it rotates q and k and appends
  // them itself (RopeAppend::decodeRopes), else nothing.
  std::string decodeRope(const OpT &attention, const plan::AttentionAttrsT &a) {
    const int fused = fusions_.ropeAppendOf[opIndex_];
    if (fused < 0 || !fusions_.ropeAppends[fused].decodeRopes)
      return "";
    // Either Rope op: they share inv_freq and attributes (LaunchFusion.cpp checked).
    const OpT &rope = *plan_.ops[fusions_.ropeAppends[fused].first];
    const plan::RopeAttrsT &r = *rope.attrs.AsRopeAttrs();
    std::ostringstream arg;
    arg << ", ninfer::dev::DecodeRope<" << a.head_dim << ", " << ropeScaling(r) << ">{"
        << ptr("const float*", attention.inputs[1]) << ", "
        << ptr("const float*", attention.inputs[2]) << ", " << ptr("const float*", rope.inputs[1])
        << ", " << raw(attention.inputs[3]) << ", " << raw(attention.inputs[4]) << ", "
        << floatLiteral(r.attention_factor) << ", " << floatLiteral(r.theta) << ", "
        << floatLiteral(r.dynamic_factor) << ", " << r.original_max_positions << "}";
    return arg.str();
  }

  Status emitAttention(OpT &op, const plan::AttentionAttrsT &a) {
    NINFER_RETURN_IF_ERROR(checkArity(op, 5, 6, 1));
    if (a.heads <= 0 || a.kv_heads <= 0 || a.head_dim <= 0 || a.context <= 0 || a.window < 0)
      return fail(op, "heads, kv_heads, head_dim, context must be positive, window >= 0");
    if (a.heads % a.kv_heads != 0)
      return fail(op, "heads " + std::to_string(a.heads) + " is not a multiple of kv_heads " +
                          std::to_string(a.kv_heads));
    if (a.head_dim > kMaxHeadDim || a.head_dim % 8 != 0)
      return fail(op, "head_dim " + std::to_string(a.head_dim) +
                          " is not supported (a multiple of 8, at most " +
                          std::to_string(kMaxHeadDim) + ")");
    const int64_t qWidth = int64_t(a.heads) * a.head_dim;
    const int64_t kvWidth = int64_t(a.kv_heads) * a.head_dim;
    NINFER_RETURN_IF_ERROR(checkRows(op, op.inputs[0], maxRows(), qWidth, "q"));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.inputs[1], maxRows(), kvWidth, "k"));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.inputs[2], maxRows(), kvWidth, "v"));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.outputs[0], maxRows(), qWidth, "output"));
    if (!aligned16(op.inputs[0]))
      return fail(op, "q buffer '" + buf(op.inputs[0]).name + "' must be 16-byte aligned");
    const DType kvType = buf(op.inputs[3]).dtype;
    for (int i = 3; i <= 4; ++i) {
      const BufferT &cache = buf(op.inputs[i]);
      if (cache.kind != BufferKind::KvCache ||
          (cache.dtype != DType::F16 && cache.dtype != DType::Q8_KV) || cache.dtype != kvType ||
          !aligned16(op.inputs[i]))
        return fail(op, "cache buffer '" + cache.name +
                            "' must be a 16-byte aligned F16 or Q8_KV KvCache like the other");
      const std::vector<int64_t> slotShape{a.context, a.kv_heads, a.head_dim};
      std::vector<int64_t> shape = slotShape;
      if (maxBatch() > 1)
        shape.insert(shape.begin(), maxBatch());
      if (kvType == DType::Q8_KV && cache.shape != shape)
        return fail(op, "Q8_KV cache '" + cache.name + "' must have shape [" +
                            (maxBatch() > 1 ? "max_batch, " : "") +
                            "context, kv_heads, head_dim]");
      const uint64_t need = uint64_t(maxBatch()) * kvSlotBytes(kvType, a);
      if (cache.size_bytes < need)
        return fail(op, "cache buffer '" + cache.name + "' holds " +
                            std::to_string(cache.size_bytes) + " bytes, needs " +
                            std::to_string(need));
    }
    // Without a workspace the decode kernel runs one split per kv head.
    int splits = 1;
    if (op.inputs.size() == 6) {
      const BufferT &workspace = buf(op.inputs[5]);
      // One decode workspace per row of a batch step.
      const uint64_t need = uint64_t(maxBatch()) *
                            attentionWorkspaceBytes(a.heads, a.kv_heads, a.head_dim, a.context);
      if (workspace.kind != BufferKind::Workspace || workspace.size_bytes < need ||
          workspace.offset % 16 != 0)
        return fail(op, "workspace buffer '" + workspace.name + "' must be a 16-byte aligned " +
                            "Workspace of at least " + std::to_string(need) + " bytes");
      splits = attentionDecodeSplits(a.context);
    }
    const std::string kvDtype = std::to_string(int(kvType));
    const std::string caches = raw(op.inputs[3]) + ", " + raw(op.inputs[4]);

    std::ostringstream append;
    append << "ninfer::dev::kvAppend<" << kvDtype << ", " << a.kv_heads << ", " << a.head_dim
           << ", " << a.context << ", " << kThreads << ">(" << ptr("const float*", op.inputs[1])
           << ", " << ptr("const float*", op.inputs[2]) << ", " << caches << ", state)";
    const uint32_t appendBlocks = kvType == DType::Q8_KV
                                      ? static_cast<uint32_t>(ceilDiv(a.kv_heads, kThreads / 32))
                                      : rowBlocks(kvWidth);
    // (None where the Rope ops' fused launch appends.)
    if (fusions_.ropeAppendOf[opIndex_] < 0)
      NINFER_RETURN_IF_ERROR(addKernel(op, "kv_append", append.str(), perTokenRows(appendBlocks)));

    const int group = a.heads / a.kv_heads;
    const bool mmaDecode = tensorCoreDecode(choices_, kvType, a.head_dim);
    // With the RoPE fused in, the kernel waits for the previous one itself, after its first
    // copies of cache rows (attentionDecodeMma).
    const std::string rope = decodeRope(op, a);
    // batch: the tensor-core kernel's split rule of batch steps (AttentionShapes.h). The
    // CUDA-core kernel keeps every split in batch steps: with kSplitBatch, the 8B q4 int8-KV
    // batch plan's step (int8 caches took that kernel then) at batch 2 took 2.95-2.97
    // against 2.59-2.61 ms at 512 keys and 4.74 against 3.33 at 3,968; at batch 8, the same
    // at 512 and 7.44 against 6.27 at 3,968 (H200).
    const auto decode = [&](bool batch) {
      std::ostringstream call;
      call << "ninfer::dev::" << (mmaDecode ? "attentionDecodeMma<" : "attentionDecode<")
           << a.heads << ", " << a.kv_heads << ", " << a.head_dim << ", " << a.window << ", "
           << a.context << ", " << kvDtype << ", " << splits
           << (mmaDecode && batch ? ", ninfer::attn::kSplitBatch" : "") << ">("
           << ptr("const float*", op.inputs[0]) << ", " << raw(op.inputs[3]) << ", "
           << raw(op.inputs[4]) << ", " << ptr("float*", op.outputs[0]) << ", "
           << (op.inputs.size() == 6 ? raw(op.inputs[5]) : std::string("nullptr")) << ", "
           << floatLiteral(a.scale) << ", state";
      return call.str();
    };
    const uint32_t decodeBlocks = static_cast<uint32_t>(a.kv_heads * decodeHeadChunks(group));
    // The single-sequence tensor-core kernel's rule takes at most kDecodeMmaMaxSplits splits:
    // its grid has no rows past them (8B q4 decode on the H200 with 64 rows, 32 of them always
    // empty: 594.3-598.1 tok/s against 599.3 with 32).
    const int sequenceSplits = mmaDecode ? std::min(splits, attn::kDecodeMmaMaxSplits) : splits;
    LaunchShape decodeShape{{decodeBlocks, 1, static_cast<uint32_t>(sequenceSplits)},
                            {0, 0, 0},
                            {kDecodeThreads, 1, 1},
                            static_cast<uint32_t>(
                                mmaDecode ? decodeMmaSharedBytes(a.head_dim, group) : 0),
                            1,
                            1};
    decodeShape.steps = plan::LaunchSteps::Sequence;
    decodeShape.waitsItself = !rope.empty();
    NINFER_RETURN_IF_ERROR(
        addKernel(op, "attention_decode", decode(false) + rope + ")", decodeShape));
    if (maxBatch() > 1) { // a grid row per row of a batch step
      args_ = op.launches.back()->args; // and the same buffers (addKernel took them)
      decodeShape.gridBase[1] = 0;
      decodeShape.gridPerToken[1] = 1;
      decodeShape.gridBase[2] = static_cast<uint32_t>(
          mmaDecode ? std::min(splits, attn::kBatchDecodeSplits) : splits);
      decodeShape.maxTokens = static_cast<uint32_t>(maxBatch());
      decodeShape.steps = plan::LaunchSteps::Batch;
      // Without the RoPE (the fused RoPE launch runs in batch steps): with it the 8B q4 batch
      // plan's 8-row step was no faster, 3.115-3.123 against 3.041-3.049 ms, or 3.032-3.042
      // against 3.029-3.030 with batch steps triggering early but for the attention (H200).
      // The tensor-core kernel waits itself, after copying its first tiles of earlier rows,
      // and the RoPE launch before it triggers early (addRopeAppend).
      decodeShape.waitsItself = mmaDecode;
      NINFER_RETURN_IF_ERROR(addKernel(op, "attention_decode", decode(true) + ")", decodeShape));
    }

    // Prefill: the tensor-core kernel where it takes the cache; one block per (head, query
    // tile), tiles past the step return.
    const bool mmaPrefill = tensorCorePrefill(choices_, kvType, a.head_dim);
    std::ostringstream prefill;
    LaunchShape prefillShape;
    if (mmaPrefill) {
      prefill << "ninfer::dev::attentionPrefillMma<" << a.heads << ", " << a.kv_heads << ", "
              << a.head_dim << ", " << a.window << ", " << a.context << x16Type() << ">(";
      const uint32_t tiles = static_cast<uint32_t>(ceilDiv(maxRows(), attn::kPrefillMmaQueries));
      prefillShape = {{static_cast<uint32_t>(a.heads), tiles, 1},
                      {0, 0, 0},
                      {attn::kPrefillMmaThreads, 1, 1},
                      static_cast<uint32_t>(attn::prefillMmaSharedBytes(a.head_dim)),
                      2};
    } else {
      prefill << "ninfer::dev::attentionPrefill<" << a.heads << ", " << a.kv_heads << ", "
              << a.head_dim << ", " << a.window << ", " << a.context << ", " << kvDtype << ", "
              << prefillQueriesPerWarp(a.head_dim) << ">(";
      prefillShape = {{static_cast<uint32_t>(a.heads), 0, 1},
                      {0, 1, 0},
                      {kPrefillThreads, 1, 1},
                      prefillSharedBytes(a.head_dim),
                      2};
    }
    // (min_tokens 2: decode steps of 1 token only launch the decode kernel.)
    prefill << ptr("const float*", op.inputs[0]) << ", " << raw(op.inputs[3]) << ", "
            << raw(op.inputs[4]) << ", " << ptr("float*", op.outputs[0]) << ", "
            << floatLiteral(a.scale) << ", state"
            << (mmaPrefill ? x16Argument(int64_t(a.heads) * a.head_dim) : std::string()) << ")";
    prefillShape.steps = plan::LaunchSteps::Sequence;
    return addKernel(op, "attention_prefill", prefill.str(), prefillShape);
  }

  Status checkElementwise(OpT &op, int dim) {
    NINFER_RETURN_IF_ERROR(checkArity(op, 2, 2, 1));
    if (dim <= 0)
      return fail(op, "dim must be positive");
    NINFER_RETURN_IF_ERROR(checkRows(op, op.inputs[0], maxRows(), dim, "first input"));
    NINFER_RETURN_IF_ERROR(checkRows(op, op.inputs[1], maxRows(), dim, "second input"));
    return checkRows(op, op.outputs[0], maxRows(), dim, "output");
  }

  Status emitElementwise(OpT &op, int dim, const char *fn, const char *suffix,
                         uint32_t minTokens = 0) {
    NINFER_RETURN_IF_ERROR(checkElementwise(op, dim));
    std::ostringstream call;
    call << "ninfer::dev::" << fn << "<" << dim << ", " << kThreads << ">("
         << ptr("const float*", op.inputs[0]) << ", " << ptr("const float*", op.inputs[1]) << ", "
         << ptr("float*", op.outputs[0]) << ", state)";
    LaunchShape shape = perTokenRows(rowBlocks(dim));
    shape.minTokens = minTokens;
    return addKernel(op, suffix, call.str(), shape);
  }

  Status emitSwiGlu(OpT &op, const plan::SwiGluAttrsT &a) {
    // Fused into its gate/up GEMV for short steps: the launch runs the longer ones, unless
    // the gate/up GEMM computes it there too (no launch at all).
    if (fusions_.swiGluGemmType[opIndex_] != 0)
      return checkElementwise(op, a.dim);
    return emitElementwise(op, a.dim, "swiGlu", "swiglu",
                           fusions_.swiGluFused[opIndex_] ? kLinearGemvRows + 1 : 0);
  }
  Status emitAdd(OpT &op, const plan::AddAttrsT &a) {
    return emitElementwise(op, a.dim, "add", "add");
  }

  plan::PlanT &plan_;
  size_t opIndex_ = 0;
  FusionChoices choices_;
  bool trace_ = false; // KernelOptions::trace
  KernelReport report_;
  // The 16-bit workspace buffers (reserveX16, reserveAct16), once a GEMM reads them.
  std::optional<uint32_t> x16_, act16_, splitPartials_, splitTickets_;
  std::vector<plan::TensorMapT> tensorMaps_; // the GEMMs' weight tensor maps (tensorMapOf)
  static constexpr uint64_t kTensorMapBytes = 128; // sizeof(CUtensorMap)
  std::unordered_map<const OpT *, size_t> opIndices_; // op -> its index in plan_.ops
  static constexpr const char *kX16Name = "gemm.x16";
  static constexpr const char *kAct16Name = "gemm.act16";
  static constexpr const char *kSplitPartialsName = "gemv.partials";
  static constexpr const char *kSplitTicketsName = "gemv.tickets";
  LaunchFusions fusions_;

  std::ostringstream source_;
  std::vector<std::string> functions_;
  std::vector<uint32_t> args_;                    // buffers of the wrapper being written
  std::map<std::string, uint32_t> kernelByBody_; // wrapper text -> function index
};

} // namespace

int attentionDecodeSplits(int context) {
  return std::max(1, std::min(kMaxDecodeSplits, ceilDiv(context, kDecodeMinKeys)));
}

uint64_t attentionWorkspaceBytes(int heads, int kvHeads, int headDim, int context) {
  const uint64_t partials = uint64_t(heads) * uint64_t(attentionDecodeSplits(context));
  const uint64_t counters = uint64_t(kvHeads) * uint64_t(decodeHeadChunks(heads / kvHeads));
  return (4 * (partials * uint64_t(headDim + 2) + counters) + 15) / 16 * 16; // rows stay aligned
}

bool abSwitchSet(const char *name) {
  const char *value = std::getenv(name);
  return value && std::string(value) != "0";
}

Status emitKernels(plan::PlanT &plan, const KernelOptions &options) {
  if (options.archs.empty())
    return Status::error("no target GPU architecture given (e.g. sm_90)");
  if (plan.max_step_tokens <= 0)
    return Status::error("plan has max_step_tokens " + std::to_string(plan.max_step_tokens) +
                         ", expected > 0");
  if (plan.max_batch < 1 || plan.max_batch > kMaxBatch || plan.max_batch > plan.max_step_tokens)
    return Status::error("plan has max_batch " + std::to_string(plan.max_batch) +
                         ", expected 1 to " + std::to_string(kMaxBatch) +
                         " and at most max_step_tokens");
  int lowest = -1;
  std::string lowestArch;
  for (const std::string &arch : options.archs) {
    const int number = nvrtc::archNumber(arch);
    if (number < 0 || arch.rfind("sm_", 0) != 0)
      return Status::error("'" + arch + "' is not a GPU architecture (expected e.g. sm_90)");
    if (lowest < 0 || number < lowest) {
      lowest = number;
      lowestArch = arch;
    }
  }

  const bool tensorCoreGemm = lowest >= 80 && !abSwitchSet("NINFER_NO_TENSOR_CORES");
  const bool bulkGemv = lowest >= 90 && !abSwitchSet("NINFER_NO_BULK_GEMV");
  // wgmma needs the architecture-specific sm_90a code (the h100/h200 targets).
  bool allSm90a = true;
  for (const std::string &arch : options.archs)
    allSm90a = allSm90a && arch == "sm_90a";
  const bool wgmmaGemm = tensorCoreGemm && allSm90a && !abSwitchSet("NINFER_NO_WGMMA");
  const bool fuseNorms = !abSwitchSet("NINFER_NO_NORM_FUSION");
  FusionChoices choices;
  choices.fuseLaunches = options.fuseLaunches;
  choices.tensorCoreGemm = tensorCoreGemm;
  choices.bulkGemv = bulkGemv;
  choices.wgmmaGemm = wgmmaGemm;
  choices.fuseNorms = fuseNorms;
  choices.deepBulkRing = bulkGemv && options.deepBulkRing;
  Emitter emitter(plan, choices, options.trace);
  NINFER_RETURN_IF_ERROR(emitter.emitAll());
  if (options.report)
    options.report(emitter.report());
  if (options.beforeCompile)
    NINFER_RETURN_IF_ERROR(options.beforeCompile(plan));
  const std::string source = emitter.source();

  // One job per cubin, plus the PTX; NVRTC programs compile independently.
  std::vector<std::string> targets = options.archs;
  std::string ptxArch;
  if (options.embedPtx) {
    ptxArch = "compute_" + std::to_string(lowest);
    if (!lowestArch.empty() && lowestArch.back() == 'a')
      ptxArch += "a";
    targets.push_back(ptxArch);
  }
  std::vector<std::future<Result<std::string>>> jobs;
  for (const std::string &target : targets)
    jobs.push_back(std::async(std::launch::async, [&source, target] {
      return nvrtc::compile(source, "ninfer_kernels.cu", target);
    }));
  auto kernels = std::make_unique<plan::KernelModuleT>();
  kernels->functions = emitter.functions();
  kernels->source = source;
  for (const plan::TensorMapT &map : emitter.tensorMaps())
    kernels->tensor_maps.push_back(std::make_unique<plan::TensorMapT>(map));
  // Every kernel waits for its predecessor: the wrapper first thing, or the kernel itself
  // before it reads a result (LaunchShape::waitsItself).
  kernels->grid_dependency_wait = true;
  Status firstError = Status::ok();
  for (size_t i = 0; i < jobs.size(); ++i) {
    Result<std::string> code = jobs[i].get();
    if (options.progress)
      options.progress(static_cast<int>(i + 1), static_cast<int>(jobs.size()));
    if (!code) {
      if (firstError.isOk())
        firstError = code.status();
      continue;
    }
    if (i < options.archs.size()) {
      auto object = std::make_unique<plan::CodeObjectT>();
      object->arch = targets[i];
      object->cubin.assign(code->begin(), code->end());
      kernels->cubins.push_back(std::move(object));
    } else {
      kernels->ptx = std::move(*code);
      kernels->ptx_arch = ptxArch;
    }
  }
  if (!firstError.isOk())
    return firstError;
  plan.kernels = std::move(kernels);
  return Status::ok();
}

} // namespace ninfer
