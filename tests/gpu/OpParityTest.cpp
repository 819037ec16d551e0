// Op parity: every op kind, swept over shapes, dtypes and step sizes, run by the
// CUDA executor and by the CPU reference executor on the same plan file and the
// same tokens over several steps (prefill, then decode); outputs are compared
// with a normalized MSE, sum((gpu - cpu)^2) / sum(cpu^2), against a bound per op.
// Inputs enter through Embedding ops from random f32 tables; an f32 identity
// Linear copies the op's output rows into an all-rows logits buffer (exact), so
// every row of every step is compared, not only the last one.
// Skips (GTEST_SKIP) when libcuda.so.1 cannot be loaded or there is no GPU.
#include "GpuParity.h"
#include "TinyModelPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace ninfer {
namespace {

using plan::DType;
using test::gpu;
using test::inputRows;
using test::kTokenVocab;
using test::TestPlan;
using test::tinyModel;

// Runs both executors over `steps`, checks every step's nMSE against `bound`
// and prints the worst of the case.
void expectParity(TestPlan &t, const std::vector<int> &steps, double bound, const std::string &what,
                  KernelOptions options = {}) {
  const std::vector<test::StepError> errors = test::stepErrors(t, steps, what, options);
  double worst = 0.0;
  for (size_t s = 0; s < steps.size(); ++s) {
    EXPECT_LE(errors[s].nmse(), bound) << what << ": step " << s << " (n " << steps[s] << ")";
    worst = std::max(worst, errors[s].nmse());
  }
  std::printf("[parity] %-60s max nMSE %.3g (bound %.0e)\n", what.c_str(), worst, bound);
}

const char *typeName(DType d) { return plan::EnumNameDType(d); }

const std::vector<int> kSteps = {7, 1, 1, 64, 1, 9};

TEST(OpParity, Embedding) {
  REQUIRE_GPU();
  for (DType type : {DType::F32, DType::F16, DType::BF16})
    for (int dim : {64, 200, 2048}) {
      std::mt19937 rng(dim);
      TestPlan t(64, 128);
      const uint32_t table = t.addWeight("table", type, {kTokenVocab, dim},
                                         test::randomValues(size_t(kTokenVocab) * dim, 1.0f, rng));
      t.addReadout(t.addEmbedding("x", table, kTokenVocab, dim), dim);
      expectParity(t, kSteps, 0.0,
                   std::string("Embedding ") + typeName(type) + " dim " + std::to_string(dim));
    }
}

// Dummy weights are generated on each executor; an embedding of a dummy table
// shows them bit for bit, so the device fill must equal the host fill exactly.
TEST(OpParity, DummyFillIsBitExact) {
  REQUIRE_GPU();
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    TestPlan t(64, 128);
    const int dim = 333;
    const uint32_t table = t.addDummyWeight("table", type, {kTokenVocab, dim}, 77, 0.7f, 0.1f);
    t.addReadout(t.addEmbedding("x", table, kTokenVocab, dim), dim);
    expectParity(t, {64, 32, 1}, 0.0, std::string("Dummy fill ") + typeName(type));
  }
}

// The first step of a fresh executor reads every upload whole: the last weight uploaded (the
// readout's 64 MB identity) comes from pageable memory, whose copy returns before its last
// chunk lands, and the arenas are zeroed on the legacy stream; the executor waits for the
// whole context before it runs a step. Fresh executors, one step each, compared exactly.
TEST(OpParity, FirstStepSeesEveryUpload) {
  REQUIRE_GPU();
  const int dim = 4096;
  for (int run = 0; run < 4; ++run) {
    std::mt19937 rng(run);
    TestPlan t(8, 16);
    const uint32_t table = t.addWeight("table", DType::F32, {kTokenVocab, dim},
                                       test::randomValues(size_t(kTokenVocab) * dim, 1.0f, rng));
    t.addReadout(t.addEmbedding("x", table, kTokenVocab, dim), dim);
    expectParity(t, {8}, 0.0, "First step after the upload, run " + std::to_string(run));
  }
}

TEST(OpParity, RmsNorm) {
  REQUIRE_GPU();
  struct Case {
    int width, dim;
    bool inPlace;
  };
  for (DType type : {DType::F32, DType::F16, DType::BF16})
    for (Case c : {Case{1024, 1024, false}, Case{512, 64, false}, Case{96, 96, true},
                   Case{640, 128, true}}) {
      std::mt19937 rng(c.width + c.dim);
      TestPlan t(64, 128);
      const uint32_t x = inputRows(t, "x", c.width, rng, 3.0f);
      const uint32_t w = t.addWeight("w", type, {c.dim}, test::randomValues(c.dim, 1.0f, rng));
      const uint32_t y = c.inPlace ? x : t.addActivation("y", c.width);
      plan::RmsNormAttrsT a;
      a.dim = c.dim;
      a.eps = 1e-6f;
      t.addOp("norm", a, {x, w}, {y});
      t.addReadout(y, c.width);
      expectParity(t, kSteps, 1e-10,
                   std::string("RmsNorm ") + typeName(type) + " width " + std::to_string(c.width) +
                       " dim " + std::to_string(c.dim) + (c.inPlace ? " in place" : ""));
    }
}

