// importModel: the program built for the shared checkpoints and for dummy
// stores of each family verifies and has the op counts the architecture implies
// (stated per layer below), and bad checkpoints fail with the tensor's name.
#include "Importer.h"
#include "TestUtil.h"

#include "ir/NinferOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/JSON.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

using namespace ninfer;
using ninfer::test::errorText;
using ninfer::test::ScratchDir;
using ninfer::test::TensorSpec;
using ::testing::HasSubstr;

namespace {

std::map<std::string, int> countOps(mlir::ModuleOp module) {
  std::map<std::string, int> counts;
  module->walk([&](mlir::Operation* op) { ++counts[op->getName().getStringRef().str()]; });
  return counts;
}

// What a llama-style decoder must contain, from the config alone.
std::map<std::string, int> expectedCounts(const ModelConfig& c) {
  const int layers = c.layers;
  const int weightsPerLayer =
      9 + (c.qkvBias ? 3 : 0) + (c.outputBias ? 1 : 0) + (c.mlpBias ? 3 : 0) + (c.qkNorm ? 2 : 0);
  return {
      {"builtin.module", 1},
      {"func.func", 1},
      {"func.return", 1},
      // embed + layers + final norm + lm_head (unless tied) + rope.inv_freq
      {"ninfer.weight", 1 + layers * weightsPerLayer + 1 + (c.tieWordEmbeddings ? 0 : 1) + 1},
      {"ninfer.embedding", 1},
      {"ninfer.rms_norm", 2 * layers + 1 + (c.qkNorm ? 2 * layers : 0)},
      {"ninfer.linear", 7 * layers},
      {"ninfer.rope", 2 * (c.ropeLayers.empty()
                               ? layers
                               : int(std::count(c.ropeLayers.begin(), c.ropeLayers.end(), true)))},
      {"ninfer.attention", layers},
      {"ninfer.swiglu", layers},
      {"ninfer.add", 2 * layers},
      {"ninfer.lm_head", 1},
      {"ninfer.sample", 1},
  };
}

std::vector<std::string> weightNames(mlir::ModuleOp module) {
  std::vector<std::string> names;
  module->walk([&](WeightOp op) { names.push_back(op.getName().str()); });
  return names;
}

std::vector<AttentionOp> attentionOps(mlir::ModuleOp module) {
  std::vector<AttentionOp> ops;
  module->walk([&](AttentionOp op) { ops.push_back(op); });
  return ops;
}

llvm::Expected<ModelConfig> configFromJson(const ScratchDir& dir, const std::string& json) {
  return loadModelConfig(dir.write("config.json", json));
}

TEST(Importer, SharedPycodeLlama) {
  const std::string model = test::sharedDir() + "/models/pycode-llama-23m";
  llvm::Expected<ModelConfig> config = loadModelConfig(model);
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  llvm::Expected<std::unique_ptr<WeightStore>> store = WeightStore::openCheckpoint(model);
  ASSERT_TRUE(static_cast<bool>(store)) << errorText(store);

  mlir::MLIRContext context;
  auto module = importModel(context, *config, **store);
  ASSERT_TRUE(static_cast<bool>(module)) << errorText(module);
  EXPECT_EQ(countOps(**module), expectedCounts(*config));
  // 6 layers: 1 + 6*9 + 1 + 1 + 1 weights, written out as a plain number too.
  EXPECT_EQ(countOps(**module)["ninfer.weight"], 58);

  std::vector<std::string> names = weightNames(**module);
  EXPECT_THAT(names, ::testing::Contains("lm_head.weight"));
  EXPECT_THAT(names, ::testing::Contains("model.layers.5.mlp.down_proj.weight"));

  std::vector<AttentionOp> attention = attentionOps(**module);
  ASSERT_EQ(attention.size(), 6u);
  EXPECT_EQ(attention[0].getLayer(), 0u);
  EXPECT_EQ(attention[5].getLayer(), 5u);
  EXPECT_EQ(attention[0].getHeads(), 8u);
  EXPECT_EQ(attention[0].getKvHeads(), 4u);
  EXPECT_EQ(attention[0].getHeadDim(), 64u);
  EXPECT_EQ(attention[0].getWindow(), 0u);
  EXPECT_FLOAT_EQ(attention[0].getScale().convertToFloat(), 0.125f); // 1/sqrt(64)

  // The weight ops carry the checkpoint dtype.
  (*module)->walk([&](WeightOp op) {
    if (op.getName() == "model.embed_tokens.weight") {
      auto type = mlir::cast<mlir::RankedTensorType>(op.getType());
      EXPECT_TRUE(type.getElementType().isBF16());
      EXPECT_EQ(type.getShape(), (llvm::ArrayRef<int64_t>{4096, 512}));
    }
  });

  // The RoPE table is a real F32 tensor: 1 / 10000^(2i/64).
  const TensorRef* invFreq = (*store)->find("rope.inv_freq");
  ASSERT_NE(invFreq, nullptr);
  ASSERT_EQ(invFreq->dtype, WeightDType::F32);
  ASSERT_EQ(invFreq->shape, std::vector<int64_t>{32});
  for (int i = 0; i < 32; ++i) {
    float value;
    std::memcpy(&value, invFreq->data + 4 * i, 4);
    EXPECT_FLOAT_EQ(value, static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / 64)));
  }
}

