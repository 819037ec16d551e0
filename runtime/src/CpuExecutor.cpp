// The CPU executor: the reference implementation of a plan. Weights become f32
// once at load (dummy weights are generated and rounded through their dtype, as
// the GPU fill does; CpuMemory.h checks first that the host has the memory for
// them); arenas, scratch and the thread pool are allocated once,
// so a step allocates nothing. Ops run in plan order through cpu:: kernels.
// A batch step runs every row-wise op (embedding, norms, linears, SwiGLU, adds)
// on all its rows at once, and RoPE, the KV append and attention row by row at
// that row's position in that row's sequence slot, with the same kernels a
// one-token step uses: each row's logits equal a single-sequence step's bit for
// bit (cpu::linear's result for a row does not depend on the other rows).
#include "CpuMemory.h"
#include "CpuOps.h"
#include "CpuThreadPool.h"
#include "Half.h"

#include "StepCheck.h"
#include "ninfer/DummyFill.h"
#include "ninfer/Executor.h"
#include "ninfer/KvFormat.h"
#include "ninfer/Plan.h"
#include "ninfer/QuantDType.h"
#include "ninfer/StepAbi.h"
#include "ninfer/TernaryDType.h"
#include "plan_generated.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace ninfer {
namespace {

using plan::BufferKind;
using plan::DType;
using plan::OpAttrs;

// An op with its buffers resolved to host pointers.
struct PreparedOp {
  const plan::Op* op = nullptr;
  OpAttrs kind = OpAttrs::NONE;
  void* in[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  void* out = nullptr;
  int64_t outWidth = 0;
  int index = 0; // in the plan's op list
};

float* asF32(void* p) { return static_cast<float*>(p); }

class CpuExecutor final : public Executor {
public:
  CpuExecutor(const PlanFile& file, int threads, CpuObserver* observer)
      : file_(file), pool_(threads), observer_(observer) {}

  Status init();
  Status forwardSequence(int sequence, const int32_t* tokens, int n, int pos,
                         float* logits) override;
  Status forwardBatch(const int32_t* tokens, const int32_t* positions, const int32_t* sequences,
                      int batch, float* logits) override;
  int maxBatch() const override { return file_.plan().max_batch(); }
  std::string name() const override { return "cpu (" + std::to_string(pool_.size()) + " threads)"; }
  bool hasAllRowsLogits() const override { return logitsOp_ >= 0; }
  Status forwardAllRows(const int32_t* tokens, int n, int pos, float* logits) override;

private:
  Status loadWeight(uint32_t index, const plan::Buffer& buffer);
  Status loadQuantWeight(uint32_t index, const plan::Buffer& buffer, int format);
  Status loadTernaryWeight(uint32_t index, const plan::Buffer& buffer);
  template <class Unit>
  const uint8_t* packedWeightBytes(uint32_t index, const plan::Buffer& buffer,
                                   std::vector<uint8_t>& generated, const Unit& unit);
  void* bufferPointer(uint32_t index);
  Status runOp(const PreparedOp& p, const StepState& step);
  void runRope(const PreparedOp& p, const StepState& step);
  void runAttention(const PreparedOp& p, const StepState& step);
  // Runs the ops of a step whose checks passed.
  Status runStep(const int32_t* tokens, const StepState& step);

