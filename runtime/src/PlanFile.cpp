// Opens a .nplan: maps it read-only, checks the container (size prefix,
// identifier, format version, flatbuffers Verifier), then checks the semantics
// every executor relies on (buffer indices, kinds, sizes, arena and file
// bounds, op arities and shapes) so that executors can trust the plan and never
// read out of bounds. Every error is one line naming the file and the index.
#include "ninfer/Plan.h"
#include "ninfer/PlanDType.h"
#include "ninfer/StepAbi.h"

#include "ninfer/Format.h"
#include "ninfer/KvFormat.h"
#include "ninfer/QuantDType.h"
#include "ninfer/TernaryDType.h"
#include "plan_generated.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ninfer {
namespace {

using plan::BufferKind;
using plan::DType;
using plan::OpAttrs;

uint64_t dtypeSize(DType dtype) { return plainDTypeBytes(dtype); }

std::string opKindName(OpAttrs kind) {
  std::string name = plan::EnumNameOpAttrs(kind);
  const std::string suffix = "Attrs";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  return name.empty() ? "unknown" : name;
}

// What the checks need to know about a buffer, computed once.
struct BufferInfo {
  const plan::Buffer* buffer = nullptr;
  uint64_t elements = 0;
  uint64_t rows = 0;  // shape[0]
  uint64_t width = 0; // elements / rows
};

// Collects the first error; the checks read top to bottom and stop there.
class PlanChecker {
public:
  PlanChecker(const plan::Plan& p, uint64_t fileSize, uint64_t flatbufferEnd)
      : plan_(p), fileSize_(fileSize), flatbufferEnd_(flatbufferEnd) {}

  Status run() {
    NINFER_RETURN_IF_ERROR(checkHeader());
    NINFER_RETURN_IF_ERROR(checkBuffers());
    NINFER_RETURN_IF_ERROR(checkSpecialBuffers());
    NINFER_RETURN_IF_ERROR(checkOps());
    return checkTokenizer();
  }

private:
  static Status fail(const std::string& message) { return Status::error(message); }

  std::string bufferLabel(uint32_t index) const {
    const plan::Buffer* b = plan_.buffers()->Get(index);
    std::ostringstream os;
    os << "buffer " << index;
    if (b->name() && b->name()->size() > 0)
      os << " (" << b->name()->str() << ")";
    return os.str();
  }

  Status checkHeader() {
    if (!plan_.model())
      return fail("the plan has no model info");
    if (plan_.model()->vocab_size() <= 0)
      return fail("the plan's vocab_size is " + std::to_string(plan_.model()->vocab_size()));
    if (!plan_.memory())
      return fail("the plan has no memory plan");
    // Far beyond any device; also keeps the sums below from overflowing.
    const uint64_t limit = uint64_t(1) << 50;
    const plan::MemoryPlan& m = *plan_.memory();
    if (m.weight_bytes() > limit || m.activation_bytes() > limit || m.kv_bytes() > limit ||
        m.workspace_bytes() > limit || plan_.weights_size() > limit ||
        plan_.weights_file_offset() > limit)
      return fail("the plan's memory sizes are implausible (corrupt plan?)");
    if (plan_.context() <= 0)
      return fail("the plan's context is " + std::to_string(plan_.context()));
    if (plan_.max_step_tokens() <= 0)
      return fail("the plan's max_step_tokens is " + std::to_string(plan_.max_step_tokens()));
    const int maxBatch = plan_.max_batch();
    if (maxBatch < 1 || maxBatch > kMaxBatch || maxBatch > plan_.max_step_tokens())
      return fail("the plan's max_batch is " + std::to_string(maxBatch) + ", expected 1 to " +
                  std::to_string(std::min(kMaxBatch, plan_.max_step_tokens())) + " (at most " +
                  std::to_string(kMaxBatch) + " and max_step_tokens)");
    if (maxBatch > 1 && plan_.format_version() < formatVersionFor(maxBatch))
      return fail("plan format version " + std::to_string(plan_.format_version()) +
                  " cannot hold a plan of several sequences (max_batch " +
                  std::to_string(maxBatch) + ")");
    if (!plan_.buffers() || plan_.buffers()->size() == 0)
      return fail("the plan has no buffers");
    if (!plan_.ops() || plan_.ops()->size() == 0)
      return fail("the plan has no ops");
    return Status::ok();
  }

