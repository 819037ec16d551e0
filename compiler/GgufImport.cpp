// GGUF import (see GgufImport.h): metadata -> ModelConfig, tensors -> the weight
// store under Hugging Face names, tokenizer.ggml.* -> the plan's tokenizer table.
#include "GgufImport.h"

#include "ChatTemplateImport.h"
#include "GgufDequant.h"
#include "GgufFile.h"
#include "GgufRepack.h"
#include "MappedFile.h"
#include "Phi3Import.h"
#include "QuantCommon.h"
#include "SentencePieceModel.h"

#include "ninfer/HalfFloat.h"
#include "ninfer/QuantFormats.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

namespace ninfer {
namespace {

class Importer {
public:
  Importer(std::string path, std::shared_ptr<const MappedFile> file, GgufFile gguf,
           GgufReadOptions options)
      : path_(std::move(path)), file_(std::move(file)), gguf_(std::move(gguf)),
        options_(std::move(options)) {}

  llvm::Expected<GgufModel> run();

private:
  llvm::Error fail(const llvm::Twine& what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), path_ + ": " + what);
  }
  std::string archKey(const char* suffix) const { return arch_ + "." + suffix; }
  // Typed metadata lookups: std::nullopt when absent, an error when of another type.
  llvm::Expected<std::optional<int64_t>> integer(const std::string& key) const;
  llvm::Expected<std::optional<double>> number(const std::string& key) const;
  llvm::Expected<std::optional<std::string>> text(const std::string& key) const;
  llvm::Error requirePositive(const std::string& key, int& out) const;

  llvm::Error readConfig(ModelConfig& config);
  llvm::Error readRope(ModelConfig& config);
  llvm::Error readLongRope(ModelConfig& config, int64_t originalLength);
  llvm::Error addWeights(const ModelConfig& config, GgufModel& model);
  llvm::Error addTensor(const GgufTensor& tensor, const std::string& name, int permuteHeads,
                        GgufModel& model);
  llvm::Expected<std::unique_ptr<plan::TokenizerT>> readTokenizer(const ModelConfig& config);
  llvm::Expected<std::unique_ptr<plan::TokenizerT>> sentencePiece();
  llvm::Expected<std::unique_ptr<plan::TokenizerT>> byteLevel();
  const GgufTensor* tensor(const std::string& name) const;

  std::string path_;
  std::shared_ptr<const MappedFile> file_;
  GgufFile gguf_;
  GgufReadOptions options_;
  std::string arch_;
};

llvm::Expected<std::optional<int64_t>> Importer::integer(const std::string& key) const {
  const GgufValue* value = gguf_.find(key);
  if (!value)
    return std::nullopt;
  if (value->kind != GgufValue::Kind::Integer && value->kind != GgufValue::Kind::Bool)
    return fail("metadata '" + key + "' must be an integer");
  return value->integer;
}

llvm::Expected<std::optional<double>> Importer::number(const std::string& key) const {
  const GgufValue* value = gguf_.find(key);
  if (!value)
    return std::nullopt;
  if (value->kind != GgufValue::Kind::Integer && value->kind != GgufValue::Kind::Float)
    return fail("metadata '" + key + "' must be a number");
  return value->number;
}

llvm::Expected<std::optional<std::string>> Importer::text(const std::string& key) const {
  const GgufValue* value = gguf_.find(key);
  if (!value)
    return std::nullopt;
  if (value->kind != GgufValue::Kind::String)
    return fail("metadata '" + key + "' must be a string");
  return value->text;
}

llvm::Error Importer::requirePositive(const std::string& key, int& out) const {
  auto value = integer(key);
  if (!value)
    return value.takeError();
  if (!*value)
    return fail("metadata '" + key + "' is missing");
  if (**value <= 0 || **value > INT32_MAX)
    return fail("metadata '" + key + "' must be a positive integer, not " + llvm::Twine(**value));
  out = static_cast<int>(**value);
  return llvm::Error::success();
}

#define NINFER_GGUF_TRY(expr)                                                                      \
  do {                                                                                             \
    if (llvm::Error err = (expr))                                                                  \
      return err;                                                                                  \
  } while (false)

#define NINFER_GGUF_VALUE(var, expr)                                                               \
  auto var = (expr);                                                                               \
  if (!var)                                                                                        \
    return var.takeError();