  const PlanFile& file_;
  CpuThreadPool pool_;
  CpuObserver* observer_ = nullptr;
  std::vector<float> activations_;
  std::vector<uint16_t> kv_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  // Per buffer: f32 weights owned here (empty when used straight from the mapping).
  std::vector<std::vector<float>> ownedWeights_;
  std::vector<const float*> weights_;
  std::vector<PreparedOp> ops_;
  std::vector<float> attentionScratch_;
  std::vector<float> kvDecoded_; // f16 K and V rows of one attention op as f32
  int64_t attentionStride_ = 0;
  std::vector<float> ropeScratch_; // cos/sin table, then dynamic inv_freq
  int maxHeadDim_ = 0;
  int embeddingVocab_ = 0; // smallest table of any Embedding op
  // The last-row-only linear op that writes the logits buffer, when it is the
  // plan's last op (so its all-rows result is the logits of every row); -1 if not.
  int logitsOp_ = -1;
  float* allRowsLogits_ = nullptr; // set during forwardAllRows()
};

// The packed bytes of a quantized or ternary weight: the plan file's, or for a
// dummy weight generated 16-bit unit by unit (unit(u, units)) into `generated`,
// as the GPU fill does. Null when the plan has neither.
template <class Unit>
const uint8_t* CpuExecutor::packedWeightBytes(uint32_t index, const plan::Buffer& b,
                                              std::vector<uint8_t>& generated, const Unit& unit) {
  if (!b.dummy())
    return file_.weightData(index);
  const uint64_t units = b.size_bytes() / 2;
  generated.resize(size_t(units) * 2);
  pool_.parallelFor(int64_t(units), 1 << 14, [&](int64_t begin, int64_t end, int) {
    for (int64_t u = begin; u < end; ++u) {
      const uint16_t value = unit(uint64_t(u), units);
      std::memcpy(generated.data() + 2 * u, &value, 2);
    }
  });
  return generated.data();
}

// Group-quantized weights become f32 once, through the shared header's
// reference decoding (so the CPU result defines what the kernels must match).
// Dummy ones are generated packed, as the GPU fill does (quant::dummyUnit),
// then decoded the same way.
// The loader checked: 2-D, cols a multiple of 128, size_bytes exact.
Status CpuExecutor::loadQuantWeight(uint32_t index, const plan::Buffer& b, int format) {
  std::vector<uint8_t> generated;
  const uint8_t* data =
      packedWeightBytes(index, b, generated, [&](uint64_t u, uint64_t units) {
        return quant::dummyUnit(format, b.dummy()->seed(), u, units, b.dummy()->scale());
      });
  if (!data)
    return Status::error("weight buffer " + std::to_string(index) + " has no data");
  const quant::QuantFormatTraits traits =
      quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format));
  const int64_t rows = b.shape()->Get(0);
  const int64_t cols = b.shape()->Get(1);
  std::vector<float>& w = ownedWeights_[index];
  w.resize(size_t(rows * cols));
  const uint64_t rowWeightBytes = uint64_t(quant::quantRowWeightBytes(traits.bits, cols));
  const uint64_t rowScaleBytes = uint64_t(quant::quantRowScaleBytes(traits.groupSize, cols));
  const uint8_t* scalePlane = data + quant::quantScalePlaneOffset(traits.bits, rows, cols);
  pool_.parallelFor(rows, 16, [&](int64_t begin, int64_t end, int) {
    // Rows start 16-byte aligned inside a 4096-aligned segment of the mapping,
    // but copying keeps the decode independent of where the bytes lie.
    std::vector<unsigned int> words(rowWeightBytes / 4);
    std::vector<unsigned short> scales(rowScaleBytes / 2);
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(words.data(), data + uint64_t(r) * rowWeightBytes, rowWeightBytes);
      std::memcpy(scales.data(), scalePlane + uint64_t(r) * rowScaleBytes, rowScaleBytes);
      float* out = w.data() + r * cols;
      for (int64_t k = 0; k < cols; ++k) {
        const unsigned int code = quant::quantCodeAt(traits.bits, words.data(), k);
        const int q = int(code) - (1 << (traits.bits - 1));
        out[k] = halfBitsToFloat(quant::quantGroupScaleBitsOf(
                     traits.groupSize, scales.data(), k / traits.groupSize)) *
                 float(q);
      }
    }
  });
  weights_[index] = w.data();
  return Status::ok();
}

// Ternary weights become f32 {-s, 0, +s} once (exactly the values of the
// checkpoint they were packed from, so a TQ2 or TQ1 plan computes what its bf16
// plan does). Dummy ternary weights are generated packed, as the GPU fill does,
// then decoded the same way. The loader checked the shape and size.
Status CpuExecutor::loadTernaryWeight(uint32_t index, const plan::Buffer& b) {
  const int64_t rows = b.shape()->Get(0);
  const int64_t cols = b.shape()->Get(1);
  const int dtype = int(b.dtype());
  std::vector<uint8_t> generated;
  const uint8_t* data =
      packedWeightBytes(index, b, generated, [&](uint64_t u, uint64_t units) {
        return ternary::dummyUnitOf(dtype, b.dummy()->seed(), u, units, b.dummy()->scale());
      });
  if (!data)
    return Status::error("weight buffer " + std::to_string(index) + " has no data");
  std::vector<float>& w = ownedWeights_[index];
  w.resize(size_t(rows * cols));
  pool_.parallelFor(rows, 16, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      ternary::dequantizeRowOf(dtype, data, rows, cols, r, w.data() + r * cols);
  });
  weights_[index] = w.data();
  return Status::ok();
}

