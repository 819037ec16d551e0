// What the compiler needs to know about a checkpoint's architecture, read from
// a Hugging Face config.json (plus generation_config.json for EOS ids).
#pragma once

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace ninfer {

struct RopeScaling {
  enum class Type { Default, Linear, Dynamic, Llama3, Yarn, LongRope };
  Type type = Type::Default;
  double factor = 1.0;
  int originalMaxPositions = 0; // llama3/yarn/dynamic/longrope: original_max_position_embeddings
  double lowFreqFactor = 1.0;   // llama3
  double highFreqFactor = 4.0;  // llama3
  double betaFast = 32.0;       // yarn
  double betaSlow = 1.0;        // yarn
  double mscale = 0.0;          // yarn (0: unset)
  double mscaleAllDim = 0.0;    // yarn (0: unset)
  double attentionFactor = 0.0; // yarn, longrope (0: unset -> derived as transformers does)
  bool truncate = true;         // yarn
  // longrope: per-frequency divisors of inv_freq (head_dim/2 each), short up to the original
  // length, long past it.
  std::vector<double> shortFactor, longFactor;
};

struct ModelConfig {
  std::string family; // model_type, one of supportedFamilies()
  int vocabSize = 0;
  int hiddenSize = 0;
  int intermediateSize = 0;
  int layers = 0;
  int heads = 0;
  int kvHeads = 0;
  int headDim = 0;
  int maxPositions = 0;
  double rmsEps = 1e-6;
  double ropeTheta = 10000.0;
  RopeScaling rope;
  // Per-frequency divisors of inv_freq (head_dim/2 of them), as a GGUF file stores
  // llama3-style scaling (its rope_freqs tensor); empty: none.
  std::vector<float> ropeFreqFactors;
  bool tieWordEmbeddings = false;
  bool qkvBias = false;   // qwen2 (always), llama attention_bias
  bool outputBias = false; // llama attention_bias also biases o_proj
  bool mlpBias = false;
  bool qkNorm = false;      // qwen3: per-head RMSNorm on q and k (olmo2: over all heads)
  bool qkNormWhole = false; // olmo2: q and k normalized over the whole projection
  // olmo2: RMSNorm on the attention's and the MLP's outputs before their residual adds, and
  // none on their inputs.
  bool postNorms = false;
  int slidingWindow = 0;  // 0: full attention
  // Per-layer attention window (0: full), as transformers resolves it (qwen2/qwen3
  // layer_types / max_window_layers). Empty: every layer uses slidingWindow.
  std::vector<int> layerWindows;
  // Per layer: whether it rotates q and k (smollm3 leaves RoPE out of every fourth layer, its
  // no_rope_layers). Empty: every layer does.
  std::vector<bool> ropeLayers;
  int bosId = -1;
  std::vector<int> eosIds;
  std::string torchDtype;
};

// The architectures ninferc compiles: `model_type` in a config.json; a GGUF file's
// general.architecture names the same ones except mistral (its files say llama).
std::vector<std::string> supportedFamilies(bool gguf);
// "llama, mistral, ...", for messages and --help.
std::string supportedFamiliesList(bool gguf);

// Reads `path` (a config.json, or a directory holding one). Unsupported
// architectures, missing fields and unknown rope_scaling types are errors that
// name the field.
llvm::Expected<ModelConfig> loadModelConfig(const std::string& path);

// RoPE as transformers computes it for the config: inv_freq (head_dim/2
// values, scaling applied) and the factor cos/sin are multiplied by.
struct RopeTables {
  // LongRoPE: head_dim values, the short factors' table and then the long factors'.
  std::vector<float> invFreq;
  float attentionFactor = 1.0f;
  float dynamicFactor = 0.0f; // > 0: dynamic NTK, recomputed per step by the executor
  int originalMaxPositions = 0; // dynamic NTK and LongRoPE: where their scaling changes
};
RopeTables computeRopeTables(const ModelConfig& config);

// SmolLM3's layers without RoPE when its config does not list them: every `interval`-th
// (transformers' no_rope_layer_interval, 4 by default, which llama.cpp's smollm3 assumes).
// Element i: whether layer i rotates q and k (ModelConfig::ropeLayers).
constexpr int kSmolLm3NoRopeInterval = 4;
std::vector<bool> ropeLayersWithoutEvery(int layers, int interval = kSmolLm3NoRopeInterval);

// A warning where a plan's context runs past the positions the model was trained for
// (max_position_embeddings, or a GGUF file's context_length) and its RoPE does not stretch
// itself to the position (dynamic NTK does); empty otherwise.
std::string contextWarning(const ModelConfig& config, int context);

} // namespace ninfer
