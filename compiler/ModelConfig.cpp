// Reads a Hugging Face config.json (and generation_config.json) into ModelConfig,
// resolving defaults the way transformers does for each supported family, and
// computes RoPE inverse frequencies with the formulas of transformers'
// modeling_rope_utils.py (in double, stored as float).
#include "ModelConfig.h"

#include "JsonFile.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>

namespace ninfer {
namespace {

using llvm::json::Object;
using llvm::json::Value;

llvm::Error makeError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// Typed access to one JSON object; every error names the file and the field.
// A null value counts as absent, as transformers treats optional fields.
class Fields {
public:
  Fields(const Object& object, std::string file, std::string prefix = "")
      : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  const Value* get(llvm::StringRef key) const {
    const Value* value = object_.get(key);
    return value && value->kind() != Value::Null ? value : nullptr;
  }
  bool has(llvm::StringRef key) const { return get(key) != nullptr; }
  bool isNull(llvm::StringRef key) const {
    const Value* value = object_.get(key);
    return value && value->kind() == Value::Null;
  }

  llvm::Error illTyped(llvm::StringRef key, const llvm::Twine& what) const {
    return makeError(file_ + ": field '" + prefix_ + key + "' must be " + what);
  }
  llvm::Error missing(llvm::StringRef key) const {
    return makeError(file_ + ": required field '" + prefix_ + key + "' is missing");
  }

  llvm::Error optionalInt(llvm::StringRef key, int& out) const {
    const Value* value = get(key);
    if (!value)
      return llvm::Error::success();
    std::optional<int64_t> number = value->getAsInteger();
    if (!number || *number < INT_MIN || *number > INT_MAX)
      return illTyped(key, "an integer");
    out = static_cast<int>(*number);
    return llvm::Error::success();
  }
  llvm::Error requirePositiveInt(llvm::StringRef key, int& out) const {
    if (!has(key))
      return missing(key);
    if (llvm::Error error = optionalInt(key, out))
      return error;
    if (out <= 0)
      return illTyped(key, "a positive integer");
    return llvm::Error::success();
  }
  llvm::Error optionalDouble(llvm::StringRef key, double& out) const {
    const Value* value = get(key);
    if (!value)
      return llvm::Error::success();
    std::optional<double> number = value->getAsNumber();
    if (!number)
      return illTyped(key, "a number");
    out = *number;
    return llvm::Error::success();
  }
  llvm::Error requireDouble(llvm::StringRef key, double& out) const {
    if (!has(key))
      return missing(key);
    return optionalDouble(key, out);
  }
  llvm::Error optionalBool(llvm::StringRef key, bool& out) const {
    const Value* value = get(key);
    if (!value)
      return llvm::Error::success();
    std::optional<bool> flag = value->getAsBoolean();
    if (!flag)
      return illTyped(key, "true or false");
    out = *flag;
    return llvm::Error::success();
  }
  llvm::Error optionalString(llvm::StringRef key, std::string& out) const {
    const Value* value = get(key);
    if (!value)
      return llvm::Error::success();
    std::optional<llvm::StringRef> text = value->getAsString();
    if (!text)
      return illTyped(key, "a string");
    out = text->str();
    return llvm::Error::success();
  }
  // eos_token_id may be one id or a list of ids.
  llvm::Error optionalIdList(llvm::StringRef key, std::vector<int>& out) const {
    const Value* value = get(key);
    if (!value)
      return llvm::Error::success();
    std::vector<int> ids;
    if (std::optional<int64_t> id = value->getAsInteger()) {
      ids.push_back(static_cast<int>(*id));
    } else if (const llvm::json::Array* array = value->getAsArray()) {
      for (const Value& element : *array) {
        std::optional<int64_t> id = element.getAsInteger();
        if (!id || *id < 0 || *id > INT_MAX)
          return illTyped(key, "a token id or a list of token ids");
        ids.push_back(static_cast<int>(*id));
      }
    } else {
      return illTyped(key, "a token id or a list of token ids");
    }
    out = std::move(ids);
    return llvm::Error::success();
  }

