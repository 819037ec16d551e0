// The tiny test model and its double-precision reference (written from the
// math, not from the executor: plain loops, no shared kernels).
#include "TestModel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace ninfer {
namespace test {
namespace {

using plan::DType;

// Rounds a float the way the weight's dtype stores it, using the compiler's own
// conversions (_Float16) and bf16 truncation with round-to-nearest-even.
float roundTo(DType dtype, float v) {
  if (dtype == DType::F16)
    return float(static_cast<_Float16>(v));
  if (dtype == DType::BF16) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&v, &bits, 4);
  }
  return v;
}

class Random {
public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(rng_() >> 8) / 16777216.0f; }

private:
  std::mt19937 rng_;
};

std::vector<double> rmsNorm(const std::vector<double>& x, const std::vector<float>& w, int dim,
                            double eps) {
  std::vector<double> y(x.size());
  for (size_t g = 0; g < x.size() / dim; ++g) {
    double ss = 0;
    for (int i = 0; i < dim; ++i)
      ss += x[g * dim + i] * x[g * dim + i];
    const double r = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i)
      y[g * dim + i] = x[g * dim + i] * r * w[i];
  }
  return y;
}

std::vector<double> matVec(const std::vector<double>& x, const std::vector<float>& w,
                           const std::vector<float>& bias, int out) {
  const size_t in = x.size();
  std::vector<double> y(out, 0.0);
  for (int o = 0; o < out; ++o) {
    double s = bias.empty() ? 0.0 : bias[o];
    for (size_t i = 0; i < in; ++i)
      s += x[i] * w[o * in + i];
    y[o] = s;
  }
  return y;
}

void ropeInPlace(std::vector<double>& x, int heads, int headDim, int position,
                 const std::vector<double>& invFreq, double attentionFactor) {
  const int half = headDim / 2;
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < half; ++i) {
      const double angle = position * invFreq[i];
      const double c = std::cos(angle) * attentionFactor, s = std::sin(angle) * attentionFactor;
      double& a = x[h * headDim + i];
      double& b = x[h * headDim + half + i];
      const double x1 = a, x2 = b;
      a = x1 * c - x2 * s;
      b = x2 * c + x1 * s;
    }
}

} // namespace

Loaded load(TinyModel& model, const std::string& fileName, int threads) {
  return openWithCpu(model.maker.write(fileName), threads);
}

Loaded openWithCpu(const std::string& path, int threads) {
  Loaded l;
  auto file = PlanFile::open(path);
  EXPECT_TRUE(file.isOk()) << file.status().message();
  if (!file.isOk())
    return l;
  l.file = std::move(file.value());
  auto executor = createCpuExecutor(*l.file, threads);
  EXPECT_TRUE(executor.isOk()) << executor.status().message();
  if (executor.isOk())
    l.executor = std::move(executor.value());
  return l;
}

