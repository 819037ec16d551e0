// The CUDA executor: loads the plan's kernels (the cubin that matches the GPU,
// else the PTX through the driver's JIT), allocates one weight allocation, the
// activation and KV arenas, tokens, logits, the device pointer table and the
// device StepState, fills or uploads the weights, and runs a step as: one
// tokens copy, one StepState copy, the plan's launches in order on one stream,
// one logits copy, one synchronize. Every driver call is checked and its error
// names the op and kernel involved. Set NINFER_CUDA_SYNC=1 to synchronize after
// every op, so an asynchronous fault is attributed to the op that caused it.
//
// Decode steps (one token) replay a CUDA graph: the first one-token step is
// captured from the stream (the two HtoD copies from pinned staging, every
// launch, the logits DtoH copy) and instantiated once; later steps only write
// the pinned StepState and token, launch the graph and synchronize. This is
// correct for any position because the graph's kernels read pos from the
// device StepState, and buffer addresses never change after init. It turns
// ~100 cuLaunchKernel calls (several microseconds of host time each) into one
// cuGraphLaunch. Batch steps (several sequences, one token each) replay a
// graph per batch size, captured the same way at the first step of that size:
// rows' positions and sequences are in the device StepState too. Prefill
// steps launch kernels one by one (one step per prompt,
// so a graph would not be replayed). NINFER_CUDA_GRAPHS=0 disables graphs (A/B
// timing); a driver without the graph entry points, or a failed capture, falls
// back to plain launches with one note on stderr.
//
// On sm_90+ with a plan whose kernels wait for their predecessor
// (grid_dependency_wait), every launch after a step's first is a programmatic
// dependent launch, scheduled while the previous kernel drains (H200: +2% on
// an 8B q4 decode step, +12% on a 23M one; docs/performance.md). NINFER_PDL=0
// turns it off (A/B timing).
#include "StepCheck.h"
#include "ninfer/Executor.h"
#include "ninfer/Format.h"
#include "ninfer/Plan.h"
#include "ninfer/QuantDType.h"
#include "ninfer/StepAbi.h"

#include "CudaDriver.h"
#include "plan_generated.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

namespace ninfer {
namespace {

using plan::BufferKind;
using plan::DType;

constexpr int kFillBlocks = 1024;
constexpr int kFillThreads = 256;
constexpr uint64_t kAllocationAlignment = 256;
// The device's top-k results: kMaxTopKCandidates (value, id) pairs, the candidates' count and
// the row's non-NaN count, the row's mass (f64, nucleus steps) (kTopKResultBytes, copied to
// the host), the ticket; then per slice its bests and its non-NaN count.
constexpr uint64_t kTopKMassOffset = kMaxTopKCandidates * 8 + 8;
constexpr uint64_t kTopKResultBytes = kTopKMassOffset + 8;
constexpr uint64_t kTopKFixedBytes = kTopKResultBytes + 8;

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", double(bytes) / double(1ull << 30));
  return text;
}

int archNumberOf(const std::string &arch, const char *prefix) {
  const size_t len = std::strlen(prefix);
  if (arch.compare(0, len, prefix) != 0)
    return -1;
  int value = 0;
  size_t i = len;
  for (; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i)
    value = value * 10 + (arch[i] - '0');
  return i == len ? -1 : value;
}

class CudaExecutor final : public Executor {
public:
  CudaExecutor(const PlanFile &file, const CudaDriver &cu) : file_(file), cu_(cu) {}
  ~CudaExecutor() override;

  Status init(int ordinal);
  Status forwardSequence(int sequence, const int32_t *tokens, int n, int pos,
                         float *logits) override;
  Status forwardBatch(const int32_t *tokens, const int32_t *positions, const int32_t *sequences,
                      int batch, float *logits) override;
  bool picksGreedyTokens() const override { return argmax_ != nullptr; }
  int maxTopKCandidates() const override {
    return topk_ ? std::min(kMaxTopKCandidates, kTopKSliceValues / topKSlices_) : 0;
  }
  Status forwardSequenceTopK(int sequence, const int32_t *tokens, int n, int pos, int k,
                             TopKCandidates *candidates) override;
  Status forwardSequenceGreedy(int sequence, const int32_t *tokens, int n, int pos,
                               int32_t *id) override;
  bool samplesTokens() const override { return argmax_ && sample_; }
  Status forwardSequenceSample(int sequence, const int32_t *tokens, int n, int pos,
                               float temperature, double uniform, int32_t *id) override;
  bool picksNucleus() const override {
    return samplesMass_ && samplesTokens() && maxTopKCandidates() == kMaxTopKCandidates;
  }
  Status forwardSequenceNucleus(int sequence, const int32_t *tokens, int n, int pos,
                                float temperature, TopKCandidates *candidates,
                                double *mass) override;
  Status lastLogits(float *logits) override;
  bool drawsNucleus() const override { return nucleus_ != nullptr && picksNucleus(); }
  Status drawLastNucleus(float temperature, float topP, double uniform, int32_t *id) override;
  Status forwardBatchGreedy(const int32_t *tokens, const int32_t *positions,
                            const int32_t *sequences, int batch, int32_t *ids) override;
  int maxBatch() const override { return file_.plan().max_batch(); }
  std::string name() const override {
    const bool graphs = std::any_of(std::begin(decodeGraphs_), std::end(decodeGraphs_),
                                    [](CUgraphExec g) { return g != nullptr; });
    return "CUDA (" + deviceName_ + ", " + codeArch_ + (graphs ? ", graphs" : "") +
           (dependentLaunch_ ? ", pdl" : "") + ")";
  }
  uint64_t deviceMemoryBytes() const override { return allocatedBytes_; }
  bool timesKernels() const override { return cu_.hasEvents(); }
  Result<std::vector<LaunchTiming>> profileStep(const int32_t *tokens, int n, int pos) override {
    return profileSequence(0, tokens, n, pos);
  }
  Result<std::vector<LaunchTiming>> profileBatchStep(const int32_t *tokens,
                                                     const int32_t *positions,
                                                     const int32_t *sequences,
                                                     int batch) override;
  Result<StepTrace> traceStep(const int32_t* tokens, const int32_t* positions,
                              const int32_t* sequences, int batch) override;

private:
  struct LaunchInfo {
    CUfunction function;
    uint32_t gridBase[3];
    uint32_t gridPerToken[3];
    uint32_t block[3];
    uint32_t sharedBytes;
    uint32_t minTokens, maxTokens; // steps the launch runs in (maxTokens 0: no limit)
    plan::LaunchSteps steps;       // single-sequence steps, batch steps or both
    uint32_t op;
    uint32_t functionIndex;
    std::vector<uint32_t> bufferIndices; // the launch's KernelArgs, as plan buffer indices
    KernelArgs args;                     // resolved once the arenas exist
  };

  // What a step hands the host: the logits (a batch step's rows, else the last token's),
  // each of those rows' greedy token, or (single-sequence steps) the top-topK_ candidates
  // of its row, picked on the device, or its token drawn on the device with temperature_, or
  // (kNucleus) its top kMaxTopKCandidates candidates and its mass at nucleusTemperature_.
  enum Output { kLogits = 0, kGreedyIds = 1, kTopK = 2, kSampled = 3, kNucleus = 4, kOutputs = 5 };

