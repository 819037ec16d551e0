// Lowers func @forward of a ninfer module (after the pass pipeline) to the
// plan's object form. Buffer layout decisions made here:
//  - buffers are numbered in program order: tokens (0), then as values
//    appear: weights at their first reference, one activation buffer per
//    produced value, two KV caches per attention op, logits at lm_head;
//  - an in-place result (rope/add/rms_norm writing over operand 0, which
//    memory planning signals by giving it operand 0's offset) reuses operand
//    0's buffer index, so executors see out == in;
//  - distinct activation buffers may share arena bytes when their lifetimes
//    are disjoint; every op is checked to never write over a live input.
//  - one Workspace buffer, shared by the attention ops (they run one at a
//    time), holds the CUDA decode kernel's split partials;
//  - a plan of several sequences (maxBatch > 1) gives every KV cache a slot
//    per sequence ([maxBatch, context, kv_heads, head_dim]), the logits a row
//    per sequence and the workspace a region per row of a batch step;
//  - weight segments are laid out in buffer order, each 4096-aligned; the
//    weight area size is the end of the last segment rounded up to 4096.
#include "PlanBuilder.h"
#include "PlanFusion.h"

#include "KernelEmitter.h"

#include "compiler/ModelConfig.h"
#include "compiler/WeightStore.h"
#include "ir/NinferOps.h"

#include "ninfer/Format.h"
#include "ninfer/KvFormat.h"
#include "ninfer/QuantDType.h"
#include "ninfer/StepAbi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <set>
#include <string>

using namespace mlir;

namespace ninfer {
namespace {

// KV caches are aligned like activations: enough for any vector access.
constexpr uint64_t kKvAlignment = 256;

llvm::Error planError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

// "'ninfer.linear' at loc(...): message": names the op the user can find.
llvm::Error opError(Operation* op, const llvm::Twine& message) {
  std::string where;
  llvm::raw_string_ostream os(where);
  os << "'" << op->getName() << "' at " << op->getLoc() << ": " << message;
  return planError(os.str());
}

enum class WeightRole { Matrix, Norm, Bias, InvFreq, Other };

WeightRole roleOf(WeightOp weight) {
  for (OpOperand& use : weight.getOutput().getUses()) {
    Operation* user = use.getOwner();
    unsigned index = use.getOperandNumber();
    if (isa<RopeOp>(user) && index == 1)
      return WeightRole::InvFreq;
    if (isa<RmsNormOp>(user) && index == 1)
      return WeightRole::Norm;
    if (isa<LinearOp>(user) && index == 2)
      return WeightRole::Bias;
  }
  return weight.getOutput().getType().getRank() >= 2 ? WeightRole::Matrix : WeightRole::Other;
}

plan::DType planDType(WeightDType dtype) {
  if (const int format = quantFormatOf(dtype); format >= 0)
    return static_cast<plan::DType>(
        quant::planDTypeOfFormat(static_cast<quant::QuantFormatId>(format)));
  switch (dtype) {
  case WeightDType::F32:
    return plan::DType::F32;
  case WeightDType::F16:
    return plan::DType::F16;
  case WeightDType::BF16:
    return plan::DType::BF16;
  case WeightDType::I32:
    return plan::DType::I32;
  case WeightDType::TQ2:
    return plan::DType::TQ2;
  case WeightDType::TQ1:
    return plan::DType::TQ1;
  default:
    break;
  }
  return plan::DType::F32;
}

bool elementTypeMatches(Type type, WeightDType dtype) {
  switch (dtype) {
  case WeightDType::F32:
    return type.isF32();
  case WeightDType::F16:
    return type.isF16();
  case WeightDType::BF16:
    return type.isBF16();
  case WeightDType::I32:
    return type.isInteger(32);
  default: // packed formats (ternary, group-quantized, raw bytes) have no element type
    return false;
  }
}

std::string stripSuffix(llvm::StringRef name, llvm::StringRef suffix) {
  name.consume_back(suffix);
  return name.str();
}

class Lowering {
public:
  Lowering(const ModelConfig& config, const WeightStore& weights, const PlanOptions& options)
      : config_(config), weights_(weights), options_(options), plan_(new plan::PlanT) {}