TinyModel buildTinyModel(const TinyModelSpec& s) {
  TinyModel m{s, PlanMaker(s.vocab, s.context, s.maxStepTokens, s.maxBatch), {}, {}, {}, {}, {}};
  PlanMaker& pm = m.maker;
  Random random(s.seed);
  const DType dt = s.weightDtype;
  auto values = [&](size_t count, float scale, float center) {
    std::vector<float> v(count);
    for (float& x : v)
      x = roundTo(dt, center + random.uniform(-scale, scale));
    return v;
  };
  auto weight = [&](const std::string& name, std::vector<int64_t> shape,
                    const std::vector<float>& v) { return pm.addWeight(name, dt, shape, v); };

  const int qWidth = s.heads * s.headDim, kvWidth = s.kvHeads * s.headDim;
  m.embed = values(size_t(s.vocab) * s.hidden, 1.0f, 0.0f);
  const uint32_t embed = weight("embed", {s.vocab, s.hidden}, m.embed);
  const int half = s.headDim / 2;
  m.invFreq.resize(s.longFactors ? 2 * half : half);
  for (int i = 0; i < half; ++i)
    m.invFreq[i] = float(1.0 / std::pow(double(s.theta), 2.0 * i / s.headDim));
  for (int i = half; i < int(m.invFreq.size()); ++i) // LongRoPE's long table: other angles
    m.invFreq[i] = m.invFreq[i - half] / float(2 + i);
  const uint32_t invFreq =
      pm.addWeight("inv_freq", DType::F32, {int64_t(m.invFreq.size())}, m.invFreq);

  const uint32_t x = pm.addActivation("x", s.hidden);
  const uint32_t h = pm.addActivation("h", s.hidden);
  const uint32_t q = pm.addActivation("q", qWidth);
  const uint32_t k = pm.addActivation("k", kvWidth);
  const uint32_t v = pm.addActivation("v", kvWidth);
  const uint32_t attn = pm.addActivation("attn", qWidth);
  const uint32_t o = pm.addActivation("o", s.hidden);
  const uint32_t g = pm.addActivation("g", s.intermediate);
  const uint32_t u = pm.addActivation("u", s.intermediate);

  plan::EmbeddingAttrsT embedding;
  embedding.dim = s.hidden;
  embedding.vocab = s.vocab;
  pm.addOp("embed", embedding, {pm.tokens(), embed}, {x});

  auto norm = [&](int dim) {
    plan::RmsNormAttrsT a;
    a.dim = dim;
    a.eps = s.eps;
    return a;
  };
  auto linear = [&](int in, int out, bool bias, bool lastRow = false) {
    plan::LinearAttrsT a;
    a.in_features = in;
    a.out_features = out;
    a.has_bias = bias;
    a.last_row_only = lastRow;
    return a;
  };
  plan::RopeAttrsT rope;
  rope.head_dim = s.headDim;
  rope.attention_factor = s.attentionFactor;
  rope.theta = s.theta;
  rope.dynamic_factor = s.dynamicFactor;
  rope.original_max_positions = s.originalMaxPositions;
  rope.long_factors = s.longFactors;
  plan::AttentionAttrsT attention;
  attention.heads = s.heads;
  attention.kv_heads = s.kvHeads;
  attention.head_dim = s.headDim;
  attention.window = s.window;
  attention.scale = 1.0f / std::sqrt(float(s.headDim));
  attention.context = s.context;
  plan::SwiGluAttrsT swiglu;
  swiglu.dim = s.intermediate;
  plan::AddAttrsT add;
  add.dim = s.hidden;

  for (int l = 0; l < s.layers; ++l) {
    TinyModel::Layer L;
    const std::string p = "layers." + std::to_string(l) + ".";
    L.attnNorm = values(s.hidden, 0.3f, 1.0f);
    const float inScale = 1.0f / std::sqrt(float(s.hidden));
    L.wq = values(size_t(qWidth) * s.hidden, inScale, 0.0f);
    L.wk = values(size_t(kvWidth) * s.hidden, inScale, 0.0f);
    L.wv = values(size_t(kvWidth) * s.hidden, inScale, 0.0f);
    if (s.qkvBias) {
      L.bq = values(qWidth, 0.2f, 0.0f);
      L.bk = values(kvWidth, 0.2f, 0.0f);
      L.bv = values(kvWidth, 0.2f, 0.0f);
    }
    if (s.qkNorm) {
      L.qNorm = values(s.headDim, 0.3f, 1.0f);
      L.kNorm = values(s.headDim, 0.3f, 1.0f);
    }
    L.wo = values(size_t(s.hidden) * qWidth, 1.0f / std::sqrt(float(qWidth)), 0.0f);
    L.mlpNorm = values(s.hidden, 0.3f, 1.0f);
    L.wg = values(size_t(s.intermediate) * s.hidden, inScale, 0.0f);
    L.wu = values(size_t(s.intermediate) * s.hidden, inScale, 0.0f);
    L.wd = values(size_t(s.hidden) * s.intermediate, 1.0f / std::sqrt(float(s.intermediate)), 0.0f);

    pm.addOp(p + "attn_norm", norm(s.hidden), {x, weight(p + "attn_norm", {s.hidden}, L.attnNorm)},
             {h});
    auto project = [&](const char* name, const std::vector<float>& w, const std::vector<float>& b,
                       int out, uint32_t dst) {
      std::vector<uint32_t> inputs = {h, weight(p + name, {out, s.hidden}, w)};
      if (s.qkvBias)
        inputs.push_back(weight(p + name + ".bias", {out}, b));
      pm.addOp(p + name, linear(s.hidden, out, s.qkvBias), inputs, {dst});
    };
    project("q_proj", L.wq, L.bq, qWidth, q);
    project("k_proj", L.wk, L.bk, kvWidth, k);
    project("v_proj", L.wv, L.bv, kvWidth, v);
    if (s.qkNorm) {
      pm.addOp(p + "q_norm", norm(s.headDim), {q, weight(p + "q_norm", {s.headDim}, L.qNorm)}, {q});
      pm.addOp(p + "k_norm", norm(s.headDim), {k, weight(p + "k_norm", {s.headDim}, L.kNorm)}, {k});
    }
    rope.heads = s.heads;
    pm.addOp(p + "rope_q", rope, {q, invFreq}, {q});
    rope.heads = s.kvHeads;
    pm.addOp(p + "rope_k", rope, {k, invFreq}, {k});
    const uint32_t kc = pm.addKvCache(p + "k_cache", s.kvHeads, s.headDim, s.kvDtype);
    const uint32_t vc = pm.addKvCache(p + "v_cache", s.kvHeads, s.headDim, s.kvDtype);
    pm.addOp(p + "attention", attention, {q, k, v, kc, vc}, {attn});
    pm.addOp(p + "o_proj", linear(qWidth, s.hidden, false),
             {attn, weight(p + "o_proj", {s.hidden, qWidth}, L.wo)}, {o});
    pm.addOp(p + "attn_residual", add, {x, o}, {x});
    pm.addOp(p + "mlp_norm", norm(s.hidden), {x, weight(p + "mlp_norm", {s.hidden}, L.mlpNorm)},
             {h});
    pm.addOp(p + "gate_proj", linear(s.hidden, s.intermediate, false),
             {h, weight(p + "gate_proj", {s.intermediate, s.hidden}, L.wg)}, {g});
    pm.addOp(p + "up_proj", linear(s.hidden, s.intermediate, false),
             {h, weight(p + "up_proj", {s.intermediate, s.hidden}, L.wu)}, {u});
    pm.addOp(p + "swiglu", swiglu, {g, u}, {g});
    pm.addOp(p + "down_proj", linear(s.intermediate, s.hidden, false),
             {g, weight(p + "down_proj", {s.hidden, s.intermediate}, L.wd)}, {o});
    pm.addOp(p + "mlp_residual", add, {x, o}, {x});
    m.layers.push_back(std::move(L));
  }
  m.finalNorm = values(s.hidden, 0.3f, 1.0f);
  m.lmHead = values(size_t(s.vocab) * s.hidden, 1.0f, 0.0f);
  pm.addOp("final_norm", norm(s.hidden), {x, weight("final_norm", {s.hidden}, m.finalNorm)}, {h});
  pm.addOp("lm_head", linear(s.hidden, s.vocab, false, true),
           {h, weight("lm_head", {s.vocab, s.hidden}, m.lmHead)}, {pm.logits()});
  return m;
}