  const std::string& file() const { return file_; }

private:
  const Object& object_;
  std::string file_;
  std::string prefix_;
};

#define NINFER_TRY(expr)                                                                           \
  do {                                                                                             \
    if (llvm::Error _err = (expr))                                                                 \
      return _err;                                                                                 \
  } while (0)

// RoPE settings: transformers 5 keeps them in `rope_parameters` (rope_theta
// included); older configs have a top-level rope_theta and a `rope_scaling`
// dict keyed by "rope_type" or "type". rope_scaling wins when both are present,
// as in transformers' convert_rope_params_to_dict.
llvm::Error parseRope(const Fields& fields, ModelConfig& config) {
  const Object* dict = nullptr;
  std::string dictName;
  for (llvm::StringRef key : {"rope_scaling", "rope_parameters"}) {
    const Value* value = fields.get(key);
    if (!value)
      continue;
    const Object* object = value->getAsObject();
    if (!object)
      return fields.illTyped(key, "an object");
    if (!object->empty()) {
      dict = object;
      dictName = key.str();
      break;
    }
  }
  static const Object emptyObject;
  Fields rope(dict ? *dict : emptyObject, fields.file(), dictName + ".");

  config.ropeTheta = 10000.0; // transformers' default_theta
  NINFER_TRY(fields.optionalDouble("rope_theta", config.ropeTheta));
  NINFER_TRY(rope.optionalDouble("rope_theta", config.ropeTheta));
  if (!(config.ropeTheta > 1.0))
    return fields.illTyped("rope_theta", "a number greater than 1");

  double partialRotary = 1.0;
  NINFER_TRY(fields.optionalDouble("partial_rotary_factor", partialRotary));
  NINFER_TRY(rope.optionalDouble("partial_rotary_factor", partialRotary));
  if (partialRotary != 1.0)
    return makeError(fields.file() + ": partial_rotary_factor " + std::to_string(partialRotary) +
                     " is not supported (only 1.0)");

  std::string typeName = "default";
  NINFER_TRY(rope.optionalString("type", typeName));
  NINFER_TRY(rope.optionalString("rope_type", typeName));
  // Phi-3 configs call LongRoPE "su" or "yarn" (transformers' Phi3Config renames both).
  if (config.family == "phi3" && (typeName == "su" || typeName == "yarn"))
    typeName = "longrope";

  RopeScaling& scaling = config.rope;
  scaling = RopeScaling();
  // Pretraining length for llama3/yarn; a top-level field has priority, as in
  // transformers' standardize_rope_params.
  auto originalMax = [&]() -> llvm::Error {
    scaling.originalMaxPositions = config.maxPositions;
    NINFER_TRY(rope.optionalInt("original_max_position_embeddings", scaling.originalMaxPositions));
    NINFER_TRY(
        fields.optionalInt("original_max_position_embeddings", scaling.originalMaxPositions));
    if (scaling.originalMaxPositions <= 0)
      return rope.illTyped("original_max_position_embeddings", "a positive integer");
    return llvm::Error::success();
  };
  auto positiveFactor = [&]() -> llvm::Error {
    NINFER_TRY(rope.requireDouble("factor", scaling.factor));
    if (!(scaling.factor > 0.0))
      return rope.illTyped("factor", "a positive number");
    return llvm::Error::success();
  };

  if (typeName == "default") {
    scaling.type = RopeScaling::Type::Default;
  } else if (typeName == "linear") {
    scaling.type = RopeScaling::Type::Linear;
    NINFER_TRY(positiveFactor());
  } else if (typeName == "dynamic") {
    scaling.type = RopeScaling::Type::Dynamic;
    NINFER_TRY(positiveFactor());
    // transformers' dynamic NTK compares against max_position_embeddings.
    scaling.originalMaxPositions = config.maxPositions;
  } else if (typeName == "llama3") {
    scaling.type = RopeScaling::Type::Llama3;
    NINFER_TRY(positiveFactor());
    NINFER_TRY(rope.requireDouble("low_freq_factor", scaling.lowFreqFactor));
    NINFER_TRY(rope.requireDouble("high_freq_factor", scaling.highFreqFactor));
    if (!(scaling.lowFreqFactor > 0.0) || !(scaling.highFreqFactor > scaling.lowFreqFactor))
      return makeError(fields.file() + ": llama3 RoPE needs 0 < " + dictName +
                       ".low_freq_factor < " + dictName + ".high_freq_factor");
    NINFER_TRY(originalMax());
  } else if (typeName == "yarn") {
    scaling.type = RopeScaling::Type::Yarn;
    NINFER_TRY(originalMax());
    // Without a factor, transformers derives it from the two lengths.
    scaling.factor = static_cast<double>(config.maxPositions) / scaling.originalMaxPositions;
    NINFER_TRY(rope.optionalDouble("factor", scaling.factor));
    if (!(scaling.factor > 0.0))
      return rope.illTyped("factor", "a positive number");
    NINFER_TRY(rope.optionalDouble("attention_factor", scaling.attentionFactor));
    NINFER_TRY(rope.optionalDouble("mscale", scaling.mscale));
    NINFER_TRY(rope.optionalDouble("mscale_all_dim", scaling.mscaleAllDim));
    NINFER_TRY(rope.optionalDouble("beta_fast", scaling.betaFast));
    NINFER_TRY(rope.optionalDouble("beta_slow", scaling.betaSlow));
    NINFER_TRY(rope.optionalBool("truncate", scaling.truncate));
    // transformers: `beta_fast or 32`, `beta_slow or 1`.
    if (scaling.betaFast == 0.0)
      scaling.betaFast = 32.0;
    if (scaling.betaSlow == 0.0)
      scaling.betaSlow = 1.0;
  } else if (typeName == "longrope") {
    scaling.type = RopeScaling::Type::LongRope;
    NINFER_TRY(originalMax());
    // Without a factor, transformers takes the two lengths' ratio (for the attention factor).
    scaling.factor = static_cast<double>(config.maxPositions) / scaling.originalMaxPositions;
    NINFER_TRY(rope.optionalDouble("factor", scaling.factor));
    NINFER_TRY(rope.optionalDouble("attention_factor", scaling.attentionFactor));
    for (const auto& [key, out] :
         {std::pair<const char*, std::vector<double>*>{"short_factor", &scaling.shortFactor},
          {"long_factor", &scaling.longFactor}}) {
      const Value* value = rope.get(key);
      const llvm::json::Array* array = value ? value->getAsArray() : nullptr;
      if (!array || static_cast<int>(array->size()) != config.headDim / 2)
        return rope.illTyped(key, "a list of head_dim / 2 (" + llvm::Twine(config.headDim / 2) +
                                      ") positive numbers");
      for (const Value& v : *array) {
        std::optional<double> number = v.getAsNumber();
        if (!number || !(*number > 0.0))
          return rope.illTyped(key, "a list of head_dim / 2 (" + llvm::Twine(config.headDim / 2) +
                                        ") positive numbers");
        out->push_back(*number);
      }
    }
  } else {
    return makeError(fields.file() + ": unsupported rope type '" + typeName +
                     "' (supported: default, linear, dynamic, llama3, yarn, longrope)");
  }
  return llvm::Error::success();
}

// The windows of the layers: `window` (0: none) on the layers layer_types marks
// "sliding_attention" where the config has layer_types, else on those defaultSliding names.
llvm::Error applyLayerTypes(const Fields& fields, ModelConfig& config, int window,
                            const std::function<bool(int)>& defaultSliding) {
  const llvm::json::Array* types = nullptr;
  if (const Value* layerTypes = fields.get("layer_types")) {
    types = layerTypes->getAsArray();
    if (!types || static_cast<int>(types->size()) != config.layers)
      return fields.illTyped("layer_types", "a list of num_hidden_layers strings (" +
                                                llvm::Twine(config.layers) + ")");
  }
  for (int layer = 0; layer < config.layers; ++layer) {
    bool sliding = defaultSliding(layer);
    if (types) {
      std::optional<llvm::StringRef> type = (*types)[layer].getAsString();
      if (!type || (*type != "sliding_attention" && *type != "full_attention"))
        return fields.illTyped("layer_types", "a list of \"full_attention\" or "
                                              "\"sliding_attention\"");
      sliding = *type == "sliding_attention";
    }
    config.layerWindows[layer] = sliding ? window : 0;
    if (sliding && window > 0)
      config.slidingWindow = window;
  }
  return llvm::Error::success();
}

// SmolLM3: no_rope_layers (1: RoPE, 0: none; by default none in every no_rope_layer_interval-th
// layer), and with use_sliding_window a window on the layers layer_types marks
// "sliding_attention" (by default the ones without RoPE), as transformers' SmolLM3Config.
llvm::Error parseSmolLm3Layers(const Fields& fields, ModelConfig& config) {
  std::vector<int> ropeFlags;
  NINFER_TRY(fields.optionalIdList("no_rope_layers", ropeFlags));
  if (fields.has("no_rope_layers")) {
    if (static_cast<int>(ropeFlags.size()) != config.layers ||
        std::any_of(ropeFlags.begin(), ropeFlags.end(), [](int f) { return f > 1; }))
      return fields.illTyped("no_rope_layers", "a list of num_hidden_layers 0s and 1s (" +
                                                   llvm::Twine(config.layers) + ")");
    config.ropeLayers.assign(ropeFlags.begin(), ropeFlags.end());
  } else {
    int interval = kSmolLm3NoRopeInterval;
    NINFER_TRY(fields.optionalInt("no_rope_layer_interval", interval));
    if (interval <= 0)
      return fields.illTyped("no_rope_layer_interval", "a positive integer");
    config.ropeLayers = ropeLayersWithoutEvery(config.layers, interval);
  }

  bool useSlidingWindow = false;
  int window = 0;
  NINFER_TRY(fields.optionalBool("use_sliding_window", useSlidingWindow));
  NINFER_TRY(fields.optionalInt("sliding_window", window));
  if (!useSlidingWindow || window <= 0)
    return llvm::Error::success();
  return applyLayerTypes(fields, config, window,
                         [&](int layer) { return !config.ropeLayers[layer]; });
}

// Sliding-window attention as transformers resolves it per family.
llvm::Error parseWindows(const Fields& fields, ModelConfig& config) {
  config.slidingWindow = 0;
  config.layerWindows.assign(config.layers, 0);
  if (config.family == "mistral" || config.family == "phi3") {
    // Every layer uses sliding_window; null means full attention and an absent
    // key means transformers' default: 4096 for mistral, none for phi3.
    if (!fields.isNull("sliding_window")) {
      config.slidingWindow = config.family == "mistral" ? 4096 : 0;
      if (fields.has("sliding_window"))
        NINFER_TRY(fields.requirePositiveInt("sliding_window", config.slidingWindow));
    }
    config.layerWindows.assign(config.layers, config.slidingWindow);
    return llvm::Error::success();
  }
  if (config.family == "smollm3")
    return parseSmolLm3Layers(fields, config);
  if (config.family != "qwen2" && config.family != "qwen3")
    return llvm::Error::success();

  // Qwen2/Qwen3: the window only exists when use_sliding_window is true, and
  // then applies to the layers that layer_types marks "sliding_attention", or
  // by default to layers i >= max_window_layers.
  bool useSlidingWindow = false;
  int window = 4096; // transformers' default when the key is absent
  int maxWindowLayers = 28;
  NINFER_TRY(fields.optionalBool("use_sliding_window", useSlidingWindow));
  if (fields.isNull("sliding_window")) {
    useSlidingWindow = false; // an explicit null disables the window
  } else if (fields.has("sliding_window")) {
    NINFER_TRY(fields.requirePositiveInt("sliding_window", window));
  }
  NINFER_TRY(fields.optionalInt("max_window_layers", maxWindowLayers));
  return applyLayerTypes(fields, config, useSlidingWindow ? window : 0,
                         [&](int layer) { return layer >= maxWindowLayers; });
}

} // namespace

llvm::Expected<ModelConfig> loadModelConfig(const std::string& path) {
  std::string configPath = path;
  std::string directory;
  if (llvm::sys::fs::is_directory(path)) {
    directory = path;
    llvm::SmallString<256> joined(path);
    llvm::sys::path::append(joined, "config.json");
    configPath = joined.str().str();
  }
  llvm::Expected<Value> json = readJsonFile(configPath);
  if (!json)
    return json.takeError();
  const Object* top = json->getAsObject();
  if (!top)
    return makeError(configPath + ": expected a JSON object at the top level");
  Fields fields(*top, configPath);

  ModelConfig config;
  if (!fields.has("model_type"))
    return fields.missing("model_type");
  NINFER_TRY(fields.optionalString("model_type", config.family));
  const std::vector<std::string> families = supportedFamilies(false);
  if (std::find(families.begin(), families.end(), config.family) == families.end())
    return makeError(configPath + ": unsupported architecture '" + config.family +
                     "' (supported: " + supportedFamiliesList(false) + ")");

  NINFER_TRY(fields.requirePositiveInt("vocab_size", config.vocabSize));
  NINFER_TRY(fields.requirePositiveInt("hidden_size", config.hiddenSize));
  NINFER_TRY(fields.requirePositiveInt("intermediate_size", config.intermediateSize));
  NINFER_TRY(fields.requirePositiveInt("num_hidden_layers", config.layers));
  NINFER_TRY(fields.requirePositiveInt("num_attention_heads", config.heads));
  NINFER_TRY(fields.requirePositiveInt("max_position_embeddings", config.maxPositions));
  config.kvHeads = config.heads;
  if (fields.has("num_key_value_heads"))
    NINFER_TRY(fields.requirePositiveInt("num_key_value_heads", config.kvHeads));
  if (config.heads % config.kvHeads != 0)
    return makeError(configPath + ": num_attention_heads (" + llvm::Twine(config.heads) +
                     ") must be a multiple of num_key_value_heads (" + llvm::Twine(config.kvHeads) +
                     ")");
  if (fields.has("head_dim")) {
    NINFER_TRY(fields.requirePositiveInt("head_dim", config.headDim));
  } else {
    if (config.hiddenSize % config.heads != 0)
      return makeError(configPath + ": hidden_size (" + llvm::Twine(config.hiddenSize) +
                       ") is not a multiple of num_attention_heads and head_dim is missing");
    config.headDim = config.hiddenSize / config.heads;
  }
  if (config.headDim % 2 != 0)
    return fields.illTyped("head_dim", "even (RoPE rotates pairs)");

  config.rmsEps = 1e-6;
  NINFER_TRY(fields.optionalDouble("rms_norm_eps", config.rmsEps));
  if (!(config.rmsEps > 0.0))
    return fields.illTyped("rms_norm_eps", "a positive number");

  std::string act = "silu";
  NINFER_TRY(fields.optionalString("hidden_act", act));
  if (act != "silu")
    return makeError(configPath + ": unsupported hidden_act '" + act + "' (supported: silu)");

  NINFER_TRY(fields.optionalBool("tie_word_embeddings", config.tieWordEmbeddings));

  if (config.family == "llama" || config.family == "smollm3") {
    bool attentionBias = false;
    NINFER_TRY(fields.optionalBool("attention_bias", attentionBias));
    NINFER_TRY(fields.optionalBool("mlp_bias", config.mlpBias));
    config.qkvBias = config.outputBias = attentionBias;
  } else if (config.family == "qwen2") {
    config.qkvBias = true; // q/k/v always biased, o_proj never
  } else if (config.family == "olmo2") {
    bool attentionBias = false;
    NINFER_TRY(fields.optionalBool("attention_bias", attentionBias));
    config.qkvBias = config.outputBias = attentionBias;
    config.qkNorm = config.qkNormWhole = true;
    config.postNorms = true;
  } else if (config.family == "qwen3") {
    bool attentionBias = false;
    NINFER_TRY(fields.optionalBool("attention_bias", attentionBias));
    config.qkvBias = config.outputBias = attentionBias;
    config.qkNorm = true;
  }

  NINFER_TRY(parseWindows(fields, config));
  NINFER_TRY(parseRope(fields, config));

  NINFER_TRY(fields.optionalInt("bos_token_id", config.bosId));
  NINFER_TRY(fields.optionalIdList("eos_token_id", config.eosIds));
  NINFER_TRY(fields.optionalString("torch_dtype", config.torchDtype));
  NINFER_TRY(fields.optionalString("dtype", config.torchDtype));

  // generation_config.json's eos ids are what generate() stops on.
  if (!directory.empty()) {
    llvm::SmallString<256> genPath(directory);
    llvm::sys::path::append(genPath, "generation_config.json");
    if (llvm::sys::fs::exists(genPath)) {
      llvm::Expected<Value> gen = readJsonFile(genPath.str().str());
      if (!gen)
        return gen.takeError();
      const Object* genTop = gen->getAsObject();
      if (!genTop)
        return makeError(genPath + ": expected a JSON object at the top level");
      Fields genFields(*genTop, genPath.str().str());
      NINFER_TRY(genFields.optionalIdList("eos_token_id", config.eosIds));
    }
  }
  return config;
}

RopeTables computeRopeTables(const ModelConfig& config) {
  RopeTables tables;
  const RopeScaling& rope = config.rope;
  const int dim = config.headDim;
  const int half = dim / 2;
  const double base = config.ropeTheta;
  std::vector<double> invFreq(half), longInvFreq;
  for (int i = 0; i < half; ++i)
    invFreq[i] = 1.0 / std::pow(base, static_cast<double>(2 * i) / dim);

  switch (rope.type) {
  case RopeScaling::Type::Default:
    break;
  case RopeScaling::Type::Linear:
    for (double& f : invFreq)
      f /= rope.factor;
    break;
  case RopeScaling::Type::Dynamic:
    // At positions below the original length dynamic NTK equals the default;
    // the executor rescales the base when a step goes past it.
    tables.dynamicFactor = static_cast<float>(rope.factor);
    tables.originalMaxPositions = rope.originalMaxPositions;
    break;
  case RopeScaling::Type::Llama3: {
    const double oldContext = rope.originalMaxPositions;
    const double lowFreqWavelen = oldContext / rope.lowFreqFactor;
    const double highFreqWavelen = oldContext / rope.highFreqFactor;
    for (double& f : invFreq) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < highFreqWavelen)
        continue; // high frequencies are kept
      if (wavelen > lowFreqWavelen) {
        f /= rope.factor; // low frequencies are interpolated fully
        continue;
      }
      const double smooth =
          (oldContext / wavelen - rope.lowFreqFactor) / (rope.highFreqFactor - rope.lowFreqFactor);
      f = (1.0 - smooth) * f / rope.factor + smooth * f;
    }
    break;
  }
  case RopeScaling::Type::Yarn: {
    auto correctionDim = [&](double rotations) {
      return dim * std::log(rope.originalMaxPositions / (rotations * 2.0 * M_PI)) /
             (2.0 * std::log(base));
    };
    double low = correctionDim(rope.betaFast);
    double high = correctionDim(rope.betaSlow);
    if (rope.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high)
      high += 0.001; // as transformers does, to avoid dividing by zero
    for (int i = 0; i < half; ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolationWeight = 1.0 - ramp;
      const double extrapolated = invFreq[i];
      const double interpolated = invFreq[i] / rope.factor;
      invFreq[i] = interpolated * (1.0 - extrapolationWeight) + extrapolated * extrapolationWeight;
    }
    auto getMscale = [](double scale, double mscale) {
      return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
    };
    double attentionFactor = rope.attentionFactor;
    if (attentionFactor == 0.0) {
      if (rope.mscale != 0.0 && rope.mscaleAllDim != 0.0)
        attentionFactor =
            getMscale(rope.factor, rope.mscale) / getMscale(rope.factor, rope.mscaleAllDim);
      else
        attentionFactor = getMscale(rope.factor, 1.0);
    }
    tables.attentionFactor = static_cast<float>(attentionFactor);
    break;
  }
  case RopeScaling::Type::LongRope: {
    // The short factors' table, then the long factors': transformers switches to the long
    // ones once a sequence runs past the original length and then recomputes the sequence's
    // keys with them (Phi3ForCausalLM's generation); so does ninfer's (Generator.h).
    longInvFreq = invFreq;
    for (int i = 0; i < half; ++i) {
      invFreq[i] /= rope.shortFactor[i];
      longInvFreq[i] /= rope.longFactor[i];
    }
    tables.originalMaxPositions = rope.originalMaxPositions;
    double attentionFactor = rope.attentionFactor;
    if (attentionFactor == 0.0)
      attentionFactor = rope.factor <= 1.0
                            ? 1.0
                            : std::sqrt(1.0 + std::log(rope.factor) /
                                                  std::log(double(rope.originalMaxPositions)));
    tables.attentionFactor = static_cast<float>(attentionFactor);
    break;
  }
  }

  if (config.ropeFreqFactors.size() == invFreq.size())
    for (int i = 0; i < half; ++i) {
      invFreq[i] /= config.ropeFreqFactors[i];
      if (!longInvFreq.empty())
        longInvFreq[i] /= config.ropeFreqFactors[i];
    }
  tables.invFreq.assign(invFreq.begin(), invFreq.end());
  tables.invFreq.insert(tables.invFreq.end(), longInvFreq.begin(), longInvFreq.end());
  return tables;
}

std::vector<std::string> supportedFamilies(bool gguf) {
  std::vector<std::string> families = {"llama", "mistral", "qwen2", "qwen3",
                                       "phi3",  "smollm3", "olmo2"};
  if (gguf)
    families.erase(std::find(families.begin(), families.end(), "mistral"));
  return families;
}

std::string supportedFamiliesList(bool gguf) {
  std::string list;
  for (const std::string& family : supportedFamilies(gguf))
    list += (list.empty() ? "" : ", ") + family;
  return list;
}

std::vector<bool> ropeLayersWithoutEvery(int layers, int interval) {
  std::vector<bool> rotates;
  for (int layer = 0; layer < layers; ++layer)
    rotates.push_back((layer + 1) % interval != 0);
  return rotates;
}

std::string contextWarning(const ModelConfig& config, int context) {
  if (context <= config.maxPositions || config.rope.type == RopeScaling::Type::Dynamic)
    return "";
  return "--ctx " + std::to_string(context) + " is past the model's " +
         std::to_string(config.maxPositions) +
         " positions (its max_position_embeddings or GGUF context_length): output beyond them "
         "is likely to degrade";
}

} // namespace ninfer