Status CpuExecutor::loadWeight(uint32_t index, const plan::Buffer& b) {
  if (ternary::isTernaryPlanDType(int(b.dtype())))
    return loadTernaryWeight(index, b);
  const int format = quant::formatOfPlanDType(int(b.dtype()));
  if (format >= 0)
    return loadQuantWeight(index, b, format);
  const uint64_t count =
      b.size_bytes() / (b.dtype() == DType::F32 || b.dtype() == DType::I32 ? 4 : 2);
  const DType dtype = b.dtype();
  if (const plan::DummyFill* fill = b.dummy()) {
    std::vector<float>& w = ownedWeights_[index];
    w.resize(count);
    const uint32_t seed = fill->seed();
    const float scale = fill->scale(), offset = fill->offset();
    pool_.parallelFor(int64_t(count), 1 << 16, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) {
        const float value = dummyUniform(seed, uint64_t(i)) * scale + offset;
        w[i] = dtype == DType::F16    ? roundToHalf(value)
               : dtype == DType::BF16 ? roundThroughBf16(value)
                                      : value;
      }
    });
    weights_[index] = w.data();
    return Status::ok();
  }
  const uint8_t* data = file_.weightData(index);
  if (!data)
    return Status::error("weight buffer " + std::to_string(index) + " has no data");
  if (dtype == DType::F32 && reinterpret_cast<uintptr_t>(data) % alignof(float) == 0) {
    weights_[index] = reinterpret_cast<const float*>(data);
    return Status::ok();
  }
  std::vector<float>& w = ownedWeights_[index];
  w.resize(count);
  pool_.parallelFor(int64_t(count), 1 << 16, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      if (dtype == DType::F32) {
        std::memcpy(&w[i], data + 4 * i, 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        w[i] = dtype == DType::F16 ? halfBitsToFloat(bits) : bf16ToFloat(bits);
      }
    }
  });
  weights_[index] = w.data();
  return Status::ok();
}

void* CpuExecutor::bufferPointer(uint32_t index) {
  const plan::Buffer* b = file_.plan().buffers()->Get(index);
  switch (b->kind()) {
  case BufferKind::Weight:
    return const_cast<float*>(weights_[index]);
  case BufferKind::Activation:
    return activations_.data() + b->offset() / sizeof(float);
  case BufferKind::KvCache:
    return kv_.data() + b->offset() / sizeof(uint16_t);
  case BufferKind::Tokens:
    return tokens_.data();
  case BufferKind::Logits:
    return logits_.data();
  case BufferKind::Workspace:
    return nullptr; // scratch of the CUDA kernels; the CPU ops keep their own
  }
  return nullptr;
}

