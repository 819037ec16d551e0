// The model importer: turns a ModelConfig and a weight store into the ninfer
// dialect program of one step (func.func @forward(tokens) -> next token) for
// the llama family of decoders (llama, mistral, qwen2, qwen3, smollm3, olmo2, and
// phi3, whose fused projections Phi3Import.h splits first). Family differences are
// all in the config (biases, q/k norms, norms after the blocks instead of before,
// windows, layers without RoPE), so one builder covers every supported family.
#include "Importer.h"

#include "ir/NinferDialect.h"
#include "ir/NinferOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cmath>
#include <cstring>
#include <map>

namespace ninfer {
namespace {

llvm::Error makeError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

constexpr const char* kInvFreqName = "rope.inv_freq";

class ModelImporter {
public:
  ModelImporter(mlir::MLIRContext& context, const ModelConfig& config, WeightStore& weights)
      : context_(context), builder_(&context), config_(config), weights_(weights) {}

  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> run();

private:
  mlir::Location loc(const llvm::Twine& name) {
    return mlir::NameLoc::get(builder_.getStringAttr(name));
  }
  mlir::RankedTensorType activation(int64_t width) {
    return mlir::RankedTensorType::get({mlir::ShapedType::kDynamic, width}, builder_.getF32Type());
  }
  // The IR element type of a checkpoint weight's dtype; an error names a dtype that has none.
  llvm::Expected<mlir::Type> elementType(const TensorRef& ref);
  llvm::Expected<mlir::Value> weight(const std::string& name, std::vector<int64_t> shape);
  llvm::Expected<mlir::Value> linear(mlir::Value input, const std::string& prefix,
                                     int64_t inFeatures, int64_t outFeatures, bool bias);
  llvm::Expected<mlir::Value> rmsNorm(mlir::Value input, const std::string& weightName,
                                      int64_t width, int64_t groupSize);
  llvm::Error addRopeTable();
  llvm::Expected<mlir::Value> layer(int index, mlir::Value hidden);

