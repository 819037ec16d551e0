// loadModelConfig: each family's defaults as transformers defines them, RoPE
// settings in both config styles, generation_config EOS ids, and the errors a
// user sees for bad configs.
#include "ModelConfig.h"
#include "TestUtil.h"

#include "llvm/Support/JSON.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace ninfer;
using ninfer::test::errorText;
using ninfer::test::ScratchDir;
using ::testing::HasSubstr;

namespace {

llvm::json::Object baseConfig(const char* family) {
  return llvm::json::Object{{"model_type", family},     {"vocab_size", 1000},
                            {"hidden_size", 256},       {"intermediate_size", 512},
                            {"num_hidden_layers", 4},   {"num_attention_heads", 8},
                            {"num_key_value_heads", 2}, {"max_position_embeddings", 2048},
                            {"rms_norm_eps", 1e-5},     {"hidden_act", "silu"}};
}

std::string dump(const llvm::json::Object& object) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(llvm::json::Object(object));
  return os.str();
}

llvm::Expected<ModelConfig> load(const ScratchDir& dir, const llvm::json::Object& object) {
  return loadModelConfig(dir.write("config.json", dump(object)));
}

ModelConfig loadOk(const llvm::json::Object& object) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config = load(dir, object);
  EXPECT_TRUE(static_cast<bool>(config)) << errorText(config);
  return config ? *config : ModelConfig();
}

std::string loadError(const llvm::json::Object& object) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config = load(dir, object);
  EXPECT_FALSE(static_cast<bool>(config)) << "expected an error";
  return errorText(config);
}

TEST(ModelConfig, SharedPycodeLlamaDirectory) {
  llvm::Expected<ModelConfig> config =
      loadModelConfig(test::sharedDir() + "/models/pycode-llama-23m");
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  EXPECT_EQ(config->family, "llama");
  EXPECT_EQ(config->vocabSize, 4096);
  EXPECT_EQ(config->hiddenSize, 512);
  EXPECT_EQ(config->intermediateSize, 1536);
  EXPECT_EQ(config->layers, 6);
  EXPECT_EQ(config->heads, 8);
  EXPECT_EQ(config->kvHeads, 4);
  EXPECT_EQ(config->headDim, 64);
  EXPECT_EQ(config->maxPositions, 4096);
  EXPECT_DOUBLE_EQ(config->rmsEps, 1e-5);
  // transformers 5 stores the base inside rope_parameters.
  EXPECT_DOUBLE_EQ(config->ropeTheta, 10000.0);
  EXPECT_EQ(config->rope.type, RopeScaling::Type::Default);
  EXPECT_FALSE(config->tieWordEmbeddings);
  EXPECT_FALSE(config->qkvBias);
  EXPECT_FALSE(config->qkNorm);
  EXPECT_EQ(config->slidingWindow, 0);
  EXPECT_EQ(config->bosId, 0);
  EXPECT_EQ(config->eosIds, std::vector<int>{1});
  EXPECT_EQ(config->torchDtype, "bfloat16");
}

TEST(ModelConfig, SharedTiedModel) {
  llvm::Expected<ModelConfig> config =
      loadModelConfig(test::sharedDir() + "/models/pycode-llama-3m/config.json");
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  EXPECT_TRUE(config->tieWordEmbeddings);
  EXPECT_EQ(config->layers, 4);
  EXPECT_EQ(config->hiddenSize, 256);
}

TEST(ModelConfig, LlamaDefaults) {
  llvm::json::Object object = baseConfig("llama");
  object.erase("num_key_value_heads");
  object.erase("rms_norm_eps");
  object.erase("hidden_act");
  ModelConfig config = loadOk(object);
  EXPECT_EQ(config.kvHeads, 8);  // defaults to num_attention_heads
  EXPECT_EQ(config.headDim, 32); // hidden / heads
  EXPECT_DOUBLE_EQ(config.rmsEps, 1e-6);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 10000.0);
  EXPECT_TRUE(config.eosIds.empty());
  EXPECT_EQ(config.bosId, -1);
}

TEST(ModelConfig, LlamaAttentionAndMlpBias) {
  llvm::json::Object object = baseConfig("llama");
  object["attention_bias"] = true;
  object["mlp_bias"] = true;
  ModelConfig config = loadOk(object);
  EXPECT_TRUE(config.qkvBias);
  EXPECT_TRUE(config.outputBias);
  EXPECT_TRUE(config.mlpBias);
}