// Steps of more than 8 rows with f16/bf16 weights and K % 8 == 0 run the
// tensor-core GEMM, which rounds the f32 activations to the weight dtype: a
// relative error per product of up to 2^-9 (bf16) or 2^-12 (f16), so a dot
// product's nMSE is ~1e-6 (bf16) or ~2e-8 (f16). Everything else accumulates
// f32 products exactly like the CPU (up to summation order): ~1e-12.
double linearBound(DType type, int in) {
  if (type == DType::F32 || in % 8 != 0)
    return 1e-9;
  return type == DType::BF16 ? 2e-5 : 1e-6;
}

TEST(OpParity, Linear) {
  REQUIRE_GPU();
  struct Case {
    int in, out;
  };
  for (DType type : {DType::F32, DType::F16, DType::BF16})
    for (Case c : {Case{256, 384}, Case{100, 72}, Case{64, 1000}, Case{1030, 33}})
      for (bool bias : {false, true})
        for (bool lastRow : {false, true}) {
          std::mt19937 rng(c.in * 7 + c.out);
          TestPlan t(64, 128);
          const uint32_t x = inputRows(t, "x", c.in, rng);
          const uint32_t w = t.addWeight("w", type, {c.out, c.in},
                                         test::randomValues(size_t(c.out) * c.in, 0.1f, rng));
          std::vector<uint32_t> inputs = {x, w};
          if (bias)
            inputs.push_back(t.addWeight("b", type, {c.out}, test::randomValues(c.out, 1.0f, rng)));
          t.addLogits(lastRow ? 1 : 64, c.out);
          plan::LinearAttrsT a;
          a.in_features = c.in;
          a.out_features = c.out;
          a.has_bias = bias;
          a.last_row_only = lastRow;
          t.addOp("linear", a, inputs, {t.logits});
          expectParity(t, kSteps, linearBound(type, c.in),
                       std::string("Linear ") + typeName(type) + " " + std::to_string(c.in) + "->" +
                           std::to_string(c.out) + (bias ? " bias" : "") +
                           (lastRow ? " last_row_only" : ""));
        }
}

// Linear ops that read one input share one decode launch (KernelEmitter.cpp
// groups them): gate/up feeding a SwiGLU and q/k/v summed by two adds, then an
// f32 linear to the logits, so every member's output reaches them; dense,
// quantized and ternary weights, decode steps and prefill steps (each op's own
// GEMM).
TEST(OpParity, GroupedLinears) {
  REQUIRE_GPU();
  struct Case {
    DType type;
    int in, out;
    double bound;
    bool deepRing = false;
  };
  // Q4_G64 with 1000 outputs keeps the register-fed one-token GEMV; Q4_K16 with 1024 (whole
  // tiles of 16) takes the bulk one on sm_90+ (gemv_quant_bulk.cuh), with 9 units of K (a
  // partial chunk); Q4_G64 4096 -> 8448 as a gate/up pair is a wide launch (1,056 tiles:
  // chunks of 32 units, GemvShapes.h kBulkWideTiles), and again in the deep ring's layout
  // (plans for cards of H200-class bandwidth: five slots of 16 units).
  for (Case c : {Case{DType::F16, 256, 384, 1e-6}, Case{DType::BF16, 1024, 200, 2e-5},
                 Case{DType::Q4_G64, 512, 1000, 1e-5}, Case{DType::Q4_K16, 1152, 1024, 1e-5},
                 Case{DType::Q4_G64, 4096, 8448, 1e-5}, Case{DType::Q4_G64, 4096, 8448, 1e-5, true},
                 Case{DType::TQ1, 400, 96, 1e-6}})
    for (int members : {2, 3}) {
      std::mt19937 rng(c.in + members);
      TestPlan t(64, 128);
      const uint32_t x = inputRows(t, "x", c.in, rng);
      std::vector<uint32_t> outputs;
      for (int m = 0; m < members; ++m) {
        const std::string name = "w" + std::to_string(m);
        const uint32_t w =
            c.type == DType::F16 || c.type == DType::BF16
                ? t.addWeight(name, c.type, {c.out, c.in},
                              test::randomValues(size_t(c.out) * c.in, 0.1f, rng))
                : t.addDummyWeight(name, c.type, {c.out, c.in}, 5 + m, 0.05f, 0.0f);
        outputs.push_back(t.addActivation("y" + std::to_string(m), c.out));
        plan::LinearAttrsT a;
        a.in_features = c.in;
        a.out_features = c.out;
        t.addOp("linear" + std::to_string(m), a, {x, w}, {outputs.back()});
      }
      const uint32_t z = t.addActivation("z", c.out);
      if (members == 2) {
        plan::SwiGluAttrsT swi;
        swi.dim = c.out;
        t.addOp("swiglu", swi, {outputs[0], outputs[1]}, {z});
      } else {
        plan::AddAttrsT add;
        add.dim = c.out;
        t.addOp("add", add, {outputs[0], outputs[1]}, {z});
        t.addOp("add", add, {z, outputs[2]}, {z});
      }
      // An f32 linear to the logits (exact up to summation order on both executors).
      const int width = 48;
      const uint32_t head = t.addWeight("head", DType::F32, {width, c.out},
                                        test::randomValues(size_t(width) * c.out, 0.1f, rng));
      t.addLogits(64, width);
      plan::LinearAttrsT last;
      last.in_features = c.out;
      last.out_features = width;
      t.addOp("head", last, {z, head}, {t.logits});
      KernelOptions options;
      options.deepBulkRing = c.deepRing;
      expectParity(t, kSteps, c.bound,
                   std::string("grouped Linear x") + std::to_string(members) + " " +
                       typeName(c.type) + " " + std::to_string(c.in) + "->" +
                       std::to_string(c.out) + (c.deepRing ? ", deep ring" : ""),
                   options);
    }
}