Status CpuExecutor::init() {
  const plan::Plan& p = file_.plan();
  const auto& buffers = *p.buffers();
  // The arenas cover what the buffers use (the loader checked that this lies
  // within the memory plan's sizes).
  uint64_t activationEnd = 0, kvEnd = 0;
  for (const plan::Buffer* b : buffers) {
    if (b->kind() == BufferKind::Activation)
      activationEnd = std::max(activationEnd, b->offset() + b->size_bytes());
    else if (b->kind() == BufferKind::KvCache)
      kvEnd = std::max(kvEnd, b->offset() + b->size_bytes());
  }
  activations_.assign((activationEnd + 3) / 4, 0.0f);
  kv_.assign((kvEnd + 1) / 2, 0);
  tokens_.assign(size_t(p.max_step_tokens()), 0);
  logits_.assign(size_t(p.max_batch()) * size_t(p.model()->vocab_size()), 0.0f);
  ownedWeights_.resize(buffers.size());
  weights_.assign(buffers.size(), nullptr);
  for (uint32_t i = 0; i < buffers.size(); ++i)
    if (buffers.Get(i)->kind() == BufferKind::Weight && buffers.Get(i)->dtype() != DType::I32)
      NINFER_RETURN_IF_ERROR(loadWeight(i, *buffers.Get(i)));

  int maxAttentionHeads = 0;
  uint64_t decodedFloats = 0;
  for (const plan::Op* op : *p.ops()) {
    PreparedOp prepared;
    prepared.op = op;
    prepared.index = int(ops_.size());
    prepared.kind = op->attrs_type();
    for (uint32_t k = 0; k < op->inputs()->size() && k < 5; ++k)
      prepared.in[k] = bufferPointer(op->inputs()->Get(k));
    prepared.out = bufferPointer(op->outputs()->Get(0));
    const plan::Buffer* out = buffers.Get(op->outputs()->Get(0));
    prepared.outWidth = int64_t(out->size_bytes() / 4 / uint64_t(out->shape()->Get(0)));
    if (const auto* a = op->attrs_as_RopeAttrs())
      maxHeadDim_ = std::max(maxHeadDim_, a->head_dim());
    if (const auto* a = op->attrs_as_AttentionAttrs()) {
      maxAttentionHeads = 1;
      const bool q8 = buffers.Get(op->inputs()->Get(3))->dtype() == DType::Q8_KV;
      if (!q8)
        decodedFloats = std::max(decodedFloats, 2 * uint64_t(a->context()) *
                                                    uint64_t(a->kv_heads()) *
                                                    uint64_t(a->head_dim()));
    }
    if (const auto* a = op->attrs_as_EmbeddingAttrs())
      embeddingVocab_ = embeddingVocab_ ? std::min(embeddingVocab_, a->vocab()) : a->vocab();
    ops_.push_back(prepared);
  }
  if (!ops_.empty()) {
    const PreparedOp& last = ops_.back();
    const auto* a = last.op->attrs_as_LinearAttrs();
    if (a && a->last_row_only() && !a->residual() &&
        buffers.Get(last.op->outputs()->Get(0))->kind() == BufferKind::Logits &&
        a->out_features() == p.model()->vocab_size())
      logitsOp_ = last.index;
  }
  ropeScratch_.assign(size_t(p.max_step_tokens()) * maxHeadDim_ + maxHeadDim_, 0.0f);
  if (maxAttentionHeads) {
    attentionStride_ = p.context();
    attentionScratch_.assign(size_t(pool_.size()) * size_t(attentionStride_), 0.0f);
    kvDecoded_.assign(size_t(decodedFloats), 0.0f);
  }
  return Status::ok();
}

Status CpuExecutor::runOp(const PreparedOp& p, const StepState& step) {
  const plan::Op& op = *p.op;
  const int n = step.nTokens;
  switch (p.kind) {
  case OpAttrs::EmbeddingAttrs: {
    const auto* a = op.attrs_as_EmbeddingAttrs();
    const float* table = asF32(p.in[1]);
    if (observer_)
      table = observer_->weight(p.index, table);
    // forward() checked the ids against every table before anything ran.
    cpu::embedding(static_cast<const int32_t*>(p.in[0]), n, table, a->dim(), asF32(p.out));
    return Status::ok();
  }
  case OpAttrs::RmsNormAttrs: {
    const auto* a = op.attrs_as_RmsNormAttrs();
    cpu::rmsNorm(pool_, asF32(p.in[0]), asF32(p.in[1]), asF32(p.out), n, p.outWidth, a->dim(),
                 a->eps());
    return Status::ok();
  }
  case OpAttrs::LinearAttrs: {
    const auto* a = op.attrs_as_LinearAttrs();
    // forwardAllRows(): the logits op computes every row, into the caller's buffer;
    // batch steps: every row (each is the last of its sequence), into the logits buffer.
    const bool lastRow =
        a->last_row_only() && !(allRowsLogits_ && p.index == logitsOp_) && step.batch == 0;
    const int rows = lastRow ? 1 : n;
    const float* x = asF32(p.in[0]) + (lastRow ? int64_t(n - 1) * a->in_features() : 0);
    float* out = lastRow || !a->last_row_only() || step.batch ? asF32(p.out) : allRowsLogits_;
    const float* w = asF32(p.in[1]);
    if (observer_) {
      observer_->linearInput(p.index, asF32(p.in[0]), n, a->in_features());
      w = observer_->weight(p.index, w);
    }
    cpu::linear(pool_, x, rows, w, a->has_bias() ? asF32(p.in[2]) : nullptr, a->in_features(),
                a->out_features(), out,
                a->residual() ? asF32(p.in[a->has_bias() ? 3 : 2]) : nullptr);
    return Status::ok();
  }
  case OpAttrs::RopeAttrs:
    runRope(p, step);
    return Status::ok();
  case OpAttrs::AttentionAttrs:
    runAttention(p, step);
    return Status::ok();
  case OpAttrs::SwiGluAttrs:
    cpu::swiGlu(asF32(p.in[0]), asF32(p.in[1]), asF32(p.out),
                int64_t(n) * op.attrs_as_SwiGluAttrs()->dim());
    return Status::ok();
  case OpAttrs::AddAttrs:
    cpu::add(asF32(p.in[0]), asF32(p.in[1]), asF32(p.out),
             int64_t(n) * op.attrs_as_AddAttrs()->dim());
    return Status::ok();
  case OpAttrs::NONE:
    break;
  }
  return Status::error("op kind not supported by the CPU executor");
}