  // Whether launch l runs in a step of n rows, a batch step or not (non-empty
  // grid, n in its token range, the step's kind among its steps).
  static bool runsAt(const LaunchInfo &l, int n, bool batch);
  Status selectCode(int ccMajor, int ccMinor, std::vector<char> &image, bool &isPtx);
  Status loadModule(const std::vector<char> &image, bool isPtx);
  // The candidates (the first k) of the last kTopK or kNucleus step, from the staging copy.
  void readCandidates(int k, TopKCandidates &candidates) const;
  // Sets a kernel argument of the step's sampling launch (the temperature, top-k's k) for
  // output's steps: a decode graph captured with another value is dropped, to be captured
  // anew.
  template <class T> void setSamplingParameter(Output output, T &parameter, T value) {
    if (decodeGraphs_[output] && parameter != value) {
      cu_.graphExecDestroy(decodeGraphs_[output]);
      decodeGraphs_[output] = nullptr;
    }
    parameter = value;
  }
  Status allocate(CUdeviceptr &ptr, uint64_t bytes, const char *what);
  Status uploadWeights();
  Status encodeTensorMaps(const std::vector<CUdeviceptr> &table);
  // Puts one step of n rows (a batch step when batch) on stream_: tokens and
  // StepState copies, the launches, the output's copy (no synchronize). Also what
  // the decode graphs capture.
  // timers: null, or launches_.size() + 1 events recorded around the launches.
  Status enqueueStep(int n, bool batch, Output output, const std::string &step,
                     const std::vector<CUevent> *timers = nullptr);
  // Captures and instantiates a step of n rows into `graph`; on failure leaves
  // it null, turns graphs off and says why on stderr once.
  void captureGraph(int n, bool batch, Output output, CUgraphExec &graph);
  // Runs the step whose state and tokens are in the pinned staging: the
  // graph when there is one (captured at the first step of its shape), else
  // launch by launch; then synchronizes.
  Status runStaged(int n, bool batch, Output output, CUgraphExec *graph,
                   const std::string &step);
  // Stages and runs a single-sequence step, or a batch step (the caller has checked it).
  // uniform: the row's StepState::uniform (kSampled steps).
  Status runSequence(int sequence, const int32_t *tokens, int n, int pos, Output output,
                     double uniform = 0.0);
  // runSequence() of a step whose output is not the logits, after checkStep()'s checks.
  Status runPickStep(int sequence, const int32_t *tokens, int n, int pos, Output output,
                     double uniform = 0.0);
  Status runBatch(const int32_t *tokens, const int32_t *positions, const int32_t *sequences,
                  int batch, Output output);
  // A batch of one runs as a single-sequence decode step: a plan of one sequence has no batch
  // launches, and in plans of several the one-token launches are the faster ones (8B q4 on
  // the H200: 609.5 tok/s in a plan of one sequence; batches of one through the batch launches
  // of a plan of 8, 586.7).
  static bool runsAsSequence(int batch, const int32_t *positions, const int32_t *sequences) {
    return batch == 1 && positions && sequences;
  }
  // A single-sequence step's StepState and tokens into the pinned staging.
  void stageSequence(int sequence, const int32_t *tokens, int n, int pos, double uniform);
  // The batch step's StepState and tokens into the pinned staging.
  void stageBatch(const int32_t *tokens, const int32_t *positions, const int32_t *sequences,
                  int batch);
  // Runs the staged step of n rows launch by launch with an event between launches, and
  // returns each launch's time (launches that do not run at n are left out).
  Result<std::vector<LaunchTiming>> timeLaunches(int n, bool batch);
  // profileStep() on the KV-cache slot `sequence`.
  Result<std::vector<LaunchTiming>> profileSequence(int sequence, const int32_t *tokens, int n,
                                                    int pos);
  std::string opLabel(uint32_t op) const;
  std::string kernelName(uint32_t function) const;

  const PlanFile &file_;
  const CudaDriver &cu_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  bool contextRetained_ = false;
  CUmodule module_ = nullptr;
  CUstream stream_ = nullptr;
  CUfunction fill_ = nullptr;
  CUfunction argmax_ = nullptr; // null in plans compiled before device greedy sampling
  CUfunction topk_ = nullptr;   // and before device top-k candidates
  CUfunction sample_ = nullptr; // and before device temperature sampling
  bool samplesMass_ = false;    // sample_ has its rowSums parameter (plans since top-p)
  CUfunction nucleus_ = nullptr; // and before top-p over a whole row on the device
  // The timeline's event counts (one per SM) and events (ninfer/TraceAbi.h): plans compiled
  // with --trace.
  CUdeviceptr traceCount_ = 0, traceEvents_ = 0;
  std::vector<LaunchInfo> launches_;
  std::vector<CUdeviceptr> allocations_;
  CUdeviceptr weights_ = 0, activations_ = 0, kv_ = 0, workspace_ = 0, tokens_ = 0, logits_ = 0,
              state_ = 0;
  // Greedy sampling's ids (kMaxBatch), tickets (kMaxBatch) and partial bests.
  CUdeviceptr greedy_ = 0;
  // Top-k candidates (kTopKBytes: the candidates, their count and the non-NaN count, the
  // ticket, the slices' non-NaN counts and bests) for a step's row; slices of the vocab.
  CUdeviceptr topKDevice_ = 0;
  int topKSlices_ = 1;
  int topK_ = 0; // the k of kTopK steps, and of decodeGraphs_[kTopK] where captured
  // Temperature sampling (kMaxBatch rows): the slices' sums and last non-NaN ids, the
  // tickets, the ids; the temperature of kSampled steps and of their graph.
  CUdeviceptr sampleDevice_ = 0;
  float temperature_ = 0.0f;
  float nucleusTemperature_ = 0.0f; // of kNucleus steps and their graph
  // Top-p over a whole row (drawLastNucleus): the kernel's scratch, then the id; its grid.
  CUdeviceptr nucleusDevice_ = 0;
  unsigned int nucleusBlocks_ = 1;
  void *hostStaging_ = nullptr; // pinned: StepState, tokens, ids, logits
  StepState *hostState_ = nullptr;
  int32_t *hostTokens_ = nullptr;
  int32_t *hostIds_ = nullptr;
  float *hostTopK_ = nullptr; // kMaxTopKCandidates (value, id bits), count, non-NaN, mass
  float *hostLogits_ = nullptr;
  uint64_t logitsBytes_ = 0;
  int embeddingVocab_ = 0;
  bool syncEachOp_ = false;
  bool graphsEnabled_ = false;
  bool dependentLaunch_ = false;
  CUgraphExec decodeGraphs_[kOutputs] = {};                // by Output
  CUgraphExec batchGraphs_[kOutputs][kMaxBatch + 1] = {}; // by Output and batch size
  uint64_t allocatedBytes_ = 0;
  std::string deviceName_;
  std::string codeArch_;
};

CudaExecutor::~CudaExecutor() {
  if (context_)
    cu_.ctxSetCurrent(context_);
  if (stream_)
    cu_.streamSynchronize(stream_);
  for (int output = 0; output < kOutputs; ++output) {
    if (decodeGraphs_[output])
      cu_.graphExecDestroy(decodeGraphs_[output]);
    for (CUgraphExec graph : batchGraphs_[output])
      if (graph)
        cu_.graphExecDestroy(graph);
  }
  if (stream_)
    cu_.streamDestroy(stream_);
  for (CUdeviceptr ptr : allocations_)
    cu_.memFree(ptr);
  if (hostStaging_)
    cu_.memFreeHost(hostStaging_);
  if (module_)
    cu_.moduleUnload(module_);
  if (contextRetained_)
    cu_.primaryCtxRelease(device_);
}

std::string CudaExecutor::opLabel(uint32_t op) const {
  const plan::Op *o = file_.plan().ops()->Get(op);
  return "op " + std::to_string(op) + " '" + (o->name() ? o->name()->str() : std::string()) + "'";
}

std::string CudaExecutor::kernelName(uint32_t function) const {
  const auto *functions = file_.plan().kernels()->functions();
  return functions && function < functions->size() ? functions->Get(function)->str() : "?";
}

Status CudaExecutor::selectCode(int ccMajor, int ccMinor, std::vector<char> &image, bool &isPtx) {
  const plan::KernelModule *kernels = file_.plan().kernels();
  const int cc = ccMajor * 10 + ccMinor;
  const std::string deviceArch = "sm_" + std::to_string(cc);
  if (!kernels)
    return Status::error("this plan carries no GPU kernels: recompile with --target " + deviceArch);
  std::string archs;
  if (kernels->cubins()) {
    for (const plan::CodeObject *object : *kernels->cubins()) {
      const std::string arch = object->arch() ? object->arch()->str() : std::string();
      archs += (archs.empty() ? "" : ", ") + arch;
      // sm_90 and sm_90a code both run on a 9.0 device; cubins never run on another.
      if (archNumberOf(arch, "sm_") == cc && object->cubin() && object->cubin()->size() > 0) {
        image.assign(object->cubin()->begin(), object->cubin()->end());
        isPtx = false;
        codeArch_ = arch;
        return Status::ok();
      }
    }
  }
  const std::string ptxArch = kernels->ptx_arch() ? kernels->ptx_arch()->str() : std::string();
  const int ptxNumber = archNumberOf(ptxArch, "compute_");
  const bool archSpecific = !ptxArch.empty() && ptxArch.back() == 'a';
  if (kernels->ptx() && kernels->ptx()->size() > 0 && ptxNumber > 0 &&
      (archSpecific ? ptxNumber == cc : ptxNumber <= cc)) {
    image.assign(kernels->ptx()->begin(), kernels->ptx()->end());
    image.push_back('\0');
    isPtx = true;
    codeArch_ = ptxArch + " PTX";
    return Status::ok();
  }
  std::string message = "this plan was compiled for " + (archs.empty() ? "no GPU" : archs) +
                        "; this GPU is " + deviceArch + " (" + deviceName_ + ")";
  if (kernels->ptx() && kernels->ptx()->size() > 0)
    message += " and the plan's PTX (" + ptxArch + ") cannot run on it";
  else
    message += " and the plan carries no PTX";
  return Status::error(message + ": recompile with --target " + deviceArch);
}

Status CudaExecutor::loadModule(const std::vector<char> &image, bool isPtx) {
  char errorLog[8192] = {0};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof(errorLog)))};
  const CUresult rc = cu_.moduleLoadDataEx(&module_, image.data(), 2, options, values);
  if (rc != CUDA_SUCCESS) {
    module_ = nullptr;
    std::string message = std::string("cannot load the plan's kernels (") +
                          (isPtx ? "JIT from PTX" : "cubin " + codeArch_) +
                          "): " + cu_.errorText(rc);
    if (errorLog[0])
      message += "\n" + std::string(errorLog);
    return Status::error(message);
  }
  return Status::ok();
}