// An RMSNorm before linears that compute it themselves in short steps (the emitter's
// fusion: the 16-byte GEMV up to 8 rows, the bulk GEMVs (quantized, TQ1) for one token on
// sm_90): 1, 2 (gate/up with SwiGLU) or 3 readers, norm weights of each float dtype, a K
// that the GEMV splits over warps (2048 -> 64), and an in-place final norm before a
// last-row-only lm_head, which normalizes its row in every step. Long steps run the norm's
// own launch; both must match the CPU executor. Bounds as GroupedLinears'.
TEST(OpParity, NormFusedIntoLinears) {
  REQUIRE_GPU();
  struct Case {
    DType type, normType;
    int in, out, members;
    double bound;
  };
  for (Case c : {Case{DType::F16, DType::F32, 2048, 64, 1, 1e-6},
                 Case{DType::BF16, DType::BF16, 512, 384, 3, 2e-5},
                 Case{DType::F32, DType::F16, 256, 128, 2, 1e-9},
                 Case{DType::F16, DType::F16, 256, 384, 2, 1e-6},
                 Case{DType::Q4_G64, DType::F16, 512, 384, 2, 1e-5},
                 Case{DType::Q4_K16, DType::BF16, 1024, 256, 3, 1e-5},
                 Case{DType::Q8_G32, DType::F32, 512, 256, 1, 1e-5},
                 Case{DType::TQ1, DType::F16, 400, 96, 3, 1e-6},
                 Case{DType::TQ1, DType::F32, 1040, 128, 2, 1e-6}}) {
    for (bool lmHead : {false, true}) {
      std::mt19937 rng(c.in + c.members);
      TestPlan t(64, 128);
      const uint32_t x = inputRows(t, "x", c.in, rng, 3.0f);
      const uint32_t gamma = t.addWeight("gamma", c.normType, {c.in},
                                         test::randomValues(size_t(c.in), 1.0f, rng));
      auto weight = [&](const std::string &name, int n) {
        return c.type == DType::F16 || c.type == DType::BF16 || c.type == DType::F32
                   ? t.addWeight(name, c.type, {n, c.in},
                                 test::randomValues(size_t(n) * c.in, 0.1f, rng))
                   : t.addDummyWeight(name, c.type, {n, c.in}, 5, 0.05f, 0.0f);
      };
      plan::RmsNormAttrsT rms;
      rms.dim = c.in;
      rms.eps = 1e-5f;
      std::string what = std::string("norm (") + typeName(c.normType) + ") -> ";
      if (lmHead) { // in place, then the lm_head's last row
        t.addOp("final_norm", rms, {x, gamma}, {x});
        t.addLmHeadLogits(c.out);
        plan::LinearAttrsT a;
        a.in_features = c.in;
        a.out_features = c.out;
        a.last_row_only = true;
        t.addOp("lm_head", a, {x, weight("lm", c.out)}, {t.logits});
        what += "lm_head ";
      } else {
        const uint32_t h = t.addActivation("h", c.in);
        t.addOp("norm", rms, {x, gamma}, {h});
        std::vector<uint32_t> outputs;
        for (int m = 0; m < c.members; ++m) {
          outputs.push_back(t.addActivation("y" + std::to_string(m), c.out));
          plan::LinearAttrsT a;
          a.in_features = c.in;
          a.out_features = c.out;
          t.addOp("linear" + std::to_string(m), a, {h, weight("w" + std::to_string(m), c.out)},
                  {outputs.back()});
        }
        uint32_t z = outputs[0];
        if (c.members == 2) {
          z = t.addActivation("z", c.out);
          plan::SwiGluAttrsT swi;
          swi.dim = c.out;
          t.addOp("swiglu", swi, {outputs[0], outputs[1]}, {z});
        } else if (c.members == 3) {
          plan::AddAttrsT add;
          add.dim = c.out;
          t.addOp("add", add, {outputs[0], outputs[1]}, {z});
          t.addOp("add", add, {z, outputs[2]}, {z});
        }
        t.addReadout(z, c.out);
        what += std::to_string(c.members) + " x ";
      }
      expectParity(t, kSteps, c.bound,
                   what + typeName(c.type) + " " + std::to_string(c.in) + "->" +
                       std::to_string(c.out));
    }
  }
}