// Rows [first, first + count) of the step, all at consecutive positions of one
// sequence: the whole of a single-sequence step, one row of a batch step.
struct RowRange {
  int first, count, pos, sequence, sequenceEnd;
};

template <class Body> void forEachRowRange(const StepState& step, const Body& body) {
  if (step.batch == 0) {
    body(RowRange{0, step.nTokens, step.pos, step.seq, stepSequenceEnd(&step, 0)});
    return;
  }
  for (int t = 0; t < step.nTokens; ++t)
    body(RowRange{t, 1, stepPosition(&step, t), stepSequence(&step, t), stepSequenceEnd(&step, t)});
}

void CpuExecutor::runRope(const PreparedOp& p, const StepState& step) {
  const auto* a = p.op->attrs_as_RopeAttrs();
  const int64_t width = int64_t(a->heads()) * a->head_dim();
  float* cosSin = ropeScratch_.data() + maxHeadDim_;
  forEachRowRange(step, [&](const RowRange& r) {
    const float* invFreq = asF32(p.in[1]);
    if (a->long_factors() && r.sequenceEnd > a->original_max_positions())
      invFreq += a->head_dim() / 2;
    if (a->dynamic_factor() > 0 && r.sequenceEnd > a->original_max_positions()) {
      cpu::dynamicNtkInvFreq(a->theta(), a->dynamic_factor(), a->original_max_positions(),
                             a->head_dim(), r.sequenceEnd, ropeScratch_.data());
      invFreq = ropeScratch_.data();
    }
    cpu::rope(asF32(p.in[0]) + r.first * width, asF32(p.out) + r.first * width, r.count, r.pos,
              a->heads(), a->head_dim(), invFreq, a->attention_factor(), cosSin);
  });
}

void CpuExecutor::runAttention(const PreparedOp& p, const StepState& step) {
  const plan::Op& op = *p.op;
  const auto* a = op.attrs_as_AttentionAttrs();
  const bool q8 = file_.plan().buffers()->Get(op.inputs()->Get(3))->dtype() == DType::Q8_KV;
  // One sequence's cache; the slots of a plan of several sequences follow each other.
  const uint64_t slotBytes =
      q8 ? uint64_t(kv::q8CacheBytes(a->context(), a->kv_heads(), a->head_dim()))
         : uint64_t(a->context()) * uint64_t(a->kv_heads()) * uint64_t(a->head_dim()) * 2;
  const int64_t qWidth = int64_t(a->heads()) * a->head_dim();
  const int64_t kvWidth = int64_t(a->kv_heads()) * a->head_dim();
  const cpu::AttentionShape shape{a->heads(), a->kv_heads(), a->head_dim(), a->window(),
                                  a->scale()};
  forEachRowRange(step, [&](const RowRange& r) {
    const cpu::KvCache kCache{static_cast<uint8_t*>(p.in[3]) + r.sequence * slotBytes, q8,
                              a->context()};
    const cpu::KvCache vCache{static_cast<uint8_t*>(p.in[4]) + r.sequence * slotBytes, q8,
                              a->context()};
    cpu::appendKv(asF32(p.in[1]) + r.first * kvWidth, asF32(p.in[2]) + r.first * kvWidth, r.count,
                  r.pos, a->kv_heads(), a->head_dim(), kCache, vCache);
    cpu::attention(pool_, asF32(p.in[0]) + r.first * qWidth, r.count, r.pos, kCache, vCache, shape,
                   attentionScratch_.data(), attentionStride_, asF32(p.out) + r.first * qWidth,
                   kvDecoded_.empty() ? nullptr : kvDecoded_.data());
  });
}