Status CudaExecutor::allocate(CUdeviceptr &ptr, uint64_t bytes, const char *what) {
  bytes = std::max<uint64_t>(bytes, kAllocationAlignment);
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memAlloc(&ptr, bytes),
                                   std::string("cannot allocate ") + gib(bytes) + " for " + what));
  allocations_.push_back(ptr);
  allocatedBytes_ += bytes;
  return Status::ok();
}

// The TMA tensor maps of the plan's GEMM weights (KernelModule.tensor_maps), encoded for their
// device addresses into their Workspace buffers: boxes of 64 values x box_rows rows of a
// row-major f16/bf16 [rows, cols] weight, 128-byte swizzle, zeros past the edges. The maps
// are written by host copies, so the kernels acquire each one before their first tensor copy
// (bulk_copy.cuh, tensorMapAcquire).
Status CudaExecutor::encodeTensorMaps(const std::vector<CUdeviceptr> &table) {
  const plan::Plan &p = file_.plan();
  const auto *maps = p.kernels()->tensor_maps();
  if (!maps || maps->size() == 0)
    return Status::ok();
  if (!cu_.tensorMapEncodeTiled)
    return Status::error("this plan's kernels read weights through TMA tensor maps, which "
                         "this CUDA driver cannot make (no cuTensorMapEncodeTiled): update the "
                         "NVIDIA driver");
  const auto &buffers = *p.buffers();
  for (uint32_t i = 0; i < maps->size(); ++i) {
    const plan::TensorMap &m = *maps->Get(i);
    const std::string label = "tensor map " + std::to_string(i);
    if (m.map() >= buffers.size() || m.weight() >= buffers.size())
      return Status::error(label + " names a buffer the plan does not have");
    const plan::Buffer &map = *buffers.Get(m.map()), &weight = *buffers.Get(m.weight());
    const bool bf16 = weight.dtype() == plan::DType::BF16;
    const bool codes = m.box_bytes() > 0; // a quantized weight's code plane
    if (codes ? weight.kind() != BufferKind::Weight ||
                    quant::formatOfPlanDType(int(weight.dtype())) < 0 ||
                    weight.size_bytes() < uint64_t(m.rows()) * m.cols() || m.cols() % 16 != 0 ||
                    m.box_bytes() % 16 != 0 || m.box_bytes() > 2048 || m.box_rows() == 0 ||
                    m.box_rows() > 256
              : weight.kind() != BufferKind::Weight ||
                    (weight.dtype() != plan::DType::F16 && !bf16) ||
                    weight.size_bytes() != uint64_t(m.rows()) * m.cols() * 2 ||
                    m.cols() % 64 != 0 ||
                    (m.box_rows() != 64 && m.box_rows() != 128))
      return Status::error(label + (codes ? " does not describe the code plane of a quantized "
                                            "weight in 16-byte rows with boxes of at most 2 KiB "
                                            "x 256 rows"
                                          : " does not describe an f16/bf16 weight of whole "
                                            "64-value rows with boxes of 64 or 128 rows"));
    if (map.kind() != BufferKind::Workspace || map.size_bytes() < sizeof(CUtensorMap) ||
        table[m.map()] % 64 != 0)
      return Status::error(label + " needs a 64-byte aligned Workspace buffer of " +
                           std::to_string(sizeof(CUtensorMap)) + " bytes");
    CUtensorMap encoded;
    // Code planes in 8-byte elements; f16/bf16 values in 64-value boxes.
    const cuuint64_t dims[2] = {codes ? m.cols() / 8 : m.cols(), m.rows()};
    const cuuint64_t strides[1] = {cuuint64_t(m.cols()) * (codes ? 1 : 2)};
    const cuuint32_t box[2] = {codes ? m.box_bytes() / 8 : 64, m.box_rows()};
    const cuuint32_t elementStrides[2] = {1, 1};
    NINFER_RETURN_IF_ERROR(cu_.check(
        cu_.tensorMapEncodeTiled(&encoded,
                                 codes  ? CU_TENSOR_MAP_DATA_TYPE_UINT64
                                 : bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                        : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                 2, reinterpret_cast<void *>(table[m.weight()]), dims, strides,
                                 box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 codes ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cannot make the TMA tensor map of weight '" +
            (weight.name() ? weight.name()->str() : std::string()) + "'"));
    NINFER_RETURN_IF_ERROR(cu_.check(cu_.memcpyHtoD(table[m.map()], &encoded, sizeof encoded),
                                     "cannot copy a tensor map to the device"));
  }
  return Status::ok();
}

Status CudaExecutor::uploadWeights() {
  const auto &buffers = *file_.plan().buffers();
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    const plan::Buffer *b = buffers.Get(i);
    if (b->kind() != BufferKind::Weight || b->size_bytes() == 0)
      continue;
    const CUdeviceptr dst = weights_ + b->offset();
    const std::string label =
        "weight " + std::to_string(i) + " '" + (b->name() ? b->name()->str() : std::string()) + "'";
    if (const plan::DummyFill *fill = b->dummy()) {
      if (!fill_)
        return Status::error("the plan's kernels lack ninfer_fill_dummy, needed for " + label);
      unsigned long long count = b->size_bytes() / (b->dtype() == DType::F32 ? 4 : 2);
      int dtype = static_cast<int>(b->dtype());
      unsigned int seed = fill->seed();
      float scale = fill->scale(), offset = fill->offset();
      CUdeviceptr target = dst;
      void *params[] = {&target, &count, &dtype, &seed, &scale, &offset};
      const unsigned int blocks = static_cast<unsigned int>(
          std::min<unsigned long long>(kFillBlocks, (count + kFillThreads - 1) / kFillThreads));
      NINFER_RETURN_IF_ERROR(
          cu_.check(cu_.launchKernel(fill_, std::max(1u, blocks), 1, 1, kFillThreads, 1, 1, 0,
                                     stream_, params, nullptr),
                    "cannot launch the dummy fill of " + label));
      continue;
    }
    const uint8_t *data = file_.weightData(i);
    if (!data)
      return Status::error(label + " has no data in the plan file");
    NINFER_RETURN_IF_ERROR(
        cu_.check(cu_.memcpyHtoD(dst, data, b->size_bytes()), "cannot upload " + label));
  }
  // The arenas' memsets, the weight and tensor-map copies from pageable memory and the dummy
  // fills must all have landed before the first step: the memsets run on the legacy default
  // stream, asynchronously to the host, and a copy from pageable memory returns once its last
  // chunk is staged, before that chunk's DMA. Neither is ordered before work on stream_ (a
  // non-blocking stream), so a stream synchronize would leave the first step racing them.
  return cu_.check(cu_.ctxSynchronize(), "preparing GPU memory (weights, zeroed arenas) failed");
}