// Ternary linears (TQ1, TQ2) on every path: GEMV for steps of 1..8 rows, the
// tiled GEMM for more, last_row_only; TQ1 also with K not a multiple of its
// 80-value chunk (padded rows) and tiny K and N. Both executors accumulate the
// same f32 values {x, -x} (the CPU one as f32 products with {-s, 0, +s}, the
// same numbers), so only the summation order differs: nMSE <= 1e-9. Except where x
// is rounded to f16 for the tensor cores (relative 2^-11; weights exact, f32
// accumulation): the TQ1 GEMV on sm_80+ (gemv_tq1_mma.cuh; steps of 1..8 rows,
// last_row_only) and the GEMMs of longer steps where K is a multiple of 64
// (gemm_ternary.cuh, which also rounds the scale to f16) are held to 1e-6.
TEST(OpParity, LinearTernary) {
  REQUIRE_GPU();
  struct Case {
    DType type;
    int in, out;
  };
  const std::vector<Case> cases = {
      {DType::TQ1, 16, 1},     {DType::TQ1, 80, 33},   {DType::TQ1, 96, 100},
      {DType::TQ1, 560, 257},  {DType::TQ1, 1040, 64}, {DType::TQ1, 2576, 130},
      {DType::TQ1, 512, 1536}, {DType::TQ1, 8192, 40}, {DType::TQ2, 64, 7},
      {DType::TQ2, 576, 300},
  };
  const std::vector<int> steps = {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 1, 33};
  for (const Case& c : cases)
    for (bool bias : {false, true})
      for (bool lastRow : {false, true}) {
        std::mt19937 rng(c.in * 13 + c.out);
        TestPlan t(64, 256);
        const uint32_t x = inputRows(t, "x", c.in, rng);
        const uint32_t w =
            t.addTernaryWeight("w", c.type, c.out, c.in, 0.0213623046875f, rng, false);
        std::vector<uint32_t> inputs = {x, w};
        if (bias)
          inputs.push_back(
              t.addWeight("b", DType::BF16, {c.out}, test::randomValues(c.out, 1.0f, rng)));
        t.addLogits(lastRow ? 1 : 64, c.out);
        plan::LinearAttrsT a;
        a.in_features = c.in;
        a.out_features = c.out;
        a.has_bias = bias;
        a.last_row_only = lastRow;
        t.addOp("linear", a, inputs, {t.logits});
        const std::string what = std::string("Linear ") + typeName(c.type) + " " +
                                 std::to_string(c.in) + "->" + std::to_string(c.out) +
                                 (bias ? " bias" : "") + (lastRow ? " last_row_only" : "");
        const std::vector<test::StepError> errors = test::stepErrors(t, steps, what);
        const double gemvBound = c.type == DType::TQ1 ? 1e-6 : 1e-9;
        const double gemmBound = c.in % 64 == 0 ? 1e-6 : 1e-9;
        double worst = 0.0;
        for (size_t s = 0; s < steps.size(); ++s) {
          const bool gemv = lastRow || steps[s] <= 8; // KernelEmitter's GEMV/GEMM split
          EXPECT_LE(errors[s].nmse(), gemv ? gemvBound : gemmBound)
              << what << ": step " << s << " (n " << steps[s] << ")";
          worst = std::max(worst, errors[s].nmse());
        }
        std::printf("[parity] %-60s max nMSE %.3g (bound %.0e GEMV, %.0e GEMM)\n", what.c_str(),
                    worst, gemvBound, gemmBound);
      }
}