TEST(Importer, SharedTiedModelUsesEmbeddings) {
  const std::string model = test::sharedDir() + "/models/pycode-llama-3m";
  llvm::Expected<ModelConfig> config = loadModelConfig(model);
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  ASSERT_TRUE(config->tieWordEmbeddings);
  llvm::Expected<std::unique_ptr<WeightStore>> store = WeightStore::openCheckpoint(model);
  ASSERT_TRUE(static_cast<bool>(store)) << errorText(store);
  mlir::MLIRContext context;
  auto module = importModel(context, *config, **store);
  ASSERT_TRUE(static_cast<bool>(module)) << errorText(module);
  EXPECT_EQ(countOps(**module), expectedCounts(*config));
  EXPECT_THAT(weightNames(**module), ::testing::Not(::testing::Contains("lm_head.weight")));
  bool checked = false;
  (*module)->walk([&](LmHeadOp op) {
    auto weight = op.getWeight().getDefiningOp<WeightOp>();
    ASSERT_TRUE(weight);
    EXPECT_EQ(weight.getName(), "model.embed_tokens.weight");
    checked = true;
  });
  EXPECT_TRUE(checked);
}

const char* kLlama3_8B = R"({
  "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
  "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
  "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
  "hidden_act": "silu", "rope_theta": 500000.0, "tie_word_embeddings": false,
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})";

TEST(Importer, DummyLlama3_8B) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config = configFromJson(dir, kLlama3_8B);
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  std::unique_ptr<WeightStore> store = WeightStore::createDummy();
  mlir::MLIRContext context;
  auto module = importModel(context, *config, *store);
  ASSERT_TRUE(static_cast<bool>(module)) << errorText(module);
  EXPECT_EQ(countOps(**module), expectedCounts(*config));
  EXPECT_EQ(countOps(**module)["ninfer.weight"], 1 + 32 * 9 + 1 + 1 + 1);

  // Every declared tensor is a dummy f16, except the computed RoPE table.
  EXPECT_EQ(store->tensors().size(), 292u);
  for (const auto& [name, ref] : store->tensors()) {
    if (name == "rope.inv_freq") {
      EXPECT_EQ(ref.dtype, WeightDType::F32);
      EXPECT_NE(ref.data, nullptr);
      EXPECT_EQ(ref.shape, std::vector<int64_t>{64});
    } else {
      EXPECT_EQ(ref.dtype, WeightDType::F16) << name;
      EXPECT_EQ(ref.data, nullptr) << name;
    }
  }
  const TensorRef* embed = store->find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{128256, 4096}));
  const TensorRef* k = store->find("model.layers.31.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{1024, 4096})); // 8 kv heads * 128
  const TensorRef* gate = store->find("model.layers.0.mlp.gate_proj.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{14336, 4096}));
}

TEST(Importer, DummyQwen2BiasesAndWindows) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config = configFromJson(dir, R"({
    "model_type": "qwen2", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
    "max_position_embeddings": 4096, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "use_sliding_window": true, "sliding_window": 128, "max_window_layers": 2})");
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  std::unique_ptr<WeightStore> store = WeightStore::createDummy();
  mlir::MLIRContext context;
  auto module = importModel(context, *config, *store);
  ASSERT_TRUE(static_cast<bool>(module)) << errorText(module);
  EXPECT_EQ(countOps(**module), expectedCounts(*config));
  EXPECT_NE(store->find("model.layers.0.self_attn.q_proj.bias"), nullptr);
  EXPECT_EQ(store->find("model.layers.0.self_attn.o_proj.bias"), nullptr);
  std::vector<AttentionOp> attention = attentionOps(**module);
  ASSERT_EQ(attention.size(), 4u);
  EXPECT_EQ(attention[0].getWindow(), 0u);
  EXPECT_EQ(attention[1].getWindow(), 0u);
  EXPECT_EQ(attention[2].getWindow(), 128u);
  EXPECT_EQ(attention[3].getWindow(), 128u);
}