  Status checkBuffers() {
    const auto& buffers = *plan_.buffers();
    infos_.resize(buffers.size());
    const plan::MemoryPlan& memory = *plan_.memory();
    bool anyFileWeight = false;
    for (uint32_t i = 0; i < buffers.size(); ++i) {
      const plan::Buffer* b = buffers.Get(i);
      BufferInfo& info = infos_[i];
      info.buffer = b;
      const std::string label = bufferLabel(i);
      if (flatbuffers::IsOutRange(b->kind(), BufferKind::MIN, BufferKind::MAX))
        return fail(label + " has unknown kind " + std::to_string(int(b->kind())));
      if (flatbuffers::IsOutRange(b->dtype(), DType::MIN, DType::MAX))
        return fail(label + " has unknown dtype " + std::to_string(int(b->dtype())));
      if (!b->shape() || b->shape()->size() == 0)
        return fail(label + " has no shape");
      // The Verifier checks a vector's length field for 4-byte alignment only;
      // reading misaligned int64 dims would be undefined behaviour.
      if (reinterpret_cast<uintptr_t>(b->shape()->data()) % alignof(int64_t) != 0)
        return fail("corrupt plan (misaligned shape of " + label + ")");
      uint64_t elements = 1;
      for (int64_t dim : *b->shape()) {
        if (dim <= 0 || dim > (int64_t(1) << 40) || elements > (uint64_t(1) << 50) / uint64_t(dim))
          return fail(label + " has an invalid shape dimension " + std::to_string(dim));
        elements *= uint64_t(dim);
      }
      info.elements = elements;
      info.rows = uint64_t(b->shape()->Get(0));
      info.width = elements / info.rows;
      uint64_t expected = elements * dtypeSize(b->dtype());
      // Group-quantized weights: [rows, cols] packed as ninfer/QuantFormats.h says.
      const int quantFormat = quant::formatOfPlanDType(int(b->dtype()));
      if (quantFormat >= 0) {
        const auto traits = quant::quantFormatTraits(quant::QuantFormatId(quantFormat));
        if (b->kind() != BufferKind::Weight || b->shape()->size() != 2 ||
            !quant::isQuantizableCols(int64_t(info.width)))
          return fail(label + ": " + plan::EnumNameDType(b->dtype()) +
                      " needs a 2-D weight whose columns are a multiple of 128");
        expected = uint64_t(
            quant::quantTensorBytes(traits.bits, traits.groupSize, int64_t(info.rows),
                                    int64_t(info.width)));
      }
      // Ternary weights: codes + one f32 scale (ninfer/TernaryDType.h).
      const int dtypeValue = int(b->dtype());
      const bool ternaryWeight = ternary::isTernaryPlanDType(dtypeValue);
      if (ternaryWeight) {
        if (b->kind() != BufferKind::Weight || b->shape()->size() != 2 ||
            !ternary::isPackableColsOf(dtypeValue, int64_t(info.width)))
          return fail(label + ": " + plan::EnumNameDType(b->dtype()) +
                      " needs a 2-D weight whose columns are a multiple of " +
                      std::to_string(ternary::colsMultipleOf(dtypeValue)));
        expected =
            uint64_t(ternary::tensorBytesOf(dtypeValue, int64_t(info.rows), int64_t(info.width)));
      }
      // KV caches: [context, kv_heads, head_dim] in a plan of one sequence,
      // [max_batch, context, kv_heads, head_dim] (one slot per sequence) otherwise.
      if (b->kind() == BufferKind::KvCache &&
          (plan_.max_batch() == 1
               ? b->shape()->size() != 3
               : b->shape()->size() != 4 || b->shape()->Get(0) != plan_.max_batch()))
        return fail(
            label + ": a KV cache must be [" +
            (plan_.max_batch() == 1 ? std::string() : std::to_string(plan_.max_batch()) + ", ") +
            "context, kv_heads, head_dim] in a plan of max_batch " +
            std::to_string(plan_.max_batch()));
      // int8 KV caches: codes + a scale per (position, kv head) (ninfer/KvFormat.h), per slot.
      if (b->dtype() == DType::Q8_KV) {
        if (b->kind() != BufferKind::KvCache)
          return fail(label + ": Q8_KV needs a [context, kv_heads, head_dim] KV cache");
        const uint32_t d = b->shape()->size() - 3;
        expected = uint64_t(plan_.max_batch()) *
                   uint64_t(kv::q8CacheBytes(b->shape()->Get(d), b->shape()->Get(d + 1),
                                             b->shape()->Get(d + 2)));
      }
      if (b->size_bytes() != expected)
        return fail(label + ": size_bytes " + std::to_string(b->size_bytes()) +
                    " does not match its shape and dtype " + plan::EnumNameDType(b->dtype()) +
                    " (" + std::to_string(expected) + " bytes)");
      const uint64_t size = b->size_bytes();
      switch (b->kind()) {
      case BufferKind::Weight:
        if (b->dummy()) {
          if (b->dtype() == DType::I32)
            return fail(label + ": dummy weights must be floating point");
          break;
        }
        anyFileWeight = true;
        if (b->offset() % (quantFormat >= 0 || ternaryWeight ? 16 : dtypeSize(b->dtype())) != 0)
          return fail(label + ": weight offset " + std::to_string(b->offset()) +
                      " is not aligned to its dtype");
        if (b->offset() > plan_.weights_size() || size > plan_.weights_size() - b->offset())
          return fail(label + ": weight segment [" + std::to_string(b->offset()) + ", +" +
                      std::to_string(size) + ") lies outside the weight area (" +
                      std::to_string(plan_.weights_size()) + " bytes)");
        break;
      case BufferKind::Activation:
        if (b->dtype() != DType::F32)
          return fail(label + ": activations must be F32");
        if (b->offset() % 4 != 0 || b->offset() > memory.activation_bytes() ||
            size > memory.activation_bytes() - b->offset())
          return fail(label + ": arena range [" + std::to_string(b->offset()) + ", +" +
                      std::to_string(size) + ") lies outside the activation arena (" +
                      std::to_string(memory.activation_bytes()) + " bytes) or is misaligned");
        break;
      case BufferKind::KvCache:
        if (b->dtype() != DType::F16 && b->dtype() != DType::Q8_KV)
          return fail(label + ": KV caches must be F16 or Q8_KV");
        if (b->offset() % 16 != 0 || b->offset() > memory.kv_bytes() ||
            size > memory.kv_bytes() - b->offset())
          return fail(label + ": arena range [" + std::to_string(b->offset()) + ", +" +
                      std::to_string(size) + ") lies outside the KV arena (" +
                      std::to_string(memory.kv_bytes()) + " bytes) or is misaligned");
        break;
      case BufferKind::Workspace:
        if (b->dtype() != DType::F32)
          return fail(label + ": workspaces must be F32");
        if (b->offset() % 16 != 0 || b->offset() > memory.workspace_bytes() ||
            size > memory.workspace_bytes() - b->offset())
          return fail(label + ": range [" + std::to_string(b->offset()) + ", +" +
                      std::to_string(size) + ") lies outside the workspace (" +
                      std::to_string(memory.workspace_bytes()) + " bytes) or is misaligned");
        break;
      case BufferKind::Tokens:
        if (b->dtype() != DType::I32 || elements < uint64_t(plan_.max_step_tokens()))
          return fail(label + ": the tokens buffer must be I32 with max_step_tokens (" +
                      std::to_string(plan_.max_step_tokens()) + ") elements");
        break;
      case BufferKind::Logits:
        if (b->dtype() != DType::F32 ||
            elements != uint64_t(plan_.max_batch()) * uint64_t(plan_.model()->vocab_size()))
          return fail(label + ": the logits buffer must be F32 with max_batch x vocab_size (" +
                      std::to_string(plan_.max_batch()) + " x " +
                      std::to_string(plan_.model()->vocab_size()) + ") elements");
        break;
      }
    }
    if (anyFileWeight) {
      const uint64_t start = plan_.weights_file_offset();
      if (start < flatbufferEnd_ || start % kWeightAlignment != 0)
        return fail("the weight area offset " + std::to_string(start) +
                    " overlaps the flatbuffer or is not 4096-aligned");
      if (start > fileSize_ || plan_.weights_size() > fileSize_ - start)
        return fail("the weight area ends at byte " + std::to_string(start + plan_.weights_size()) +
                    ", past the end of the file (" + std::to_string(fileSize_) +
                    " bytes): truncated plan?");
    }
    return Status::ok();
  }