Status CudaExecutor::init(int ordinal) {
  const plan::Plan &p = file_.plan();
  syncEachOp_ =
      std::getenv("NINFER_CUDA_SYNC") && std::string(std::getenv("NINFER_CUDA_SYNC")) != "0";
  const char *graphsEnv = std::getenv("NINFER_CUDA_GRAPHS");
  graphsEnabled_ = !syncEachOp_ && cu_.hasGraphs() && !(graphsEnv && std::string(graphsEnv) == "0");
  int count = 0;
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.deviceGetCount(&count), "cannot count CUDA devices"));
  if (count == 0)
    return Status::error("no CUDA device found");
  if (ordinal < 0 || ordinal >= count)
    return Status::error("CUDA device " + std::to_string(ordinal) + " does not exist (" +
                         std::to_string(count) + " device" + (count == 1 ? "" : "s") + ")");
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.deviceGet(&device_, ordinal), "cannot open CUDA device"));
  char nameBuffer[256] = {0};
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.deviceGetName(nameBuffer, sizeof(nameBuffer) - 1, device_),
                                   "cannot read the device name"));
  deviceName_ = nameBuffer;
  int ccMajor = 0, ccMinor = 0;
  NINFER_RETURN_IF_ERROR(cu_.check(
      cu_.deviceGetAttribute(&ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_),
      "cannot read the compute capability"));
  NINFER_RETURN_IF_ERROR(cu_.check(
      cu_.deviceGetAttribute(&ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_),
      "cannot read the compute capability"));

  std::vector<char> image;
  bool isPtx = false;
  NINFER_RETURN_IF_ERROR(selectCode(ccMajor, ccMinor, image, isPtx));

  NINFER_RETURN_IF_ERROR(cu_.check(cu_.primaryCtxRetain(&context_, device_),
                                   "cannot create a CUDA context on " + deviceName_));
  contextRetained_ = true;
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSetCurrent(context_), "cannot use the CUDA context"));
  NINFER_RETURN_IF_ERROR(loadModule(image, isPtx));
  const char *pdlEnv = std::getenv("NINFER_PDL");
  dependentLaunch_ = ccMajor >= 9 && cu_.launchKernelEx && p.kernels()->grid_dependency_wait() &&
                     !syncEachOp_ && !(pdlEnv && std::string(pdlEnv) == "0");
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.streamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cannot create a CUDA stream"));

  // Kernels and launches.
  const auto *functions = p.kernels()->functions();
  const uint32_t functionCount = functions ? functions->size() : 0;
  std::vector<CUfunction> handles(functionCount, nullptr);
  for (uint32_t i = 0; i < functionCount; ++i)
    NINFER_RETURN_IF_ERROR(
        cu_.check(cu_.moduleGetFunction(&handles[i], module_, functions->Get(i)->c_str()),
                  "the plan's kernels lack function '" + functions->Get(i)->str() + "'"));
  for (uint32_t opIndex = 0; opIndex < p.ops()->size(); ++opIndex) {
    const plan::Op *op = p.ops()->Get(opIndex);
    if (const auto *a = op->attrs_as_EmbeddingAttrs())
      embeddingVocab_ = embeddingVocab_ ? std::min(embeddingVocab_, a->vocab()) : a->vocab();
    // A linear op of a group (q/k/v, gate/up) may have no launches: the first op's grouped
    // launches do its work; so may an RMSNorm whose readers normalize their input
    // themselves in every step, a SwiGLU computed by the gate/up GEMV in short steps and
    // by the gate/up GEMM in long ones (sm_90a), and the second Rope op of a
    // RoPE + KV-append launch. Any other op without launches is a broken plan.
    if ((!op->launches() || op->launches()->size() == 0) && !op->attrs_as_LinearAttrs() &&
        !op->attrs_as_RmsNormAttrs() && !op->attrs_as_SwiGluAttrs() && !op->attrs_as_RopeAttrs())
      return Status::error(opLabel(opIndex) + " has no CUDA kernels: recompile the plan with a GPU "
                                              "target");
    if (!op->launches())
      continue;
    for (const plan::Launch *launch : *op->launches()) {
      LaunchInfo info{};
      if (launch->function() >= functionCount)
        return Status::error(opLabel(opIndex) + " calls a kernel that does not exist");
      info.function = handles[launch->function()];
      info.functionIndex = launch->function();
      for (int d = 0; d < 3; ++d) {
        info.gridBase[d] = launch->grid_base()->Get(d);
        info.gridPerToken[d] = launch->grid_per_token()->Get(d);
        info.block[d] = launch->block()->Get(d);
      }
      info.sharedBytes = launch->shared_bytes();
      info.minTokens = launch->min_tokens();
      info.maxTokens = launch->max_tokens();
      info.steps = launch->steps();
      info.op = opIndex;
      if (launch->args()) {
        if (launch->args()->size() > static_cast<uint32_t>(kMaxKernelArgs))
          return Status::error(opLabel(opIndex) + ": a launch passes " +
                               std::to_string(launch->args()->size()) + " buffers, at most " +
                               std::to_string(kMaxKernelArgs) + " are allowed");
        info.bufferIndices.assign(launch->args()->begin(), launch->args()->end());
      }
      if (info.sharedBytes > 48 * 1024)
        NINFER_RETURN_IF_ERROR(cu_.check(
            cu_.funcSetAttribute(info.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(info.sharedBytes)),
            opLabel(opIndex) + ": kernel " + kernelName(info.functionIndex) + " cannot get " +
                std::to_string(info.sharedBytes) + " bytes of shared memory"));
      launches_.push_back(info);
    }
  }

  // Memory: one allocation per arena; buffers sit at base + offset.
  uint64_t weightBytes = 0, activationBytes = p.memory()->activation_bytes(),
           kvBytes = p.memory()->kv_bytes(), workspaceBytes = p.memory()->workspace_bytes(),
           tokenBytes = uint64_t(p.max_step_tokens()) * 4;
  bool anyDummy = false;
  const auto &buffers = *p.buffers();
  for (const plan::Buffer *b : buffers) {
    const uint64_t end = b->offset() + b->size_bytes();
    switch (b->kind()) {
    case BufferKind::Weight:
      weightBytes = std::max(weightBytes, end);
      anyDummy = anyDummy || b->dummy();
      break;
    case BufferKind::Activation:
      activationBytes = std::max(activationBytes, end);
      break;
    case BufferKind::KvCache:
      kvBytes = std::max(kvBytes, end);
      break;
    case BufferKind::Workspace:
      workspaceBytes = std::max(workspaceBytes, end);
      break;
    case BufferKind::Tokens:
      tokenBytes = std::max(tokenBytes, b->size_bytes());
      break;
    case BufferKind::Logits:
      logitsBytes_ = std::max(logitsBytes_, b->size_bytes());
      break;
    }
  }
  logitsBytes_ =
      std::max(logitsBytes_, uint64_t(p.max_batch()) * uint64_t(p.model()->vocab_size()) * 4);
  // Plans compiled before device greedy sampling lack the kernel; their callers pick
  // tokens from the logits (picksGreedyTokens()).
  if (cu_.moduleGetFunction(&argmax_, module_, "ninfer_argmax_rows") != CUDA_SUCCESS)
    argmax_ = nullptr;
  size_t traceBytes = 0;
  if (cu_.moduleGetGlobal(&traceCount_, &traceBytes, module_, NINFER_TRACE_COUNT_SYMBOL) !=
          CUDA_SUCCESS ||
      cu_.moduleGetGlobal(&traceEvents_, &traceBytes, module_, NINFER_TRACE_EVENTS_SYMBOL) !=
          CUDA_SUCCESS)
    traceCount_ = traceEvents_ = 0;
  if (cu_.moduleGetFunction(&topk_, module_, "ninfer_topk_rows") != CUDA_SUCCESS)
    topk_ = nullptr;
  if (cu_.moduleGetFunction(&sample_, module_, "ninfer_sample_rows") != CUDA_SUCCESS)
    sample_ = nullptr;
  // Plans compiled before top-p on the device carry the kernel without its 10th parameter,
  // rowSums, and never write the mass: they draw top-p on the host.
  size_t offset = 0, size = 0;
  samplesMass_ = sample_ && cu_.funcGetParamInfo &&
                 cu_.funcGetParamInfo(sample_, 9, &offset, &size) == CUDA_SUCCESS;
  // Plans compiled before the grid draw carry ninfer_nucleus_row (one block, other
  // parameters), which is not used: they bring the row to the host.
  if (!cu_.launchCooperativeKernel ||
      cu_.moduleGetFunction(&nucleus_, module_, "ninfer_nucleus_grid") != CUDA_SUCCESS)
    nucleus_ = nullptr;
  int smCount = 0;
  if (nucleus_ && cu_.deviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                         device_) != CUDA_SUCCESS)
    nucleus_ = nullptr;
  // One block per SM always fits: kNucleusThreads threads of at most 128 registers
  // (__launch_bounds__), under 48 KB of shared memory.
  nucleusBlocks_ = unsigned(std::clamp(smCount, 1, kNucleusMaxBlocks));
  topKSlices_ = std::max(1, (p.model()->vocab_size() + kTopKSliceValues - 1) / kTopKSliceValues);
  if (topKSlices_ > kTopKSliceValues)
    topk_ = nullptr; // a vocabulary past 16M ids: not even one candidate per slice
  if (anyDummy) {
    CUresult rc = cu_.moduleGetFunction(&fill_, module_, "ninfer_fill_dummy");
    if (rc != CUDA_SUCCESS)
      return Status::error("this plan has dummy weights but its kernels lack ninfer_fill_dummy");
  }
  // Greedy sampling's ids and tickets (kMaxBatch each) and partial bests.
  const uint64_t greedyBytes = 2 * kMaxBatch * 4 + uint64_t(kMaxBatch) * kArgmaxSlices * 8;
  const uint64_t topKBytes = kTopKFixedBytes + uint64_t(topKSlices_) * (4 + kMaxTopKCandidates * 8);
  const uint64_t sampleBytes = uint64_t(kMaxBatch) * (kArgmaxSlices * 12 + 8);
  const uint64_t nucleusBytes = nucleus_ ? kNucleusScratchBytes + 4 : 0;
  size_t freeBytes = 0, totalBytes = 0;
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.memGetInfo(&freeBytes, &totalBytes), "cannot query free GPU memory"));
  const uint64_t needed = weightBytes + activationBytes + kvBytes + workspaceBytes + tokenBytes +
                          logitsBytes_ + greedyBytes + topKBytes + sampleBytes + nucleusBytes +
                          11 * kAllocationAlignment;
  if (needed > freeBytes)
    return Status::error("the plan needs " + gib(needed) + " of GPU memory (weights " +
                         gib(weightBytes) + ", activations " + gib(activationBytes) +
                         ", KV cache " + gib(kvBytes) + ") but " + deviceName_ + " has " +
                         gib(freeBytes) + " free of " + gib(totalBytes) +
                         ": use a smaller --ctx or a smaller quantization");
  NINFER_RETURN_IF_ERROR(allocate(weights_, weightBytes, "weights"));
  NINFER_RETURN_IF_ERROR(allocate(activations_, activationBytes, "activations"));
  NINFER_RETURN_IF_ERROR(allocate(kv_, kvBytes, "the KV cache"));
  NINFER_RETURN_IF_ERROR(allocate(workspace_, workspaceBytes, "the workspace"));
  NINFER_RETURN_IF_ERROR(allocate(tokens_, tokenBytes, "tokens"));
  NINFER_RETURN_IF_ERROR(allocate(logits_, logitsBytes_, "logits"));
  NINFER_RETURN_IF_ERROR(allocate(state_, sizeof(StepState), "the step state"));
  NINFER_RETURN_IF_ERROR(allocate(greedy_, greedyBytes, "greedy sampling"));
  NINFER_RETURN_IF_ERROR(allocate(topKDevice_, topKBytes, "top-k sampling"));
  NINFER_RETURN_IF_ERROR(allocate(sampleDevice_, sampleBytes, "temperature sampling"));
  if (nucleus_)
    NINFER_RETURN_IF_ERROR(allocate(nucleusDevice_, nucleusBytes, "top-p sampling"));
  // Zeroed like the CPU executor's arenas, so unwritten rows compare equal.
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memsetD8(activations_, 0, activationBytes), "memset"));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memsetD8(kv_, 0, kvBytes), "memset"));
  // Kernels that count finished blocks there expect zeros (attention.cuh).
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memsetD8(workspace_, 0, workspaceBytes), "memset"));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memsetD8(logits_, 0, logitsBytes_), "memset"));
  // The sampling kernel's tickets start at zero (argmax.cuh).
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memsetD8(greedy_, 0, greedyBytes), "memset"));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memsetD8(topKDevice_, 0, topKBytes), "memset"));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memsetD8(sampleDevice_, 0, sampleBytes), "memset"));
  if (nucleus_) // the draw's barrier counters
    NINFER_RETURN_IF_ERROR(cu_.check(cu_.memsetD8(nucleusDevice_, 0, nucleusBytes), "memset"));

  std::vector<CUdeviceptr> table(buffers.size(), 0);
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    const plan::Buffer *b = buffers.Get(i);
    switch (b->kind()) {
    case BufferKind::Weight:
      table[i] = weights_ + b->offset();
      break;
    case BufferKind::Activation:
      table[i] = activations_ + b->offset();
      break;
    case BufferKind::KvCache:
      table[i] = kv_ + b->offset();
      break;
    case BufferKind::Workspace:
      table[i] = workspace_ + b->offset();
      break;
    case BufferKind::Tokens:
      table[i] = tokens_;
      break;
    case BufferKind::Logits:
      table[i] = logits_;
      break;
    }
  }
  for (LaunchInfo& launch : launches_) {
    launch.args = KernelArgs{};
    for (size_t k = 0; k < launch.bufferIndices.size(); ++k)
      launch.args.buffers[k] = reinterpret_cast<void*>(table[launch.bufferIndices[k]]);
  }
  NINFER_RETURN_IF_ERROR(encodeTensorMaps(table)); // after the workspace memset

  const size_t stateBytes = alignUp(sizeof(StepState), 64);
  const size_t idsBytes = alignUp(kMaxBatch * sizeof(int32_t), 64);
  const size_t topKResultBytes = alignUp(kTopKResultBytes, 64);
  const size_t stagingBytes = stateBytes + idsBytes + topKResultBytes + tokenBytes + logitsBytes_;
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memAllocHost(&hostStaging_, stagingBytes),
                                   "cannot allocate " + gib(stagingBytes) + " of pinned memory"));
  char *staging = static_cast<char *>(hostStaging_);
  hostState_ = reinterpret_cast<StepState *>(staging);
  *hostState_ = StepState{};
  hostIds_ = reinterpret_cast<int32_t *>(staging + stateBytes);
  hostTopK_ = reinterpret_cast<float *>(staging + stateBytes + idsBytes);
  hostTokens_ = reinterpret_cast<int32_t *>(staging + stateBytes + idsBytes + topKResultBytes);
  hostLogits_ = reinterpret_cast<float *>(staging + stateBytes + idsBytes + topKResultBytes +
                                          tokenBytes);
  allocatedBytes_ += stagingBytes; // pinned host memory the device maps, counted for the report
  return uploadWeights();
}

