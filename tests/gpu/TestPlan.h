// Builds small plans by hand for the GPU op tests: buffers with random or dummy
// weights (rounded to their dtype on the host), ternary weights (TQ2, TQ1)
// packed on the host or dummy-filled, packed bytes of a quantized dtype made by
// the caller, activations in an arena, KV caches (F16 or Q8_KV), workspaces,
// tokens and logits, ops with their attributes; then writes the plan with the
// real plan writer. Also: a temporary path for a plan file.
#pragma once

#include "Half.h"
#include "KernelEmitter.h"
#include "PlanWriter.h"
#include "ninfer/Format.h"
#include "ninfer/KvFormat.h"
#include "ninfer/TernaryDType.h"
#include "ninfer/QuantDType.h"
#include "plan_generated.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace ninfer {
namespace test {

using plan::BufferKind;
using plan::DType;

inline std::vector<float> randomValues(size_t count, float scale, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &v : values)
    v = dist(rng) * scale;
  return values;
}

inline std::vector<uint8_t> encode(const std::vector<float> &values, DType dtype) {
  std::vector<uint8_t> bytes;
  if (dtype == DType::F32) {
    bytes.resize(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  bytes.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = dtype == DType::F16 ? floatToHalfBits(values[i]) : floatToBf16(values[i]);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

class TestPlan {
public:
  // maxBatch > 1: a plan of several sequences (KV caches get a slot each; the
  // lm_head logits of addLmHeadLogits a row each).
  TestPlan(int maxStepTokens, int context, int maxBatch = 1) {
    plan.format_version = formatVersionFor(maxBatch);
    plan.max_batch = maxBatch;
    plan.compiler = "gpu_tests";
    plan.target = "test";
    plan.context = context;
    plan.max_step_tokens = maxStepTokens;
    plan.model = std::make_unique<plan::ModelInfoT>();
    plan.model->family = "test";
    plan.memory = std::make_unique<plan::MemoryPlanT>();
    plan.tokenizer = std::make_unique<plan::TokenizerT>();
    tokens = addBuffer("tokens", BufferKind::Tokens, DType::I32, {maxStepTokens}, 0);
    plan.tokens_buffer = tokens;
  }

  uint32_t addWeight(const std::string &name, DType dtype, std::vector<int64_t> shape,
                     const std::vector<float> &values) {
    const uint32_t index = addWeightSlot(name, dtype, shape);
    data[index] = encode(values, dtype);
    return index;
  }

  // A weight whose bytes are given as they go into the plan (e.g. packed quantized codes).
  uint32_t addWeightBytes(const std::string &name, DType dtype, std::vector<int64_t> shape,
                          std::vector<uint8_t> bytes) {
    const uint32_t index = addWeightSlot(name, dtype, shape);
    data[index] = std::move(bytes);
    return index;
  }

  uint32_t addDummyWeight(const std::string &name, DType dtype, std::vector<int64_t> shape,
                          uint32_t seed, float scale, float offset) {
    const uint32_t index = addWeightSlot(name, dtype, shape);
    plan.buffers[index]->dummy = std::make_unique<plan::DummyFill>(seed, scale, offset);
    plan.dummy_weights = true;
    return index;
  }

  // A [n, k] ternary weight of `dtype` (TQ2 or TQ1): random t in {-1, 0, +1}
  // (a third zeros, like a trained BitNet) times `scale`, packed on the host;
  // or, when `dummy`, filled by the executors (seed 11, scale `scale`).
  uint32_t addTernaryWeight(const std::string& name, DType dtype, int64_t n, int64_t k, float scale,
                            std::mt19937& rng, bool dummy) {
    if (dummy)
      return addDummyWeight(name, dtype, {n, k}, 11, scale, 0.0f);
    const uint32_t index = addWeightSlot(name, dtype, {n, k});
    std::vector<uint8_t>& bytes = data[index];
    bytes.assign(size_t(plan.buffers[index]->size_bytes), 0);
    std::vector<signed char> row(static_cast<size_t>(k));
    std::vector<uint32_t> words(static_cast<size_t>(ternary::rowWords(k)));
    for (int64_t r = 0; r < n; ++r) {
      for (auto& v : row)
        v = static_cast<signed char>(int(rng() % 3) - 1);
      if (dtype == DType::TQ1) {
        tq1::packRow(row.data(), k, bytes.data() + r * tq1::rowBytes(k));
      } else {
        ternary::packRow(row.data(), k, words.data());
        std::memcpy(bytes.data() + r * ternary::rowBytes(k), words.data(),
                    size_t(ternary::rowBytes(k)));
      }
    }
    if (dtype == DType::TQ1)
      tq1::writeScale(bytes.data(), n, k, scale);
    else
      ternary::writeScale(bytes.data(), n, k, scale);
    return index;
  }

  uint32_t addActivation(const std::string &name, int64_t width) {
    const uint64_t offset = activationBytes_;
    const uint32_t index =
        addBuffer(name, BufferKind::Activation, DType::F32, {plan.max_step_tokens, width}, offset);
    activationBytes_ = alignUp(offset + plan.buffers[index]->size_bytes, 256);
    plan.memory->activation_bytes = activationBytes_;
    return index;
  }

  // An F16 or Q8_KV (ninfer/KvFormat.h) cache [context, kvHeads, headDim], or
  // [max_batch, context, kvHeads, headDim] in a plan of several sequences.
  uint32_t addKvCache(const std::string &name, int context, int kvHeads, int headDim,
                      DType dtype = DType::F16) {
    const uint64_t offset = kvBytes_;
    std::vector<int64_t> shape{context, kvHeads, headDim};
    if (plan.max_batch > 1)
      shape.insert(shape.begin(), plan.max_batch);
    const uint32_t index = addBuffer(name, BufferKind::KvCache, dtype, shape, offset);
    if (dtype == DType::Q8_KV)
      plan.buffers[index]->size_bytes =
          uint64_t(plan.max_batch) * uint64_t(kv::q8CacheBytes(context, kvHeads, headDim));
    kvBytes_ = alignUp(offset + plan.buffers[index]->size_bytes, 256);
    plan.memory->kv_bytes = kvBytes_;
    return index;
  }

  // A Workspace buffer of `bytes` (a multiple of 4), after the previous ones.
  uint32_t addWorkspace(const std::string &name, uint64_t bytes) {
    const uint64_t offset = workspaceBytes_;
    const uint32_t index = addBuffer(name, BufferKind::Workspace, DType::F32,
                                     {static_cast<int64_t>(bytes / 4)}, offset);
    workspaceBytes_ = alignUp(offset + bytes, 256);
    plan.memory->workspace_bytes = workspaceBytes_;
    return index;
  }

  // An Embedding op: rows of `table` [vocab, dim] picked by the tokens into a
  // new activation `name`, which it returns.
  uint32_t addEmbedding(const std::string &name, uint32_t table, int vocab, int dim) {
    const uint32_t x = addActivation(name, dim);
    plan::EmbeddingAttrsT a;
    a.dim = dim;
    a.vocab = vocab;
    addOp("embed_" + name, a, {tokens, table}, {x});
    return x;
  }

  // The logits buffer: [rows, width]; rows = max_step_tokens lets a plain
  // Linear write every row of the step there, so all rows are compared.
  uint32_t addLogits(int64_t rows, int64_t width) {
    logits = addBuffer("logits", BufferKind::Logits, DType::F32, {rows, width}, 0);
    plan.logits_buffer = logits;
    plan.model->vocab_size = static_cast<int32_t>(rows * width);
    logitsWidth = width;
    logitsAllRows = rows > 1;
    return logits;
  }

  // The logits of a last-row-only lm_head: [max_batch, vocab], a row per
  // sequence of a batch step (single-sequence steps use the first).
  uint32_t addLmHeadLogits(int64_t vocab) {
    logits = addBuffer("logits", BufferKind::Logits, DType::F32, {plan.max_batch, vocab}, 0);
    plan.logits_buffer = logits;
    plan.model->vocab_size = static_cast<int32_t>(vocab);
    logitsWidth = vocab;
    logitsAllRows = false;
    return logits;
  }

  template <typename Attrs>
  void addOp(const std::string &name, Attrs attrs, std::vector<uint32_t> inputs,
             std::vector<uint32_t> outputs) {
    auto op = std::make_unique<plan::OpT>();
    op->name = name;
    op->attrs.Set(std::move(attrs));
    op->inputs = std::move(inputs);
    op->outputs = std::move(outputs);
    plan.ops.push_back(std::move(op));
  }

  // Copies `activation` [rows, width] into an all-rows logits buffer through
  // an f32 identity Linear (exact on both executors).
  void addReadout(uint32_t activation, int64_t width) {
    std::vector<float> identity(size_t(width * width), 0.0f);
    for (int64_t i = 0; i < width; ++i)
      identity[size_t(i * width + i)] = 1.0f;
    const uint32_t w = addWeight("readout.weight", DType::F32, {width, width}, identity);
    addLogits(plan.max_step_tokens, width);
    plan::LinearAttrsT attrs;
    attrs.in_features = static_cast<int32_t>(width);
    attrs.out_features = static_cast<int32_t>(width);
    addOp("readout", attrs, {activation, w}, {logits});
  }

  // Values of a step's logits that both executors must agree on.
  size_t comparedValues(int nTokens) const {
    return logitsAllRows ? size_t(nTokens) * size_t(logitsWidth) : size_t(logitsWidth);
  }

  Status write(const std::string &path) {
    plan.weights_size = 0;
    return writePlan(path, plan, [this](const plan::BufferT &b) -> const uint8_t * {
      for (size_t i = 0; i < plan.buffers.size(); ++i)
        if (plan.buffers[i].get() == &b && data.count(uint32_t(i)))
          return data[uint32_t(i)].data();
      return nullptr;
    });
  }

  plan::PlanT plan;
  std::map<uint32_t, std::vector<uint8_t>> data;
  uint32_t tokens = 0;
  uint32_t logits = 0;
  int64_t logitsWidth = 0;
  bool logitsAllRows = false;

private:
  uint32_t addWeightSlot(const std::string &name, DType dtype, const std::vector<int64_t> &shape) {
    const uint64_t offset = weightBytes_;
    const uint32_t index = addBuffer(name, BufferKind::Weight, dtype, shape, offset);
    weightBytes_ = alignUp(offset + plan.buffers[index]->size_bytes, kWeightAlignment);
    plan.memory->weight_bytes = weightBytes_;
    return index;
  }

  uint32_t addBuffer(const std::string &name, BufferKind kind, DType dtype,
                     std::vector<int64_t> shape, uint64_t offset) {
    auto b = std::make_unique<plan::BufferT>();
    b->name = name;
    b->kind = kind;
    b->dtype = dtype;
    uint64_t elements = 1;
    for (int64_t d : shape)
      elements *= uint64_t(d);
    b->shape = std::move(shape);
    b->size_bytes = elements * (dtype == DType::F32 || dtype == DType::I32 ? 4 : 2);
    if (ternary::isTernaryPlanDType(int(dtype)) && b->shape.size() == 2)
      b->size_bytes = uint64_t(ternary::tensorBytesOf(int(dtype), b->shape[0], b->shape[1]));
    const int quantFormat = quant::formatOfPlanDType(int(dtype));
    if (quantFormat >= 0) { // group-quantized [rows, cols] (ninfer/QuantFormats.h)
      const auto traits = quant::quantFormatTraits(quant::QuantFormatId(quantFormat));
      b->size_bytes = uint64_t(
          quant::quantTensorBytes(traits.bits, traits.groupSize, b->shape[0], b->shape[1]));
    }
    b->offset = offset;
    plan.buffers.push_back(std::move(b));
    return static_cast<uint32_t>(plan.buffers.size() - 1);
  }

  uint64_t weightBytes_ = 0;
  uint64_t activationBytes_ = 0;
  uint64_t kvBytes_ = 0;
  uint64_t workspaceBytes_ = 0;
};

// Attention attributes of a test plan (no window unless given).
inline plan::AttentionAttrsT attentionAttrs(int heads, int kvHeads, int headDim, float scale,
                                            int context, int window = 0) {
  plan::AttentionAttrsT a;
  a.heads = heads;
  a.kv_heads = kvHeads;
  a.head_dim = headDim;
  a.scale = scale;
  a.context = context;
  a.window = window;
  return a;
}

// A unique temporary path for a plan file.
inline std::string tempPlanPath(const std::string &stem) {
  static int counter = 0;
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/ninfer_gpu_test_" + std::to_string(getpid()) + "_" +
         std::to_string(counter++) + "_" + stem + ".nplan";
}

} // namespace test
} // namespace ninfer