  Status checkSpecialBuffers() {
    const uint32_t count = plan_.buffers()->size();
    if (plan_.tokens_buffer() >= count ||
        infos_[plan_.tokens_buffer()].buffer->kind() != BufferKind::Tokens)
      return fail("tokens_buffer " + std::to_string(plan_.tokens_buffer()) +
                  " is not a Tokens buffer");
    if (plan_.logits_buffer() >= count ||
        infos_[plan_.logits_buffer()].buffer->kind() != BufferKind::Logits)
      return fail("logits_buffer " + std::to_string(plan_.logits_buffer()) +
                  " is not a Logits buffer");
    return Status::ok();
  }

  // Checks of one op; `label_` prefixes every message.
  Status opFail(const std::string& message) const { return fail(label_ + ": " + message); }

  Status expectKind(const char* role, uint32_t index, std::initializer_list<BufferKind> kinds) {
    const BufferKind kind = infos_[index].buffer->kind();
    for (BufferKind k : kinds)
      if (k == kind)
        return Status::ok();
    std::string expected;
    for (BufferKind k : kinds)
      expected += std::string(expected.empty() ? "" : " or ") + plan::EnumNameBufferKind(k);
    return opFail(std::string(role) + " is " + bufferLabel(index) + " of kind " +
                  plan::EnumNameBufferKind(kind) + ", expected " + expected);
  }