void CudaExecutor::stageSequence(int sequence, const int32_t *tokens, int n, int pos,
                                 double uniform) {
  *hostState_ = StepState{};
  hostState_->pos = pos;
  hostState_->nTokens = n;
  hostState_->seq = sequence;
  hostState_->uniform[0] = uniform;
  hostState_->forwardEnd = forwardEnd(sequence);
  std::memcpy(hostTokens_, tokens, size_t(n) * sizeof(int32_t));
}

Status CudaExecutor::runSequence(int sequence, const int32_t *tokens, int n, int pos,
                                 Output output, double uniform) {
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSetCurrent(context_), "cannot use the CUDA context"));
  // The graph's copies read these pinned slots when it runs, so they are
  // written first on both paths.
  stageSequence(sequence, tokens, n, pos, uniform);
  return runStaged(n, false, output, n == 1 ? &decodeGraphs_[output] : nullptr,
                   " (step at position " + std::to_string(pos) + ", " + std::to_string(n) +
                       " tokens)");
}

Status CudaExecutor::runPickStep(int sequence, const int32_t *tokens, int n, int pos,
                                 Output output, double uniform) {
  NINFER_RETURN_IF_ERROR(checkStep(file_.plan(), tokens, n, pos, embeddingVocab_, sequence));
  return runSequence(sequence, tokens, n, pos, output, uniform);
}