// RoPE of base 10000 over an original context of 16 positions: its inv_freq weight and
// the op's attributes. longFactors: LongRoPE's second table (other angles) past them.
struct TestRope {
  float factor = 1.0f, dynamic = 0.0f;
  bool longFactors = false;
};

uint32_t addInvFreq(TestPlan &t, int headDim, const TestRope &r) {
  const int half = headDim / 2;
  std::vector<float> inv(size_t(r.longFactors ? headDim : half));
  for (int i = 0; i < half; ++i)
    inv[size_t(i)] = 1.0f / std::pow(10000.0f, float(2 * i) / float(headDim));
  for (int i = half; i < int(inv.size()); ++i)
    inv[size_t(i)] = inv[size_t(i - half)] / float(2 + i);
  return t.addWeight("inv_freq", DType::F32, {int64_t(inv.size())}, inv);
}

plan::RopeAttrsT ropeAttrs(int heads, int headDim, const TestRope &r) {
  plan::RopeAttrsT a;
  a.heads = heads;
  a.head_dim = headDim;
  a.attention_factor = r.factor;
  a.theta = 10000.0f;
  a.dynamic_factor = r.dynamic;
  a.original_max_positions = 16;
  a.long_factors = r.longFactors;
  return a;
}

TEST(OpParity, Rope) {
  REQUIRE_GPU();
  struct Case {
    int heads, headDim;
    TestRope rope;
  };
  for (Case c : {Case{4, 64, {1.0f, 0.0f}}, Case{2, 128, {1.25f, 0.0f}}, Case{4, 64, {1.0f, 2.0f}},
                 Case{3, 32, {1.1f, 4.0f}}, Case{4, 96, {1.2f, 0.0f, true}}}) {
    std::mt19937 rng(c.headDim);
    TestPlan t(64, 128);
    const int width = c.heads * c.headDim;
    const uint32_t x = inputRows(t, "x", width, rng);
    const uint32_t invFreq = addInvFreq(t, c.headDim, c.rope);
    t.addOp("rope", ropeAttrs(c.heads, c.headDim, c.rope), {x, invFreq}, {x});
    t.addReadout(x, width);
    char what[128];
    std::snprintf(what, sizeof(what), "Rope heads %d head_dim %d factor %.2f dynamic %.1f%s",
                  c.heads, c.headDim, c.rope.factor, c.rope.dynamic,
                  c.rope.longFactors ? " long factors" : "");
    expectParity(t, kSteps, 1e-8, what);
  }
}

// Attention with a workspace (split decode) over f16 and int8 caches: GQA
// ratios 1..16, windows, head_dim 48..256. Steps mix decode (n = 1, the
// flash-decoding kernel) and prefill (n > 1, the tiled kernel, with partial
// query tiles).
struct AttentionCase {
  int heads, kvHeads, headDim, window;
  DType cache;
};

// With `rope`, RoPE ops rotate q and k in place before the attention.
void expectAttentionParity(const AttentionCase &c, int context, int maxStep,
                           const std::vector<int> &steps,
                           const std::optional<TestRope> &rope = std::nullopt) {
  std::mt19937 rng(c.heads * 100 + c.headDim + c.window);
  TestPlan t(maxStep, context);
  const uint32_t q = inputRows(t, "q", c.heads * c.headDim, rng, 2.0f);
  const uint32_t k = inputRows(t, "k", c.kvHeads * c.headDim, rng, 2.0f);
  const uint32_t v = inputRows(t, "v", c.kvHeads * c.headDim, rng);
  const uint32_t kc = t.addKvCache("k_cache", context, c.kvHeads, c.headDim, c.cache);
  const uint32_t vc = t.addKvCache("v_cache", context, c.kvHeads, c.headDim, c.cache);
  const uint32_t ws = t.addWorkspace(
      "workspace", attentionWorkspaceBytes(c.heads, c.kvHeads, c.headDim, context));
  const uint32_t o = t.addActivation("o", c.heads * c.headDim);
  if (rope) {
    const uint32_t invFreq = addInvFreq(t, c.headDim, *rope);
    t.addOp("rope_q", ropeAttrs(c.heads, c.headDim, *rope), {q, invFreq}, {q});
    t.addOp("rope_k", ropeAttrs(c.kvHeads, c.headDim, *rope), {k, invFreq}, {k});
  }
  t.addOp("attention",
          test::attentionAttrs(c.heads, c.kvHeads, c.headDim, 1.0f / std::sqrt(float(c.headDim)),
                               context, c.window),
          {q, k, v, kc, vc, ws}, {o});
  t.addReadout(o, c.heads * c.headDim);
  char ropeWhat[64] = "";
  if (rope)
    std::snprintf(ropeWhat, sizeof(ropeWhat), ", after RoPE factor %.2f dynamic %.1f%s",
                  rope->factor, rope->dynamic, rope->longFactors ? " long factors" : "");
  char what[200];
  std::snprintf(what, sizeof(what), "Attention %s heads %d kv_heads %d head_dim %d window %d ctx %d%s",
                typeName(c.cache), c.heads, c.kvHeads, c.headDim, c.window, context, ropeWhat);
  expectParity(t, steps, 1e-8, what);
}