  Status expectWidth(const char* role, uint32_t index, uint64_t width) {
    if (infos_[index].width != width)
      return opFail(std::string(role) + " " + bufferLabel(index) + " has rows of " +
                    std::to_string(infos_[index].width) + " values, expected " +
                    std::to_string(width));
    return Status::ok();
  }

  // A step writes or reads up to max_step_tokens rows of every activation.
  Status expectStepRows(const char* role, uint32_t index) {
    if (infos_[index].rows < uint64_t(plan_.max_step_tokens()))
      return opFail(std::string(role) + " " + bufferLabel(index) + " has " +
                    std::to_string(infos_[index].rows) + " rows, fewer than max_step_tokens");
    return Status::ok();
  }

  Status expectActivation(const char* role, uint32_t index, uint64_t width) {
    NINFER_RETURN_IF_ERROR(expectKind(role, index, {BufferKind::Activation}));
    NINFER_RETURN_IF_ERROR(expectWidth(role, index, width));
    return expectStepRows(role, index);
  }

  Status expectWeight(const char* role, uint32_t index, uint64_t elements) {
    NINFER_RETURN_IF_ERROR(expectKind(role, index, {BufferKind::Weight}));
    const BufferInfo& info = infos_[index];
    if (info.buffer->dtype() == DType::I32)
      return opFail(std::string(role) + " " + bufferLabel(index) + " must be floating point");
    if (ternary::isTernaryPlanDType(int(info.buffer->dtype())) && std::string(role) != "weight")
      return opFail(std::string(role) + " " + bufferLabel(index) + " is " +
                    plan::EnumNameDType(info.buffer->dtype()) +
                    ", which only linear weights may be");
    if (info.elements != elements)
      return opFail(std::string(role) + " " + bufferLabel(index) + " has " +
                    std::to_string(info.elements) + " values, expected " +
                    std::to_string(elements));
    return Status::ok();
  }

  static bool positive(int value) { return value > 0; }

  bool overlaps(uint32_t a, uint32_t b) const {
    const plan::Buffer* x = infos_[a].buffer;
    const plan::Buffer* y = infos_[b].buffer;
    if (x->kind() != y->kind() ||
        (x->kind() != BufferKind::Activation && x->kind() != BufferKind::KvCache))
      return a == b && x->kind() != BufferKind::Weight;
    return x->offset() < y->offset() + y->size_bytes() &&
           y->offset() < x->offset() + x->size_bytes();
  }