std::vector<std::vector<double>> referenceStepLogits(const TinyModel& m,
                                                     const std::vector<int32_t>& tokens,
                                                     const std::vector<int>& steps) {
  const TinyModelSpec& s = m.spec;
  const int kvWidth = s.kvHeads * s.headDim, qWidth = s.heads * s.headDim;
  // Per layer: cached k and v rows, already rounded to f16.
  std::vector<std::vector<std::vector<double>>> kCache(s.layers), vCache(s.layers);
  std::vector<std::vector<double>> result;
  int pos = 0;
  for (int n : steps) {
    // RoPE frequencies for this step: dynamic NTK rescales the base by the
    // sequence length at the end of the step; LongRoPE takes its long table past the
    // original length.
    const int seqLen = pos + n;
    const size_t table =
        s.longFactors && seqLen > s.originalMaxPositions ? size_t(s.headDim / 2) : 0;
    std::vector<double> invFreq(m.invFreq.begin() + table,
                                m.invFreq.begin() + table + s.headDim / 2);
    if (s.dynamicFactor > 0 && seqLen > s.originalMaxPositions) {
      const double f = s.dynamicFactor, d = s.headDim;
      const double base =
          s.theta * std::pow(f * seqLen / s.originalMaxPositions - (f - 1), d / (d - 2));
      for (int i = 0; i < s.headDim / 2; ++i)
        invFreq[i] = 1.0 / std::pow(base, 2.0 * i / d);
    }
    std::vector<double> lastHidden;
    for (int t = 0; t < n; ++t) {
      const int p = pos + t;
      std::vector<double> x(m.embed.begin() + size_t(tokens[p]) * s.hidden,
                            m.embed.begin() + size_t(tokens[p] + 1) * s.hidden);
      // Layers run per token: a token only sees earlier tokens through the cache,
      // and within a step the cache rows of earlier tokens are already written.
      for (int l = 0; l < s.layers; ++l) {
        const TinyModel::Layer& L = m.layers[l];
        std::vector<double> h = rmsNorm(x, L.attnNorm, s.hidden, s.eps);
        std::vector<double> q = matVec(h, L.wq, L.bq, qWidth);
        std::vector<double> k = matVec(h, L.wk, L.bk, kvWidth);
        std::vector<double> v = matVec(h, L.wv, L.bv, kvWidth);
        if (s.qkNorm) {
          q = rmsNorm(q, L.qNorm, s.headDim, s.eps);
          k = rmsNorm(k, L.kNorm, s.headDim, s.eps);
        }
        ropeInPlace(q, s.heads, s.headDim, p, invFreq, s.attentionFactor);
        ropeInPlace(k, s.kvHeads, s.headDim, p, invFreq, s.attentionFactor);
        for (double& value : k)
          value = float(static_cast<_Float16>(float(value)));
        for (double& value : v)
          value = float(static_cast<_Float16>(float(value)));
        kCache[l].push_back(k);
        vCache[l].push_back(v);
        std::vector<double> attn(qWidth, 0.0);
        const int group = s.heads / s.kvHeads;
        for (int hd = 0; hd < s.heads; ++hd) {
          const int kvh = hd / group;
          std::vector<double> scores;
          std::vector<int> keys;
          for (int j = 0; j <= p; ++j) {
            if (s.window > 0 && p - j >= s.window)
              continue;
            double dot = 0;
            for (int d = 0; d < s.headDim; ++d)
              dot += q[hd * s.headDim + d] * kCache[l][j][kvh * s.headDim + d];
            scores.push_back(dot / std::sqrt(double(s.headDim)));
            keys.push_back(j);
          }
          const double mx = *std::max_element(scores.begin(), scores.end());
          double sum = 0;
          for (double& sc : scores)
            sum += (sc = std::exp(sc - mx));
          for (size_t i = 0; i < keys.size(); ++i)
            for (int d = 0; d < s.headDim; ++d)
              attn[hd * s.headDim + d] += scores[i] / sum * vCache[l][keys[i]][kvh * s.headDim + d];
        }
        std::vector<double> o = matVec(attn, L.wo, {}, s.hidden);
        for (int i = 0; i < s.hidden; ++i)
          x[i] += o[i];
        h = rmsNorm(x, L.mlpNorm, s.hidden, s.eps);
        std::vector<double> gate = matVec(h, L.wg, {}, s.intermediate);
        std::vector<double> up = matVec(h, L.wu, {}, s.intermediate);
        for (int i = 0; i < s.intermediate; ++i)
          gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
        o = matVec(gate, L.wd, {}, s.hidden);
        for (int i = 0; i < s.hidden; ++i)
          x[i] += o[i];
      }
      lastHidden = x;
    }
    result.push_back(
        matVec(rmsNorm(lastHidden, m.finalNorm, s.hidden, s.eps), m.lmHead, {}, s.vocab));
    pos += n;
  }
  return result;
}

} // namespace test
} // namespace ninfer