TEST(OpParity, Attention) {
  REQUIRE_GPU();
  for (DType cache : {DType::F16, DType::Q8_KV})
    for (AttentionCase c :
         {AttentionCase{4, 4, 64, 0, cache}, AttentionCase{8, 2, 64, 0, cache},
          AttentionCase{8, 1, 128, 0, cache}, AttentionCase{4, 2, 64, 5, cache},
          AttentionCase{2, 2, 48, 0, cache}, AttentionCase{4, 1, 256, 20, cache},
          AttentionCase{6, 3, 96, 0, cache}, AttentionCase{32, 4, 128, 0, cache},
          AttentionCase{16, 1, 64, 3, cache}, AttentionCase{12, 2, 80, 0, cache}})
      expectAttentionParity(c, 160, 64, {7, 1, 1, 64, 1, 9, 1, 33, 1});
}

// Long sequences: decode at positions that use 1, 2, 8 and all 64 splits of the
// CUDA-core kernel (head_dim 256), 1, 4 and 26 splits of 3 rounds on tensor cores (f16 and
// int8 caches), prefill chunks of 512 rows far into the cache, a window of 1000.
TEST(OpParity, AttentionLongContext) {
  REQUIRE_GPU();
  const std::vector<int> steps = {1, 1, 30, 1, 200, 1, 512, 512, 512, 512, 512,
                                  512, 512, 512, 512, 1, 1, 83, 1};
  for (DType cache : {DType::F16, DType::Q8_KV})
    for (AttentionCase c : {AttentionCase{8, 8, 64, 0, cache}, AttentionCase{32, 8, 128, 0, cache},
                            AttentionCase{8, 1, 128, 1000, cache},
                            AttentionCase{4, 2, 256, 0, cache}})
      expectAttentionParity(c, 5000, 512, steps);
}

// RoPE of q and k, then attention over f16 caches: the emitter fuses the three into one
// launch, and in one-token steps into the tensor-core decode kernel (head_dim 16..128 in
// steps of 16), which rotates and appends itself; head_dim 80 keeps the launch in every
// step. GQA up to 16 (two head chunks write the same cache row), windows, dynamic NTK and
// LongRoPE's long factors past the original 16 positions, decode at split counts 1 to 26.
TEST(OpParity, RopeIntoDecodeAttention) {
  REQUIRE_GPU();
  const DType f16 = DType::F16;
  for (const auto &[c, rope] :
       {std::pair{AttentionCase{8, 2, 64, 0, f16}, TestRope{}},
        std::pair{AttentionCase{32, 8, 128, 0, f16}, TestRope{1.0f, 2.0f}},
        std::pair{AttentionCase{4, 4, 16, 0, f16}, TestRope{1.1f, 0.0f}},
        std::pair{AttentionCase{6, 3, 96, 5, f16}, TestRope{1.0f, 4.0f}},
        std::pair{AttentionCase{8, 2, 64, 0, f16}, TestRope{1.1f, 0.0f, true}},
        std::pair{AttentionCase{6, 3, 96, 0, f16}, TestRope{1.0f, 0.0f, true}},
        std::pair{AttentionCase{16, 1, 64, 0, f16}, TestRope{}},
        std::pair{AttentionCase{4, 2, 80, 0, f16}, TestRope{}}})
    expectAttentionParity(c, 160, 64, {7, 1, 1, 64, 1, 9, 1, 33, 1}, rope);
  expectAttentionParity(AttentionCase{32, 8, 128, 0, f16}, 5000, 512,
                        {1, 1, 30, 1, 200, 1, 512, 512, 512, 512, 512, 512, 512, 512, 512, 1, 1,
                         83, 1},
                        TestRope{});
}