  // Elementwise ops may work in place (output at the input's offset); anything
  // else that overlaps would read values the op already overwrote.
  // elementwise: the output may start exactly where an input does (each element
  // is read before it is written); aliasableInput: the one input for which that
  // holds when the op is not elementwise as a whole (-1: none).
  Status checkAliasing(const plan::Op& op, bool elementwise, int aliasableInput = -1) {
    const uint32_t out = op.outputs()->Get(0);
    for (uint32_t i = 0; i < op.inputs()->size(); ++i) {
      const uint32_t in = op.inputs()->Get(i);
      if (!overlaps(out, in))
        continue;
      const bool sameStart = infos_[in].buffer->offset() == infos_[out].buffer->offset() &&
                             infos_[in].buffer->kind() == infos_[out].buffer->kind();
      if ((elementwise || int(i) == aliasableInput) && sameStart)
        continue;
      return opFail("output " + bufferLabel(out) + " overlaps input " + std::to_string(i) + " " +
                    bufferLabel(in));
    }
    return Status::ok();
  }

  Status checkOps() {
    const auto& ops = *plan_.ops();
    const uint32_t bufferCount = plan_.buffers()->size();
    const plan::KernelModule* kernels = plan_.kernels();
    const uint32_t functionCount =
        kernels && kernels->functions() ? kernels->functions()->size() : 0;
    for (uint32_t i = 0; i < ops.size(); ++i) {
      const plan::Op* op = ops.Get(i);
      const OpAttrs kind = op->attrs_type();
      label_ = "op " + std::to_string(i) + " (" +
               (op->name() && op->name()->size() ? op->name()->str() + ", " : std::string()) +
               opKindName(kind) + ")";
      if (flatbuffers::IsOutRange(kind, OpAttrs::MIN, OpAttrs::MAX))
        return opFail("unknown op kind " + std::to_string(int(kind)) +
                      " (plan from a newer compiler?)");
      if (kind == OpAttrs::NONE || !op->attrs())
        return opFail("has no attributes");
      if (!op->inputs() || !op->outputs())
        return opFail("has no input or output list");
      for (uint32_t k = 0; k < op->inputs()->size(); ++k)
        if (op->inputs()->Get(k) >= bufferCount)
          return opFail("input " + std::to_string(k) + " refers to buffer " +
                        std::to_string(op->inputs()->Get(k)) + " but the plan has " +
                        std::to_string(bufferCount) + " buffers");
      for (uint32_t k = 0; k < op->outputs()->size(); ++k)
        if (op->outputs()->Get(k) >= bufferCount)
          return opFail("output " + std::to_string(k) + " refers to buffer " +
                        std::to_string(op->outputs()->Get(k)) + " but the plan has " +
                        std::to_string(bufferCount) + " buffers");
      NINFER_RETURN_IF_ERROR(checkOp(*op));
      if (op->launches()) {
        for (uint32_t k = 0; k < op->launches()->size(); ++k) {
          const plan::Launch* launch = op->launches()->Get(k);
          if (launch->function() >= functionCount)
            return opFail("launch " + std::to_string(k) + " calls function " +
                          std::to_string(launch->function()) + " but the kernel module has " +
                          std::to_string(functionCount));
          if (!launch->grid_base() || launch->grid_base()->size() != 3 ||
              !launch->grid_per_token() || launch->grid_per_token()->size() != 3 ||
              !launch->block() || launch->block()->size() != 3)
            return opFail("launch " + std::to_string(k) + " needs 3 values each for grid_base, " +
                          "grid_per_token and block");
          if (flatbuffers::IsOutRange(launch->steps(), plan::LaunchSteps::MIN,
                                      plan::LaunchSteps::MAX))
            return opFail("launch " + std::to_string(k) + " has unknown steps " +
                          std::to_string(int(launch->steps())));
          if (launch->args() && launch->args()->size() > static_cast<uint32_t>(kMaxKernelArgs))
            return opFail("launch " + std::to_string(k) + " passes " +
                          std::to_string(launch->args()->size()) + " buffers, at most " +
                          std::to_string(kMaxKernelArgs) + " are allowed");
          if (launch->args())
            for (uint32_t arg : *launch->args())
              if (arg >= bufferCount)
                return opFail("launch " + std::to_string(k) + " passes buffer " +
                              std::to_string(arg) + " but the plan has " +
                              std::to_string(bufferCount) + " buffers");
        }
      }
    }
    return Status::ok();
  }