TEST(Importer, DummyMistralWindow) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config = configFromJson(dir, R"({
    "model_type": "mistral", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
    "max_position_embeddings": 4096, "sliding_window": 64})");
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  std::unique_ptr<WeightStore> store = WeightStore::createDummy();
  mlir::MLIRContext context;
  auto module = importModel(context, *config, *store);
  ASSERT_TRUE(static_cast<bool>(module)) << errorText(module);
  EXPECT_EQ(countOps(**module), expectedCounts(*config));
  for (AttentionOp op : attentionOps(**module))
    EXPECT_EQ(op.getWindow(), 64u);
}

TEST(Importer, DummyQwen3PerHeadNorms) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config = configFromJson(dir, R"({
    "model_type": "qwen3", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 128, "max_position_embeddings": 4096, "attention_bias": false,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                        "original_max_position_embeddings": 1024}})");
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  std::unique_ptr<WeightStore> store = WeightStore::createDummy();
  mlir::MLIRContext context;
  auto module = importModel(context, *config, *store);
  ASSERT_TRUE(static_cast<bool>(module)) << errorText(module);
  EXPECT_EQ(countOps(**module), expectedCounts(*config));
  const TensorRef* qNorm = store->find("model.layers.1.self_attn.q_norm.weight");
  ASSERT_NE(qNorm, nullptr);
  EXPECT_EQ(qNorm->shape, std::vector<int64_t>{128});
  // q is 4 heads * 128 = 512 wide although hidden is 256.
  const TensorRef* q = store->find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{512, 256}));
  // yarn: cos/sin are scaled by 0.1 * ln(4) + 1.
  (*module)->walk([&](RopeOp op) {
    EXPECT_NEAR(op.getAttentionFactor().convertToFloat(), 0.1 * std::log(4.0) + 1.0, 1e-6);
  });
}

// OLMo2: the block norms after the blocks (post_attention_layernorm on the attention's
// output, post_feedforward_layernorm on the MLP's; no input_layernorm), q/k norms over whole
// projections. SmolLM3: no RoPE ops in its fourth layer.
TEST(Importer, DummyOlmo2AndSmolLm3) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> olmo2 = configFromJson(dir, R"({
    "model_type": "olmo2", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 4096})");
  ASSERT_TRUE(static_cast<bool>(olmo2)) << errorText(olmo2);
  std::unique_ptr<WeightStore> store = WeightStore::createDummy();
  mlir::MLIRContext context;
  auto module = importModel(context, *olmo2, *store);
  ASSERT_TRUE(static_cast<bool>(module)) << errorText(module);
  EXPECT_EQ(countOps(**module), expectedCounts(*olmo2));
  EXPECT_EQ(store->find("model.layers.0.input_layernorm.weight"), nullptr);
  ASSERT_NE(store->find("model.layers.0.post_feedforward_layernorm.weight"), nullptr);
  const TensorRef* kNorm = store->find("model.layers.1.self_attn.k_norm.weight");
  ASSERT_NE(kNorm, nullptr);
  EXPECT_EQ(kNorm->shape, std::vector<int64_t>{128}); // 2 kv heads x 64
  // The attention's output is normalized before the residual add reads it.
  (*module)->walk([&](AddOp add) {
    EXPECT_TRUE(add.getOperand(1).getDefiningOp<RmsNormOp>()) << "the add reads no norm";
  });

  llvm::Expected<ModelConfig> smol = configFromJson(dir, R"({
    "model_type": "smollm3", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 4096})");
  ASSERT_TRUE(static_cast<bool>(smol)) << errorText(smol);
  std::unique_ptr<WeightStore> smolStore = WeightStore::createDummy();
  auto smolModule = importModel(context, *smol, *smolStore);
  ASSERT_TRUE(static_cast<bool>(smolModule)) << errorText(smolModule);
  EXPECT_EQ(countOps(**smolModule), expectedCounts(*smol)); // 6 layers of 8 with RoPE
  EXPECT_EQ(countOps(**smolModule)["ninfer.rope"], 12);
}