Status CpuExecutor::forwardSequence(int sequence, const int32_t* tokens, int n, int pos,
                                    float* logits) {
  NINFER_RETURN_IF_ERROR(checkLogits(logits));
  NINFER_RETURN_IF_ERROR(checkStep(file_.plan(), tokens, n, pos, embeddingVocab_, sequence));
  StepState step{};
  step.pos = pos;
  step.nTokens = n;
  step.seq = sequence;
  step.forwardEnd = forwardEnd(sequence);
  NINFER_RETURN_IF_ERROR(runStep(tokens, step));
  const size_t vocab = size_t(file_.plan().model()->vocab_size());
  std::copy(logits_.begin(), logits_.begin() + vocab, logits);
  return Status::ok();
}

Status CpuExecutor::forwardBatch(const int32_t* tokens, const int32_t* positions,
                                 const int32_t* sequences, int batch, float* logits) {
  NINFER_RETURN_IF_ERROR(checkLogits(logits, "forwardBatch"));
  NINFER_RETURN_IF_ERROR(
      checkBatchStep(file_.plan(), tokens, positions, sequences, batch, embeddingVocab_));
  StepState step{};
  step.nTokens = batch;
  step.batch = batch;
  for (int t = 0; t < batch; ++t) {
    step.rowPos[t] = positions[t];
    step.rowSeq[t] = sequences[t];
  }
  NINFER_RETURN_IF_ERROR(runStep(tokens, step));
  const size_t vocab = size_t(file_.plan().model()->vocab_size());
  std::copy(logits_.begin(), logits_.begin() + size_t(batch) * vocab, logits);
  return Status::ok();
}

Status CpuExecutor::forwardAllRows(const int32_t* tokens, int n, int pos, float* logits) {
  if (logitsOp_ < 0)
    return Executor::forwardAllRows(tokens, n, pos, logits);
  NINFER_RETURN_IF_ERROR(checkLogits(logits));
  NINFER_RETURN_IF_ERROR(checkStep(file_.plan(), tokens, n, pos, embeddingVocab_));
  StepState step{};
  step.pos = pos;
  step.nTokens = n;
  step.forwardEnd = forwardEnd(0);
  allRowsLogits_ = logits;
  Status status = runStep(tokens, step);
  allRowsLogits_ = nullptr;
  return status;
}

Status CpuExecutor::runStep(const int32_t* tokens, const StepState& step) {
  std::copy(tokens, tokens + step.nTokens, tokens_.begin());
  for (const PreparedOp& op : ops_) {
    if (observer_ && !observer_->beforeOp(op.index, activations_.data(), activations_.size()))
      continue;
    Status status = runOp(op, step);
    if (!status.isOk()) {
      const std::string opName = op.op->name() ? op.op->name()->str() : std::string();
      return Status::error("op " + opName + ": " + status.message());
    }
  }
  return Status::ok();
}

} // namespace

Result<std::unique_ptr<Executor>> createCpuExecutor(const PlanFile& plan, int threads,
                                                    CpuObserver* observer) {
  if (threads <= 0)
    threads = int(std::max(1u, std::thread::hardware_concurrency()));
  NINFER_RETURN_IF_ERROR(checkCpuMemory(cpuExecutorMemory(plan), availableHostMemory()));
  try {
    auto executor = std::make_unique<CpuExecutor>(plan, threads, observer);
    NINFER_RETURN_IF_ERROR(executor->init());
    return std::unique_ptr<Executor>(std::move(executor));
  } catch (const std::bad_alloc&) {
    return Status::error("not enough memory for the CPU executor (it keeps all weights as f32)");
  } catch (const std::system_error& e) {
    return Status::error(std::string("cannot start CPU worker threads: ") + e.what());
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot create the CPU executor: ") + e.what());
  }
}

} // namespace ninfer