TEST(ModelConfig, MistralSlidingWindow) {
  llvm::json::Object object = baseConfig("mistral");
  object["sliding_window"] = 1024;
  object["head_dim"] = 64; // explicit, not hidden / heads
  ModelConfig config = loadOk(object);
  EXPECT_EQ(config.family, "mistral");
  EXPECT_EQ(config.headDim, 64);
  EXPECT_EQ(config.slidingWindow, 1024);
  EXPECT_EQ(config.layerWindows, std::vector<int>(4, 1024));
  EXPECT_FALSE(config.qkvBias);

  object["sliding_window"] = nullptr; // Mistral 7B v0.2+: full attention
  config = loadOk(object);
  EXPECT_EQ(config.slidingWindow, 0);
  EXPECT_EQ(config.layerWindows, std::vector<int>(4, 0));
}

// Phi-3: a window only where sliding_window is given (Phi-3-mini-4k: 2047), no biases, and
// LongRoPE under each of its names ("su", "yarn" and "longrope" in phi3 configs), with a
// factor per frequency (head_dim / 2 of them; baseConfig's head_dim is 32).
TEST(ModelConfig, Phi3WindowAndLongRope) {
  llvm::json::Object object = baseConfig("phi3");
  ModelConfig config = loadOk(object);
  EXPECT_EQ(config.family, "phi3");
  EXPECT_EQ(config.slidingWindow, 0);
  EXPECT_FALSE(config.qkvBias || config.outputBias || config.mlpBias);
  object["sliding_window"] = 2047;
  config = loadOk(object);
  EXPECT_EQ(config.slidingWindow, 2047);
  EXPECT_EQ(config.layerWindows, std::vector<int>(4, 2047));
  object["original_max_position_embeddings"] = 512;
  const auto factors = [](double first) {
    llvm::json::Array array;
    for (int i = 0; i < 16; ++i)
      array.push_back(first + i);
    return array;
  };
  for (const char* type : {"su", "yarn", "longrope"}) {
    object["rope_scaling"] = llvm::json::Object{
        {"type", type}, {"short_factor", factors(1.0)}, {"long_factor", factors(4.0)}};
    config = loadOk(object);
    EXPECT_EQ(config.rope.type, RopeScaling::Type::LongRope) << type;
    EXPECT_EQ(config.rope.originalMaxPositions, 512) << type;
    EXPECT_EQ(config.rope.longFactor.size(), 16u) << type;
    EXPECT_DOUBLE_EQ(config.rope.factor, 2048.0 / 512.0) << type;
  }
  object["rope_scaling"] = llvm::json::Object{{"type", "longrope"},
                                              {"short_factor", llvm::json::Array{1.0}},
                                              {"long_factor", factors(4.0)}};
  EXPECT_THAT(loadError(object),
              HasSubstr("'rope_scaling.short_factor' must be a list of head_dim / 2 (16) positive "
                        "numbers"));
}