  llvm::Expected<std::unique_ptr<plan::PlanT>> run(ModuleOp module);

private:
  uint32_t addBuffer(std::string name, plan::BufferKind kind, plan::DType dtype,
                     std::vector<int64_t> shape, uint64_t bytes, uint64_t offset) {
    auto buffer = std::make_unique<plan::BufferT>();
    buffer->name = std::move(name);
    buffer->kind = kind;
    buffer->dtype = dtype;
    buffer->shape = std::move(shape);
    buffer->size_bytes = bytes;
    buffer->offset = offset;
    plan_->buffers.push_back(std::move(buffer));
    return static_cast<uint32_t>(plan_->buffers.size() - 1);
  }

  llvm::Expected<uint32_t> weightBuffer(WeightOp op);
  uint64_t layoutWeights();
  llvm::Expected<uint32_t> activationBuffer(Operation* op, const std::string& name);
  llvm::Expected<uint32_t> bufferOf(Operation* user, Value value);
  llvm::Error checkNoOverlap(Operation* op, const plan::OpT& planOp);
  llvm::Error lowerOp(Operation* op);
  void addOp(Operation* op, std::string name, std::vector<uint32_t> inputs, uint32_t output,
             plan::OpAttrsUnion attrs);

  const ModelConfig& config_;
  const WeightStore& weights_;
  const PlanOptions& options_;
  std::unique_ptr<plan::PlanT> plan_;