  mlir::MLIRContext& context_;
  mlir::OpBuilder builder_;
  const ModelConfig& config_;
  WeightStore& weights_;
  std::map<std::string, mlir::Value> weightOps_; // one op per tensor, e.g. tied embeddings
  mlir::Value invFreq_;
  RopeTables rope_;
};

llvm::Expected<mlir::Type> ModelImporter::elementType(const TensorRef& ref) {
  switch (ref.dtype) {
  case WeightDType::F32:
    return builder_.getF32Type();
  case WeightDType::F16:
    return builder_.getF16Type();
  case WeightDType::BF16:
    return builder_.getBF16Type();
  case WeightDType::I32:
    return builder_.getI32Type();
  default:
    return makeError("weight '" + ref.name + "' is " + dtypeName(ref.dtype) +
                     ": ninferc imports F32, F16 and BF16 weights (U8 only as the packed "
                     "weights of a Hugging Face BitNet checkpoint, with their weight_scale)");
  }
}

// Every tensor goes through the store's shape-checked get(); a dummy store
// gets the tensor declared (f16) first, so both paths check the same shapes.
llvm::Expected<mlir::Value> ModelImporter::weight(const std::string& name,
                                                  std::vector<int64_t> shape) {
  auto cached = weightOps_.find(name);
  if (cached != weightOps_.end())
    return cached->second;
  if (weights_.isDummy() && !weights_.find(name))
    weights_.addDummy(name, WeightDType::F16, shape);
  llvm::Expected<const TensorRef*> ref = weights_.get(name, shape);
  if (!ref)
    return ref.takeError();
  // A weight the store already holds packed (a GGUF file's Q8_0 as q8_g32) is f16 to the IR,
  // and its storage attribute names the packed dtype, as after the quantization pass.
  const bool packed = quantFormatOf((*ref)->dtype) >= 0;
  llvm::Expected<mlir::Type> element =
      packed ? llvm::Expected<mlir::Type>(builder_.getF16Type()) : elementType(**ref);
  if (!element)
    return element.takeError();
  auto type = mlir::RankedTensorType::get(shape, *element);
  auto op = builder_.create<WeightOp>(loc(name), type, name);
  if (packed)
    op->setAttr(kStorageAttr, builder_.getStringAttr(dtypeName((*ref)->dtype)));
  mlir::Value value = op.getResult();
  weightOps_.emplace(name, value);
  return value;
}

llvm::Expected<mlir::Value> ModelImporter::linear(mlir::Value input, const std::string& prefix,
                                                  int64_t inFeatures, int64_t outFeatures,
                                                  bool bias) {
  llvm::Expected<mlir::Value> w = weight(prefix + ".weight", {outFeatures, inFeatures});
  if (!w)
    return w.takeError();
  mlir::Value b;
  if (bias) {
    llvm::Expected<mlir::Value> biasValue = weight(prefix + ".bias", {outFeatures});
    if (!biasValue)
      return biasValue.takeError();
    b = *biasValue;
  }
  return builder_.create<LinearOp>(loc(prefix), activation(outFeatures), input, *w, b).getResult();
}

llvm::Expected<mlir::Value> ModelImporter::rmsNorm(mlir::Value input, const std::string& weightName,
                                                   int64_t width, int64_t groupSize) {
  llvm::Expected<mlir::Value> w = weight(weightName, {groupSize});
  if (!w)
    return w.takeError();
  return builder_
      .create<RmsNormOp>(loc(weightName), activation(width), input, *w,
                         builder_.getF32FloatAttr(static_cast<float>(config_.rmsEps)))
      .getResult();
}

// One inv_freq table serves every layer; its bytes are real even in a dummy
// store, because RoPE must be exact for the dummy plan to run like a real one.
llvm::Error ModelImporter::addRopeTable() {
  rope_ = computeRopeTables(config_);
  std::vector<uint8_t> bytes(rope_.invFreq.size() * sizeof(float));
  std::memcpy(bytes.data(), rope_.invFreq.data(), bytes.size());
  const int64_t count = static_cast<int64_t>(rope_.invFreq.size());
  weights_.addOwned(kInvFreqName, WeightDType::F32, {count}, std::move(bytes));
  llvm::Expected<mlir::Value> table = weight(kInvFreqName, {count});
  if (!table)
    return table.takeError();
  invFreq_ = *table;
  return llvm::Error::success();
}

llvm::Expected<mlir::Value> ModelImporter::layer(int index, mlir::Value hidden) {
  const std::string prefix = "model.layers." + std::to_string(index);
  const int64_t hiddenSize = config_.hiddenSize;
  const int64_t headDim = config_.headDim;
  const int64_t qWidth = config_.heads * headDim;
  const int64_t kvWidth = config_.kvHeads * headDim;

#define NINFER_VALUE(var, expr)                                                                    \
  llvm::Expected<mlir::Value> var##OrErr = (expr);                                                 \
  if (!var##OrErr)                                                                                 \
    return var##OrErr.takeError();                                                                 \
  mlir::Value var = *var##OrErr;

  // A block's input norm (none with post-norms) and its output's (post-norms only).
  auto inputNorm = [&](const std::string& name) -> llvm::Expected<mlir::Value> {
    if (config_.postNorms)
      return hidden;
    return rmsNorm(hidden, prefix + "." + name + ".weight", hiddenSize, hiddenSize);
  };
  auto outputNorm = [&](mlir::Value out, const std::string& name) -> llvm::Expected<mlir::Value> {
    if (!config_.postNorms)
      return out;
    return rmsNorm(out, prefix + "." + name + ".weight", hiddenSize, hiddenSize);
  };

  // Attention block.
  NINFER_VALUE(normed, inputNorm("input_layernorm"));
  const std::string attn = prefix + ".self_attn";
  NINFER_VALUE(q, linear(normed, attn + ".q_proj", hiddenSize, qWidth, config_.qkvBias));
  NINFER_VALUE(k, linear(normed, attn + ".k_proj", hiddenSize, kvWidth, config_.qkvBias));
  NINFER_VALUE(v, linear(normed, attn + ".v_proj", hiddenSize, kvWidth, config_.qkvBias));
  if (config_.qkNorm) {
    // qwen3 normalizes each head of q and k separately, olmo2 the whole of each, before RoPE.
    NINFER_VALUE(qNormed, rmsNorm(q, attn + ".q_norm.weight", qWidth,
                                  config_.qkNormWhole ? qWidth : headDim));
    NINFER_VALUE(kNormed, rmsNorm(k, attn + ".k_norm.weight", kvWidth,
                                  config_.qkNormWhole ? kvWidth : headDim));
    q = qNormed;
    k = kNormed;
  }
  auto rope = [&](mlir::Value x, int64_t heads, int64_t width, const char* which) {
    return builder_
        .create<RopeOp>(loc(attn + ".rope_" + which), activation(width), x, invFreq_,
                        builder_.getI32IntegerAttr(static_cast<int32_t>(heads)),
                        builder_.getI32IntegerAttr(static_cast<int32_t>(headDim)),
                        builder_.getF32FloatAttr(rope_.attentionFactor),
                        builder_.getF32FloatAttr(static_cast<float>(config_.ropeTheta)),
                        builder_.getF32FloatAttr(rope_.dynamicFactor),
                        builder_.getI32IntegerAttr(rope_.originalMaxPositions))
        .getResult();
  };
  if (config_.ropeLayers.empty() || config_.ropeLayers[index]) {
    q = rope(q, config_.heads, qWidth, "q");
    k = rope(k, config_.kvHeads, kvWidth, "k");
  }
  const int window =
      config_.layerWindows.empty() ? config_.slidingWindow : config_.layerWindows[index];
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(headDim)));
  mlir::Value attended =
      builder_
          .create<AttentionOp>(loc(attn), activation(qWidth), q, k, v,
                               builder_.getI32IntegerAttr(index),
                               builder_.getI32IntegerAttr(config_.heads),
                               builder_.getI32IntegerAttr(config_.kvHeads),
                               builder_.getI32IntegerAttr(static_cast<int32_t>(headDim)),
                               builder_.getI32IntegerAttr(window), builder_.getF32FloatAttr(scale))
          .getResult();
  NINFER_VALUE(projected,
               linear(attended, attn + ".o_proj", qWidth, hiddenSize, config_.outputBias));
  NINFER_VALUE(attnOut, outputNorm(projected, "post_attention_layernorm"));
  hidden = builder_.create<AddOp>(loc(prefix + ".attn_residual"), activation(hiddenSize), hidden,
                                  attnOut);