  Status expectArity(const plan::Op& op, uint32_t inputs) {
    if (op.inputs()->size() != inputs || op.outputs()->size() != 1)
      return opFail("has " + std::to_string(op.inputs()->size()) + " inputs and " +
                    std::to_string(op.outputs()->size()) + " outputs, expected " +
                    std::to_string(inputs) + " and 1");
    return Status::ok();
  }

  Status checkOp(const plan::Op& op) {
    auto in = [&](uint32_t k) { return op.inputs()->Get(k); };
    const uint32_t out = op.outputs()->size() ? op.outputs()->Get(0) : 0;
    switch (op.attrs_type()) {
    case OpAttrs::EmbeddingAttrs: {
      const auto* a = op.attrs_as_EmbeddingAttrs();
      NINFER_RETURN_IF_ERROR(expectArity(op, 2));
      if (!positive(a->dim()) || !positive(a->vocab()))
        return opFail("dim and vocab must be positive");
      NINFER_RETURN_IF_ERROR(expectKind("input 0", in(0), {BufferKind::Tokens}));
      NINFER_RETURN_IF_ERROR(expectWeight("table", in(1), uint64_t(a->vocab()) * a->dim()));
      NINFER_RETURN_IF_ERROR(expectActivation("output", out, a->dim()));
      return checkAliasing(op, false);
    }
    case OpAttrs::RmsNormAttrs: {
      const auto* a = op.attrs_as_RmsNormAttrs();
      NINFER_RETURN_IF_ERROR(expectArity(op, 2));
      if (!positive(a->dim()) || !(a->eps() >= 0.0f))
        return opFail("dim must be positive and eps non-negative");
      NINFER_RETURN_IF_ERROR(expectKind("input 0", in(0), {BufferKind::Activation}));
      const uint64_t width = infos_[in(0)].width;
      if (width % uint64_t(a->dim()) != 0)
        return opFail("row width " + std::to_string(width) + " is not a multiple of dim " +
                      std::to_string(a->dim()));
      NINFER_RETURN_IF_ERROR(expectStepRows("input 0", in(0)));
      NINFER_RETURN_IF_ERROR(expectWeight("weight", in(1), a->dim()));
      NINFER_RETURN_IF_ERROR(expectActivation("output", out, width));
      return checkAliasing(op, true);
    }
    case OpAttrs::LinearAttrs: {
      const auto* a = op.attrs_as_LinearAttrs();
      const int residual = a->residual() ? (a->has_bias() ? 3 : 2) : -1;
      NINFER_RETURN_IF_ERROR(
          expectArity(op, 2 + (a->has_bias() ? 1 : 0) + (a->residual() ? 1 : 0)));
      if (!positive(a->in_features()) || !positive(a->out_features()))
        return opFail("in_features and out_features must be positive");
      NINFER_RETURN_IF_ERROR(expectActivation("input 0", in(0), a->in_features()));
      NINFER_RETURN_IF_ERROR(
          expectWeight("weight", in(1), uint64_t(a->in_features()) * a->out_features()));
      if (a->has_bias())
        NINFER_RETURN_IF_ERROR(expectWeight("bias", in(2), a->out_features()));
      NINFER_RETURN_IF_ERROR(
          expectKind("output", out, {BufferKind::Activation, BufferKind::Logits}));
      NINFER_RETURN_IF_ERROR(expectWidth("output", out, a->out_features()));
      if (!a->last_row_only())
        NINFER_RETURN_IF_ERROR(expectStepRows("output", out));
      if (residual >= 0) {
        if (a->last_row_only())
          return opFail("a last-row-only linear cannot carry a residual add");
        NINFER_RETURN_IF_ERROR(expectStepRows("residual", in(residual)));
        NINFER_RETURN_IF_ERROR(expectActivation("residual", in(residual), a->out_features()));
      }
      return checkAliasing(op, false, residual);
    }
    case OpAttrs::RopeAttrs: {
      const auto* a = op.attrs_as_RopeAttrs();
      NINFER_RETURN_IF_ERROR(expectArity(op, 2));
      if (!positive(a->heads()) || !positive(a->head_dim()) || a->head_dim() % 2 != 0)
        return opFail("heads must be positive and head_dim positive and even");
      if (!std::isfinite(a->attention_factor()) || !std::isfinite(a->dynamic_factor()))
        return opFail("attention_factor and dynamic_factor must be finite");
      if (a->dynamic_factor() > 0 &&
          (a->original_max_positions() <= 0 || !(a->theta() > 0) || a->head_dim() <= 2))
        return opFail("dynamic NTK needs original_max_positions > 0, theta > 0, head_dim > 2");
      if (a->long_factors() && (a->dynamic_factor() > 0 || a->original_max_positions() <= 0))
        return opFail("LongRoPE's long factors need original_max_positions > 0 and no dynamic NTK");
      const uint64_t width = uint64_t(a->heads()) * a->head_dim();
      NINFER_RETURN_IF_ERROR(expectActivation("input 0", in(0), width));
      NINFER_RETURN_IF_ERROR(
          expectWeight("inv_freq", in(1), a->head_dim() / (a->long_factors() ? 1 : 2)));
      if (infos_[in(1)].buffer->dtype() != DType::F32)
        return opFail("inv_freq must be F32");
      NINFER_RETURN_IF_ERROR(expectActivation("output", out, width));
      return checkAliasing(op, true);
    }
    case OpAttrs::AttentionAttrs: {
      const auto* a = op.attrs_as_AttentionAttrs();
      NINFER_RETURN_IF_ERROR(expectArity(op, op.inputs()->size() == 6 ? 6 : 5));
      if (!positive(a->heads()) || !positive(a->kv_heads()) || !positive(a->head_dim()) ||
          a->heads() % a->kv_heads() != 0 || a->window() < 0 || !std::isfinite(a->scale()))
        return opFail("needs positive heads, kv_heads dividing heads, head_dim, window >= 0 "
                      "and a finite scale");
      if (a->context() < plan_.context())
        return opFail("cache context " + std::to_string(a->context()) +
                      " is smaller than the plan's context " + std::to_string(plan_.context()));
      const uint64_t qWidth = uint64_t(a->heads()) * a->head_dim();
      const uint64_t kvWidth = uint64_t(a->kv_heads()) * a->head_dim();
      NINFER_RETURN_IF_ERROR(expectActivation("q", in(0), qWidth));
      NINFER_RETURN_IF_ERROR(expectActivation("k", in(1), kvWidth));
      NINFER_RETURN_IF_ERROR(expectActivation("v", in(2), kvWidth));
      for (uint32_t k = 3; k <= 4; ++k) {
        const char* role = k == 3 ? "k_cache" : "v_cache";
        NINFER_RETURN_IF_ERROR(expectKind(role, in(k), {BufferKind::KvCache}));
        // checkBuffers made the shape [context, kv_heads, head_dim] or
        // [max_batch, context, kv_heads, head_dim].
        const auto* shape = infos_[in(k)].buffer->shape();
        const uint32_t d = shape->size() - 3;
        if (shape->Get(d) != a->context() || shape->Get(d + 1) != a->kv_heads() ||
            shape->Get(d + 2) != a->head_dim())
          return opFail(std::string(role) + " " + bufferLabel(in(k)) +
                        " must hold [context, kv_heads, head_dim] values per sequence");
      }
      if (overlaps(in(3), in(4)))
        return opFail("k_cache and v_cache overlap");
      if (infos_[in(3)].buffer->dtype() != infos_[in(4)].buffer->dtype())
        return opFail("k_cache and v_cache have different dtypes");
      if (op.inputs()->size() == 6)
        NINFER_RETURN_IF_ERROR(expectKind("workspace", in(5), {BufferKind::Workspace}));
      NINFER_RETURN_IF_ERROR(expectActivation("output", out, qWidth));
      return checkAliasing(op, false);
    }
    case OpAttrs::SwiGluAttrs:
    case OpAttrs::AddAttrs: {
      const int dim = op.attrs_type() == OpAttrs::SwiGluAttrs ? op.attrs_as_SwiGluAttrs()->dim()
                                                              : op.attrs_as_AddAttrs()->dim();
      NINFER_RETURN_IF_ERROR(expectArity(op, 2));
      if (!positive(dim))
        return opFail("dim must be positive");
      NINFER_RETURN_IF_ERROR(expectActivation("input 0", in(0), dim));
      NINFER_RETURN_IF_ERROR(expectActivation("input 1", in(1), dim));
      NINFER_RETURN_IF_ERROR(expectActivation("output", out, dim));
      return checkAliasing(op, true);
    }
    case OpAttrs::NONE:
      break;
    }
    return opFail("unsupported op kind");
  }