Status CudaExecutor::forwardSequence(int sequence, const int32_t *tokens, int n, int pos,
                                     float *logits) {
  const plan::Plan &p = file_.plan();
  NINFER_RETURN_IF_ERROR(checkLogits(logits));
  NINFER_RETURN_IF_ERROR(checkStep(p, tokens, n, pos, embeddingVocab_, sequence));
  NINFER_RETURN_IF_ERROR(runSequence(sequence, tokens, n, pos, kLogits));
  std::memcpy(logits, hostLogits_, size_t(p.model()->vocab_size()) * 4);
  return Status::ok();
}

Status CudaExecutor::forwardSequenceGreedy(int sequence, const int32_t *tokens, int n, int pos,
                                           int32_t *id) {
  if (!argmax_)
    return Executor::forwardSequenceGreedy(sequence, tokens, n, pos, id);
  if (!id)
    return Status::error("no place for the step's token");
  NINFER_RETURN_IF_ERROR(runPickStep(sequence, tokens, n, pos, kGreedyIds));
  *id = hostIds_[0];
  return Status::ok();
}

Status CudaExecutor::forwardSequenceSample(int sequence, const int32_t *tokens, int n,
                                           int pos, float temperature, double uniform,
                                           int32_t *id) {
  if (!samplesTokens())
    return Executor::forwardSequenceSample(sequence, tokens, n, pos, temperature, uniform, id);
  if (!id)
    return Status::error("no place for the step's token");
  if (!(temperature > 0.0f) || !std::isfinite(temperature))
    return Status::error("temperature sampling needs a finite temperature above 0");
  if (!(uniform >= 0.0 && uniform < 1.0))
    return Status::error("the sampling uniform must lie in [0, 1)");
  setSamplingParameter(kSampled, temperature_, temperature);
  NINFER_RETURN_IF_ERROR(runPickStep(sequence, tokens, n, pos, kSampled, uniform));
  *id = hostIds_[0];
  return Status::ok();
}

Status CudaExecutor::forwardSequenceTopK(int sequence, const int32_t *tokens, int n, int pos,
                                         int k, TopKCandidates *candidates) {
  if (k < 1 || k > maxTopKCandidates())
    return Executor::forwardSequenceTopK(sequence, tokens, n, pos, k, candidates);
  if (!candidates)
    return Status::error("no place for the step's top-k candidates");
  setSamplingParameter(kTopK, topK_, k);
  NINFER_RETURN_IF_ERROR(runPickStep(sequence, tokens, n, pos, kTopK));
  readCandidates(k, *candidates);
  return Status::ok();
}

void CudaExecutor::readCandidates(int k, TopKCandidates &candidates) const {
  int32_t counts[2];
  std::memcpy(counts, hostTopK_ + 2 * kMaxTopKCandidates, sizeof(counts));
  candidates.count = std::min(counts[0], k);
  candidates.valid = counts[1];
  for (int i = 0; i < candidates.count; ++i) {
    candidates.values[i] = hostTopK_[2 * i];
    std::memcpy(&candidates.ids[i], &hostTopK_[2 * i + 1], sizeof(int32_t));
  }
}

Status CudaExecutor::forwardSequenceNucleus(int sequence, const int32_t *tokens, int n,
                                            int pos, float temperature,
                                            TopKCandidates *candidates, double *mass) {
  if (!picksNucleus())
    return Executor::forwardSequenceNucleus(sequence, tokens, n, pos, temperature, candidates,
                                            mass);
  if (!candidates || !mass)
    return Status::error("no place for the step's candidates and mass");
  if (!(temperature > 0.0f) || !std::isfinite(temperature))
    return Status::error("top-p sampling needs a finite temperature above 0");
  setSamplingParameter(kNucleus, nucleusTemperature_, temperature);
  NINFER_RETURN_IF_ERROR(runPickStep(sequence, tokens, n, pos, kNucleus));
  readCandidates(kMaxTopKCandidates, *candidates);
  std::memcpy(mass, reinterpret_cast<const char *>(hostTopK_) + kTopKMassOffset, sizeof(double));
  return Status::ok();
}

Status CudaExecutor::lastLogits(float *logits) {
  if (!logits)
    return Status::error("no place for the logits");
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSetCurrent(context_), "cannot use the CUDA context"));
  const size_t bytes = size_t(file_.plan().model()->vocab_size()) * 4;
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.memcpyDtoHAsync(hostLogits_, logits_, bytes, stream_),
                "cannot copy the logits from the GPU"));
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.streamSynchronize(stream_), "cannot copy the logits from the GPU"));
  std::memcpy(logits, hostLogits_, bytes);
  return Status::ok();
}

Status CudaExecutor::drawLastNucleus(float temperature, float topP, double uniform,
                                     int32_t *id) {
  if (!drawsNucleus())
    return Executor::drawLastNucleus(temperature, topP, uniform, id);
  if (!id)
    return Status::error("no place for the drawn token");
  if (!(temperature > 0.0f) || !std::isfinite(temperature))
    return Status::error("top-p sampling needs a finite temperature above 0");
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSetCurrent(context_), "cannot use the CUDA context"));
  int vocab = file_.plan().model()->vocab_size();
  CUdeviceptr scratch = nucleusDevice_, drawn = nucleusDevice_ + kNucleusScratchBytes;
  void *params[] = {&logits_, &vocab, &temperature, &topP, &uniform, &scratch, &drawn};
  const CUresult launched = cu_.launchCooperativeKernel(
      nucleus_, nucleusBlocks_, 1, 1, kNucleusThreads, 1, 1, 0, stream_, params);
  // Too large where the process may use only part of the SMs (as under MPS).
  if (launched == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) {
    nucleus_ = nullptr; // drawsNucleus() is false from now on: the host draws
    return Status::error(deviceName_ + " cannot keep the top-p draw's " +
                         std::to_string(nucleusBlocks_) + " blocks resident at once");
  }
  NINFER_RETURN_IF_ERROR(cu_.check(launched, "cannot launch the top-p draw"));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.memcpyDtoHAsync(hostIds_, drawn, 4, stream_),
                                   "cannot copy the drawn token from the GPU"));
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.streamSynchronize(stream_), "the top-p draw failed on the GPU"));
  *id = hostIds_[0];
  return Status::ok();
}

void CudaExecutor::stageBatch(const int32_t *tokens, const int32_t *positions,
                              const int32_t *sequences, int batch) {
  *hostState_ = StepState{};
  hostState_->nTokens = batch;
  hostState_->batch = batch;
  for (int t = 0; t < batch; ++t) {
    hostState_->rowPos[t] = positions[t];
    hostState_->rowSeq[t] = sequences[t];
  }
  std::memcpy(hostTokens_, tokens, size_t(batch) * sizeof(int32_t));
}

Status CudaExecutor::runBatch(const int32_t *tokens, const int32_t *positions,
                              const int32_t *sequences, int batch, Output output) {
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSetCurrent(context_), "cannot use the CUDA context"));
  stageBatch(tokens, positions, sequences, batch);
  return runStaged(batch, true, output, &batchGraphs_[output][batch],
                   " (batch step of " + std::to_string(batch) + " sequences)");
}