const GgufTensor* Importer::tensor(const std::string& name) const {
  for (const GgufTensor& t : gguf_.tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

llvm::Error Importer::readConfig(ModelConfig& config) {
  const std::vector<std::string> families = supportedFamilies(true);
  if (std::find(families.begin(), families.end(), arch_) == families.end())
    return fail("architecture '" + arch_ +
                "' is not supported (supported: " + supportedFamiliesList(true) + ")");
  config.family = arch_;
  NINFER_GGUF_TRY(requirePositive(archKey("embedding_length"), config.hiddenSize));
  NINFER_GGUF_TRY(requirePositive(archKey("block_count"), config.layers));
  NINFER_GGUF_TRY(requirePositive(archKey("feed_forward_length"), config.intermediateSize));
  NINFER_GGUF_TRY(requirePositive(archKey("attention.head_count"), config.heads));
  NINFER_GGUF_TRY(requirePositive(archKey("context_length"), config.maxPositions));
  config.kvHeads = config.heads;
  if (gguf_.find(archKey("attention.head_count_kv")))
    NINFER_GGUF_TRY(requirePositive(archKey("attention.head_count_kv"), config.kvHeads));
  if (config.heads % config.kvHeads != 0)
    return fail("attention.head_count (" + llvm::Twine(config.heads) +
                ") must be a multiple of attention.head_count_kv (" + llvm::Twine(config.kvHeads) +
                ")");
  if (gguf_.find(archKey("attention.key_length")))
    NINFER_GGUF_TRY(requirePositive(archKey("attention.key_length"), config.headDim));
  else if (config.hiddenSize % config.heads == 0)
    config.headDim = config.hiddenSize / config.heads;
  else
    return fail(archKey("embedding_length") + " is not a multiple of " +
                archKey("attention.head_count") + " and " + archKey("attention.key_length") +
                " is missing");
  if (config.headDim % 2 != 0)
    return fail("the head size " + llvm::Twine(config.headDim) + " is odd (RoPE rotates pairs)");
  if (const GgufValue* valueLength = gguf_.find(archKey("attention.value_length")))
    if (valueLength->integer != config.headDim)
      return fail("attention.value_length differs from attention.key_length; not supported");
  NINFER_GGUF_VALUE(eps, number(archKey("attention.layer_norm_rms_epsilon")));
  if (!*eps || !(**eps > 0.0))
    return fail("metadata '" + archKey("attention.layer_norm_rms_epsilon") +
                "' must be a positive number");
  config.rmsEps = **eps;
  NINFER_GGUF_VALUE(window, integer(archKey("attention.sliding_window")));
  config.slidingWindow = static_cast<int>(window->value_or(0));
  if (config.slidingWindow > 0 && gguf_.find(archKey("attention.sliding_window_pattern")))
    return fail("a sliding window on some layers only (attention.sliding_window_pattern) is not "
                "supported");

  const GgufTensor* embedding = tensor("token_embd.weight");
  if (!embedding || embedding->dims.size() != 2)
    return fail("tensor 'token_embd.weight' (two dimensions) is missing");
  config.vocabSize = static_cast<int>(embedding->dims[1]);
  // llama.cpp's smollm3 leaves RoPE out of every fourth layer (its files do not say so).
  if (config.family == "smollm3")
    config.ropeLayers = ropeLayersWithoutEvery(config.layers);
  config.tieWordEmbeddings = tensor("output.weight") == nullptr;
  config.qkvBias = tensor("blk.0.attn_q.bias") != nullptr;
  config.outputBias = tensor("blk.0.attn_output.bias") != nullptr;
  config.mlpBias = tensor("blk.0.ffn_up.bias") != nullptr;
  config.qkNorm = tensor("blk.0.attn_q_norm.weight") != nullptr;
  if (config.family == "qwen2" && !config.qkvBias)
    return fail("a qwen2 model needs q/k/v biases (blk.0.attn_q.bias is missing)");
  if ((config.family == "qwen3" || config.family == "olmo2") && !config.qkNorm)
    return fail("a " + config.family +
                " model needs q/k norms (blk.0.attn_q_norm.weight is missing)");
  // olmo2: its q/k norms span the whole projections, and its block norms follow the blocks.
  config.qkNormWhole = config.postNorms = config.family == "olmo2";

  NINFER_GGUF_VALUE(bos, integer("tokenizer.ggml.bos_token_id"));
  config.bosId = static_cast<int>(bos->value_or(-1));
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    NINFER_GGUF_VALUE(id, integer(key));
    if (*id && std::find(config.eosIds.begin(), config.eosIds.end(), **id) == config.eosIds.end())
      config.eosIds.push_back(static_cast<int>(**id));
  }
  return readRope(config);
}

llvm::Error Importer::readRope(ModelConfig& config) {
  NINFER_GGUF_VALUE(base, number(archKey("rope.freq_base")));
  config.ropeTheta = base->value_or(10000.0);
  NINFER_GGUF_VALUE(dims, integer(archKey("rope.dimension_count")));
  if (*dims && **dims != config.headDim)
    return fail("RoPE over " + llvm::Twine(**dims) + " of " + llvm::Twine(config.headDim) +
                " head dimensions (partial rotary) is not supported");
  NINFER_GGUF_VALUE(type, text(archKey("rope.scaling.type")));
  NINFER_GGUF_VALUE(factor, number(archKey("rope.scaling.factor")));
  NINFER_GGUF_VALUE(original, integer(archKey("rope.scaling.original_context_length")));
  const std::string scaling = type->value_or("none");
  RopeScaling& rope = config.rope;
  if (scaling == "linear" || scaling == "yarn") {
    if (!*factor || !(**factor > 0.0))
      return fail("RoPE scaling '" + scaling + "' needs a positive rope.scaling.factor");
    rope.factor = **factor;
    rope.type = scaling == "linear" ? RopeScaling::Type::Linear : RopeScaling::Type::Yarn;
    if (rope.type == RopeScaling::Type::Yarn) {
      if (!*original)
        return fail("RoPE scaling 'yarn' needs rope.scaling.original_context_length");
      rope.originalMaxPositions = static_cast<int>(**original);
      NINFER_GGUF_VALUE(fast, number(archKey("rope.scaling.yarn_beta_fast")));
      NINFER_GGUF_VALUE(slow, number(archKey("rope.scaling.yarn_beta_slow")));
      rope.betaFast = fast->value_or(rope.betaFast);
      rope.betaSlow = slow->value_or(rope.betaSlow);
    }
  } else if (scaling != "none") {
    return fail("RoPE scaling '" + scaling + "' is not supported (supported: none, linear, yarn)");
  }
  NINFER_GGUF_TRY(readLongRope(config, original->value_or(0)));
  if (const GgufTensor* freqs = tensor("rope_freqs.weight")) {
    if (freqs->type != static_cast<uint32_t>(GgmlType::F32) || freqs->dims.size() != 1 ||
        freqs->dims[0] != config.headDim / 2)
      return fail("tensor 'rope_freqs.weight' must hold " + llvm::Twine(config.headDim / 2) +
                  " F32 values");
    config.ropeFreqFactors.resize(config.headDim / 2);
    std::memcpy(config.ropeFreqFactors.data(), freqs->data, freqs->bytes);
  }
  return llvm::Error::success();
}

// LongRoPE (Phi-3's 128K models, Phi-3.5): the short and long factors as tensors, the original
// length and the attention factor as metadata.
llvm::Error Importer::readLongRope(ModelConfig& config, int64_t originalLength) {
  const GgufTensor* shortFactors = tensor("rope_factors_short.weight");
  const GgufTensor* longFactors = tensor("rope_factors_long.weight");
  if (!shortFactors && !longFactors)
    return llvm::Error::success();
  RopeScaling& rope = config.rope;
  if (rope.type != RopeScaling::Type::Default || config.ropeFreqFactors.size() ||
      tensor("rope_freqs.weight"))
    return fail("LongRoPE factors beside another RoPE scaling");
  for (const auto& [t, name, out] :
       {std::tuple{shortFactors, "rope_factors_short.weight", &rope.shortFactor},
        std::tuple{longFactors, "rope_factors_long.weight", &rope.longFactor}}) {
    if (!t || t->type != static_cast<uint32_t>(GgmlType::F32) || t->dims.size() != 1 ||
        t->dims[0] != config.headDim / 2)
      return fail("LongRoPE needs tensor '" + std::string(name) + "' of " +
                  llvm::Twine(config.headDim / 2) + " F32 values");
    std::vector<float> values(config.headDim / 2);
    std::memcpy(values.data(), t->data, values.size() * sizeof(float));
    out->assign(values.begin(), values.end());
  }
  if (originalLength <= 0)
    return fail("LongRoPE needs " + archKey("rope.scaling.original_context_length"));
  rope.type = RopeScaling::Type::LongRope;
  rope.originalMaxPositions = static_cast<int>(originalLength);
  rope.factor = static_cast<double>(config.maxPositions) / rope.originalMaxPositions;
  NINFER_GGUF_VALUE(attnFactor, number(archKey("rope.scaling.attn_factor")));
  rope.attentionFactor = attnFactor->value_or(0.0); // 0: derived, as transformers does
  return llvm::Error::success();
}

// llama.cpp's block tensor names -> the Hugging Face ones; "" for names not read.
std::string huggingFaceName(const std::string& gguf) {
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}};
  for (const auto& [from, to] : kGlobal)
    if (gguf == from)
      return to;
  static const std::pair<const char*, const char*> kBlock[] = {
      {"attn_norm", "input_layernorm"},
      {"ffn_norm", "post_attention_layernorm"},
      {"attn_qkv", "self_attn.qkv_proj"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"post_attention_norm", "post_attention_layernorm"},
      {"post_ffw_norm", "post_feedforward_layernorm"}};
  llvm::StringRef rest(gguf);
  if (!rest.consume_front("blk."))
    return "";
  auto [layer, tail] = rest.split('.');
  unsigned index;
  if (layer.getAsInteger(10, index))
    return "";
  auto [stem, suffix] = tail.rsplit('.');
  if (suffix != "weight" && suffix != "bias")
    return "";
  for (const auto& [from, to] : kBlock)
    if (stem == from)
      return "model.layers." + std::to_string(index) + "." + to + "." + suffix.str();
  return "";
}