TEST(OpParity, SwiGluAndAdd) {
  REQUIRE_GPU();
  for (bool swiglu : {true, false})
    for (int dim : {256, 1000})
      for (bool inPlace : {false, true}) {
        std::mt19937 rng(dim);
        TestPlan t(64, 128);
        const uint32_t a = inputRows(t, "a", dim, rng, 4.0f);
        const uint32_t b = inputRows(t, "b", dim, rng);
        const uint32_t y = inPlace ? a : t.addActivation("y", dim);
        if (swiglu) {
          plan::SwiGluAttrsT attrs;
          attrs.dim = dim;
          t.addOp("swiglu", attrs, {a, b}, {y});
        } else {
          plan::AddAttrsT attrs;
          attrs.dim = dim;
          t.addOp("add", attrs, {a, b}, {y});
        }
        t.addReadout(y, dim);
        expectParity(t, kSteps, 1e-10,
                     std::string(swiglu ? "SwiGlu" : "Add") + " dim " + std::to_string(dim) +
                         (inPlace ? " in place" : ""));
      }
}

TEST(OpParity, TinyModel) {
  REQUIRE_GPU();
  for (DType type : {DType::F32, DType::F16, DType::BF16})
    for (bool dummy : {false, true}) {
      TestPlan t = tinyModel(type, dummy);
      // Prefill steps (64, 30 rows) go through the tensor-core GEMM for f16/bf16.
      const double bound = type == DType::F32 ? 1e-7 : type == DType::F16 ? 1e-5 : 1e-4;
      expectParity(t, {7, 1, 1, 1, 64, 1, 30, 1}, bound,
                   std::string("TinyModel ") + typeName(type) + (dummy ? " dummy weights" : ""));
    }
}

// The tiny model with dummy group-quantized linears: on sm_90 the one-token steps run the
// bulk GEMV with the RMSNorms fused into q/k/v and gate/up; the lm_head (300 rows, no
// whole tiles) keeps its norm. Bound: the q4 TinyModel bound of BatchParity.
TEST(OpParity, TinyModelQuantizedLinears) {
  REQUIRE_GPU();
  for (DType type : {DType::Q4_G64, DType::Q4_K16, DType::Q8_G32, DType::Q3_K16}) {
    test::TinyModelOptions options;
    options.type = DType::F16;
    options.dummy = true;
    options.linearsSet = true;
    options.linears = type;
    TestPlan t = tinyModel(options);
    expectParity(t, {7, 1, 1, 1, 64, 1, 30, 1}, 1e-4,
                 std::string("TinyModel ") + typeName(type) + " linears");
  }
}

TEST(OpParity, PtxFallbackAndArchMismatch) {
  REQUIRE_GPU();
  const std::string other = gpu().arch == "sm_80" ? "sm_86" : "sm_80";
  {
    // Only a foreign cubin plus compute_80 PTX: the driver JIT-compiles the PTX.
    TestPlan t = tinyModel(DType::BF16, false);
    KernelOptions options;
    options.archs = {other};
    options.embedPtx = true;
    expectParity(t, {7, 1}, 1e-7, "TinyModel via PTX JIT (" + other + " cubin only)", options);
  }
  {
    TestPlan t = tinyModel(DType::BF16, false);
    KernelOptions options;
    options.archs = {other};
    options.embedPtx = false;
    ASSERT_TRUE(emitKernels(t.plan, options).isOk());
    const std::string path = test::tempPlanPath("foreign");
    ASSERT_TRUE(t.write(path).isOk());
    Result<std::unique_ptr<PlanFile>> file = PlanFile::open(path);
    std::remove(path.c_str());
    ASSERT_TRUE(file.isOk()) << file.status().message();
    Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(**file, 0);
    ASSERT_FALSE(cuda.isOk());
    const std::string &message = cuda.status().message();
    EXPECT_NE(message.find("this plan was compiled for " + other), std::string::npos) << message;
    EXPECT_NE(message.find("carries no PTX: recompile with --target " + gpu().arch),
              std::string::npos)
        << message;
    std::printf("[parity] arch mismatch message: %s\n", message.c_str());
  }
}

TEST(OpParity, ForwardRejectsBadSteps) {
  REQUIRE_GPU();
  TestPlan t = tinyModel(DType::F16, true);
  std::unique_ptr<PlanFile> file = test::emittedPlan(t, "tiny model");
  ASSERT_TRUE(file);
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(*file, 0);
  ASSERT_TRUE(cuda.isOk()) << cuda.status().message();
  std::vector<float> logits(size_t(t.plan.model->vocab_size));
  std::vector<int32_t> ids(65, 1);
  EXPECT_FALSE((*cuda)->forward(ids.data(), 65, 0, logits.data()).isOk());  // > max_step_tokens
  EXPECT_FALSE((*cuda)->forward(ids.data(), 1, 128, logits.data()).isOk()); // past context
  ids[0] = kTokenVocab;
  EXPECT_FALSE((*cuda)->forward(ids.data(), 1, 0, logits.data()).isOk()); // bad id
  ids[0] = 3;
  EXPECT_TRUE((*cuda)->forward(ids.data(), 1, 0, logits.data()).isOk());
  EXPECT_FALSE(createCudaExecutor(*file, 1000).isOk());
}