// SmolLM3: RoPE left out of every fourth layer unless no_rope_layers says otherwise; with
// use_sliding_window, a window on the layers without RoPE (or where layer_types says).
TEST(ModelConfig, SmolLm3LayersWithoutRopeAndTheirWindow) {
  llvm::json::Object object = baseConfig("smollm3"); // 4 layers
  ModelConfig config = loadOk(object);
  EXPECT_EQ(config.ropeLayers, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(config.layerWindows, std::vector<int>(4, 0));
  object["no_rope_layers"] = llvm::json::Array{1, 0, 1, 0};
  object["use_sliding_window"] = true;
  object["sliding_window"] = 4096;
  config = loadOk(object);
  EXPECT_EQ(config.ropeLayers, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(config.layerWindows, (std::vector<int>{0, 4096, 0, 4096}));
  object["layer_types"] =
      llvm::json::Array{"sliding_attention", "full_attention", "full_attention", "full_attention"};
  EXPECT_EQ(loadOk(object).layerWindows, (std::vector<int>{4096, 0, 0, 0}));
  object["no_rope_layers"] = llvm::json::Array{1, 0};
  EXPECT_THAT(loadError(object), HasSubstr("no_rope_layers"));
}

// OLMo2: norms after the attention and the MLP instead of before, and q/k norms over the
// whole projections; attention_bias biases q/k/v and o.
TEST(ModelConfig, Olmo2PostNormsAndWholeQkNorms) {
  llvm::json::Object object = baseConfig("olmo2");
  ModelConfig config = loadOk(object);
  EXPECT_TRUE(config.postNorms);
  EXPECT_TRUE(config.qkNorm && config.qkNormWhole);
  EXPECT_FALSE(config.qkvBias || config.outputBias || config.mlpBias);
  object["attention_bias"] = true;
  config = loadOk(object);
  EXPECT_TRUE(config.qkvBias && config.outputBias);
  EXPECT_FALSE(loadOk(baseConfig("qwen3")).qkNormWhole);
  EXPECT_FALSE(loadOk(baseConfig("llama")).postNorms);
}

TEST(ModelConfig, Qwen2BiasTieAndNoWindowByDefault) {
  llvm::json::Object object = baseConfig("qwen2");
  object["tie_word_embeddings"] = true;
  object["sliding_window"] = 4096; // present but unused: use_sliding_window is false
  object["use_sliding_window"] = false;
  object["attention_bias"] = false; // ignored: qwen2 always biases q/k/v
  ModelConfig config = loadOk(object);
  EXPECT_TRUE(config.qkvBias);
  EXPECT_FALSE(config.outputBias);
  EXPECT_TRUE(config.tieWordEmbeddings);
  EXPECT_FALSE(config.qkNorm);
  EXPECT_EQ(config.slidingWindow, 0);
  EXPECT_EQ(config.layerWindows, std::vector<int>(4, 0));
}

TEST(ModelConfig, Qwen2WindowFromMaxWindowLayers) {
  // transformers: layer i slides iff use_sliding_window and i >= max_window_layers.
  llvm::json::Object object = baseConfig("qwen2");
  object["use_sliding_window"] = true;
  object["sliding_window"] = 512;
  object["max_window_layers"] = 2;
  ModelConfig config = loadOk(object);
  EXPECT_EQ(config.slidingWindow, 512);
  EXPECT_EQ(config.layerWindows, (std::vector<int>{0, 0, 512, 512}));

  // The default max_window_layers (28) leaves a 4-layer model without windows.
  object.erase("max_window_layers");
  config = loadOk(object);
  EXPECT_EQ(config.layerWindows, std::vector<int>(4, 0));
  EXPECT_EQ(config.slidingWindow, 0);
}

TEST(ModelConfig, Qwen2WindowFromLayerTypes) {
  llvm::json::Object object = baseConfig("qwen2");
  object["use_sliding_window"] = true;
  object["sliding_window"] = 256;
  object["layer_types"] = llvm::json::Array{"sliding_attention", "full_attention",
                                            "sliding_attention", "full_attention"};
  ModelConfig config = loadOk(object);
  EXPECT_EQ(config.layerWindows, (std::vector<int>{256, 0, 256, 0}));

  object["layer_types"] = llvm::json::Array{"sliding_attention"};
  EXPECT_THAT(loadError(object), HasSubstr("layer_types"));
}

TEST(ModelConfig, Qwen3NormsHeadDimAndBias) {
  llvm::json::Object object = baseConfig("qwen3");
  object["head_dim"] = 128; // qwen3 decouples head_dim from hidden / heads
  object["attention_bias"] = true;
  ModelConfig config = loadOk(object);
  EXPECT_TRUE(config.qkNorm);
  EXPECT_EQ(config.headDim, 128);
  EXPECT_TRUE(config.qkvBias);
  EXPECT_TRUE(config.outputBias);

  object["attention_bias"] = false;
  config = loadOk(object);
  EXPECT_FALSE(config.qkvBias);
  EXPECT_FALSE(config.outputBias);
}

TEST(ModelConfig, RopeThetaTopLevelAndRopeParameters) {
  llvm::json::Object object = baseConfig("llama");
  object["rope_theta"] = 500000.0;
  EXPECT_DOUBLE_EQ(loadOk(object).ropeTheta, 500000.0);

  object.erase("rope_theta");
  object["rope_parameters"] =
      llvm::json::Object{{"rope_theta", 250000.0}, {"rope_type", "default"}};
  EXPECT_DOUBLE_EQ(loadOk(object).ropeTheta, 250000.0);

  // Both present: rope_parameters' own value wins, as transformers' setdefault does.
  object["rope_theta"] = 7.0e4;
  EXPECT_DOUBLE_EQ(loadOk(object).ropeTheta, 250000.0);
}

TEST(ModelConfig, RopeScalingTypes) {
  llvm::json::Object object = baseConfig("llama");
  object["rope_scaling"] = llvm::json::Object{{"type", "linear"}, {"factor", 2.0}};
  ModelConfig config = loadOk(object);
  EXPECT_EQ(config.rope.type, RopeScaling::Type::Linear);
  EXPECT_DOUBLE_EQ(config.rope.factor, 2.0);

  object["rope_scaling"] = llvm::json::Object{{"rope_type", "dynamic"}, {"factor", 3.0}};
  config = loadOk(object);
  EXPECT_EQ(config.rope.type, RopeScaling::Type::Dynamic);
  EXPECT_EQ(config.rope.originalMaxPositions, 2048);

  object["rope_scaling"] = llvm::json::Object{{"rope_type", "llama3"},
                                              {"factor", 8.0},
                                              {"low_freq_factor", 1.0},
                                              {"high_freq_factor", 4.0},
                                              {"original_max_position_embeddings", 8192}};
  config = loadOk(object);
  EXPECT_EQ(config.rope.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(config.rope.originalMaxPositions, 8192);
  EXPECT_DOUBLE_EQ(config.rope.highFreqFactor, 4.0);

  object["rope_scaling"] = llvm::json::Object{{"type", "yarn"}, {"factor", 4.0}};
  config = loadOk(object);
  EXPECT_EQ(config.rope.type, RopeScaling::Type::Yarn);
  EXPECT_EQ(config.rope.originalMaxPositions, 2048); // defaults to max_position_embeddings
  EXPECT_TRUE(config.rope.truncate);
  EXPECT_DOUBLE_EQ(config.rope.betaFast, 32.0);

  object["rope_scaling"] = nullptr; // null means no scaling
  EXPECT_EQ(loadOk(object).rope.type, RopeScaling::Type::Default);
}

TEST(ModelConfig, DynamicRopeTablesCarryFactor) {
  llvm::json::Object object = baseConfig("llama");
  object["rope_scaling"] = llvm::json::Object{{"rope_type", "dynamic"}, {"factor", 3.0}};
  RopeTables tables = computeRopeTables(loadOk(object));
  EXPECT_FLOAT_EQ(tables.dynamicFactor, 3.0f);
  EXPECT_EQ(tables.originalMaxPositions, 2048);
  ASSERT_EQ(tables.invFreq.size(), 16u);
  // Below the original length dynamic NTK is plain RoPE: 1 / theta^(2i/d).
  EXPECT_FLOAT_EQ(tables.invFreq[0], 1.0f);
  EXPECT_FLOAT_EQ(tables.invFreq[8], static_cast<float>(1.0 / std::pow(10000.0, 0.5)));
}

TEST(ModelConfig, GenerationConfigEosOverrides) {
  ScratchDir dir;
  llvm::json::Object object = baseConfig("llama");
  object["eos_token_id"] = 2;
  object["bos_token_id"] = 1;
  dir.write("config.json", dump(object));
  llvm::Expected<ModelConfig> config = loadModelConfig(dir.path());
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  EXPECT_EQ(config->eosIds, std::vector<int>{2});

  dir.write("generation_config.json", R"({"bos_token_id": 1, "eos_token_id": [7, 9]})");
  config = loadModelConfig(dir.path());
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  EXPECT_EQ(config->eosIds, (std::vector<int>{7, 9}));
  EXPECT_EQ(config->bosId, 1);

  dir.write("generation_config.json", R"({"eos_token_id": 5})");
  config = loadModelConfig(dir.path());
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  EXPECT_EQ(config->eosIds, std::vector<int>{5});

  // A path to the file itself does not look for generation_config.json.
  config = loadModelConfig(dir.file("config.json"));
  ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
  EXPECT_EQ(config->eosIds, std::vector<int>{2});
}

TEST(ModelConfigErrors, MissingFile) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config = loadModelConfig(dir.file("nope.json"));
  ASSERT_FALSE(static_cast<bool>(config));
  std::string message = errorText(config);
  EXPECT_THAT(message, HasSubstr("nope.json"));
  EXPECT_THAT(message, HasSubstr("cannot read"));

  config = loadModelConfig(dir.path()); // a directory without config.json
  ASSERT_FALSE(static_cast<bool>(config));
  EXPECT_THAT(errorText(config), HasSubstr("config.json"));
}

TEST(ModelConfigErrors, CorruptJson) {
  ScratchDir dir;
  llvm::Expected<ModelConfig> config =
      loadModelConfig(dir.write("config.json", "{\"model_type\": \"llama\", "));
  ASSERT_FALSE(static_cast<bool>(config));
  std::string message = errorText(config);
  EXPECT_THAT(message, HasSubstr("config.json"));
  EXPECT_THAT(message, HasSubstr("invalid JSON"));

  config = loadModelConfig(dir.write("config.json", "[1, 2]"));
  ASSERT_FALSE(static_cast<bool>(config));
  EXPECT_THAT(errorText(config), HasSubstr("JSON object"));
}

TEST(ModelConfigErrors, CorruptGenerationConfig) {
  ScratchDir dir;
  dir.write("config.json", dump(baseConfig("llama")));
  dir.write("generation_config.json", "{eos");
  llvm::Expected<ModelConfig> config = loadModelConfig(dir.path());
  ASSERT_FALSE(static_cast<bool>(config));
  EXPECT_THAT(errorText(config), HasSubstr("generation_config.json"));
}

TEST(ModelConfigErrors, UnsupportedArchitecture) {
  std::string message = loadError(baseConfig("gpt_neox"));
  EXPECT_THAT(message, HasSubstr("unsupported architecture 'gpt_neox' (supported: llama, "
                                 "mistral, qwen2, qwen3, phi3, smollm3, olmo2)"));
}

TEST(ModelConfigErrors, UnknownRopeType) {
  llvm::json::Object object = baseConfig("llama");
  object["rope_scaling"] = llvm::json::Object{{"rope_type", "su"}, {"factor", 2.0}};
  std::string message = loadError(object); // "su" is LongRoPE only in phi3 configs
  EXPECT_THAT(message, HasSubstr("unsupported rope type 'su' (supported: default, linear, "
                                 "dynamic, llama3, yarn, longrope)"));
  EXPECT_THAT(message, HasSubstr("config.json"));
}

TEST(ModelConfigErrors, MissingAndIllTypedFields) {
  llvm::json::Object object = baseConfig("llama");
  object.erase("hidden_size");
  std::string message = loadError(object);
  EXPECT_THAT(message, HasSubstr("'hidden_size'"));
  EXPECT_THAT(message, HasSubstr("missing"));
  EXPECT_THAT(message, HasSubstr("config.json"));

  object = baseConfig("llama");
  object["num_hidden_layers"] = "six";
  EXPECT_THAT(loadError(object), HasSubstr("'num_hidden_layers' must be"));

  object = baseConfig("llama");
  object["vocab_size"] = -3;
  EXPECT_THAT(loadError(object), HasSubstr("'vocab_size' must be a positive integer"));

  object = baseConfig("llama");
  object["tie_word_embeddings"] = 1;
  EXPECT_THAT(loadError(object), HasSubstr("'tie_word_embeddings'"));

  object = baseConfig("llama");
  object["rope_scaling"] = llvm::json::Object{{"rope_type", "linear"}};
  EXPECT_THAT(loadError(object), HasSubstr("'rope_scaling.factor'"));

  object = baseConfig("llama");
  object["eos_token_id"] = llvm::json::Array{1, "x"};
  EXPECT_THAT(loadError(object), HasSubstr("'eos_token_id'"));

  object = baseConfig("llama");
  object.erase("model_type");
  EXPECT_THAT(loadError(object), HasSubstr("'model_type'"));
}

TEST(ModelConfigErrors, UnsupportedActivationAndShapes) {
  llvm::json::Object object = baseConfig("llama");
  object["hidden_act"] = "gelu";
  EXPECT_THAT(loadError(object), HasSubstr("unsupported hidden_act 'gelu'"));

  object = baseConfig("llama");
  object["num_key_value_heads"] = 3; // 8 heads cannot be grouped over 3
  EXPECT_THAT(loadError(object), HasSubstr("num_key_value_heads"));

  object = baseConfig("llama");
  object["partial_rotary_factor"] = 0.5;
  EXPECT_THAT(loadError(object), HasSubstr("partial_rotary_factor"));
}

} // namespace

// A context past max_position_embeddings is warned of, unless dynamic NTK stretches RoPE to
// the position; llama3 and yarn configs give their extended length there, so it counts.
TEST(ModelConfig, ContextPastTrainingIsWarnedOf) {
  llvm::json::Object object = baseConfig("llama");
  const ModelConfig plain = loadOk(object);
  EXPECT_EQ(contextWarning(plain, 2048), "");
  EXPECT_THAT(contextWarning(plain, 2049),
              HasSubstr("--ctx 2049 is past the model's 2048 positions"));
  object["rope_scaling"] = llvm::json::Object{{"rope_type", "dynamic"}, {"factor", 3.0}};
  EXPECT_EQ(contextWarning(loadOk(object), 8192), "");
  object["rope_scaling"] = llvm::json::Object{{"rope_type", "llama3"},
                                              {"factor", 8.0},
                                              {"low_freq_factor", 1.0},
                                              {"high_freq_factor", 4.0},
                                              {"original_max_position_embeddings", 256}};
  EXPECT_EQ(contextWarning(loadOk(object), 2048), "");
  EXPECT_NE(contextWarning(loadOk(object), 4096), "");
}