llvm::Error Importer::addTensor(const GgufTensor& t, const std::string& name, int permuteHeads,
                                GgufModel& model) {
  const GgmlTypeTraits traits = ggmlTypeTraits(t.type);
  const auto type = static_cast<GgmlType>(t.type);
  const bool isFloat = type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
  if (!canDequantizeGgml(t.type))
    return fail("tensor '" + t.name + "' has ggml type " + traits.name +
                ", which ninferc cannot read (it reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, "
                "Q8_0, Q2_K..Q6_K, IQ4_NL and IQ4_XS)");
  TensorRef ref;
  ref.name = name;
  ref.shape = t.shape();
  ref.dtype = type == GgmlType::F32    ? WeightDType::F32
              : type == GgmlType::BF16 ? WeightDType::BF16
                                       : WeightDType::F16;
  if (isFloat && permuteHeads == 0) {
    ref.data = t.data;
    ref.bytes = t.bytes;
    model.weights->addMapped(std::move(ref), file_);
    return llvm::Error::success();
  }

  // Units reordered by the permutation: rows of a matrix, elements of a float vector (a
  // bias); a vector of blocks is one row.
  const bool vector = t.dims.size() == 1;
  const bool elementUnits = vector && isFloat;
  const int64_t units =
      elementUnits ? t.dims[0] : t.bytes / (t.dims[0] / traits.blockValues * traits.blockBytes);
  const uint64_t unitBytes = t.bytes / units;
  const int64_t unitValues = elementUnits ? 1 : t.dims[0];
  if (permuteHeads > 0 && units % (2 * permuteHeads) != 0)
    return fail("tensor '" + t.name + "': " + llvm::Twine(units) + " rows cannot be " +
                llvm::Twine(permuteHeads) + " heads of RoPE pairs");
  // Hugging Face row (head h, half s, i) was llama.cpp's row (h, i, s).
  auto sourceUnit = [&](int64_t row) {
    if (permuteHeads == 0)
      return row;
    const int64_t perHead = units / permuteHeads, halfSize = perHead / 2;
    const int64_t head = row / perHead, within = row % perHead;
    return head * perHead + (within % halfSize) * 2 + within / halfSize;
  };
  const int exact = options_.keepExactFormats && !vector ? exactQuantFormatOf(t.type) : -1;
  if (exact >= 0 && t.dims.size() == 2 && quant::isQuantizableCols(t.dims[0])) {
    model.weights->addOwned(name, weightDTypeOfQuantFormat(exact), ref.shape,
                            repackGgmlRows(t.type, units, t.dims[0], [&](int64_t row) {
                              return t.data + sourceUnit(row) * unitBytes;
                            }));
    ++model.exactTensors;
    return llvm::Error::success();
  }
  std::vector<uint8_t> bytes;
  if (isFloat) {
    bytes.resize(t.bytes);
    for (int64_t row = 0; row < units; ++row)
      std::memcpy(bytes.data() + row * unitBytes, t.data + sourceUnit(row) * unitBytes, unitBytes);
  } else {
    // Decoded: matrices to F16 (the quantizer reads them), vectors to F32.
    ref.dtype = vector ? WeightDType::F32 : WeightDType::F16;
    bytes.resize(static_cast<uint64_t>(units) * unitValues * (vector ? 4 : 2));
    quant::parallelFor(units, 0, [&](int64_t r) {
      std::vector<float> row(unitValues);
      dequantizeGgmlRow(t.type, t.data + sourceUnit(r) * unitBytes, row.data(), unitValues);
      if (vector) {
        std::memcpy(bytes.data() + static_cast<uint64_t>(r) * unitValues * 4, row.data(),
                    static_cast<size_t>(unitValues) * 4);
        return;
      }
      uint8_t* out = bytes.data() + static_cast<uint64_t>(r) * unitValues * 2;
      for (int64_t i = 0; i < unitValues; ++i) {
        const uint16_t h = floatToHalfBits(row[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
    });
    ++model.decodedTensors;
  }
  model.weights->addOwned(name, ref.dtype, ref.shape, std::move(bytes));
  return llvm::Error::success();
}

llvm::Error Importer::addWeights(const ModelConfig& config, GgufModel& model) {
  model.weights = WeightStore::createEmpty();
  uint64_t total = 0, done = 0;
  for (const GgufTensor& t : gguf_.tensors)
    total += t.bytes;
  for (const GgufTensor& t : gguf_.tensors) {
    done += t.bytes;
    if (options_.progress)
      options_.progress(done, total);
    std::string name = huggingFaceName(t.name);
    if (name.empty())
      continue; // rope_freqs (read into the config) and tensors no supported model reads
    // phi3's ffn_up holds the gate rows, then the up rows (transformers' gate_up_proj).
    if (config.family == "phi3" && llvm::StringRef(name).ends_with(".mlp.up_proj.weight"))
      name = name.substr(0, name.size() - std::strlen("up_proj.weight")) + "gate_up_proj.weight";
    // llama.cpp reorders llama's (and smollm3's) q and k rows for its interleaved RoPE (not
    // qwen's or phi3's).
    int permuteHeads = 0;
    if (config.family == "llama" || config.family == "smollm3") {
      llvm::StringRef stem(name);
      if (stem.contains(".self_attn.q_proj."))
        permuteHeads = config.heads;
      else if (stem.contains(".self_attn.k_proj."))
        permuteHeads = config.kvHeads;
    }
    NINFER_GGUF_TRY(addTensor(t, name, permuteHeads, model));
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<plan::TokenizerT>> Importer::sentencePiece() {
  const GgufValue* tokens = gguf_.find("tokenizer.ggml.tokens");
  const GgufValue* scores = gguf_.find("tokenizer.ggml.scores");
  const GgufValue* types = gguf_.find("tokenizer.ggml.token_type");
  if (!scores || scores->kind != GgufValue::Kind::FloatArray ||
      scores->numbers.size() != tokens->strings.size())
    return fail("tokenizer.ggml.scores must hold one float per token");
  if (!types || types->kind != GgufValue::Kind::IntegerArray ||
      types->integers.size() != tokens->strings.size())
    return fail("tokenizer.ggml.token_type must hold one integer per token");
  SentencePieceModel model;
  model.modelType = static_cast<int>(SentencePieceModel::ModelType::Bpe);
  model.pieces.resize(tokens->strings.size());
  for (size_t id = 0; id < model.pieces.size(); ++id) {
    model.pieces[id].text = tokens->strings[id];
    model.pieces[id].score = static_cast<float>(scores->numbers[id]);
    model.pieces[id].type = static_cast<int>(types->integers[id]);
    if (model.pieces[id].type == static_cast<int>(SentencePieceModel::PieceType::Byte))
      model.byteFallback = true;
  }
  NINFER_GGUF_VALUE(unk, integer("tokenizer.ggml.unknown_token_id"));
  model.unkId = static_cast<int>(unk->value_or(0));
  model.normalizer.present = true;
  model.normalizer.name = "identity";
  model.normalizer.removeExtraWhitespaces = false;
  NINFER_GGUF_VALUE(prefix, integer("tokenizer.ggml.add_space_prefix"));
  model.normalizer.addDummyPrefix = prefix->value_or(1) != 0;
  auto table = sentencePieceTokenizer(model);
  if (!table)
    return fail(llvm::toString(table.takeError()));
  NINFER_GGUF_VALUE(addBos, integer("tokenizer.ggml.add_bos_token"));
  (*table)->add_bos = addBos->value_or(1) != 0;
  return table;
}

llvm::Expected<std::unique_ptr<plan::TokenizerT>> Importer::byteLevel() {
  const GgufValue* tokens = gguf_.find("tokenizer.ggml.tokens");
  NINFER_GGUF_VALUE(pre, text("tokenizer.ggml.pre"));
  const std::string preName = pre->value_or("default");
  auto table = std::make_unique<plan::TokenizerT>();
  table->kind = plan::TokenizerKind::ByteLevelBpe;
  if (preName == "llama-bpe" || preName == "llama3") {
    table->pretokenizer = "llama3";
    table->ignore_merges = true;
  } else if (preName == "qwen2") {
    table->pretokenizer = "qwen2";
    table->normalizer = "nfc";
  } else if (preName == "gpt-2" || preName == "gpt2") {
    table->pretokenizer = "gpt2";
  } else {
    return fail("tokenizer.ggml.pre '" + preName +
                "' is not supported (supported: llama-bpe, qwen2, gpt-2)");
  }
  table->tokens = tokens->strings;
  llvm::StringMap<int> idOf;
  for (size_t id = 0; id < table->tokens.size(); ++id)
    idOf.try_emplace(table->tokens[id], static_cast<int>(id));
  if (const GgufValue* types = gguf_.find("tokenizer.ggml.token_type")) {
    if (types->kind != GgufValue::Kind::IntegerArray ||
        types->integers.size() != table->tokens.size())
      return fail("tokenizer.ggml.token_type must hold one integer per token");
    for (size_t id = 0; id < types->integers.size(); ++id)
      if (types->integers[id] == 3 || types->integers[id] == 4) // control, user-defined
        table->special_ids.push_back(static_cast<uint32_t>(id));
  }
  const GgufValue* merges = gguf_.find("tokenizer.ggml.merges");
  if (!merges || merges->kind != GgufValue::Kind::StringArray)
    return fail("a gpt2 tokenizer needs tokenizer.ggml.merges (a list of strings)");
  for (size_t i = 0; i < merges->strings.size(); ++i) {
    auto [left, right] = llvm::StringRef(merges->strings[i]).split(' ');
    auto l = idOf.find(left), r = idOf.find(right);
    if (right.empty() || l == idOf.end() || r == idOf.end())
      return fail("tokenizer.ggml.merges entry " + llvm::Twine(i) + " '" + merges->strings[i] +
                  "' is not two tokens separated by a space");
    table->merges.push_back(static_cast<uint32_t>(l->second));
    table->merges.push_back(static_cast<uint32_t>(r->second));
  }
  NINFER_GGUF_VALUE(addBos, integer("tokenizer.ggml.add_bos_token"));
  table->add_bos = addBos->value_or(0) != 0;
  return table;
}

llvm::Expected<std::unique_ptr<plan::TokenizerT>>
Importer::readTokenizer(const ModelConfig& config) {
  NINFER_GGUF_VALUE(model, text("tokenizer.ggml.model"));
  const GgufValue* tokens = gguf_.find("tokenizer.ggml.tokens");
  std::unique_ptr<plan::TokenizerT> table;
  if (!*model || **model == "none" || **model == "no_vocab") {
    table = std::make_unique<plan::TokenizerT>();
    table->kind = plan::TokenizerKind::None;
  } else if (**model != "llama" && **model != "gpt2") {
    return fail("tokenizer.ggml.model '" + **model + "' is not supported (supported: llama, gpt2)");
  } else if (!tokens || tokens->kind != GgufValue::Kind::StringArray || tokens->strings.empty()) {
    return fail("tokenizer.ggml.tokens (a list of strings) is missing");
  } else if (tokens->strings.size() > static_cast<size_t>(config.vocabSize)) {
    return fail("tokenizer.ggml.tokens has " + llvm::Twine(tokens->strings.size()) +
                " tokens but the embedding has " + llvm::Twine(config.vocabSize) + " rows");
  } else if (**model == "llama") {
    NINFER_GGUF_VALUE(sp, sentencePiece());
    table = std::move(*sp);
  } else {
    NINFER_GGUF_VALUE(bpe, byteLevel());
    table = std::move(*bpe);
  }
  table->bos_id = config.bosId;
  table->eos_ids = config.eosIds;
  // It would append EOS to every prompt; the plan cannot say so (as tokenizer_config.json's).
  NINFER_GGUF_VALUE(addEos, integer("tokenizer.ggml.add_eos_token"));
  if (addEos->value_or(0) != 0)
    return fail("tokenizer.ggml.add_eos_token is not supported yet");
  const int vocab = static_cast<int>(table->tokens.size());
  if (table->kind != plan::TokenizerKind::None) {
    if (table->bos_id >= vocab || (table->add_bos && table->bos_id < 0))
      return fail("tokenizer.ggml.bos_token_id " + llvm::Twine(table->bos_id) + " is not a token");
    for (int id : table->eos_ids)
      if (id < 0 || id >= vocab)
        return fail("end-of-sequence id " + llvm::Twine(id) + " is not a token");
  }
  NINFER_GGUF_VALUE(chatTemplate, text("tokenizer.chat_template"));
  if (*chatTemplate && !(*chatTemplate)->empty()) {
    auto tokenText = [&](int id) -> std::optional<std::string> {
      if (id < 0 || id >= vocab)
        return std::nullopt;
      return table->tokens[id];
    };
    NINFER_GGUF_TRY(setChatTemplate(
        **chatTemplate, path_ + ": tokenizer.chat_template", tokenText(table->bos_id),
        tokenText(table->eos_ids.empty() ? -1 : table->eos_ids[0]), *table));
  }
  return table;
}

llvm::Expected<GgufModel> Importer::run() {
  NINFER_GGUF_VALUE(arch, text("general.architecture"));
  if (!*arch)
    return fail("metadata 'general.architecture' is missing");
  arch_ = **arch;
  NINFER_GGUF_VALUE(splits, integer("split.count"));
  if (splits->value_or(1) > 1)
    return fail("one part of a GGUF split in " + llvm::Twine(**splits) +
                " files; join them first (llama-gguf-split --merge)");
  GgufModel model;
  NINFER_GGUF_TRY(readConfig(model.config));
  NINFER_GGUF_VALUE(tokenizer, readTokenizer(model.config));
  model.tokenizer = std::move(*tokenizer);
  NINFER_GGUF_TRY(addWeights(model.config, model));
  if (model.config.family == "phi3")
    NINFER_GGUF_TRY(splitPhi3Projections(model.config, *model.weights));
  std::map<std::string, size_t> byType;
  for (const GgufTensor& t : gguf_.tensors)
    ++byType[ggmlTypeTraits(t.type).name];
  model.summary = "GGUF v" + std::to_string(gguf_.version) + ", " + arch_;
  for (const auto& [type, count] : byType)
    model.summary += ", " + type + " x" + std::to_string(count);
  return model;
}

} // namespace

bool isGgufFile(const std::string& path) {
  if (llvm::sys::fs::is_directory(path))
    return false;
  auto file = MappedFile::open(path);
  if (!file) {
    llvm::consumeError(file.takeError());
    return false;
  }
  return hasGgufMagic((*file)->data(), (*file)->size());
}

llvm::Expected<GgufModel> importGguf(const std::string& path, const GgufReadOptions& options) {
  auto file = MappedFile::open(path);
  if (!file)
    return file.takeError();
  auto gguf = parseGguf(path, (*file)->data(), (*file)->size());
  if (!gguf)
    return gguf.takeError();
  return Importer(path, std::move(*file), std::move(*gguf), options).run();
}

} // namespace ninfer