// Model-sized linear layers on every path: decode GEMV (1 row), few-row GEMV (8),
// tensor-core GEMM (64, 512 rows), with dummy weights (filled on each executor,
// bit for bit), plus odd shapes that exercise the GEMM's predication (M, N not
// multiples of the 128 x 128 tile, bias).
TEST(OpParity, LinearLargeShapes) {
  REQUIRE_GPU();
  struct Case {
    int in, out;
    bool bias;
    std::vector<int> steps;
  };
  const std::vector<Case> cases = {
      {4096, 4096, false, {1, 8, 64, 512}},  {4096, 14336, false, {1, 8, 64, 512}},
      {14336, 4096, false, {1, 8, 64, 512}}, {256, 200, true, {300, 1, 9}},
      {520, 4100, true, {129, 1, 2}},
  };
  for (DType type : {DType::F16, DType::BF16})
    for (const Case &c : cases) {
      std::mt19937 rng(c.in + c.out);
      TestPlan t(512, 1024);
      const uint32_t x = inputRows(t, "x", c.in, rng);
      const uint32_t w = t.addDummyWeight("w", type, {c.out, c.in}, 5, 1.0f / std::sqrt(float(c.in)),
                                          0.0f);
      std::vector<uint32_t> inputs = {x, w};
      if (c.bias)
        inputs.push_back(t.addWeight("b", type, {c.out}, test::randomValues(c.out, 1.0f, rng)));
      t.addLogits(512, c.out);
      plan::LinearAttrsT a;
      a.in_features = c.in;
      a.out_features = c.out;
      a.has_bias = c.bias;
      t.addOp("linear", a, inputs, {t.logits});
      expectParity(t, c.steps, linearBound(type, c.in),
                   std::string("Linear large ") + typeName(type) + " " + std::to_string(c.in) +
                       "->" + std::to_string(c.out) + (c.bias ? " bias" : ""));
    }
}

// Decode steps replay a captured CUDA graph; NINFER_CUDA_GRAPHS=0 launches the
// same kernels one by one. Both must give bit-identical logits at every position.
TEST(OpParity, DecodeGraphMatchesPlainLaunches) {
  REQUIRE_GPU();
  TestPlan t = tinyModel(DType::BF16, true);
  KernelOptions options;
  options.archs = {gpu().codeArch};
  options.embedPtx = false;
  ASSERT_TRUE(emitKernels(t.plan, options).isOk());
  const std::string path = test::tempPlanPath("graphs");
  ASSERT_TRUE(t.write(path).isOk());
  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(path);
  std::remove(path.c_str());
  ASSERT_TRUE(file.isOk()) << file.status().message();
  const char *saved = std::getenv("NINFER_CUDA_GRAPHS");
  const std::string savedValue = saved ? saved : "";
  setenv("NINFER_CUDA_GRAPHS", "0", 1);
  Result<std::unique_ptr<Executor>> plain = createCudaExecutor(**file, 0);
  unsetenv("NINFER_CUDA_GRAPHS");
  Result<std::unique_ptr<Executor>> graphed = createCudaExecutor(**file, 0);
  if (saved)
    setenv("NINFER_CUDA_GRAPHS", savedValue.c_str(), 1);
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  ASSERT_TRUE(graphed.isOk()) << graphed.status().message();
  const size_t vocab = size_t(t.plan.model->vocab_size);
  std::vector<float> a(vocab), b(vocab);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> token(0, kTokenVocab - 1);
  int pos = 0;
  for (int n : {7, 1, 1, 1, 5, 1, 1}) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t &id : ids)
      id = token(rng);
    ASSERT_TRUE((*plain)->forward(ids.data(), n, pos, a.data()).isOk());
    ASSERT_TRUE((*graphed)->forward(ids.data(), n, pos, b.data()).isOk());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), vocab * sizeof(float)), 0) << "pos " << pos;
    pos += n;
  }
  std::printf("[parity] decode graphs: %s vs %s\n", (*graphed)->name().c_str(),
              (*plain)->name().c_str());
  EXPECT_GT((*graphed)->deviceMemoryBytes(), 0u);
}

} // namespace
} // namespace ninfer