  // MLP block (llama's post_attention_layernorm is the MLP's input norm).
  NINFER_VALUE(normed2, inputNorm("post_attention_layernorm"));
  const std::string mlp = prefix + ".mlp";
  const int64_t ffn = config_.intermediateSize;
  NINFER_VALUE(gate, linear(normed2, mlp + ".gate_proj", hiddenSize, ffn, config_.mlpBias));
  NINFER_VALUE(up, linear(normed2, mlp + ".up_proj", hiddenSize, ffn, config_.mlpBias));
  mlir::Value act = builder_.create<SwiGluOp>(loc(mlp + ".act"), activation(ffn), gate, up);
  NINFER_VALUE(down, linear(act, mlp + ".down_proj", ffn, hiddenSize, config_.mlpBias));
  NINFER_VALUE(mlpOut, outputNorm(down, "post_feedforward_layernorm"));
  return builder_
      .create<AddOp>(loc(prefix + ".mlp_residual"), activation(hiddenSize), hidden, mlpOut)
      .getResult();
#undef NINFER_VALUE
}

llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> ModelImporter::run() {
  if (config_.hiddenSize <= 0 || config_.heads <= 0 || config_.kvHeads <= 0 ||
      config_.headDim <= 0 || config_.layers <= 0 || config_.vocabSize <= 0 ||
      config_.intermediateSize <= 0 || config_.heads % config_.kvHeads != 0 ||
      config_.headDim % 2 != 0)
    return makeError("model config has invalid sizes (hidden, heads, kv heads, head_dim, "
                     "layers, vocab, intermediate)");
  if (!config_.layerWindows.empty() &&
      static_cast<int>(config_.layerWindows.size()) != config_.layers)
    return makeError("model config: layerWindows has " + llvm::Twine(config_.layerWindows.size()) +
                     " entries for " + llvm::Twine(config_.layers) + " layers");
  if (!config_.ropeLayers.empty() && static_cast<int>(config_.ropeLayers.size()) != config_.layers)
    return makeError("model config: ropeLayers has " + llvm::Twine(config_.ropeLayers.size()) +
                     " entries for " + llvm::Twine(config_.layers) + " layers");

  context_.loadDialect<mlir::func::FuncDialect, NinferDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc("model"));
  builder_.setInsertionPointToEnd(module->getBody());
  auto tokensType =
      mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, builder_.getI32Type());
  auto nextTokenType = mlir::RankedTensorType::get({1}, builder_.getI32Type());
  auto forward = builder_.create<mlir::func::FuncOp>(
      loc("forward"), "forward", builder_.getFunctionType({tokensType}, {nextTokenType}));
  mlir::Block* entry = forward.addEntryBlock();
  builder_.setInsertionPointToStart(entry);

  if (llvm::Error error = addRopeTable())
    return error;

  const int64_t hiddenSize = config_.hiddenSize;
  const int64_t vocab = config_.vocabSize;
  const std::string embedName = "model.embed_tokens.weight";
  llvm::Expected<mlir::Value> table = weight(embedName, {vocab, hiddenSize});
  if (!table)
    return table.takeError();
  mlir::Value hidden = builder_.create<EmbeddingOp>(
      loc("model.embed_tokens"), activation(hiddenSize), entry->getArgument(0), *table);
  for (int index = 0; index < config_.layers; ++index) {
    llvm::Expected<mlir::Value> next = layer(index, hidden);
    if (!next)
      return next.takeError();
    hidden = *next;
  }
  llvm::Expected<mlir::Value> normed = rmsNorm(hidden, "model.norm.weight", hiddenSize, hiddenSize);
  if (!normed)
    return normed.takeError();

  // Tied models project with the embedding table (transformers ties the two
  // even when a checkpoint also stores a copy of lm_head.weight).
  const std::string headName = config_.tieWordEmbeddings ? embedName : "lm_head.weight";
  llvm::Expected<mlir::Value> head = weight(headName, {vocab, hiddenSize});
  if (!head)
    return head.takeError();
  auto logitsType = mlir::RankedTensorType::get({1, vocab}, builder_.getF32Type());
  mlir::Value logits =
      builder_.create<LmHeadOp>(loc("lm_head"), logitsType, *normed, *head).getResult();
  mlir::Value token = builder_.create<SampleOp>(loc("sample"), nextTokenType, logits).getResult();
  builder_.create<mlir::func::ReturnOp>(loc("return"), token);

  // Collect verifier diagnostics instead of printing them, so the caller gets
  // them as an error it can report.
  std::string diagnostics;
  {
    mlir::ScopedDiagnosticHandler handler(&context_, [&](mlir::Diagnostic& diag) {
      if (!diagnostics.empty())
        diagnostics += "; ";
      diagnostics += diag.str();
      return mlir::success();
    });
    if (mlir::failed(mlir::verify(*module)))
      return makeError("the imported " + config_.family +
                       " program does not verify: " + diagnostics);
  }
  return module;
}

} // namespace

llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(mlir::MLIRContext& context, const ModelConfig& config, WeightStore& weights) {
  ModelImporter importer(context, config, weights);
  return importer.run();
}

} // namespace ninfer