Status CudaExecutor::forwardBatch(const int32_t *tokens, const int32_t *positions,
                                  const int32_t *sequences, int batch, float *logits) {
  const plan::Plan &p = file_.plan();
  NINFER_RETURN_IF_ERROR(checkLogits(logits, "forwardBatch"));
  if (runsAsSequence(batch, positions, sequences))
    return forwardSequence(sequences[0], tokens, 1, positions[0], logits);
  NINFER_RETURN_IF_ERROR(checkBatchStep(p, tokens, positions, sequences, batch, embeddingVocab_));
  NINFER_RETURN_IF_ERROR(runBatch(tokens, positions, sequences, batch, kLogits));
  std::memcpy(logits, hostLogits_, size_t(batch) * size_t(p.model()->vocab_size()) * 4);
  return Status::ok();
}

Status CudaExecutor::forwardBatchGreedy(const int32_t *tokens, const int32_t *positions,
                                        const int32_t *sequences, int batch, int32_t *ids) {
  const plan::Plan &p = file_.plan();
  if (!argmax_)
    return Executor::forwardBatchGreedy(tokens, positions, sequences, batch, ids);
  if (!ids)
    return Status::error("no place for the batch step's tokens");
  if (runsAsSequence(batch, positions, sequences))
    return forwardSequenceGreedy(sequences[0], tokens, 1, positions[0], ids);
  NINFER_RETURN_IF_ERROR(checkBatchStep(p, tokens, positions, sequences, batch, embeddingVocab_));
  NINFER_RETURN_IF_ERROR(runBatch(tokens, positions, sequences, batch, kGreedyIds));
  std::memcpy(ids, hostIds_, size_t(batch) * sizeof(int32_t));
  return Status::ok();
}

Status CudaExecutor::runStaged(int n, bool batch, Output output, CUgraphExec *graph,
                               const std::string &step) {
  if (graph && graphsEnabled_ && !*graph)
    captureGraph(n, batch, output, *graph);
  if (graph && *graph) {
    NINFER_RETURN_IF_ERROR(cu_.check(cu_.graphLaunch(*graph, stream_),
                                     "cannot launch the decode graph" + step));
  } else {
    NINFER_RETURN_IF_ERROR(enqueueStep(n, batch, output, step));
  }
  const CUresult rc = cu_.streamSynchronize(stream_);
  if (rc != CUDA_SUCCESS)
    return Status::error("a kernel failed while running the step" + step + ": " +
                         cu_.errorText(rc) + " (set NINFER_CUDA_SYNC=1 to find the op)");
  return Status::ok();
}

bool CudaExecutor::runsAt(const LaunchInfo &l, int n, bool batch) {
  for (int d = 0; d < 3; ++d)
    if (l.gridBase[d] + l.gridPerToken[d] * static_cast<uint32_t>(n) == 0)
      return false;
  const bool kind = l.steps == plan::LaunchSteps::Any ||
                    l.steps == (batch ? plan::LaunchSteps::Batch : plan::LaunchSteps::Sequence);
  return kind && uint32_t(n) >= l.minTokens && (l.maxTokens == 0 || uint32_t(n) <= l.maxTokens);
}

Result<std::vector<LaunchTiming>> CudaExecutor::profileSequence(int sequence,
                                                                const int32_t *tokens, int n,
                                                                int pos) {
  NINFER_RETURN_IF_ERROR(checkStep(file_.plan(), tokens, n, pos, embeddingVocab_, sequence));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSetCurrent(context_), "cannot use the CUDA context"));
  stageSequence(sequence, tokens, n, pos, 0.0);
  return timeLaunches(n, false);
}

Result<std::vector<LaunchTiming>> CudaExecutor::profileBatchStep(const int32_t *tokens,
                                                                 const int32_t *positions,
                                                                 const int32_t *sequences,
                                                                 int batch) {
  const plan::Plan &p = file_.plan();
  if (runsAsSequence(batch, positions, sequences))
    return profileSequence(sequences[0], tokens, 1, positions[0]);
  NINFER_RETURN_IF_ERROR(checkBatchStep(p, tokens, positions, sequences, batch, embeddingVocab_));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSetCurrent(context_), "cannot use the CUDA context"));
  stageBatch(tokens, positions, sequences, batch);
  return timeLaunches(batch, true);
}

Result<StepTrace> CudaExecutor::traceStep(const int32_t* tokens, const int32_t* positions,
                                          const int32_t* sequences, int batch) {
  if (!traceCount_)
    return Status::error("the plan records no timeline: compile it with ninferc --trace");
  if (!argmax_)
    return Status::error("the plan predates greedy sampling on the GPU: compile it again");
  if (batch < 1 || !tokens || !positions || !sequences)
    return Status::error("a traced step needs at least one sequence");
  const bool asSequence = runsAsSequence(batch, positions, sequences);
  if (!asSequence)
    NINFER_RETURN_IF_ERROR(
        checkBatchStep(file_.plan(), tokens, positions, sequences, batch, embeddingVocab_));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSetCurrent(context_), "cannot use the CUDA context"));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.streamSynchronize(stream_), "the GPU failed"));
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.memsetD8(traceCount_, 0, trace::kMaxSms * 4), "cannot reset the timeline"));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.ctxSynchronize(), "cannot reset the timeline"));
  if (asSequence)
    NINFER_RETURN_IF_ERROR(runPickStep(sequences[0], tokens, 1, positions[0], kGreedyIds));
  else
    NINFER_RETURN_IF_ERROR(runBatch(tokens, positions, sequences, batch, kGreedyIds));
  // Each SM's count, then the events of its region.
  StepTrace trace;
  std::vector<uint32_t> counts(trace::kMaxSms);
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.memcpyDtoHAsync(counts.data(), traceCount_, counts.size() * 4, stream_),
                "cannot read the timeline"));
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.streamSynchronize(stream_), "cannot read the timeline"));
  for (uint32_t sm = 0; sm < trace::kMaxSms; ++sm) {
    trace.recorded += counts[sm];
    const uint32_t kept = std::min(counts[sm], trace::kEventsPerSm);
    if (kept == 0)
      continue;
    const size_t at = trace.events.size();
    trace.events.resize(at + kept);
    NINFER_RETURN_IF_ERROR(
        cu_.check(cu_.memcpyDtoHAsync(trace.events.data() + at,
                                      traceEvents_ +
                                          uint64_t(sm) * trace::kEventsPerSm * sizeof(trace::Event),
                                      kept * sizeof(trace::Event), stream_),
                  "cannot read the timeline"));
  }
  NINFER_RETURN_IF_ERROR(cu_.check(cu_.streamSynchronize(stream_), "cannot read the timeline"));
  const int n = asSequence ? 1 : batch;
  for (const LaunchInfo& l : launches_)
    if (runsAt(l, n, !asSequence))
      trace.launches.push_back({l.op, kernelName(l.functionIndex)});
  // The greedy pick after them (enqueueStep), which records events too.
  trace.launches.push_back({StepTrace::kNotAnOp, "ninfer_argmax_rows"});
  return trace;
}

Result<std::vector<LaunchTiming>> CudaExecutor::timeLaunches(int n, bool batch) {
  if (!cu_.hasEvents())
    return Status::error("the CUDA driver lacks the event entry points needed to time kernels");
  std::vector<CUevent> timers(launches_.size() + 1, nullptr);
  Status status = Status::ok();
  for (CUevent &timer : timers)
    if (status.isOk())
      status = cu_.check(cu_.eventCreate(&timer, CU_EVENT_DEFAULT), "cannot create a CUDA event");
  std::vector<LaunchTiming> timings;
  if (status.isOk())
    status = enqueueStep(n, batch, kLogits, " (profiled step)", &timers);
  if (status.isOk())
    status = cu_.check(cu_.streamSynchronize(stream_), "a kernel failed in the profiled step");
  for (size_t i = 0; status.isOk() && i < launches_.size(); ++i) {
    if (!runsAt(launches_[i], n, batch))
      continue; // skipped at this step size: nothing to time
    float ms = 0.0f;
    status = cu_.check(cu_.eventElapsedTime(&ms, timers[i], timers[i + 1]),
                       "cannot read a kernel time");
    timings.push_back({launches_[i].op, launches_[i].functionIndex, 1e3 * double(ms)});
  }
  for (CUevent timer : timers)
    if (timer)
      cu_.eventDestroy(timer);
  if (!status.isOk())
    return status;
  return timings;
}