// A tiny llama checkpoint made in the test: every tensor right except `wrong`.// A tiny llama
// checkpoint made in the test: every tensor right except `wrong`.
std::vector<TensorSpec> tinyLlamaTensors(const std::string& wrong, bool withLmHead = true) {
  std::vector<TensorSpec> tensors = {{"model.embed_tokens.weight", "BF16", {100, 64}},
                                     {"model.norm.weight", "BF16", {64}}};
  if (withLmHead)
    tensors.push_back({"lm_head.weight", "BF16", {100, 64}});
  for (int layer = 0; layer < 2; ++layer) {
    std::string p = "model.layers." + std::to_string(layer);
    std::vector<TensorSpec> layerTensors = {{p + ".input_layernorm.weight", "BF16", {64}},
                                            {p + ".post_attention_layernorm.weight", "BF16", {64}},
                                            {p + ".self_attn.q_proj.weight", "BF16", {64, 64}},
                                            {p + ".self_attn.k_proj.weight", "BF16", {32, 64}},
                                            {p + ".self_attn.v_proj.weight", "BF16", {32, 64}},
                                            {p + ".self_attn.o_proj.weight", "BF16", {64, 64}},
                                            {p + ".mlp.gate_proj.weight", "BF16", {128, 64}},
                                            {p + ".mlp.up_proj.weight", "BF16", {128, 64}},
                                            {p + ".mlp.down_proj.weight", "BF16", {64, 128}}};
    tensors.insert(tensors.end(), layerTensors.begin(), layerTensors.end());
  }
  for (TensorSpec& t : tensors)
    if (t.name == wrong)
      t.shape = {64, 32};
  return tensors;
}

const char* kTinyLlama = R"({
  "model_type": "llama", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "max_position_embeddings": 256})";

TEST(Importer, TinyCheckpointImports) {
  ScratchDir dir;
  dir.write("config.json", kTinyLlama);
  dir.write("model.safetensors", test::safetensorsBytes(tinyLlamaTensors("")));
  llvm::Expected<ModelConfig> config = loadModelConfig(dir.path());
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  llvm::Expected<std::unique_ptr<WeightStore>> store = WeightStore::openCheckpoint(dir.path());
  ASSERT_TRUE(static_cast<bool>(store)) << errorText(store);
  mlir::MLIRContext context;
  auto module = importModel(context, *config, **store);
  ASSERT_TRUE(static_cast<bool>(module)) << errorText(module);
  EXPECT_EQ(countOps(**module), expectedCounts(*config));
}

// Imports the checkpoint of `tensors` (the tiny llama's config) and returns the error's
// text, or "" where it imported.
std::string importError(const std::vector<TensorSpec>& tensors) {
  ScratchDir dir;
  dir.write("config.json", kTinyLlama);
  dir.write("model.safetensors", test::safetensorsBytes(tensors));
  llvm::Expected<ModelConfig> config = loadModelConfig(dir.path());
  llvm::Expected<std::unique_ptr<WeightStore>> store = WeightStore::openCheckpoint(dir.path());
  if (!config || !store) {
    ADD_FAILURE() << "the checkpoint does not open: " << errorText(config) << errorText(store);
    return "";
  }
  mlir::MLIRContext context;
  auto module = importModel(context, *config, **store);
  return module ? "" : errorText(module);
}

TEST(Importer, WrongShapedTensorIsNamed) {
  const std::string message =
      importError(tinyLlamaTensors("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_THAT(message, HasSubstr("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_THAT(message, HasSubstr("[64, 32]"));
  EXPECT_THAT(message, HasSubstr("expected [64, 64]"));
}

TEST(Importer, MissingLmHeadIsNamed) {
  EXPECT_THAT(importError(tinyLlamaTensors("", false)), HasSubstr("lm_head.weight"));
}

// A U8 tensor that is not a BitNet packed weight (no weight_scale beside it).
TEST(Importer, RawByteWeightIsNamed) {
  std::vector<TensorSpec> tensors = tinyLlamaTensors("");
  for (TensorSpec& t : tensors)
    if (t.name == "model.layers.0.mlp.up_proj.weight")
      t.dtype = "U8";
  const std::string message = importError(tensors);
  EXPECT_THAT(message, HasSubstr("weight 'model.layers.0.mlp.up_proj.weight' is U8"));
  EXPECT_THAT(message, HasSubstr("imports F32, F16 and BF16 weights"));
}

TEST(Importer, DummyStoreWithWrongDeclaredShape) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config = configFromJson(dir, kTinyLlama);
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  std::unique_ptr<WeightStore> store = WeightStore::createDummy();
  store->addDummy("model.norm.weight", WeightDType::F16, {65});
  mlir::MLIRContext context;
  auto module = importModel(context, *config, *store);
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_THAT(errorText(module), HasSubstr("model.norm.weight"));
}

} // namespace
