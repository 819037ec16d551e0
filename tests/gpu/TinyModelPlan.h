// A two-layer llama-shaped plan for the GPU tests (hidden 256, 8 heads over 2
// KV heads of 32, SwiGLU 512, vocab 300, context 128 (an option), 64-token steps, so the
// emitter fuses q/k/v and gate/up GEMVs and RoPE with the KV append): real
// random weights, or dummy weights filled on each executor (which also checks
// that both fills agree). Options give the linears another dtype (dummy
// group-quantized ones, e.g. Q4_G64), the KV cache int8, and the plan several
// sequences (batched decode).
#pragma once

#include "GpuParity.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace ninfer {
namespace test {

struct TinyModelOptions {
  plan::DType type = plan::DType::F16; // every weight but the linears' when `linears` is set
  bool dummy = false;
  plan::DType linears = plan::DType::F32; // used when linearsSet (group-quantized: dummy only)
  bool linearsSet = false;
  plan::DType cache = plan::DType::F16;   // F16 or Q8_KV
  int maxBatch = 1;
  int ffn = 512; // the MLP's width
  int context = 128;
  // The SwiGLU writes an activation of its own (else in place over gate, which keeps it
  // from being fused into the gate/up launches: the down projection reads gate's buffer).
  bool swiGluOwnOutput = false;
};

inline TestPlan tinyModel(const TinyModelOptions &options) {
  std::mt19937 rng(99);
  const int hidden = 256, heads = 8, kvHeads = 2, headDim = 32, ffn = options.ffn, vocab = 300,
            context = options.context, layers = 2;
  TestPlan t(64, context, options.maxBatch);
  uint32_t seed = 1;
  auto weightOf = [&](plan::DType type, const std::string &name, std::vector<int64_t> shape,
                      float scale, float offset) {
    size_t count = 1;
    for (int64_t d : shape)
      count *= size_t(d);
    if (options.dummy || quant::formatOfPlanDType(int(type)) >= 0)
      return t.addDummyWeight(name, type, shape, seed++, scale, offset);
    std::vector<float> values = randomValues(count, scale, rng);
    for (float &v : values)
      v += offset;
    return t.addWeight(name, type, shape, values);
  };
  auto weight = [&](const std::string &name, std::vector<int64_t> shape, float scale,
                    float offset = 0.0f) {
    return weightOf(options.type, name, std::move(shape), scale, offset);
  };
  const uint32_t table = weight("embed", {kTokenVocab, hidden}, 1.0f);
  const uint32_t x = t.addActivation("x", hidden);
  const uint32_t h = t.addActivation("h", hidden);
  const uint32_t q = t.addActivation("q", heads * headDim);
  const uint32_t k = t.addActivation("k", kvHeads * headDim);
  const uint32_t v = t.addActivation("v", kvHeads * headDim);
  const uint32_t o = t.addActivation("o", heads * headDim);
  const uint32_t g = t.addActivation("g", ffn);
  const uint32_t u = t.addActivation("u", ffn);
  const uint32_t act = options.swiGluOwnOutput ? t.addActivation("act", ffn) : g;
  std::vector<float> inv(headDim / 2);
  for (int i = 0; i < headDim / 2; ++i)
    inv[size_t(i)] = 1.0f / std::pow(10000.0f, float(2 * i) / headDim);
  const uint32_t invFreq = t.addWeight("inv_freq", plan::DType::F32, {headDim / 2}, inv);
  const uint32_t workspace =
      t.addWorkspace("workspace", uint64_t(options.maxBatch) *
                                      attentionWorkspaceBytes(heads, kvHeads, headDim, context));
  plan::EmbeddingAttrsT embed;
  embed.dim = hidden;
  embed.vocab = kTokenVocab;
  t.addOp("embed", embed, {t.tokens, table}, {x});
  auto norm = [&](const std::string &name, uint32_t in, uint32_t out) {
    plan::RmsNormAttrsT a;
    a.dim = hidden;
    a.eps = 1e-5f;
    t.addOp(name, a, {in, weight(name + ".w", {hidden}, 0.1f, 1.0f)}, {out});
  };
  auto linear = [&](const std::string &name, uint32_t in, uint32_t out, int inF, int outF,
                    bool last = false) {
    plan::LinearAttrsT a;
    a.in_features = inF;
    a.out_features = outF;
    a.last_row_only = last;
    const float scale = 1.0f / std::sqrt(float(inF));
    const uint32_t w = options.linearsSet
                           ? weightOf(options.linears, name + ".w", {outF, inF}, scale, 0.0f)
                           : weight(name + ".w", {outF, inF}, scale);
    t.addOp(name, a, {in, w}, {out});
  };
  for (int l = 0; l < layers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    norm(p + "attn_norm", x, h);
    linear(p + "q", h, q, hidden, heads * headDim);
    linear(p + "k", h, k, hidden, kvHeads * headDim);
    linear(p + "v", h, v, hidden, kvHeads * headDim);
    plan::RopeAttrsT rope;
    rope.head_dim = headDim;
    rope.theta = 10000.0f;
    rope.heads = heads;
    t.addOp(p + "rope_q", rope, {q, invFreq}, {q});
    rope.heads = kvHeads;
    t.addOp(p + "rope_k", rope, {k, invFreq}, {k});
    t.addOp(p + "attn",
            attentionAttrs(heads, kvHeads, headDim, 1.0f / std::sqrt(float(headDim)), context),
            {q, k, v, t.addKvCache(p + "k_cache", context, kvHeads, headDim, options.cache),
             t.addKvCache(p + "v_cache", context, kvHeads, headDim, options.cache), workspace},
            {o});
    linear(p + "o", o, h, heads * headDim, hidden);
    plan::AddAttrsT add;
    add.dim = hidden;
    t.addOp(p + "attn_residual", add, {x, h}, {x});
    norm(p + "ffn_norm", x, h);
    linear(p + "gate", h, g, hidden, ffn);
    linear(p + "up", h, u, hidden, ffn);
    plan::SwiGluAttrsT swi;
    swi.dim = ffn;
    t.addOp(p + "swiglu", swi, {g, u}, {act});
    linear(p + "down", act, h, ffn, hidden);
    t.addOp(p + "ffn_residual", add, {x, h}, {x});
  }
  norm("final_norm", x, h);
  t.addLmHeadLogits(vocab);
  linear("lm_head", h, t.logits, hidden, vocab, true);
  return t;
}

inline TestPlan tinyModel(plan::DType type, bool dummy) {
  TinyModelOptions options;
  options.type = type;
  options.dummy = dummy;
  return tinyModel(options);
}

} // namespace test
} // namespace ninfer