  llvm::DenseMap<Value, uint32_t> bufferOfValue_;
  llvm::StringMap<uint32_t> weightByName_;
  std::set<int64_t> layersSeen_;
  uint64_t kvCursor_ = 0;
  uint32_t workspaceBuffer_ = 0;
  bool haveWorkspace_ = false;
  uint64_t parameters_ = 0;
  uint32_t weightOrdinal_ = 0;
  uint64_t activationBytes_ = 0;
  uint32_t tokensBuffer_ = 0;
  uint32_t logitsBuffer_ = 0;
  bool haveLogits_ = false;
  Value logitsValue_;
};

// Places weights in the weight area in program order, those with bytes first:
// only they are stored in the file, so dummy weights (device-only) never make
// the file reserve room. Returns the area's size.
uint64_t Lowering::layoutWeights() {
  uint64_t cursor = 0;
  for (bool dummy : {false, true})
    for (auto& buffer : plan_->buffers)
      if (buffer->kind == plan::BufferKind::Weight && (buffer->dummy != nullptr) == dummy) {
        buffer->offset = alignUp(cursor, kWeightAlignment);
        cursor = buffer->offset + buffer->size_bytes;
      }
  return alignUp(cursor, kWeightAlignment);
}

llvm::Expected<uint32_t> Lowering::weightBuffer(WeightOp op) {
  llvm::StringRef name = op.getName();
  auto it = weightByName_.find(name);
  if (it != weightByName_.end())
    return it->second;
  const TensorRef* ref = weights_.find(name.str());
  if (!ref)
    return opError(op, "weight '" + name + "' is not in the weight store");
  RankedTensorType type = op.getOutput().getType();
  // A weight the quantization pass packed keeps its logical IR type; the
  // storage attribute names the store's packed dtype, which fixes the size.
  auto storage = op->getAttrOfType<StringAttr>(kStorageAttr);
  if (storage && (dtypeSize(ref->dtype) != 0 ||
                  !storage.getValue().equals_insensitive(dtypeName(ref->dtype))))
    return opError(op, "weight '" + name + "' is marked " + kStorageAttr + " = \"" +
                           storage.getValue() + "\" but the weight store holds it as " +
                           dtypeName(ref->dtype));
  if (std::vector<int64_t>(type.getShape().begin(), type.getShape().end()) != ref->shape ||
      (!storage && !elementTypeMatches(type.getElementType(), ref->dtype)))
    return opError(op, "weight '" + name + "' is " + dtypeName(ref->dtype) +
                           " in the weight store but the IR declares a different shape or dtype");
  uint64_t elements = 1;
  for (int64_t dim : ref->shape)
    elements *= static_cast<uint64_t>(dim);
  uint64_t bytes =
      storage ? tensorBytes(ref->dtype, ref->shape) : elements * dtypeSize(ref->dtype);
  if (ref->data && ref->bytes != bytes)
    return opError(op, "weight '" + name + "' holds " + llvm::Twine(ref->bytes) +
                           " bytes, its shape needs " + llvm::Twine(bytes));

  WeightRole role = roleOf(op);
  // Offsets are assigned by layoutWeights() once all weights are known.
  uint32_t index = addBuffer(name.str(), plan::BufferKind::Weight, planDType(ref->dtype),
                             ref->shape, bytes, 0);
  // Tensors the compiler computed (RoPE tables) have bytes even in a dummy
  // store and must never be replaced by noise.
  if (weights_.isDummy() && !ref->data) {
    uint32_t seed = weightOrdinal_;
    if (role == WeightRole::Norm)
      plan_->buffers[index]->dummy = std::make_unique<plan::DummyFill>(seed, 0.0f, 1.0f);
    else
      plan_->buffers[index]->dummy = std::make_unique<plan::DummyFill>(seed, 0.02f, 0.0f);
  }
  ++weightOrdinal_;
  if (role != WeightRole::InvFreq)
    parameters_ += elements;
  weightByName_[name] = index;
  return index;
}

llvm::Expected<uint32_t> Lowering::activationBuffer(Operation* op, const std::string& name) {
  auto offsetAttr = op->getAttrOfType<IntegerAttr>(kArenaOffsetAttr);
  if (!offsetAttr)
    return opError(op, "no arena offset: run memory planning (the ninfer pipeline) first");
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  uint64_t width = static_cast<uint64_t>(type.getDimSize(1));
  uint64_t bytes = static_cast<uint64_t>(options_.maxStepTokens) * width * 4;
  int64_t offset = offsetAttr.getInt();
  if (offset < 0 || static_cast<uint64_t>(offset) + bytes > activationBytes_)
    return opError(op, "arena offset " + llvm::Twine(offset) + " + " + llvm::Twine(bytes) +
                           " bytes lies outside the activation arena of " +
                           llvm::Twine(activationBytes_) + " bytes");
  // Memory planning marks an in-place result by giving it operand 0's slot.
  if (isa<RopeOp, AddOp, RmsNormOp>(op)) {
    auto source = bufferOfValue_.find(op->getOperand(0));
    if (source != bufferOfValue_.end() &&
        plan_->buffers[source->second]->offset == static_cast<uint64_t>(offset) &&
        plan_->buffers[source->second]->size_bytes == bytes) {
      const uint32_t index = source->second; // before the insertion below may rehash
      bufferOfValue_[op->getResult(0)] = index;
      return index;
    }
  }
  uint32_t index = addBuffer(name, plan::BufferKind::Activation, plan::DType::F32,
                             {options_.maxStepTokens, static_cast<int64_t>(width)}, bytes, offset);
  bufferOfValue_[op->getResult(0)] = index;
  return index;
}

llvm::Expected<uint32_t> Lowering::bufferOf(Operation* user, Value value) {
  auto it = bufferOfValue_.find(value);
  if (it != bufferOfValue_.end())
    return it->second;
  if (auto weight = value.getDefiningOp<WeightOp>()) {
    auto index = weightBuffer(weight);
    if (index)
      bufferOfValue_[value] = *index;
    return index;
  }
  return opError(user, "an operand has no plan buffer (only ninfer ops and the token argument "
                       "can feed ninfer ops)");
}

// The kernels read inputs while writing outputs, so an output may only share
// bytes with an input when it is the very same buffer (a planned in-place op).
llvm::Error Lowering::checkNoOverlap(Operation* op, const plan::OpT& planOp) {
  for (uint32_t out : planOp.outputs) {
    const plan::BufferT& o = *plan_->buffers[out];
    if (o.kind != plan::BufferKind::Activation)
      continue;
    for (uint32_t in : planOp.inputs) {
      const plan::BufferT& i = *plan_->buffers[in];
      if (in == out || i.kind != plan::BufferKind::Activation)
        continue;
      if (i.offset < o.offset + o.size_bytes && o.offset < i.offset + i.size_bytes)
        return opError(op, "output buffer '" + o.name + "' overlaps input buffer '" + i.name +
                               "' in the activation arena");
    }
  }
  return llvm::Error::success();
}

void Lowering::addOp(Operation* op, std::string name, std::vector<uint32_t> inputs, uint32_t output,
                     plan::OpAttrsUnion attrs) {
  auto planOp = std::make_unique<plan::OpT>();
  planOp->name = std::move(name);
  planOp->attrs = std::move(attrs);
  planOp->inputs = std::move(inputs);
  planOp->outputs = {output};
  plan_->ops.push_back(std::move(planOp));
}

llvm::Error Lowering::lowerOp(Operation* op) {
  if (isa<WeightOp, func::ReturnOp>(op))
    return llvm::Error::success(); // weights become buffers when first read
  if (auto sample = dyn_cast<SampleOp>(op)) {
    if (sample.getLogits() != logitsValue_)
      return opError(op, "samples something other than the lm_head logits");
    return llvm::Error::success(); // the runtime's sampler reads the logits buffer
  }

  // Inputs first (in the plan's documented order), then the output buffer.
  std::vector<uint32_t> inputs;
  for (Value operand : op->getOperands()) {
    auto index = bufferOf(op, operand);
    if (!index)
      return index.takeError();
    inputs.push_back(*index);
  }
  auto weightName = [&](unsigned operand) {
    auto weight = op->getOperand(operand).getDefiningOp<WeightOp>();
    return weight ? stripSuffix(weight.getName(), ".weight") : std::string();
  };
  std::string opName = op->getName().stripDialect().str() + "." + std::to_string(plan_->ops.size());
  plan::OpAttrsUnion attrs;

  if (auto lmHead = dyn_cast<LmHeadOp>(op)) {
    if (haveLogits_)
      return opError(op, "a program has exactly one lm_head");
    auto logitsType = lmHead.getLogits().getType();
    int64_t vocab = logitsType.getDimSize(1);
    // A row per sequence: a batch step returns the logits of each.
    logitsBuffer_ =
        addBuffer("logits", plan::BufferKind::Logits, plan::DType::F32, {options_.maxBatch, vocab},
                  static_cast<uint64_t>(options_.maxBatch) * vocab * 4, 0);
    haveLogits_ = true;
    logitsValue_ = lmHead.getLogits();
    bufferOfValue_[logitsValue_] = logitsBuffer_;
    plan::LinearAttrsT linear;
    linear.in_features = static_cast<int32_t>(lmHead.getWeight().getType().getDimSize(1));
    linear.out_features = static_cast<int32_t>(vocab);
    linear.has_bias = false;
    linear.last_row_only = true;
    attrs.Set(std::move(linear));
    addOp(op, "lm_head", inputs, logitsBuffer_, std::move(attrs));
    return llvm::Error::success();
  }

  std::string bufferName = opName;
  if (isa<LinearOp, RmsNormOp>(op) && !weightName(1).empty())
    bufferName = weightName(1);
  int64_t width = 0;
  if (op->getNumResults() == 1)
    if (auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
        type && type.getRank() == 2)
      width = type.getDimSize(1);

  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    plan::EmbeddingAttrsT a;
    a.dim = static_cast<int32_t>(width);
    a.vocab = static_cast<int32_t>(embedding.getTable().getType().getDimSize(0));
    attrs.Set(std::move(a));
    bufferName = "hidden"; // in-place adds and norms keep the residual stream here
  } else if (auto norm = dyn_cast<RmsNormOp>(op)) {
    plan::RmsNormAttrsT a;
    a.dim = static_cast<int32_t>(norm.getWeight().getType().getDimSize(0));
    a.eps = static_cast<float>(norm.getEpsAttr().getValueAsDouble());
    attrs.Set(std::move(a));
  } else if (auto linear = dyn_cast<LinearOp>(op)) {
    plan::LinearAttrsT a;
    a.in_features = static_cast<int32_t>(linear.getWeight().getType().getDimSize(1));
    a.out_features = static_cast<int32_t>(linear.getWeight().getType().getDimSize(0));
    a.has_bias = static_cast<bool>(linear.getBias());
    a.last_row_only = false;
    attrs.Set(std::move(a));
  } else if (auto rope = dyn_cast<RopeOp>(op)) {
    plan::RopeAttrsT a;
    a.heads = static_cast<int32_t>(rope.getHeadsAttr().getInt());
    a.head_dim = static_cast<int32_t>(rope.getHeadDimAttr().getInt());
    a.attention_factor = static_cast<float>(rope.getAttentionFactorAttr().getValueAsDouble());
    a.theta = static_cast<float>(rope.getThetaAttr().getValueAsDouble());
    a.dynamic_factor = static_cast<float>(rope.getDynamicFactorAttr().getValueAsDouble());
    a.original_max_positions = static_cast<int32_t>(rope.getOriginalMaxPositionsAttr().getInt());
    // LongRoPE: inv_freq holds the short table and then the long one (RopeOp::verify).
    a.long_factors = rope.getInvFreq().getType().getDimSize(0) == a.head_dim;
    attrs.Set(std::move(a));
  } else if (auto attention = dyn_cast<AttentionOp>(op)) {
    int64_t layer = attention.getLayerAttr().getInt();
    if (!layersSeen_.insert(layer).second)
      return opError(op, "layer " + llvm::Twine(layer) +
                             " has a second attention op; each "
                             "layer owns one KV cache");
    int64_t kvHeads = attention.getKvHeadsAttr().getInt();
    int64_t headDim = attention.getHeadDimAttr().getInt();
    const bool q8 = options_.kvDType == plan::DType::Q8_KV;
    const uint64_t slotBytes =
        q8 ? static_cast<uint64_t>(kv::q8CacheBytes(options_.context, kvHeads, headDim))
           : static_cast<uint64_t>(options_.context) * static_cast<uint64_t>(kvHeads * headDim) * 2;
    const uint64_t cacheBytes = static_cast<uint64_t>(options_.maxBatch) * slotBytes;
    std::vector<int64_t> cacheShape{options_.context, kvHeads, headDim};
    if (options_.maxBatch > 1)
      cacheShape.insert(cacheShape.begin(), options_.maxBatch);
    std::string prefix = "model.layers." + std::to_string(layer);
    for (const char* which : {".k_cache", ".v_cache"}) {
      uint64_t offset = alignUp(kvCursor_, kKvAlignment);
      kvCursor_ = offset + cacheBytes;
      inputs.push_back(addBuffer(prefix + which, plan::BufferKind::KvCache, options_.kvDType,
                                 cacheShape, cacheBytes, offset));
    }
    const int64_t heads = attention.getHeadsAttr().getInt();
    const uint64_t workspaceBytes =
        static_cast<uint64_t>(options_.maxBatch) *
        attentionWorkspaceBytes(static_cast<int>(heads), static_cast<int>(kvHeads),
                                static_cast<int>(headDim), options_.context);
    if (!haveWorkspace_) {
      workspaceBuffer_ = addBuffer("attention.workspace", plan::BufferKind::Workspace,
                                   plan::DType::F32, {static_cast<int64_t>(workspaceBytes / 4)},
                                   workspaceBytes, 0);
      haveWorkspace_ = true;
    }
    plan::BufferT& workspace = *plan_->buffers[workspaceBuffer_];
    if (workspace.size_bytes < workspaceBytes) {
      workspace.size_bytes = workspaceBytes;
      workspace.shape = {static_cast<int64_t>(workspaceBytes / 4)};
    }
    inputs.push_back(workspaceBuffer_);
    plan::AttentionAttrsT a;
    a.heads = static_cast<int32_t>(attention.getHeadsAttr().getInt());
    a.kv_heads = static_cast<int32_t>(kvHeads);
    a.head_dim = static_cast<int32_t>(headDim);
    a.window = static_cast<int32_t>(attention.getWindowAttr().getInt());
    a.scale = static_cast<float>(attention.getScaleAttr().getValueAsDouble());
    a.context = options_.context;
    attrs.Set(std::move(a));
    bufferName = prefix + ".attention";
  } else if (isa<SwiGluOp>(op)) {
    plan::SwiGluAttrsT a;
    a.dim = static_cast<int32_t>(width);
    attrs.Set(std::move(a));
  } else if (isa<AddOp>(op)) {
    plan::AddAttrsT a;
    a.dim = static_cast<int32_t>(width);
    attrs.Set(std::move(a));
  } else {
    return opError(op, "the plan builder does not support this op");
  }