  Status checkTokenizer() {
    const plan::Tokenizer* tok = plan_.tokenizer();
    if (!tok || !tok->eos_ids())
      return Status::ok();
    for (int32_t id : *tok->eos_ids())
      if (id < 0 || id >= plan_.model()->vocab_size())
        return fail("tokenizer eos id " + std::to_string(id) + " is outside the vocabulary");
    return Status::ok();
  }

  const plan::Plan& plan_;
  uint64_t fileSize_;
  uint64_t flatbufferEnd_;
  std::vector<BufferInfo> infos_;
  std::string label_;
};

// Closes the descriptor on every path out of open().
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

Result<std::unique_ptr<PlanFile>> PlanFile::open(const std::string& path) {
  auto fail = [&](const std::string& message) { return Status::error(path + ": " + message); };
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0)
    return fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd.fd, &st) != 0)
    return fail(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail("not a regular file");
  const uint64_t size = uint64_t(st.st_size);
  // Size prefix, root offset and the identifier.
  if (size < 12)
    return fail("file too small to be a ninfer plan (" + std::to_string(size) + " bytes)");
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (mapping == MAP_FAILED)
    return fail(std::string("cannot map: ") + std::strerror(errno));

  std::unique_ptr<PlanFile> file(new PlanFile());
  file->path_ = path;
  file->data_ = static_cast<const uint8_t*>(mapping);
  file->size_ = size;
  const uint8_t* data = file->data_;

  if (!plan::SizePrefixedPlanBufferHasIdentifier(data))
    return fail("not a ninfer plan (file identifier is not NPLN)");
  const uint64_t prefix = uint64_t(data[0]) | uint64_t(data[1]) << 8 | uint64_t(data[2]) << 16 |
                          uint64_t(data[3]) << 24;
  if (prefix + 4 > size)
    return fail("size prefix says " + std::to_string(prefix) + " bytes but the file has " +
                std::to_string(size) + ": truncated plan?");
  if (prefix + 4 >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return fail("corrupt plan (flatbuffer larger than 2 GiB)");

  flatbuffers::Verifier::Options options;
  options.max_tables = 10000000; // vocabularies and op lists of big models
  flatbuffers::Verifier verifier(data, size_t(prefix + 4), options);
  if (!plan::VerifySizePrefixedPlanBuffer(verifier))
    return fail("corrupt plan (flatbuffer verification failed)");
  const plan::Plan* p = plan::GetSizePrefixedPlan(data);
  if (p->format_version() < kOldestFormatVersion || p->format_version() > kFormatVersion)
    return fail("plan format version " + std::to_string(p->format_version()) +
                ", this ninfer reads versions " + std::to_string(kOldestFormatVersion) + " to " +
                std::to_string(kFormatVersion) + ": recompile the plan");

  Status semantic = PlanChecker(*p, size, prefix + 4).run();
  if (!semantic.isOk())
    return fail(semantic.message());
  file->plan_ = p;
  return file;
}

PlanFile::~PlanFile() {
  if (data_)
    ::munmap(const_cast<uint8_t*>(data_), size_);
}

const uint8_t* PlanFile::weightData(uint32_t index) const {
  const auto* buffers = plan_->buffers();
  if (index >= buffers->size())
    return nullptr;
  const plan::Buffer* b = buffers->Get(index);
  if (b->kind() != plan::BufferKind::Weight || b->dummy())
    return nullptr;
  return data_ + plan_->weights_file_offset() + b->offset();
}

} // namespace ninfer