Status CudaExecutor::enqueueStep(int n, bool batch, Output output, const std::string &step,
                                 const std::vector<CUevent> *timers) {
  const plan::Plan &p = file_.plan();
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.memcpyHtoDAsync(tokens_, hostTokens_, size_t(n) * sizeof(int32_t), stream_),
                "cannot copy tokens to the GPU" + step));
  NINFER_RETURN_IF_ERROR(
      cu_.check(cu_.memcpyHtoDAsync(state_, hostState_, sizeof(StepState), stream_),
                "cannot copy the step state to the GPU" + step));
  CUdeviceptr state = state_;
  bool afterKernel = false; // programmatic launches only follow a kernel, never a copy
  for (size_t i = 0; i < launches_.size(); ++i) {
    LaunchInfo &l = launches_[i];
    void *params[] = {&state, &l.args};
    unsigned int grid[3];
    for (int d = 0; d < 3; ++d)
      grid[d] = l.gridBase[d] + l.gridPerToken[d] * static_cast<unsigned int>(n);
    if (timers)
      NINFER_RETURN_IF_ERROR(cu_.check(cu_.eventRecord((*timers)[i], stream_), "event"));
    if (!runsAt(l, n, batch))
      continue; // nothing to do at this token count
    CUresult rc;
    if (dependentLaunch_ && afterKernel && !timers) {
      CUlaunchAttribute attribute{};
      attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attribute.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig config{};
      config.gridDimX = grid[0];
      config.gridDimY = grid[1];
      config.gridDimZ = grid[2];
      config.blockDimX = l.block[0];
      config.blockDimY = l.block[1];
      config.blockDimZ = l.block[2];
      config.sharedMemBytes = l.sharedBytes;
      config.hStream = stream_;
      config.attrs = &attribute;
      config.numAttrs = 1;
      rc = cu_.launchKernelEx(&config, l.function, params, nullptr);
    } else {
      rc = cu_.launchKernel(l.function, grid[0], grid[1], grid[2], l.block[0], l.block[1],
                            l.block[2], l.sharedBytes, stream_, params, nullptr);
    }
    afterKernel = true;
    if (rc != CUDA_SUCCESS)
      return Status::error(opLabel(l.op) + ": launching kernel " + kernelName(l.functionIndex) +
                           " failed: " + cu_.errorText(rc) + step);
    const bool lastOfOp = i + 1 == launches_.size() || launches_[i + 1].op != l.op;
    if (syncEachOp_ && lastOfOp) {
      const CUresult sync = cu_.streamSynchronize(stream_);
      if (sync != CUDA_SUCCESS)
        return Status::error(opLabel(l.op) + ": kernel " + kernelName(l.functionIndex) +
                             " failed: " + cu_.errorText(sync) + step);
    }
  }
  if (timers)
    NINFER_RETURN_IF_ERROR(cu_.check(cu_.eventRecord(timers->back(), stream_), "event"));
  // A batch step's logits are one row per sequence; otherwise the last token's row.
  const int rows = batch ? n : 1;
  int vocab = p.model()->vocab_size();
  if (output == kLogits) {
    const uint64_t vocabBytes = uint64_t(rows) * uint64_t(vocab) * 4;
    return cu_.check(cu_.memcpyDtoHAsync(hostLogits_, logits_, vocabBytes, stream_),
                     "cannot copy logits from the GPU" + step);
  }
  CUdeviceptr ids = greedy_;
  if (output != kTopK) { // the row's max (its argmax) first
    CUdeviceptr tickets = greedy_ + kMaxBatch * 4, partial = greedy_ + 2 * kMaxBatch * 4;
    void *params[] = {&logits_, &vocab, &ids, &partial, &tickets};
    NINFER_RETURN_IF_ERROR(cu_.check(cu_.launchKernel(argmax_, kArgmaxSlices, unsigned(rows), 1,
                                                      kArgmaxThreads, 1, 1, 0, stream_, params,
                                                      nullptr),
                                     "cannot launch the greedy sampling" + step));
  }
  if (output == kSampled || output == kNucleus) { // then the draw, and the row's mass
    CUdeviceptr sums = sampleDevice_, lasts = sums + kMaxBatch * kArgmaxSlices * 8,
                sampleTickets = lasts + kMaxBatch * kArgmaxSlices * 4,
                sampled = sampleTickets + kMaxBatch * 4;
    CUdeviceptr rowMass = output == kNucleus ? topKDevice_ + kTopKMassOffset : 0;
    float temperature = output == kNucleus ? nucleusTemperature_ : temperature_;
    CUdeviceptr state = state_;
    void *drawParams[] = {&logits_, &vocab, &temperature, &ids, &state,
                          &sampled, &sums, &lasts, &sampleTickets, &rowMass};
    NINFER_RETURN_IF_ERROR(cu_.check(cu_.launchKernel(sample_, kArgmaxSlices, unsigned(rows), 1,
                                                      kArgmaxThreads, 1, 1, 0, stream_,
                                                      drawParams, nullptr),
                                     "cannot launch the temperature sampling" + step));
    ids = sampled;
  }
  if (output == kTopK || output == kNucleus) {
    CUdeviceptr results = topKDevice_, tickets = topKDevice_ + kTopKResultBytes,
                partial = topKDevice_ + kTopKFixedBytes,
                partialValid = partial + uint64_t(topKSlices_) * kMaxTopKCandidates * 8,
                counts = results + kMaxTopKCandidates * 8;
    int k = output == kTopK ? topK_ : kMaxTopKCandidates;
    void *params[] = {&logits_, &vocab, &k, &results, &counts, &partial, &partialValid, &tickets};
    NINFER_RETURN_IF_ERROR(cu_.check(cu_.launchKernel(topk_, unsigned(topKSlices_), 1, 1,
                                                      kTopKThreads, 1, 1, 0, stream_, params,
                                                      nullptr),
                                     "cannot launch the top-k sampling" + step));
    return cu_.check(cu_.memcpyDtoHAsync(hostTopK_, results, kTopKResultBytes, stream_),
                     "cannot copy the top-k candidates from the GPU" + step);
  }
  return cu_.check(cu_.memcpyDtoHAsync(hostIds_, ids, size_t(rows) * 4, stream_),
                   "cannot copy the sampled ids from the GPU" + step);
}

void CudaExecutor::captureGraph(int n, bool batch, Output output, CUgraphExec &decodeGraph) {
  // Thread-local mode: other threads' unrelated CUDA calls do not break the capture.
  CUresult rc = cu_.streamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  std::string why;
  if (rc != CUDA_SUCCESS) {
    why = "cannot begin stream capture: " + cu_.errorText(rc);
  } else {
    const Status enqueued = enqueueStep(n, batch, output, " (capturing a decode graph)");
    CUgraph graph = nullptr;
    rc = cu_.streamEndCapture(stream_, &graph); // always ends the capture, even after an error
    if (!enqueued.isOk())
      why = enqueued.message();
    else if (rc != CUDA_SUCCESS || !graph)
      why = "cannot end stream capture: " + cu_.errorText(rc);
    if (why.empty()) {
      rc = cu_.graphInstantiate(&decodeGraph, graph, 0);
      if (rc != CUDA_SUCCESS) {
        decodeGraph = nullptr;
        why = "cannot instantiate the decode graph: " + cu_.errorText(rc);
      }
    }
    if (graph)
      cu_.graphDestroy(graph); // the executable graph keeps what it needs
  }
  if (!why.empty()) {
    graphsEnabled_ = false; // no further attempts
    std::fprintf(stderr, "ninfer: note: CUDA graphs are off (%s); launching kernels one by one\n",
                 why.c_str());
  }
}

} // namespace

Result<std::unique_ptr<Executor>> createCudaExecutor(const PlanFile &plan, int deviceOrdinal) {
  Result<const CudaDriver *> driver = CudaDriver::get();
  if (!driver)
    return driver.status();
  auto executor = std::make_unique<CudaExecutor>(plan, **driver);
  NINFER_RETURN_IF_ERROR(executor->init(deviceOrdinal));
  return std::unique_ptr<Executor>(std::move(executor));
}

} // namespace ninfer