  auto output = activationBuffer(op, bufferName);
  if (!output)
    return output.takeError();
  // Named after the buffer it writes, which carries the checkpoint's names.
  const std::string& written = plan_->buffers[*output]->name;
  std::string fullName =
      written == opName ? written : op->getName().stripDialect().str() + " " + written;
  addOp(op, fullName, std::move(inputs), *output, std::move(attrs));
  return checkNoOverlap(op, *plan_->ops.back());
}

llvm::Expected<std::unique_ptr<plan::PlanT>> Lowering::run(ModuleOp module) {
  if (options_.context <= 0 || options_.maxStepTokens <= 0)
    return planError("context and max step tokens must be positive, got context " +
                     llvm::Twine(options_.context) + " and max step tokens " +
                     llvm::Twine(options_.maxStepTokens));
  if (options_.maxBatch < 1 || options_.maxBatch > kMaxBatch ||
      options_.maxBatch > options_.maxStepTokens)
    return planError("batch " + llvm::Twine(options_.maxBatch) + " is not supported: 1 to " +
                     llvm::Twine(kMaxBatch) + " sequences, and at most the step tokens (" +
                     llvm::Twine(options_.maxStepTokens) + ")");
  auto stepTokens = module->getAttrOfType<IntegerAttr>(kMaxStepTokensAttr);
  auto arenaBytes = module->getAttrOfType<IntegerAttr>(kActivationBytesAttr);
  if (!stepTokens || !arenaBytes)
    return planError("the module has no memory plan: run the ninfer pass pipeline first");
  if (stepTokens.getInt() != options_.maxStepTokens)
    return planError("memory was planned for " + llvm::Twine(stepTokens.getInt()) +
                     " tokens per step but the plan asks for " +
                     llvm::Twine(options_.maxStepTokens));
  activationBytes_ = static_cast<uint64_t>(arenaBytes.getInt());

  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return planError("the module has no func.func @forward with a body");
  if (!forward.getBody().hasOneBlock() || forward.getNumArguments() != 1)
    return planError("@forward must be one block taking the token ids");
  Block& body = forward.getBody().front();

  tokensBuffer_ =
      addBuffer("tokens", plan::BufferKind::Tokens, plan::DType::I32, {options_.maxStepTokens},
                static_cast<uint64_t>(options_.maxStepTokens) * 4, 0);
  bufferOfValue_[body.getArgument(0)] = tokensBuffer_;

  for (Operation& op : body)
    if (auto error = lowerOp(&op))
      return error;
  if (!haveLogits_)
    return planError("@forward has no ninfer.lm_head: nothing produces logits");

  plan_->format_version = formatVersionFor(options_.maxBatch);
  plan_->max_batch = options_.maxBatch;
  plan_->context = options_.context;
  plan_->max_step_tokens = options_.maxStepTokens;
  plan_->dummy_weights = weights_.isDummy();
  plan_->tokens_buffer = tokensBuffer_;
  plan_->logits_buffer = logitsBuffer_;

  auto model = std::make_unique<plan::ModelInfoT>();
  model->family = config_.family;
  model->vocab_size = config_.vocabSize;
  model->hidden_size = config_.hiddenSize;
  model->layers = config_.layers;
  model->heads = config_.heads;
  model->kv_heads = config_.kvHeads;
  model->head_dim = config_.headDim;
  model->intermediate_size = config_.intermediateSize;
  model->parameters = parameters_;
  plan_->model = std::move(model);

  auto memory = std::make_unique<plan::MemoryPlanT>();
  memory->weight_bytes = layoutWeights();
  memory->activation_bytes = activationBytes_;
  memory->kv_bytes = alignUp(kvCursor_, kKvAlignment);
  memory->workspace_bytes =
      haveWorkspace_ ? alignUp(plan_->buffers[workspaceBuffer_]->size_bytes, kKvAlignment) : 0;
  plan_->memory = std::move(memory);
  plan_->kernels = std::make_unique<plan::KernelModuleT>();
  if (options_.fuse)
    fuseResidualAdds(*plan_);
  return std::move(plan_);
}

} // namespace

llvm::Expected<std::unique_ptr<plan::PlanT>> buildPlan(mlir::ModuleOp module,
                                                       const ModelConfig& config,
                                                       const WeightStore& weights,
                                                       const PlanOptions& options) {
  Lowering lowering(config, weights, options);
  return lowering.run(module);
}

} // namespace ninfer
