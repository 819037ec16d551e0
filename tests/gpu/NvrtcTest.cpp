// Kernel emission and NVRTC without a GPU (runs in CPU-only CI): a small plan
// compiles for sm_80/86/89/90 plus PTX, compile errors carry NVRTC's log, and
// invalid ops are refused with a message naming the op.
#include "Nvrtc.h"
#include "TestPlan.h"
#include "ninfer/GemvShapes.h"
#include "ninfer/TernaryDType.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace ninfer {
namespace {

using plan::DType;
using test::TestPlan;

// Emits t's kernels for sm_90 (launches fused as `fuse` says).
void emitForSm90(TestPlan &t, bool fuse = true) {
  KernelOptions options;
  options.archs = {"sm_90"};
  options.fuseLaunches = fuse;
  Status status = emitKernels(t.plan, options);
  ASSERT_TRUE(status.isOk()) << status.message();
}

// embedding -> rmsnorm -> linear -> rope -> attention -> swiglu/add -> lm_head.
// Ternary weightType: the linears but the lm_head are ternary, the rest f16.
TestPlan smallModel(DType weightType, int maxStepTokens = 8, DType cache = DType::F16) {
  std::mt19937 rng(7);
  const int hidden = 64, heads = 4, kvHeads = 2, headDim = 16, vocab = 50, context = 32;
  const bool ternary = ternary::isTernaryPlanDType(int(weightType));
  const DType dense = ternary ? DType::F16 : weightType;
  TestPlan t(maxStepTokens, context);
  const uint32_t table = t.addWeight("embed", dense, {vocab, hidden},
                                     test::randomValues(size_t(vocab) * hidden, 1.0f, rng));
  const uint32_t x = t.addActivation("x", hidden);
  const uint32_t h = t.addActivation("h", hidden);
  const uint32_t q = t.addActivation("q", heads * headDim);
  const uint32_t k = t.addActivation("k", kvHeads * headDim);
  const uint32_t v = t.addActivation("v", kvHeads * headDim);
  const uint32_t o = t.addActivation("o", heads * headDim);
  const uint32_t kc = t.addKvCache("k_cache", context, kvHeads, headDim, cache);
  const uint32_t vc = t.addKvCache("v_cache", context, kvHeads, headDim, cache);
  const uint32_t norm = t.addWeight("norm", dense, {hidden}, test::randomValues(hidden, 1.0f, rng));
  auto linearWeight = [&](const char *name, int out, int in, DType type) {
    if (ternary::isTernaryPlanDType(int(type)))
      return t.addTernaryWeight(name, type, out, in, 0.05f, rng, false);
    return t.addWeight(name, type, {out, in}, test::randomValues(size_t(out) * in, 0.2f, rng));
  };
  const uint32_t wq = linearWeight("wq", heads * headDim, hidden, weightType);
  const uint32_t wk = linearWeight("wk", kvHeads * headDim, hidden, weightType);
  const uint32_t wv = linearWeight("wv", kvHeads * headDim, hidden, weightType);
  const uint32_t wo = linearWeight("wo", hidden, heads * headDim, weightType);
  const uint32_t lm = linearWeight("lm_head", vocab, hidden, dense);
  std::vector<float> inv(headDim / 2);
  for (int i = 0; i < headDim / 2; ++i)
    inv[i] = 1.0f / std::pow(10000.0f, float(2 * i) / headDim);
  const uint32_t invFreq = t.addWeight("inv_freq", DType::F32, {headDim / 2}, inv);
  t.addLogits(1, vocab);

  plan::EmbeddingAttrsT embed;
  embed.dim = hidden;
  embed.vocab = vocab;
  t.addOp("embed", embed, {t.tokens, table}, {x});
  plan::RmsNormAttrsT rms;
  rms.dim = hidden;
  rms.eps = 1e-5f;
  t.addOp("norm", rms, {x, norm}, {h});
  auto linear = [&](const char *name, uint32_t in, uint32_t w, uint32_t out, int inF, int outF,
                    bool last) {
    plan::LinearAttrsT a;
    a.in_features = inF;
    a.out_features = outF;
    a.last_row_only = last;
    t.addOp(name, a, {in, w}, {out});
  };
  linear("q", h, wq, q, hidden, heads * headDim, false);
  linear("k", h, wk, k, hidden, kvHeads * headDim, false);
  linear("v", h, wv, v, hidden, kvHeads * headDim, false);
  plan::RopeAttrsT rope;
  rope.heads = heads;
  rope.head_dim = headDim;
  rope.theta = 10000.0f;
  t.addOp("rope_q", rope, {q, invFreq}, {q});
  rope.heads = kvHeads;
  t.addOp("rope_k", rope, {k, invFreq}, {k});
  t.addOp("attn", test::attentionAttrs(heads, kvHeads, headDim, 0.25f, context),
          {q, k, v, kc, vc}, {o});
  linear("o", o, wo, h, heads * headDim, hidden, false);
  plan::AddAttrsT add;
  add.dim = hidden;
  t.addOp("residual", add, {x, h}, {x});
  plan::SwiGluAttrsT swi;
  swi.dim = hidden;
  t.addOp("swiglu", swi, {x, h}, {h});
  linear("lm_head", h, lm, t.logits, hidden, vocab, true);
  return t;
}

TEST(Nvrtc, EmitsCubinsForAllArchsAndPtx) {
  TestPlan t = smallModel(DType::BF16);
  KernelOptions options;
  options.archs = {"sm_80", "sm_86", "sm_89", "sm_90"};
  options.embedPtx = true;
  int calls = 0;
  options.progress = [&](int done, int total) {
    ++calls;
    EXPECT_LE(done, total);
  };
  Status status = emitKernels(t.plan, options);
  ASSERT_TRUE(status.isOk()) << status.message();
  ASSERT_TRUE(t.plan.kernels);
  EXPECT_EQ(calls, 5);
  ASSERT_EQ(t.plan.kernels->cubins.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(t.plan.kernels->cubins[i]->arch, options.archs[i]);
    ASSERT_GT(t.plan.kernels->cubins[i]->cubin.size(), 4u);
    EXPECT_EQ(std::memcmp(t.plan.kernels->cubins[i]->cubin.data(),
                          "\x7f"
                          "ELF",
                          4),
              0);
  }
  EXPECT_EQ(t.plan.kernels->ptx_arch, "compute_80");
  EXPECT_NE(t.plan.kernels->ptx.find(".entry k0_embedding"), std::string::npos);
  EXPECT_NE(t.plan.kernels->ptx.find("ninfer_fill_dummy"), std::string::npos);
  // Every op got launches but the norm, which q/k/v's GEMVs compute themselves in every
  // step of this plan (steps of at most 8 tokens), and rope_k, whose rotation and the cache
  // append run in rope_q's launch; attention gets two (decode, prefill).
  for (const auto &op : t.plan.ops) {
    ASSERT_EQ(op->launches.empty(), op->name == "norm" || op->name == "rope_k") << op->name;
    for (const auto &launch : op->launches) {
      EXPECT_LT(launch->function, t.plan.kernels->functions.size());
      EXPECT_EQ(launch->grid_base.size(), 3u);
      EXPECT_EQ(launch->grid_per_token.size(), 3u);
      EXPECT_EQ(launch->block.size(), 3u);
    }
  }
  EXPECT_EQ(t.plan.ops[7]->launches.size(), 2u);
  // The k and v projections have one shape: they share a kernel and differ only
  // in the buffers passed to it; q has another shape and its own kernel.
  const plan::LaunchT& q = *t.plan.ops[2]->launches[0];
  const plan::LaunchT& k = *t.plan.ops[3]->launches[0];
  const plan::LaunchT& v = *t.plan.ops[4]->launches[0];
  EXPECT_EQ(k.function, v.function);
  EXPECT_NE(q.function, k.function);
  EXPECT_NE(k.args, v.args);
  EXPECT_EQ(k.args.size(), 4u); // the norm's input and weight (fused), weight, output
  // The plan with kernels still writes (and the source is kept for inspection).
  EXPECT_NE(t.plan.kernels->source.find("ninfer::dev::attentionDecodeMma<4, 2, 16"),
            std::string::npos);
  const std::string path = test::tempPlanPath("nvrtc");
  Status written = t.write(path);
  EXPECT_TRUE(written.isOk()) << written.message();
  std::remove(path.c_str());
}

// With steps longer than the GEMV rows: q, k and v read one input and share one
// decode launch (blocks of q, then k, then v) and keep a GEMM launch each; the
// lm_head (last row only) and o (another input) keep their own launches. The two
// RoPE ops and the attention's KV append run as one launch in every step.
TEST(Nvrtc, FusesLaunchesForShortSteps) {
  for (bool group : {true, false}) {
    TestPlan t = smallModel(DType::F16, 16);
    ASSERT_NO_FATAL_FAILURE(emitForSm90(t, group));
    const auto &fns = t.plan.kernels->functions;
    const auto &q = t.plan.ops[2]->launches, &k = t.plan.ops[3]->launches,
               &v = t.plan.ops[4]->launches, &o = t.plan.ops[8]->launches;
    ASSERT_EQ(q.size(), 2u);
    ASSERT_EQ(o.size(), 2u);
    EXPECT_EQ(q[0]->max_tokens, 8u);
    EXPECT_EQ(q[1]->min_tokens, 9u);
    EXPECT_EQ(fns[o[0]->function].find("group"), std::string::npos);
    const auto &ropeQ = t.plan.ops[5]->launches, &ropeK = t.plan.ops[6]->launches,
               &attn = t.plan.ops[7]->launches;
    if (group) {
      // One launch for both RoPE ops and the append, in steps of 2 tokens or more: in
      // one-token steps the decode kernel rotates and appends itself.
      ASSERT_EQ(ropeQ.size(), 1u);
      EXPECT_TRUE(ropeK.empty());
      EXPECT_NE(fns[ropeQ[0]->function].find("rope_append"), std::string::npos);
      EXPECT_EQ(ropeQ[0]->min_tokens, 2u);
      EXPECT_EQ(ropeQ[0]->max_tokens, 0u);
      // rope of q (4 heads x 8 pairs), of k (2 x 8) and the v copy (2 x 16): a block each.
      EXPECT_EQ(ropeQ[0]->grid_base[0], 3u);
      ASSERT_EQ(attn.size(), 2u); // decode and prefill, no append
      EXPECT_EQ(fns[attn[0]->function].find("kv_append"), std::string::npos);
    } else {
      ASSERT_EQ(ropeQ.size(), 1u);
      ASSERT_EQ(ropeK.size(), 1u);
      EXPECT_EQ(ropeQ[0]->min_tokens, 0u);
      ASSERT_EQ(attn.size(), 3u);
      EXPECT_NE(fns[attn[0]->function].find("kv_append"), std::string::npos);
      EXPECT_EQ(attn[0]->min_tokens, 0u);
    }
    if (group) {
      // k and v run in q's launches: the GEMV and the tensor-core GEMM of all three.
      EXPECT_TRUE(k.empty());
      EXPECT_TRUE(v.empty());
      EXPECT_NE(fns[q[0]->function].find("linear_group3_gemv"), std::string::npos);
      EXPECT_NE(fns[q[1]->function].find("linear_group3_gemm"), std::string::npos);
      // 64 rows of q (8 per block), 32 of k and of v: 8 + 4 + 4 blocks.
      EXPECT_EQ(q[0]->grid_base[0], 16u);
      // x and the weight of the norm fused into it, then weight and output of each member.
      EXPECT_EQ(q[0]->args.size(), 8u);
      EXPECT_NE(t.plan.kernels->source.find("ninfer::dev::BlockSlice{static_cast<int>(blockIdx.x) - 12, 4}"),
                std::string::npos);
      // The GEMM: one 128 x 128 tile per member at 16 tokens.
      EXPECT_EQ(q[1]->grid_base[0], 3u);
      EXPECT_EQ(q[1]->shared_bytes, uint32_t(gemm::kSharedBytes));
      EXPECT_EQ(q[1]->args.size(), 7u);
      EXPECT_NE(t.plan.kernels->source.find("ninfer::dev::BlockSlice{static_cast<int>(blockIdx.x) - 2, 1}"),
                std::string::npos);
    } else {
      ASSERT_EQ(k.size(), 2u);
      EXPECT_EQ(fns[q[0]->function].find("group"), std::string::npos);
      EXPECT_EQ(q[0]->grid_base[0], 8u);
    }
  }
}

// The tensor-core decode kernel (sm_80+ targets, f16 caches, head_dim 16..128) rotates q
// and k and appends them itself, so the fused RoPE launch skips one-token steps; not where
// a target lacks tensor cores, nor where an op after the attention reads the rotated q.
TEST(Nvrtc, DecodeAttentionRotatesAndAppendsItself) {
  enum Variant { kSm90, kWithSm75, kQReadLater };
  for (Variant variant : {kSm90, kWithSm75, kQReadLater}) {
    TestPlan t = smallModel(DType::F16, 16);
    if (variant == kQReadLater) {
      plan::AddAttrsT add;
      add.dim = 64;
      const uint32_t probe = t.addActivation("probe", 64);
      t.addOp("probe", add, {t.plan.ops[7]->inputs[0], t.plan.ops[7]->outputs[0]}, {probe});
    }
    KernelOptions options;
    options.archs = variant == kWithSm75 ? std::vector<std::string>{"sm_75", "sm_90"}
                                         : std::vector<std::string>{"sm_90"};
    Status status = emitKernels(t.plan, options);
    ASSERT_TRUE(status.isOk()) << status.message();
    const auto &rope = t.plan.ops[5]->launches;
    const auto &attn = t.plan.ops[7]->launches;
    ASSERT_EQ(rope.size(), 1u) << variant;
    ASSERT_FALSE(attn.empty()) << variant;
    const std::string &source = t.plan.kernels->source;
    const bool decodeRopes = variant == kSm90;
    EXPECT_EQ(rope[0]->min_tokens, decodeRopes ? 2u : 0u) << variant;
    EXPECT_EQ(source.find("ninfer::dev::DecodeRope<16, ninfer::dev::kRopeFixed>{") !=
                  std::string::npos,
              decodeRopes)
        << variant;
    EXPECT_EQ(source.find("attentionDecodeMma<4, 2, 16") != std::string::npos,
              variant != kWithSm75)
        << variant;
  }
}

TEST(Nvrtc, AllWeightTypesCompile) {
  for (DType type : {DType::F32, DType::F16}) {
    TestPlan t = smallModel(type);
    KernelOptions options;
    options.archs = {"sm_90"};
    options.embedPtx = false;
    Status status = emitKernels(t.plan, options);
    ASSERT_TRUE(status.isOk()) << status.message();
    EXPECT_TRUE(t.plan.kernels->ptx.empty());
    EXPECT_EQ(t.plan.kernels->cubins.size(), 1u);
  }
}

// A plan holding, for each of `dtypes`, an embedding lookup and a linear layer of
// that quantized dtype (dummy weights).
TestPlan quantizedOpsPlan(const std::vector<DType> &dtypes) {
  TestPlan t(16, 32);
  const int hidden = 256, outputs = 64, vocab = 50;
  const uint32_t x = t.addActivation("x", hidden);
  const uint32_t y = t.addActivation("y", outputs);
  for (DType dtype : dtypes) {
    const std::string name = plan::EnumNameDType(dtype);
    const uint32_t table = t.addDummyWeight("embed_" + name, dtype, {vocab, hidden},
                                            uint32_t(dtype), 0.5f, 0.0f);
    const uint32_t w = t.addDummyWeight("w_" + name, dtype, {outputs, hidden}, uint32_t(dtype),
                                        0.1f, 0.0f);
    plan::EmbeddingAttrsT embed;
    embed.dim = hidden;
    embed.vocab = vocab;
    t.addOp("embed_" + name, embed, {t.tokens, table}, {x});
    plan::LinearAttrsT linear;
    linear.in_features = hidden;
    linear.out_features = outputs;
    t.addOp("linear_" + name, linear, {x, w}, {y});
  }
  return t;
}

// Every group-quantized dtype: its GEMV/tiled linear and its embedding kernel
// compile (the kernels are generic over QuantPacking<BITS>).
TEST(Nvrtc, AllQuantizedFormatsCompile) {
  std::vector<DType> dtypes;
  for (int dtype = 0; dtype < 256; ++dtype)
    if (quant::formatOfPlanDType(dtype) >= 0)
      dtypes.push_back(DType(dtype));
  EXPECT_EQ(int(dtypes.size()), quant::kQuantFormatCount);
  TestPlan t = quantizedOpsPlan(dtypes);
  KernelOptions options;
  options.archs = {"sm_90"};
  options.embedPtx = false;
  Status status = emitKernels(t.plan, options);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_EQ(t.plan.kernels->cubins.size(), 1u);
  for (int bits : {2, 3, 4, 5, 6, 8})
    EXPECT_NE(t.plan.kernels->source.find("ninfer::dev::linearQuant<" + std::to_string(bits)),
              std::string::npos)
        << bits;
}

// The K16 formats (two scales per run from a unit's record) on every kind of path:
// sm_75 (CUDA-core GEMV and tiled GEMM), sm_80 and sm_90 (tensor-core GEMV and GEMM).
TEST(Nvrtc, K16FormatsCompileForEveryPath) {
  TestPlan t = quantizedOpsPlan({DType::Q2_K16, DType::Q3_K16, DType::Q4_K16});
  KernelOptions options;
  options.archs = {"sm_75", "sm_80", "sm_90"};
  options.embedPtx = false;
  Status status = emitKernels(t.plan, options);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_EQ(t.plan.kernels->cubins.size(), 3u);
  EXPECT_NE(t.plan.kernels->source.find("ninfer::dev::linearQuant<3, 16"), std::string::npos);
}

// The linear paths for model-sized shapes compile on sm_80/sm_90 (tensor-core GEMM)
// and, with sm_75 among the targets, on the CUDA-core GEMM for all (the tensor-core one
// needs dynamic shared memory every target has), with and without the A/B switch that
// turns the tensor cores off. The GEMM launch asks for gemm_mma.cuh's shared memory and
// a block per 128 x 128 tile only when the tensor-core GEMM is compiled in.
TEST(Nvrtc, LargeLinearPathsCompile) {
  using Archs = std::vector<std::string>;
  for (const Archs &archs : {Archs{"sm_80", "sm_90"}, Archs{"sm_75", "sm_80", "sm_90"}})
    for (const char *noMma : {"0", "1"})
      for (DType type : {DType::F16, DType::BF16}) {
        setenv("NINFER_NO_TENSOR_CORES", noMma, 1);
        TestPlan t(512, 1024);
        const uint32_t x = t.addActivation("x", 4096);
        const uint32_t h = t.addActivation("h", 14336);
        const uint32_t w1 = t.addDummyWeight("w1", type, {14336, 4096}, 1, 0.01f, 0.0f);
        const uint32_t w2 = t.addDummyWeight("w2", type, {4096, 14336}, 2, 0.01f, 0.0f);
        plan::LinearAttrsT up;
        up.in_features = 4096;
        up.out_features = 14336;
        t.addOp("up", up, {x, w1}, {h});
        plan::LinearAttrsT down;
        down.in_features = 14336;
        down.out_features = 4096;
        t.addOp("down", down, {h, w2}, {x});
        KernelOptions options;
        options.archs = archs;
        options.embedPtx = false;
        Status status = emitKernels(t.plan, options);
        unsetenv("NINFER_NO_TENSOR_CORES");
        ASSERT_TRUE(status.isOk()) << status.message();
        EXPECT_EQ(t.plan.kernels->cubins.size(), archs.size());
        const bool mma = std::string(noMma) == "0" && archs.size() == 2;
        EXPECT_EQ(t.plan.kernels->source.find("NINFER_LINEAR_MMA 0") == std::string::npos, mma);
        // Wide layers: two output rows per warp, 16 per block.
        const auto &gemv = *t.plan.ops[0]->launches[0];
        EXPECT_EQ(gemv.grid_base[0], 14336u / 16);
        EXPECT_EQ(gemv.max_tokens, 8u);
        const auto &gemmLaunch = *t.plan.ops[0]->launches[1];
        EXPECT_EQ(gemmLaunch.min_tokens, 9u);
        EXPECT_EQ(gemmLaunch.shared_bytes, mma ? uint32_t(gemm::kSharedBytes) : 0u);
        EXPECT_EQ(gemmLaunch.grid_base[0], mma ? (14336u / 128) * (512u / 128) : 14336u / 16);
      }
}

// On sm_90a (ninferc's h100/h200 targets) the prefill GEMMs run on wgmma
// (gemm_wgmma.cuh) and read their x rounded to the weights' 16-bit type (f16 for ternary
// weights) from the "gemm.x16" workspace, which lies after the other workspaces. The RMSNorm
// before q/k/v and the tensor-core prefill attention before o write it themselves in long
// steps; where the producer cannot (an int8 KV cache: the CUDA-core prefill attention), a
// launch on the same steps rounds x before the GEMM. With any other target among the archs,
// or NINFER_NO_WGMMA=1, the GEMMs read x themselves (gemm_mma.cuh) and nothing is rounded.
TEST(Nvrtc, Sm90aGemmsReadXRoundedOnceIntoTheWorkspace) {
  struct Case {
    std::vector<std::string> archs;
    const char *noWgmma;
    DType type;
    DType cache;
    bool wgmma;
  };
  for (const Case &c : {Case{{"sm_90a"}, "0", DType::F16, DType::F16, true},
                        Case{{"sm_90a"}, "0", DType::BF16, DType::F16, true},
                        Case{{"sm_90a"}, "0", DType::F16, DType::Q8_KV, true},
                        Case{{"sm_90a"}, "0", DType::TQ1, DType::F16, true},
                        Case{{"sm_90a"}, "0", DType::TQ2, DType::F16, true},
                        Case{{"sm_90a"}, "1", DType::F16, DType::F16, false},
                        Case{{"sm_90"}, "0", DType::F16, DType::F16, false},
                        Case{{"sm_80", "sm_90a"}, "0", DType::F16, DType::F16, false}}) {
    setenv("NINFER_NO_WGMMA", c.noWgmma, 1);
    TestPlan t = smallModel(c.type, 64, c.cache);
    const uint32_t attentionWorkspace = t.addWorkspace("attention.ws", 1000);
    KernelOptions options;
    options.archs = c.archs;
    options.embedPtx = false;
    Status status = emitKernels(t.plan, options);
    unsetenv("NINFER_NO_WGMMA");
    ASSERT_TRUE(status.isOk()) << status.message();
    const std::string what = c.archs.back() + " " + plan::EnumNameDType(c.type) + " " +
                             plan::EnumNameDType(c.cache) +
                             (std::string(c.noWgmma) == "1" ? " NINFER_NO_WGMMA" : "");
    const plan::BufferT *x16 = nullptr;
    uint32_t x16Index = 0;
    for (uint32_t i = 0; i < t.plan.buffers.size(); ++i)
      if (t.plan.buffers[i]->name == "gemm.x16") {
        x16 = t.plan.buffers[i].get();
        x16Index = i;
      }
    ASSERT_EQ(x16 != nullptr, c.wgmma) << what;
    int gemms = 0, rounds = 0, producers = 0;
    for (const auto &op : t.plan.ops) {
      for (size_t i = 0; i < op->launches.size(); ++i) {
        const plan::LaunchT &launch = *op->launches[i];
        const std::string &name = t.plan.kernels->functions[launch.function];
        const bool writesX16 =
            x16 && std::find(launch.args.begin(), launch.args.end(), x16Index) != launch.args.end();
        if (name.find("round_x16") != std::string::npos) {
          ++rounds;
          ASSERT_LT(i + 1, op->launches.size()) << what << ": nothing after " << name;
          const plan::LaunchT &gemm = *op->launches[i + 1];
          EXPECT_NE(t.plan.kernels->functions[gemm.function].find("_gemm"), std::string::npos)
              << what;
          EXPECT_EQ(launch.min_tokens, gemm.min_tokens) << what;
          EXPECT_EQ(launch.grid_per_token[1], 1u) << what << ": a block row per token";
          continue;
        }
        if (writesX16 && name.find("_gemm") == std::string::npos) {
          ++producers; // the norm before q/k/v, the prefill attention before o
          EXPECT_TRUE(name.find("rmsnorm") != std::string::npos ||
                      name.find("attention_prefill") != std::string::npos)
              << what << ": " << name;
        }
        if (name.find("_gemm") == std::string::npos)
          continue;
        ++gemms;
        EXPECT_EQ(launch.min_tokens, 9u) << what;
        EXPECT_EQ(writesX16, c.wgmma) << what;
        EXPECT_EQ(launch.shared_bytes,
                  uint32_t(c.wgmma ? gemm::kWgmmaSharedBytes : gemm::kSharedBytes))
            << what;
      }
    }
    // q/k/v (one group) and o; the lm_head is last-row-only (a GEMV).
    const bool int8 = c.cache == DType::Q8_KV;
    EXPECT_EQ(gemms, 2) << what;
    EXPECT_EQ(rounds, c.wgmma && int8 ? 1 : 0) << what;
    EXPECT_EQ(producers, c.wgmma ? (int8 ? 1 : 2) : 0) << what;
    const std::string &source = t.plan.kernels->source;
    // Ternary plans: f16 norm weights and x16.
    const bool ternary = ternary::isTernaryPlanDType(int(c.type));
    const std::string type = std::to_string(int(ternary ? DType::F16 : c.type));
    EXPECT_EQ(source.find("roundRows<" + type + ", 64, ") != std::string::npos, c.wgmma && int8)
        << what;
    EXPECT_EQ(source.find("rmsNormWarp<" + type + ", 64, 64, 256, " + type + ">(") !=
                  std::string::npos,
              c.wgmma)
        << what;
    EXPECT_EQ(source.find(ternary ? ", 4>(" : ", 4, true>(") != std::string::npos, c.wgmma)
        << what << ": GEMM calls with ROWS = kRowsGemmX16";
    if (!x16)
      continue;
    const plan::BufferT &ws = *t.plan.buffers[attentionWorkspace];
    EXPECT_EQ(x16->kind, plan::BufferKind::Workspace);
    EXPECT_EQ(x16->size_bytes, 128u * 64u * 2u)
        << what << ": 64 rows of K = 64 halves, in whole tiles of 128 rows";
    EXPECT_GE(x16->offset, ws.offset + ws.size_bytes) << what;
    EXPECT_EQ(x16->offset % 256, 0u);
    EXPECT_GE(t.plan.memory->workspace_bytes, x16->offset + x16->size_bytes) << what;
  }
}

// A last-row-only linear (the lm_head) has no GEMM: the RMSNorm before it keeps writing
// its f32 output in every step, even on sm_90a where the norm before a GEMM writes x16.
// (The norm keeps its launch: NINFER_NO_NORM_FUSION=1, as where its reader cannot
// normalize.)
TEST(Nvrtc, Sm90aNormBeforeALastRowOnlyLinearKeepsItsOutput) {
  for (DType type : {DType::F16, DType::Q4_G64}) {
    TestPlan t(16, 64);
    const uint32_t x = t.addActivation("x", 256), h = t.addActivation("h", 256);
    plan::RmsNormAttrsT rms;
    rms.dim = 256;
    rms.eps = 1e-5f;
    t.addOp("norm", rms, {x, t.addDummyWeight("nw", DType::F16, {256}, 1, 0.1f, 1.0f)}, {h});
    t.addLogits(1, 384);
    plan::LinearAttrsT a;
    a.in_features = 256;
    a.out_features = 384;
    a.last_row_only = true;
    t.addOp("lm_head", a, {h, t.addDummyWeight("w", type, {384, 256}, 2, 0.05f, 0.0f)},
            {t.logits});
    KernelOptions options;
    options.archs = {"sm_90a"};
    options.embedPtx = false;
    setenv("NINFER_NO_NORM_FUSION", "1", 1);
    Status status = emitKernels(t.plan, options);
    unsetenv("NINFER_NO_NORM_FUSION");
    ASSERT_TRUE(status.isOk()) << status.message();
    const std::string what = plan::EnumNameDType(type);
    ASSERT_EQ(t.plan.ops[0]->launches.size(), 1u) << what;
    for (const auto &b : t.plan.buffers)
      EXPECT_NE(b->name, "gemm.x16") << what;
    EXPECT_EQ(t.plan.kernels->source.find("unsigned short*"), std::string::npos) << what;
  }
}

// sm_90a GEMMs take 256-token tiles where 128-token ones need more than one wave of blocks
// (132 SMs) and 256-token ones fit in one: the 8B q/k/v group at 512 tokens (192 tiles ->
// 96), not a 4096 x 4096 linear (128 tiles already fit).
TEST(Nvrtc, Sm90aTallTilesWhereTheyFillOneWave) {
  TestPlan t(512, 64);
  const uint32_t x = t.addActivation("x", 4096);
  const int outs[3] = {4096, 1024, 1024};
  uint32_t outputs[3];
  for (int m = 0; m < 3; ++m) {
    outputs[m] = t.addActivation(std::string(1, "qkv"[m]), outs[m]);
    plan::LinearAttrsT a;
    a.in_features = 4096;
    a.out_features = outs[m];
    t.addOp(std::string(1, "qkv"[m]), a,
            {x, t.addDummyWeight("w" + std::to_string(m), DType::F16, {outs[m], 4096}, m + 1,
                                 0.01f, 0.0f)},
            {outputs[m]});
  }
  const uint32_t y = t.addActivation("y", 4096);
  plan::LinearAttrsT o;
  o.in_features = 4096;
  o.out_features = 4096;
  t.addOp("o", o, {outputs[0], t.addDummyWeight("wo", DType::F16, {4096, 4096}, 9, 0.01f, 0.0f)},
          {y});
  KernelOptions options;
  options.archs = {"sm_90a"};
  options.embedPtx = false;
  Status status = emitKernels(t.plan, options);
  ASSERT_TRUE(status.isOk()) << status.message();
  const plan::LaunchT &qkv = *t.plan.ops[0]->launches.back();
  const plan::LaunchT &single = *t.plan.ops[3]->launches.back();
  EXPECT_EQ(qkv.grid_base[0], (32u + 8 + 8) * 2);
  EXPECT_EQ(qkv.shared_bytes, uint32_t(gemm::wgmmaSharedBytes(2)));
  EXPECT_EQ(single.grid_base[0], 32u * 4);
  EXPECT_EQ(single.shared_bytes, uint32_t(gemm::wgmmaSharedBytes(1)));
  const std::string &source = t.plan.kernels->source;
  EXPECT_NE(source.find("4096, 1024, 5, true, 6144>("), std::string::npos);
  EXPECT_NE(source.find("4096, 4096, 4, true>("), std::string::npos);
  EXPECT_NE(source.find("BlockSlice{static_cast<int>(blockIdx.x) - 64, 16}"), std::string::npos)
      << "k's 16 tiles after q's 64";
}

// An 8B-shaped q/k/v group: its f16 GEMVs split the work as one layer of 6144 outputs
// would (8 rows per block for k and v too), not as three layers: alone, k and v
// (1024 outputs) take 2-row blocks, each re-reading all of x.
TEST(Nvrtc, GroupedGemvSplitsAsOneLayer) {
  for (bool group : {true, false}) {
    TestPlan t(16, 64); // steps of more than 8 tokens: groups are formed
    const uint32_t x = t.addActivation("x", 4096);
    const int outs[3] = {4096, 1024, 1024};
    for (int m = 0; m < 3; ++m) {
      const std::string name = std::string(1, "qkv"[m]);
      const uint32_t w = t.addDummyWeight("w" + name, DType::F16, {outs[m], 4096}, m + 1, 0.01f, 0.0f);
      plan::LinearAttrsT a;
      a.in_features = 4096;
      a.out_features = outs[m];
      t.addOp(name, a, {x, w}, {t.addActivation(name, outs[m])});
    }
    KernelOptions options;
    options.archs = {"sm_90"};
    options.fuseLaunches = group;
    Status status = emitKernels(t.plan, options);
    ASSERT_TRUE(status.isOk()) << status.message();
    EXPECT_EQ(gemv::linearRowsPerBlock(6144, 4096, 8), 8);
    EXPECT_EQ(gemv::linearRowsPerBlock(1024, 4096, 8), 2);
    if (group) {
      EXPECT_EQ(t.plan.ops[0]->launches[0]->grid_base[0], 4096u / 8 + 1024u / 8 + 1024u / 8);
      EXPECT_NE(t.plan.kernels->source.find("4096, 1024, 1, true, 6144>("), std::string::npos);
    } else {
      EXPECT_EQ(t.plan.ops[1]->launches[0]->grid_base[0], 1024u / 2);
      EXPECT_EQ(t.plan.kernels->source.find("6144>("), std::string::npos);
    }
  }
}

// gate, up and the SwiGLU that reads them: with steps of more than 8 tokens the pair's
// decode launch writes the activation itself (f16: linearSwiGlu; Q4: linearQuantSwiGlu and
// TQ1: linearTq1SwiGlu, with sm_80+ targets), and the SwiGLU op keeps a launch for the longer
// steps only. Not when the activation overlaps the input, with an sm_75 target for quantized
// or TQ1 weights, or in a plan of several sequences whose pair's steps of 2..8 rows would not
// take the multi-row kernel (Nvrtc.BatchPlanFusesWideSwiGluIntoTheMultiRowKernel).
TEST(Nvrtc, FusesSwiGluIntoTheGateUpGemv) {
  struct Case {
    DType type;
    std::vector<std::string> archs;
    bool inPlaceOverInput;
    int batch;
    const char *fused; // the decode call, or null: not fused
  };
  const Case cases[] = {
      {DType::F16, {"sm_90"}, false, 1, "linearSwiGlu<1, 256, 384>("},
      {DType::BF16, {"sm_80", "sm_86"}, false, 1, "linearSwiGlu<2, 256, 384>("},
      {DType::Q4_G64, {"sm_80", "sm_90"}, false, 1, "linearQuantSwiGlu<4, 64, 256, 384>("},
      {DType::Q4_G64, {"sm_75", "sm_90"}, false, 1, nullptr},
      {DType::TQ1, {"sm_80", "sm_90"}, false, 1, "linearTq1SwiGlu<256, 384>("},
      {DType::TQ1, {"sm_75", "sm_90"}, false, 1, nullptr},
      {DType::F16, {"sm_90"}, true, 1, nullptr},
      {DType::Q4_G64, {"sm_90"}, false, 4, nullptr}};
  for (const Case &c : cases) {
    TestPlan t(16, 64, c.batch);
    // In place over the input: x is as wide as the activation (256 -> 384 would not fit).
    const int in = c.inPlaceOverInput ? 384 : 256, out = 384;
    const uint32_t x = t.addActivation("x", in);
    const uint32_t gate = t.addActivation("gate", out), up = t.addActivation("up", out);
    for (uint32_t y : {gate, up}) {
      const uint32_t w = t.addDummyWeight("w" + std::to_string(y), c.type, {out, in}, y, 0.05f, 0.0f);
      plan::LinearAttrsT a;
      a.in_features = in;
      a.out_features = out;
      t.addOp("linear", a, {x, w}, {y});
    }
    plan::SwiGluAttrsT swi;
    swi.dim = out;
    const uint32_t act = c.inPlaceOverInput ? x : t.addActivation("act", out);
    t.addOp("swiglu", swi, {gate, up}, {act});
    KernelOptions options;
    options.archs = c.archs;
    Status status = emitKernels(t.plan, options);
    ASSERT_TRUE(status.isOk()) << status.message();
    const std::string &source = t.plan.kernels->source;
    const auto &swiLaunches = t.plan.ops[2]->launches;
    ASSERT_EQ(swiLaunches.size(), 1u);
    const std::string what = std::string(plan::EnumNameDType(c.type)) + " on " + c.archs[0];
    if (c.fused) {
      EXPECT_NE(source.find(c.fused), std::string::npos) << what;
      EXPECT_EQ(swiLaunches[0]->min_tokens, 9u) << what;
      const uint32_t outputsPerBlock =
          c.type == DType::Q4_G64 || c.type == DType::TQ1
              ? uint32_t(gemv::mmaSwiGluOutputsPerBlock(out))
              : uint32_t(gemv::linearSwiGluOutputsPerBlock(out, in, 8));
      EXPECT_EQ(t.plan.ops[0]->launches[0]->grid_base[0], (out + outputsPerBlock - 1) / outputsPerBlock)
          << what;
    } else {
      EXPECT_EQ(source.find("SwiGlu<"), std::string::npos) << what;
      EXPECT_EQ(swiLaunches[0]->min_tokens, 0u) << what;
    }
  }
}

// The TQ1 GEMV's launch asks for 3 blocks per SM where its warps take at most 2 quads of
// chunks (their codes all in flight fit 85 registers), else 2 (GemvShapes.h
// tq1MmaBlocksPerSm): the 8B shapes, and the bounds the emitter writes for a 4096-row
// linear (2 quads), an 8192-row one and a SwiGLU pair of 4096 (4 quads: 2 row tiles a block).
// On sm_90 one-token steps take the bulk TQ1 GEMV's own launch (gemv_tq1_bulk.cuh), ahead of
// the GEMV's.
TEST(Nvrtc, Tq1GemvBlocksPerSmFollowItsQuads) {
  EXPECT_EQ(gemv::tq1MmaQuads(4096, 4096), 2);  // q/k/v, o
  EXPECT_EQ(gemv::tq1MmaQuads(4096, 1024), 2);  // k, v
  EXPECT_EQ(gemv::tq1MmaQuads(4096, 28672), 4); // gate/up with its SwiGLU
  EXPECT_EQ(gemv::tq1MmaQuads(14336, 4096), 6); // down
  EXPECT_EQ(gemv::tq1MmaBlocksPerSm(4096, 4096), 3);
  EXPECT_EQ(gemv::tq1MmaBlocksPerSm(4096, 28672), 2);
  EXPECT_EQ(gemv::tq1MmaBlocksPerSm(14336, 4096), 2);
  TestPlan t(16, 64);
  const uint32_t x = t.addActivation("x", 4096), y = t.addActivation("y", 4096);
  const uint32_t z = t.addActivation("z", 8192), gate = t.addActivation("gate", 4096);
  const uint32_t up = t.addActivation("up", 4096), act = t.addActivation("act", 4096);
  auto linear = [&](uint32_t in, uint32_t out, int64_t k, int64_t n) {
    const uint32_t w =
        t.addDummyWeight("w" + std::to_string(out), DType::TQ1, {n, k}, out, 1.0f, 0.0f);
    plan::LinearAttrsT a;
    a.in_features = k;
    a.out_features = n;
    t.addOp("linear", a, {in, w}, {out});
  };
  linear(x, y, 4096, 4096);
  linear(y, z, 4096, 8192);
  linear(x, gate, 4096, 4096);
  linear(x, up, 4096, 4096);
  plan::SwiGluAttrsT swi;
  swi.dim = 4096;
  t.addOp("swiglu", swi, {gate, up}, {act});
  KernelOptions options;
  options.archs = {"sm_90"};
  Status status = emitKernels(t.plan, options);
  ASSERT_TRUE(status.isOk()) << status.message();
  const std::string& source = t.plan.kernels->source;
  auto function = [&](size_t op, size_t launch) -> std::string {
    const auto& launches = t.plan.ops[op]->launches;
    return launch < launches.size() ? t.plan.kernels->functions[launches[launch]->function]
                                    : std::string();
  };
  auto bounds = [&](size_t op, size_t launch) {
    const std::string name = function(op, launch);
    const size_t at = source.find(" " + name + "(");
    const size_t open = source.rfind("__launch_bounds__(", at);
    return name.empty() || at == std::string::npos || open == std::string::npos
               ? std::string()
               : source.substr(open, source.find(')', open) + 1 - open);
  };
  // Three blocks per SM where their shared memory fits (GemvShapes.h tq1BulkBlocksPerSm), two
  // for the SwiGLU pair.
  for (size_t op : {0, 1, 2}) {
    EXPECT_NE(function(op, 0).find("_one"), std::string::npos) << function(op, 0);
    EXPECT_EQ(bounds(op, 0), op < 2 ? "__launch_bounds__(288, 3)" : "__launch_bounds__(288, 2)")
        << op;
    EXPECT_NE(function(op, 1).find("_gemv"), std::string::npos) << function(op, 1);
  }
  EXPECT_NE(source.find("linearTq1OneToken<0, false, 4096, 8192, 1>"), std::string::npos);
  EXPECT_NE(source.find("linearTq1SwiGluOneToken<4096, 4096>"), std::string::npos);
  EXPECT_EQ(bounds(0, 1), "__launch_bounds__(256, 3)");
  EXPECT_EQ(bounds(1, 1), "__launch_bounds__(256, 2)");
  EXPECT_NE(function(2, 1).find("group2"), std::string::npos);
  EXPECT_EQ(bounds(2, 1), "__launch_bounds__(256, 2)"); // the SwiGLU pair's GEMV
}

// In a plan of several sequences the SwiGLU is fused only where the gate/up pair's steps of
// 2..8 rows take the multi-row kernel (quantized weights, sm_90+ targets, block groups of
// enough tiles: GemvShapes.h rowsPays): linearQuantRowsSwiGlu over tiles of 8 gate and 8 up
// rows, both code planes as tensor maps with boxes of 8 rows, after the one-token launch
// that computes it too; the SwiGLU op keeps a launch for longer steps. Not with an sm_80
// target, nor for a narrow pair (the register-fed SwiGLU GEMV had slowed batch plans).
TEST(Nvrtc, BatchPlanFusesWideSwiGluIntoTheMultiRowKernel) {
  struct Case {
    std::vector<std::string> archs;
    int out;
    bool fused;
  };
  for (const Case &c : {Case{{"sm_90"}, 12800, true}, Case{{"sm_80", "sm_90"}, 12800, false},
                        Case{{"sm_90"}, 384, false}}) {
    TestPlan t(16, 64, 4);
    const int in = 256;
    const uint32_t x = t.addActivation("x", in);
    const uint32_t gate = t.addActivation("gate", c.out), up = t.addActivation("up", c.out);
    std::vector<uint32_t> weights;
    for (uint32_t y : {gate, up}) {
      weights.push_back(
          t.addDummyWeight("w" + std::to_string(y), DType::Q4_G64, {c.out, in}, y, 0.05f, 0.0f));
      plan::LinearAttrsT a;
      a.in_features = in;
      a.out_features = c.out;
      t.addOp("linear", a, {x, weights.back()}, {y});
    }
    plan::SwiGluAttrsT swi;
    swi.dim = c.out;
    t.addOp("swiglu", swi, {gate, up}, {t.addActivation("act", c.out)});
    KernelOptions options;
    options.archs = c.archs;
    options.embedPtx = false;
    Status status = emitKernels(t.plan, options);
    const std::string what = c.archs[0] + ", " + std::to_string(in) + " -> " + std::to_string(c.out);
    ASSERT_TRUE(status.isOk()) << what << ": " << status.message();
    const plan::KernelModuleT &kernels = *t.plan.kernels;
    const auto &swiLaunches = t.plan.ops[2]->launches;
    ASSERT_EQ(swiLaunches.size(), 1u) << what;
    EXPECT_EQ(swiLaunches[0]->min_tokens, c.fused ? 9u : 0u) << what;
    const std::string call =
        "linearQuantRowsSwiGlu<4, 64, " + std::to_string(in) + ", " + std::to_string(c.out) + ">(";
    EXPECT_EQ(kernels.source.find(call) != std::string::npos, c.fused) << what;
    if (!c.fused)
      continue;
    const auto &launches = t.plan.ops[0]->launches; // one token, 2..8 rows, the GEMM
    ASSERT_EQ(launches.size(), 3u) << what;
    EXPECT_NE(kernels.source.find("linearQuantSwiGluOneToken<"), std::string::npos) << what;
    const plan::LaunchT &rows = *launches[1];
    EXPECT_NE(kernels.functions[rows.function].find("_swiglu_rows"), std::string::npos) << what;
    const gemv::RowsLayout layout = gemv::bulkRowsLayout(4, 64, in, 2 * c.out);
    EXPECT_EQ(rows.block[0], uint32_t(gemv::kRowsThreads)) << what;
    EXPECT_EQ(rows.min_tokens, 2u) << what;
    EXPECT_EQ(rows.max_tokens, 8u) << what;
    EXPECT_EQ(rows.shared_bytes, uint32_t(layout.sharedBytes)) << what;
    EXPECT_EQ(rows.grid_base[0], uint32_t(gemv::kBulkGridBlocks)) << what; // K in one part
    ASSERT_EQ(kernels.tensor_maps.size(), 2u) << what;
    for (size_t m = 0; m < 2; ++m) {
      const plan::TensorMapT &map = *kernels.tensor_maps[m];
      EXPECT_EQ(map.weight, weights[m]) << what;
      EXPECT_EQ(map.rows, uint32_t(c.out)) << what;
      EXPECT_EQ(map.box_rows, 8u) << what;
      EXPECT_EQ(map.box_bytes, uint32_t(layout.boxBytes)) << what;
    }
  }
}

// On sm_90a the gate/up group's long-step GEMM runs over both matrices' rows and writes
// silu(gate) * up as the down projection's 16-bit x, into its own workspace (gemm.act16):
// the SwiGLU op has no launch left (the gate/up GEMV computes it in short steps) and the
// down GEMM no rounding launch (f16, q4 and TQ1 weights). Not where another op reads the
// activation, not in plans of several sequences or TQ2 plans (no SwiGLU fused into the GEMV)
// and not for sm_90 code. Where a later op reads gate (which the fused launches do not write),
// the SwiGLU is not fused at all.
TEST(Nvrtc, Sm90aGateUpGemmWritesTheSwiGluForTheDownProjection) {
  enum Reader { kNone, kActivation, kGate };
  struct Case {
    DType type;
    std::string arch;
    Reader otherReader;
    int batch;
    const char *fused; // the GEMM's function, or null
  };
  for (const Case &c :
       {Case{DType::F16, "sm_90a", kNone, 1, "linearSwiGluGemm<1, 1, 256, 384, 4>("},
        Case{DType::Q4_G64, "sm_90a", kNone, 1, "linearQuantSwiGluGemm<4, 64, 1, 256, 384, 4>("},
        Case{DType::TQ1, "sm_90a", kNone, 1,
             "ternarySwiGluGemm<ninfer::dev::Tq1Codes, 1, 256, 384, 4>("},
        Case{DType::TQ2, "sm_90a", kNone, 1, nullptr},
        Case{DType::F16, "sm_90", kNone, 1, nullptr},
        Case{DType::F16, "sm_90a", kActivation, 1, nullptr},
        Case{DType::F16, "sm_90a", kGate, 1, nullptr},
        Case{DType::F16, "sm_90a", kNone, 2, nullptr}}) {
    TestPlan t(16, 64, c.batch);
    const int hidden = 256, ffn = 384;
    const uint32_t x = t.addActivation("x", hidden);
    const uint32_t gate = t.addActivation("gate", ffn), up = t.addActivation("up", ffn);
    std::vector<uint32_t> weights;
    const auto linear = [&](uint32_t in, uint32_t out, int inF, int outF) {
      weights.push_back(t.addDummyWeight("w" + std::to_string(out), c.type, {outF, inF}, out,
                                         0.05f, 0.0f));
      plan::LinearAttrsT a;
      a.in_features = inF;
      a.out_features = outF;
      t.addOp("linear", a, {in, weights.back()}, {out});
    };
    linear(x, gate, hidden, ffn);
    linear(x, up, hidden, ffn);
    plan::SwiGluAttrsT swi;
    swi.dim = ffn;
    const uint32_t act = t.addActivation("act", ffn);
    t.addOp("swiglu", swi, {gate, up}, {act});
    const uint32_t y = t.addActivation("y", hidden);
    linear(act, y, ffn, hidden);
    if (c.otherReader != kNone) {
      plan::AddAttrsT add;
      add.dim = ffn;
      const uint32_t read = c.otherReader == kGate ? gate : act;
      t.addOp("add", add, {read, read}, {t.addActivation("again", ffn)});
    }
    KernelOptions options;
    options.archs = {c.arch};
    options.embedPtx = false;
    Status status = emitKernels(t.plan, options);
    ASSERT_TRUE(status.isOk()) << status.message();
    const std::string what = std::string(plan::EnumNameDType(c.type)) + " " + c.arch +
                             (c.otherReader == kActivation ? " activation read again" : "") +
                             (c.otherReader == kGate ? " gate read again" : "") +
                             (c.batch > 1 ? " batch" : "");
    const std::string &source = t.plan.kernels->source;
    EXPECT_EQ(source.find("SwiGluGemm<") != std::string::npos, c.fused != nullptr) << what;
    const auto &swiLaunches = t.plan.ops[2]->launches;
    EXPECT_EQ(swiLaunches.size(), c.fused ? 0u : 1u) << what;
    if (!c.fused) {
      ASSERT_EQ(swiLaunches.size(), 1u);
      // Fused into the gate/up GEMV (one-sequence plans, gate and up read by nothing else;
      // not TQ2's select/add GEMV): its launch runs the long steps.
      const bool gemvFused = c.batch == 1 && c.otherReader != kGate && c.type != DType::TQ2;
      EXPECT_EQ(swiLaunches[0]->min_tokens, gemvFused ? 9u : 0u) << what;
      continue;
    }
    EXPECT_NE(source.find(c.fused), std::string::npos) << what;
    uint32_t act16 = 0;
    for (uint32_t i = 0; i < t.plan.buffers.size(); ++i)
      if (t.plan.buffers[i]->name == "gemm.act16")
        act16 = i;
    ASSERT_NE(act16, 0u) << what;
    EXPECT_GE(t.plan.buffers[act16]->size_bytes, uint64_t(16) * ffn * 2) << what;
    // The gate/up group's last launch is the GEMM: it reads both weights, writes act16 and
    // none of gate, up or the activation.
    const auto &group = t.plan.ops[0]->launches;
    ASSERT_FALSE(group.empty());
    const plan::LaunchT &gemm = *group.back();
    EXPECT_NE(t.plan.kernels->functions[gemm.function].find("swiglu_gemm"), std::string::npos)
        << what;
    EXPECT_EQ(gemm.min_tokens, 9u) << what;
    const auto has = [](const std::vector<uint32_t> &args, uint32_t b) {
      return std::find(args.begin(), args.end(), b) != args.end();
    };
    // Quantized weights: the GEMM reads them. F16: through TMA tensor maps, boxes of 64
    // rows for gate and up (each half a tile), 128 for the down projection.
    const bool mapped = c.type == DType::F16;
    const auto mapOf = [&](uint32_t weight, int rows, int cols, int box) -> uint32_t {
      for (const auto &m : t.plan.kernels->tensor_maps)
        if (m->weight == weight) {
          EXPECT_EQ(int(m->rows), rows) << what;
          EXPECT_EQ(int(m->cols), cols) << what;
          EXPECT_EQ(int(m->box_rows), box) << what;
          const plan::BufferT &b = *t.plan.buffers[m->map];
          EXPECT_EQ(b.kind, plan::BufferKind::Workspace) << what;
          EXPECT_EQ(b.size_bytes, 128u) << what;
          EXPECT_EQ(b.offset % 256, 0u) << what;
          EXPECT_LE(b.offset + b.size_bytes, t.plan.memory->workspace_bytes) << what;
          return m->map;
        }
      return 0;
    };
    EXPECT_EQ(t.plan.kernels->tensor_maps.size(), mapped ? 3u : 0u) << what;
    const uint32_t gateMap = mapOf(weights[0], ffn, hidden, 64);
    const uint32_t upMap = mapOf(weights[1], ffn, hidden, 64);
    const uint32_t downMap = mapOf(weights[2], hidden, ffn, 128);
    EXPECT_EQ(gateMap != 0 && upMap != 0 && downMap != 0, mapped) << what;
    EXPECT_EQ(has(gemm.args, weights[0]) && has(gemm.args, weights[1]), !mapped) << what;
    EXPECT_EQ(has(gemm.args, gateMap) && has(gemm.args, upMap), mapped) << what;
    EXPECT_TRUE(has(gemm.args, act16)) << what;
    EXPECT_FALSE(has(gemm.args, gate) || has(gemm.args, up) || has(gemm.args, act)) << what;
    EXPECT_TRUE(t.plan.ops[1]->launches.empty()) << what;
    // The down projection: no rounding launch; its GEMM reads act16 (and its map).
    const auto &down = t.plan.ops[3]->launches;
    ASSERT_FALSE(down.empty());
    for (const auto &launch : down)
      EXPECT_EQ(t.plan.kernels->functions[launch->function].find("round_x16"), std::string::npos)
          << what;
    EXPECT_TRUE(has(down.back()->args, act16)) << what;
    EXPECT_EQ(has(down.back()->args, downMap), mapped) << what;
    EXPECT_EQ(has(down.back()->args, weights[2]), !mapped) << what;
  }
}

// An RMSNorm read only by linears whose short-step launches can normalize their input
// (the 16-byte GEMV for up to 8 rows, the sm_90 bulk GEMV for one token) is fused into
// them: those launches read the norm's input and weight, the norm's launch runs the longer
// steps only, and none is left for an in-place final norm whose lm_head covers every step.
// Not fused: quantized and TQ1 readers without their bulk GEMVs (targets below sm_90), f16
// readers of more than 16 MiB of weights, a reader that is no linear, multi-row lm_head launches (batch
// plans) and NINFER_NO_NORM_FUSION=1.
TEST(Nvrtc, FusesRmsNormIntoTheGemvsThatReadIt) {
  struct Case {
    const char *what;
    DType type;
    std::vector<std::string> archs;
    int readers;       // 3: q/k/v; 2: gate/up and SwiGLU; 1: one linear
    int out;           // the readers' rows
    bool otherReader;  // an add reads the norm's output too
    int batch;
    uint32_t normFrom; // min_tokens of the norm's launch (0: not fused)
    bool headFused;    // the final in-place norm runs in no step
  };
  const Case cases[] = {
      {"f16 q/k/v", DType::F16, {"sm_90"}, 3, 384, false, 1, 9, true},
      {"bf16 gate/up on sm_80", DType::BF16, {"sm_80"}, 2, 384, false, 1, 9, true},
      {"f16, 16 MiB", DType::F16, {"sm_90"}, 1, 32768, false, 1, 9, true},
      {"f16, 16 MiB + 512 bytes", DType::F16, {"sm_90"}, 1, 32769, false, 1, 0, true},
      {"q4 gate/up", DType::Q4_G64, {"sm_90"}, 2, 384, false, 1, 2, true},
      {"q4 q/k/v, batch 4", DType::Q4_G64, {"sm_90"}, 3, 384, false, 4, 2, false},
      {"q4 without sm_90", DType::Q4_G64, {"sm_80", "sm_90"}, 3, 384, false, 1, 0, false},
      {"tq1 gate/up", DType::TQ1, {"sm_90"}, 2, 384, false, 1, 2, true},
      {"tq1 without sm_90", DType::TQ1, {"sm_80", "sm_90"}, 1, 384, false, 1, 0, false},
      {"f16 read by an add", DType::F16, {"sm_90"}, 1, 384, true, 1, 0, true},
      {"f16 with NINFER_NO_NORM_FUSION=1", DType::F16, {"sm_90"}, 3, 384, false, 1, 0, false}};
  const int hidden = 256, vocab = 96;
  for (const Case &c : cases) {
    const bool env = std::string(c.what).find("NINFER_NO_NORM_FUSION") != std::string::npos;
    if (env)
      setenv("NINFER_NO_NORM_FUSION", "1", 1);
    std::mt19937 rng(3);
    TestPlan t(16, 64, c.batch);
    const uint32_t x = t.addActivation("x", hidden), h = t.addActivation("h", hidden);
    const uint32_t gamma = t.addWeight("gamma", DType::F16, {hidden},
                                       test::randomValues(hidden, 1.0f, rng));
    plan::RmsNormAttrsT rms;
    rms.dim = hidden;
    rms.eps = 1e-5f;
    t.addOp("norm", rms, {x, gamma}, {h});
    auto weight = [&](const std::string &name, int n) {
      return c.type == DType::TQ1 ? t.addTernaryWeight(name, c.type, n, hidden, 0.05f, rng, true)
                                  : t.addDummyWeight(name, c.type, {n, hidden}, 3, 0.05f, 0.0f);
    };
    std::vector<uint32_t> outputs;
    for (int m = 0; m < c.readers; ++m) {
      outputs.push_back(t.addActivation("y" + std::to_string(m), c.out));
      plan::LinearAttrsT a;
      a.in_features = hidden;
      a.out_features = c.out;
      t.addOp("linear" + std::to_string(m), a, {h, weight("w" + std::to_string(m), c.out)},
              {outputs.back()});
    }
    if (c.readers == 2) {
      plan::SwiGluAttrsT swi;
      swi.dim = c.out;
      t.addOp("swiglu", swi, {outputs[0], outputs[1]}, {t.addActivation("act", c.out)});
    }
    if (c.otherReader) {
      plan::AddAttrsT add;
      add.dim = hidden;
      t.addOp("add", add, {h, x}, {t.addActivation("sum", hidden)});
    }
    t.addOp("final_norm", rms, {x, gamma}, {x});
    t.addLmHeadLogits(vocab);
    plan::LinearAttrsT head;
    head.in_features = hidden;
    head.out_features = vocab;
    head.last_row_only = true;
    t.addOp("lm_head", head, {x, weight("lm", vocab)}, {t.logits});
    KernelOptions options;
    options.archs = c.archs;
    options.embedPtx = false;
    Status status = emitKernels(t.plan, options);
    if (env)
      unsetenv("NINFER_NO_NORM_FUSION");
    ASSERT_TRUE(status.isOk()) << c.what << ": " << status.message();
    const auto &normLaunches = t.plan.ops[0]->launches;
    const auto &reader = t.plan.ops[1]->launches;
    ASSERT_EQ(normLaunches.size(), 1u) << c.what;
    EXPECT_EQ(normLaunches[0]->min_tokens, c.normFrom) << c.what;
    // The reader's first launch (one token, or up to 8 rows) reads x and the norm's
    // weight where the norm is fused, h otherwise.
    const std::vector<uint32_t> &args = reader[0]->args;
    const bool readsX = std::find(args.begin(), args.end(), x) != args.end();
    const bool readsGamma = std::find(args.begin(), args.end(), gamma) != args.end();
    EXPECT_EQ(readsX, c.normFrom > 0) << c.what;
    EXPECT_EQ(readsGamma, c.normFrom > 0) << c.what;
    for (const auto &launch : reader) // the GEMM launch takes normalized rows
      if (launch->min_tokens > c.normFrom && c.normFrom > 0) {
        EXPECT_EQ(std::find(launch->args.begin(), launch->args.end(), gamma), launch->args.end())
            << c.what;
        EXPECT_NE(std::find(launch->args.begin(), launch->args.end(), h), launch->args.end())
            << c.what;
      }
    const size_t finalNorm = t.plan.ops.size() - 2;
    EXPECT_EQ(t.plan.ops[finalNorm]->launches.empty(), c.headFused) << c.what;
    const auto &headArgs = t.plan.ops.back()->launches[0]->args;
    EXPECT_EQ(std::find(headArgs.begin(), headArgs.end(), gamma) != headArgs.end(), c.headFused)
        << c.what;
  }
}

// The f16/bf16/f32 GEMV launches (alone, grouped, the lm_head's last row) leave the
// dependency wait to the GEMV, which waits after its first weight loads (linear.cuh), and
// the decode attention with the RoPE fused in waits after its first cache-row copies
// (attention.cuh); the GEMM launches and the other kernels wait first thing in their wrapper.
TEST(Nvrtc, DenseGemvWaitsAfterItsFirstWeightLoads) {
  TestPlan t = smallModel(DType::F16, 16);
  ASSERT_NO_FATAL_FAILURE(emitForSm90(t));
  const plan::KernelModuleT &kernels = *t.plan.kernels;
  auto wrapperWaits = [&](uint32_t function) {
    const std::string name = kernels.functions[function] + "(";
    const size_t body = kernels.source.find(name);
    EXPECT_NE(body, std::string::npos) << name;
    const std::string text = kernels.source.substr(body, kernels.source.find("}\n", body) - body);
    return text.find("gridDependencyWait") != std::string::npos;
  };
  size_t gemvs = 0, others = 0;
  for (const auto &op : t.plan.ops)
    for (const auto &launch : op->launches) {
      const std::string &name = kernels.functions[launch->function];
      const bool waitsItself = (name.find("linear") != std::string::npos &&
                                name.find("gemm") == std::string::npos) ||
                               name.find("attention_decode") != std::string::npos;
      EXPECT_EQ(wrapperWaits(launch->function), !waitsItself) << name;
      ++(waitsItself ? gemvs : others);
    }
  EXPECT_GE(gemvs, 4u); // q/k/v, o, lm_head, attention decode
  EXPECT_GE(others, 5u);
  EXPECT_NE(kernels.source.find("ninfer::dev::linear<1, 0, false, 64, 50, 3, true>("),
            std::string::npos); // the lm_head's last row
}

// Group-quantized formats (bits, group; 16: K16) the bulk kernels' layout tests cover.
struct BulkFormat {
  int bits, group;
};
const BulkFormat kBulkFormats[] = {{8, 32}, {8, 128}, {6, 64}, {5, 32}, {4, 32}, {4, 64},
                                   {4, 128}, {4, 16}, {3, 64}, {3, 16}, {2, 128}, {2, 16}};

// gemv_quant_bulk.cuh's shared-memory layout: every bulk copy's destination and size a
// multiple of 16 bytes, slot rows 128-byte aligned and padded so two rows' runs fall in
// different banks, the whole within two blocks per SM; whole tiles only.
TEST(GemvShapes, BulkLayoutKeepsCopiesAlignedAndFitsTwoBlocks) {
  for (const BulkFormat f : kBulkFormats)
    for (int k : {128, 1152, 4096, 14336})
      for (bool swiGlu : {false, true}) {
        const std::string what = "q" + std::to_string(f.bits) + " g" + std::to_string(f.group) +
                                 " K " + std::to_string(k) + (swiGlu ? " SwiGLU" : "");
        const gemv::BulkLayout l = gemv::bulkLayout(f.bits, f.group, k, 4096, swiGlu);
        ASSERT_TRUE(l.fits) << what;
        EXPECT_EQ(gemv::bulkLayout(f.bits, f.group, k, 1000, swiGlu).fits, swiGlu) << what;
        EXPECT_GE(l.slots, 2) << what;
        EXPECT_LE(l.slots, gemv::kBulkMaxSlots) << what;
        EXPECT_LE(l.sharedBytes, gemv::kBulkSharedLimit) << what;
        EXPECT_EQ(l.sharedBytes, l.offSlots + l.slots * l.slotBytes) << what;
        EXPECT_GE(l.chunks * l.chunkUnits, k / 128) << what;
        EXPECT_LT((l.chunks - 1) * l.chunkUnits, k / 128) << what;
        EXPECT_EQ(l.unitsPerWarp * gemv::kBulkConsumerWarps, l.chunkUnits) << what;
        for (int offset : {l.offScales, l.offX, l.offPartial, l.scaleBytes, l.xWarpBytes,
                           l.slotRowBytes, l.slotBytes, l.chunkUnits * gemv::bulkUnitBytes(f.bits)})
          EXPECT_EQ(offset % 16, 0) << what;
        EXPECT_EQ(l.offSlots % 128, 0) << what;
        EXPECT_GE(l.slotRowBytes, l.chunkUnits * gemv::bulkUnitBytes(f.bits)) << what;
        EXPECT_NE(l.slotRowBytes % 128, 0) << what; // consecutive rows in other banks
        EXPECT_EQ(l.scaleBytes, gemv::kBulkTileRows * gemv::bulkRowScaleBytes(f.group, k)) << what;
        EXPECT_TRUE(l.scaleBuffers == 2 || l.scaleBuffers == 3) << what;
        EXPECT_LE(l.scaleBuffers, gemv::kBulkMaxScaleBuffers) << what;
        EXPECT_GE(l.offX, l.offScales + l.scaleBuffers * l.scaleBytes) << what;
      }
  // The 8B q4_g64 layers: four slots at K 4096, three beside the staged x of K 14,336.
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 6144, false).slots, 4);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 14336, 4096, false).slots, 3);
}

// gemv_tq1_bulk.cuh's shared-memory layout: stages of whole quads of chunks (but the last)
// that cover a row once, slot rows whose quad reads fall in other banks than the next row's
// (64 bytes apart modulo 128), copies and offsets 16-byte aligned, the whole within two blocks
// per SM (three where tq1BulkBlocksPerSm says so); whole tiles only.
TEST(GemvShapes, Tq1BulkLayoutCoversRowsAndFitsItsBlocks) {
  for (int k : {16, 80, 96, 400, 512, 1040, 2576, 4096, 8192, 14336, 28672})
    for (bool swiGlu : {false, true}) {
      const std::string what = "K " + std::to_string(k) + (swiGlu ? " SwiGLU" : "");
      const gemv::Tq1BulkLayout l = gemv::tq1BulkLayout(k, 4096, swiGlu);
      ASSERT_TRUE(l.fits) << what;
      EXPECT_EQ(gemv::tq1BulkLayout(k, 1000, swiGlu).fits, swiGlu) << what; // 1000 % 8 == 0
      const int chunks = int(tq1::chunks(k));
      EXPECT_GE(l.stages * l.stageChunks, chunks) << what;
      EXPECT_LT((l.stages - 1) * l.stageChunks, chunks) << what;
      if (l.stages > 1) {
        EXPECT_EQ(l.stageChunks % 4, 0) << what;
      }
      EXPECT_LE(l.stageChunks * tq1::kChunkBytes, gemv::kTq1StageRowBytes) << what;
      EXPECT_GE(l.quadsPerWarp * gemv::kBulkConsumerWarps * 4, l.stageChunks) << what;
      EXPECT_EQ(l.slotRowBytes % 128, 64) << what;
      EXPECT_GE(l.slotRowBytes, l.stageChunks * tq1::kChunkBytes) << what;
      EXPECT_GE(l.slots, 2) << what;
      EXPECT_LE(l.slots, gemv::kBulkMaxSlots) << what;
      EXPECT_EQ(l.sharedBytes, l.offSlots + l.slots * l.slotBytes) << what;
      EXPECT_LE(l.sharedBytes, gemv::kBulkSharedLimit) << what;
      EXPECT_EQ(l.xWarpBytes, l.stages * l.quadsPerWarp * 4 * gemv::kTq1ChunkXBytes) << what;
      for (int offset : {l.offX, l.offPartial, l.xWarpBytes, l.slotRowBytes, l.slotBytes})
        EXPECT_EQ(offset % 16, 0) << what;
      EXPECT_EQ(l.offSlots % 128, 0) << what;
      EXPECT_GE(l.offPartial, l.offX + gemv::kBulkConsumerWarps * l.xWarpBytes) << what;
      if (gemv::tq1BulkBlocksPerSm(l) == 3) {
        EXPECT_LE(3 * (l.sharedBytes + 1024), 228 * 1024) << what;
      }
    }
  // The 8B TQ1 layers: one stage of 52 chunks at K 4,096 (three blocks per SM), three of 60 at
  // 14,336 (two).
  const gemv::Tq1BulkLayout qkv = gemv::tq1BulkLayout(4096, 6144, false);
  EXPECT_EQ(qkv.stages, 1);
  EXPECT_EQ(qkv.stageChunks, 52);
  EXPECT_EQ(gemv::tq1BulkBlocksPerSm(qkv), 3);
  const gemv::Tq1BulkLayout down = gemv::tq1BulkLayout(14336, 4096, false);
  EXPECT_EQ(down.stages, 3);
  EXPECT_EQ(down.stageChunks, 60);
  EXPECT_EQ(gemv::tq1BulkBlocksPerSm(down), 2);
}

// Wide launches of formats of 4 bits or fewer take chunks of twice bulkChunkUnits where K
// has whole chunks of that size and two slots fit; the rest keep bulkChunkUnits.
TEST(GemvShapes, WideBulkLaunchesTakeDoubleChunks) {
  const int wideN = gemv::kBulkWideTiles * gemv::kBulkTileRows;
  for (const BulkFormat f : kBulkFormats)
    for (int k : {1152, 4096, 8192, 14336})
      for (bool swiGlu : {false, true}) {
        const std::string what = "q" + std::to_string(f.bits) + " g" + std::to_string(f.group) +
                                 " K " + std::to_string(k) + (swiGlu ? " SwiGLU" : "");
        const int chunk = gemv::bulkChunkUnits(f.bits);
        const gemv::BulkLayout narrow = gemv::bulkLayout(f.bits, f.group, k, wideN - 16, false);
        const gemv::BulkLayout wide = gemv::bulkLayout(f.bits, f.group, k, wideN, swiGlu);
        const gemv::BulkLayout doubled =
            gemv::bulkLayoutOf(f.bits, f.group, k, wideN, swiGlu, 2 * chunk);
        EXPECT_EQ(narrow.chunkUnits, chunk) << what;
        const bool takes = f.bits <= 4 && (k / 128) % (2 * chunk) == 0 && doubled.fits;
        EXPECT_EQ(wide.chunkUnits, takes ? 2 * chunk : chunk) << what;
        ASSERT_TRUE(wide.fits) << what;
        EXPECT_EQ(wide.unitsPerWarp * gemv::kBulkConsumerWarps, wide.chunkUnits) << what;
        EXPECT_LE(wide.sharedBytes, gemv::kBulkSharedLimit) << what;
        EXPECT_EQ(wide.slotBytes % 16, 0) << what;
        EXPECT_EQ(wide.offSlots % 128, 0) << what;
        // A third scale buffer for the double chunks where it costs no ring slot.
        const gemv::BulkLayout deeper =
            gemv::bulkLayoutOf(f.bits, f.group, k, wideN, swiGlu, 2 * chunk, 3);
        EXPECT_EQ(wide.scaleBuffers, takes && deeper.slots == doubled.slots ? 3 : 2) << what;
        EXPECT_EQ(narrow.scaleBuffers, 2) << what;
      }
  // The 8B q4_g64 shapes: gate/up (1,792 tiles of 8 + 8 rows) and the lm_head in two slots
  // of 32 units; q/k/v, o and down (K 14,336: its x leaves room for one such slot) as before.
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 14336, true).chunkUnits, 32);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 14336, true).slots, 2);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 128256, false).chunkUnits, 32);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 4096, false).chunkUnits, 16);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 14336, 4096, false).chunkUnits, 16);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 14336, 128256, false).chunkUnits, 16);
  // Three scale buffers beside the gate/up pair's and the lm_head's two slots; two elsewhere.
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 14336, true).scaleBuffers, 3);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 128256, false).scaleBuffers, 3);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 6144, false).scaleBuffers, 2);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 14336, 4096, false).scaleBuffers, 2);
}

// Plans for cards of H200-class bandwidth (bulkLayout's deepRing): wide launches take
// bulkChunkUnits chunks in up to kBulkDeepMaxSlots slots beside kBulkDeepScaleBuffers scale
// buffers where that holds at least a quarter more bytes in flight than the double chunks,
// with room for their barriers before the scale buffers; every other launch keeps the
// layout it has without the deep ring.
TEST(GemvShapes, DeepRingHoldsMoreBytesInWideLaunches) {
  const int wideN = gemv::kBulkWideTiles * gemv::kBulkTileRows;
  int taken = 0;
  for (const BulkFormat f : kBulkFormats)
    for (int k : {1152, 4096, 8192, 14336})
      for (int n : {wideN - 16, wideN})
        for (bool swiGlu : {false, true}) {
          const std::string what = "q" + std::to_string(f.bits) + " g" + std::to_string(f.group) +
                                   " K " + std::to_string(k) + " N " + std::to_string(n) +
                                   (swiGlu ? " SwiGLU" : "");
          const gemv::BulkLayout plain = gemv::bulkLayout(f.bits, f.group, k, n, swiGlu);
          const gemv::BulkLayout deep = gemv::bulkLayout(f.bits, f.group, k, n, swiGlu, true);
          ASSERT_TRUE(deep.fits) << what;
          if (deep.scaleBuffers != gemv::kBulkDeepScaleBuffers) { // not taken
            EXPECT_EQ(deep.chunkUnits, plain.chunkUnits) << what;
            EXPECT_EQ(deep.slots, plain.slots) << what;
            EXPECT_EQ(deep.scaleBuffers, plain.scaleBuffers) << what;
            EXPECT_EQ(deep.offScales, plain.offScales) << what;
            EXPECT_EQ(deep.sharedBytes, plain.sharedBytes) << what;
            continue;
          }
          ++taken;
          const int chunk = gemv::bulkChunkUnits(f.bits);
          EXPECT_TRUE(f.bits <= 4 && (k / 128) % (2 * chunk) == 0 &&
                      gemv::bulkTiles(n, swiGlu) >= gemv::kBulkWideTiles)
              << what;
          const gemv::BulkLayout doubled =
              gemv::bulkLayoutOf(f.bits, f.group, k, n, swiGlu, 2 * chunk);
          if (doubled.fits) {
            EXPECT_GE(4 * deep.slots * deep.slotBytes, 5 * doubled.slots * doubled.slotBytes)
                << what;
          }
          EXPECT_EQ(deep.chunkUnits, chunk) << what;
          EXPECT_EQ(deep.unitsPerWarp * gemv::kBulkConsumerWarps, deep.chunkUnits) << what;
          EXPECT_GE(deep.slots, 2) << what;
          EXPECT_LE(deep.slots, gemv::kBulkDeepMaxSlots) << what;
          EXPECT_EQ(deep.barrierSlots, gemv::kBulkDeepMaxSlots) << what;
          EXPECT_EQ(deep.barrierScaleBuffers, gemv::kBulkDeepScaleBuffers) << what;
          EXPECT_GE(deep.offScales, 8 * 2 * (deep.barrierSlots + deep.barrierScaleBuffers)) << what;
          EXPECT_GE(deep.offX, deep.offScales + deep.scaleBuffers * deep.scaleBytes) << what;
          EXPECT_EQ(deep.offSlots % 128, 0) << what;
          EXPECT_EQ(deep.sharedBytes, deep.offSlots + deep.slots * deep.slotBytes) << what;
          EXPECT_LE(deep.sharedBytes, gemv::kBulkSharedLimit) << what;
        }
  EXPECT_GT(taken, 0);
  // The 8B q4_g64 gate/up pair and lm_head: five slots of 16 units; q/k/v, o and down as
  // without the deep ring.
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 14336, true, true).slots, 5);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 14336, true, true).chunkUnits, 16);
  EXPECT_EQ(gemv::bulkLayout(4, 64, 4096, 128256, false, true).slots, 5);
  for (int k : {4096, 14336})
    for (int n : {4096, 6144})
      EXPECT_EQ(gemv::bulkLayout(4, 64, k, n, false, true).sharedBytes,
                gemv::bulkLayout(4, 64, k, n, false).sharedBytes);
}

// gemv_quant_rows.cuh's shared-memory layout: the part of K a block takes (all of K up to
// 32 units where its code rows fit a box, one block per SM; else parts of 16 units, two
// blocks per SM), 128-byte aligned stages (TMA boxes) within the SM's share, a code row's
// part at most 2 KiB (a TMA box's 256 eight-byte elements), whole tiles only; the shapes
// of the 8B q4 layers.
TEST(GemvShapes, RowsLayoutFitsItsSmShareAndAlignsStages) {
  for (const BulkFormat f : kBulkFormats)
    for (int k : {128, 1152, 2176, 4096, 14336}) {
      const std::string what = "q" + std::to_string(f.bits) + " g" + std::to_string(f.group) +
                               " K " + std::to_string(k);
      const gemv::RowsLayout l = gemv::bulkRowsLayout(f.bits, f.group, k, 4096);
      EXPECT_FALSE(gemv::bulkRowsLayout(f.bits, f.group, k, 4104).fits) << what;
      // Q8 parts of 2 KiB with wider K (and Q5_G32 at K 14,336) leave room for one stage
      // only: those keep the register-fed GEMV.
      if (!l.fits) {
        EXPECT_TRUE((f.bits == 8 && k > 1152) || (f.bits == 5 && k == 14336)) << what;
        EXPECT_LT(l.slots, 2) << what;
        continue;
      }
      const int units = k / 128;
      const bool whole =
          units <= 16 || (units <= 32 && units * gemv::bulkUnitBytes(f.bits) <= 2048);
      EXPECT_EQ(l.partUnits, whole ? units : 16) << what;
      EXPECT_EQ(gemv::rowsParts(f.bits, k), whole ? 1 : (units + 15) / 16) << what;
      const int perSm = gemv::rowsBlocksPerSm(f.bits, k);
      EXPECT_EQ(perSm, whole && units > 16 ? 1 : 2) << what;
      EXPECT_EQ(gemv::rowsGridBlocks(f.bits, k), 132 * perSm) << what;
      EXPECT_EQ(l.boxBytes, l.partUnits * gemv::bulkUnitBytes(f.bits)) << what;
      EXPECT_LE(l.boxBytes, 2048) << what;
      EXPECT_GE(l.slots, 2) << what;
      EXPECT_LE(l.slots, gemv::kRowsMaxSlots) << what;
      EXPECT_LE(l.sharedBytes, perSm == 1 ? 227 * 1024 : gemv::kBulkSharedLimit) << what;
      EXPECT_EQ(l.sharedBytes, l.offSlots + l.slots * l.slotBytes) << what;
      EXPECT_GE(l.slotBytes, gemv::kBulkTileRows * l.boxBytes + l.scaleBytes) << what;
      for (int offset : {l.offX, l.offPartial, l.offSlots, l.slotBytes})
        EXPECT_EQ(offset % 128, 0) << what;
      EXPECT_GE(l.offX, gemv::kRowsBarrierBytes) << what;
      EXPECT_EQ(l.scaleBytes, gemv::kBulkTileRows * gemv::bulkRowScaleBytes(f.group, k)) << what;
    }
  // The 8B q4_g64 layers: four slots at K 4096 (one part), two at K 14,336 (seven).
  EXPECT_EQ(gemv::bulkRowsLayout(4, 64, 4096, 14336).slots, 4);
  EXPECT_EQ(gemv::rowsParts(4, 14336), 7);
  EXPECT_EQ(gemv::bulkRowsLayout(4, 64, 14336, 4096).slots, 2);
}

// One-token steps of quantized linears take the bulk-copy GEMV (gemv_quant_bulk.cuh) when
// every target is sm_90+ and the outputs are whole tiles of 16: a launch of its own for
// one-token steps (288 threads, its shared memory, a wrapper that leaves the dependency
// wait to the kernel) ahead of the GEMV for 2..8 rows; the lm_head's last row takes it in
// steps of any length; grouped q/k/v and gate/up (SwiGLU fused) launches take it as a group.
TEST(Nvrtc, OneTokenQuantGemvTakesBulkCopiesOnSm90) {
  struct Case {
    DType type;
    std::vector<std::string> archs;
    int out;
    int members; // 1: one linear and a last-row-only one; 2: gate/up + SwiGLU; 3: q/k/v
    const char *call; // the one-token call, or null: no bulk launch
  };
  const Case cases[] = {
      {DType::Q4_G64, {"sm_90"}, 384, 1, "linearQuantOneToken<4, 64, 0, false, 256, 384, 1>("},
      {DType::Q4_G64, {"sm_80", "sm_90"}, 384, 1, nullptr},
      {DType::Q4_G64, {"sm_90"}, 392, 1, nullptr},
      {DType::Q4_K16, {"sm_90"}, 384, 2, "linearQuantSwiGluOneToken<4, 16, 256, 384>("},
      {DType::Q3_G128, {"sm_90"}, 384, 3, "linearQuantOneToken<3, 128, 0, false, 256, 384, 1>("}};
  const int in = 256;
  for (const Case &c : cases) {
    const std::string what = std::string(plan::EnumNameDType(c.type)) + " on " + c.archs[0] +
                             ", " + std::to_string(c.members) + " x " + std::to_string(c.out);
    TestPlan t(16, 64);
    const uint32_t x = t.addActivation("x", in);
    std::vector<uint32_t> outputs;
    for (int m = 0; m < c.members; ++m) {
      outputs.push_back(t.addActivation("y" + std::to_string(m), c.out));
      const uint32_t w = t.addDummyWeight("w" + std::to_string(m), c.type, {c.out, in}, m, 0.05f, 0.0f);
      plan::LinearAttrsT a;
      a.in_features = in;
      a.out_features = c.out;
      t.addOp("linear", a, {x, w}, {outputs.back()});
    }
    if (c.members == 2) {
      plan::SwiGluAttrsT swi;
      swi.dim = c.out;
      t.addOp("swiglu", swi, {outputs[0], outputs[1]}, {t.addActivation("act", c.out)});
    }
    t.addLogits(1, c.out);
    const uint32_t lm = t.addDummyWeight("lm", c.type, {c.out, in}, 9, 0.05f, 0.0f);
    plan::LinearAttrsT last;
    last.in_features = in;
    last.out_features = c.out;
    last.last_row_only = true;
    t.addOp("lm_head", last, {x, lm}, {t.logits});
    KernelOptions options;
    options.archs = c.archs;
    options.embedPtx = false;
    Status status = emitKernels(t.plan, options);
    ASSERT_TRUE(status.isOk()) << what << ": " << status.message();
    const plan::KernelModuleT &kernels = *t.plan.kernels;
    const auto &first = t.plan.ops[0]->launches;
    const auto &head = t.plan.ops.back()->launches;
    ASSERT_EQ(head.size(), 1u) << what;
    const std::string headName = kernels.functions[head[0]->function];
    if (!c.call) {
      EXPECT_EQ(kernels.source.find("OneToken<"), std::string::npos) << what;
      EXPECT_EQ(head[0]->block[0], uint32_t(gemv::kBlockThreads)) << what;
      continue;
    }
    EXPECT_NE(kernels.source.find(c.call), std::string::npos) << what;
    ASSERT_EQ(first.size(), 3u) << what; // one token, 2..8 rows, the GEMM
    const std::string oneName = kernels.functions[first[0]->function];
    EXPECT_NE(oneName.find("_one"), std::string::npos) << what << ": " << oneName;
    EXPECT_EQ(first[0]->block[0], uint32_t(gemv::kBulkThreads)) << what;
    EXPECT_EQ(first[0]->max_tokens, 1u) << what;
    EXPECT_EQ(first[1]->min_tokens, 2u) << what;
    EXPECT_EQ(first[1]->max_tokens, 8u) << what;
    const bool swiGlu = c.members == 2;
    const int tiles = swiGlu ? c.out / 8 : c.members * c.out / gemv::kBulkTileRows;
    EXPECT_EQ(first[0]->grid_base[0], uint32_t(std::min(tiles, gemv::kBulkGridBlocks))) << what;
    const gemv::BulkLayout layout = gemv::bulkLayout(
        c.type == DType::Q3_G128 ? 3 : 4, c.type == DType::Q4_K16 ? 16 : c.type == DType::Q3_G128 ? 128 : 64,
        in, c.out, swiGlu);
    EXPECT_EQ(first[0]->shared_bytes, uint32_t(layout.sharedBytes)) << what;
    // The wrapper of the one-token kernel does not wait first; the others do.
    const size_t body = kernels.source.find(oneName + "(");
    ASSERT_NE(body, std::string::npos) << what;
    const std::string wrapper = kernels.source.substr(body, kernels.source.find("}\n", body) - body);
    EXPECT_EQ(wrapper.find("gridDependencyWait"), std::string::npos) << wrapper;
    // Other wrappers read the step's token count, wait, then let the next kernel launch
    // in one-token steps (common.cuh, gridDependencyTrigger).
    const size_t gemvBody = kernels.source.find(kernels.functions[first[1]->function] + "(");
    const size_t read = kernels.source.find("early = state->nTokens == 1;", gemvBody);
    const size_t wait = kernels.source.find("gridDependencyWait();", gemvBody);
    const size_t trigger = kernels.source.find("gridDependencyTrigger(early);", gemvBody);
    EXPECT_TRUE(read < wait && wait < trigger && trigger != std::string::npos) << what;
    // The lm_head's last row, in steps of any length.
    EXPECT_EQ(head[0]->block[0], uint32_t(gemv::kBulkThreads)) << what;
    EXPECT_EQ(head[0]->max_tokens, 0u) << what;
    EXPECT_NE(kernels.source.find(std::string("linearQuantOneToken<") +
                                  (c.type == DType::Q3_G128 ? "3, 128" : c.type == DType::Q4_K16 ? "4, 16" : "4, 64") +
                                  ", 0, false, 256, " + std::to_string(c.out) + ", 3>("),
              std::string::npos)
        << what;
  }
}

// KernelOptions::deepBulkRing (ninferc: every target card streams at least
// gemv::kDeepRingBandwidth) gives a wide one-token launch the deep ring's layout: the module
// defines NINFER_DEEP_BULK_RING, so the kernel takes the layout whose shared memory the
// launch has; where a target is below sm_90 (no bulk GEMV) or the option is off, neither.
TEST(Nvrtc, DeepBulkRingReachesKernelAndLaunch) {
  const int in = 4096, out = gemv::kBulkWideTiles * gemv::kBulkTileRows;
  for (bool deep : {false, true})
    for (const std::vector<std::string>& archs :
         {std::vector<std::string>{"sm_90a"}, std::vector<std::string>{"sm_89", "sm_90a"}}) {
      const std::string what = std::string(deep ? "deep ring" : "no deep ring") + " on " +
                               archs[0] + (archs.size() > 1 ? " and " + archs[1] : "");
      TestPlan t(16, 64);
      const uint32_t x = t.addActivation("x", in);
      const uint32_t w = t.addDummyWeight("w", DType::Q4_G64, {out, in}, 3, 0.05f, 0.0f);
      t.addLogits(16, out);
      plan::LinearAttrsT a;
      a.in_features = in;
      a.out_features = out;
      t.addOp("linear", a, {x, w}, {t.logits});
      KernelOptions options;
      options.archs = archs;
      options.embedPtx = archs.size() == 1; // compute_90a PTX: the kernel's barriers below
      options.deepBulkRing = deep;
      Status status = emitKernels(t.plan, options);
      ASSERT_TRUE(status.isOk()) << what << ": " << status.message();
      const plan::KernelModuleT& kernels = *t.plan.kernels;
      const bool takes = deep && archs.size() == 1;
      EXPECT_EQ(kernels.source.find("#define NINFER_DEEP_BULK_RING 1") != std::string::npos, takes)
          << what;
      if (archs.size() > 1)
        continue;
      const plan::LaunchT& one = *t.plan.ops[0]->launches[0];
      EXPECT_EQ(one.max_tokens, 1u) << what;
      const gemv::BulkLayout layout = gemv::bulkLayout(4, 64, in, out, false, deep);
      EXPECT_EQ(one.shared_bytes, uint32_t(layout.sharedBytes)) << what;
      EXPECT_EQ(layout.chunkUnits, deep ? 16 : 32) << what;
      // The kernel itself takes that layout: it sets up a full and an empty barrier per ring
      // slot and per scale buffer (five and four with the deep ring, two and three without).
      const std::string name = kernels.functions[one.function];
      const size_t entry = kernels.ptx.find(".entry " + name + "(");
      ASSERT_NE(entry, std::string::npos) << what;
      const std::string body = kernels.ptx.substr(entry, kernels.ptx.find("\n}", entry) - entry);
      size_t inits = 0;
      for (size_t at = body.find("mbarrier.init"); at != std::string::npos;
           at = body.find("mbarrier.init", at + 1))
        ++inits;
      EXPECT_EQ(inits, size_t(2 * (layout.slots + layout.scaleBuffers))) << what;
      EXPECT_EQ(inits, deep ? 18u : 10u) << what;
    }
}

// Steps of 2..8 rows of a quantized linear take gemv_quant_rows.cuh when every target is
// sm_90+ and its block groups get enough tiles (GemvShapes.h rowsPays): the launch for
// 2..8 rows has 320 threads, whole groups of K's parts, the layout's shared memory, and
// the weight's code plane as a TMA tensor map (box_bytes: a part of a code row). A narrow
// linear keeps the register-fed GEMV, and so does an sm_80 plan.
TEST(Nvrtc, WideQuantLinearTakesRowsKernelOnSm90) {
  struct Case {
    std::vector<std::string> archs;
    int in, out;
    bool rows; // takes gemv_quant_rows.cuh
  };
  const Case cases[] = {{{"sm_90"}, 2176, 25600, true},
                        {{"sm_90"}, 4224, 25600, true},
                        {{"sm_90"}, 2176, 384, false},
                        {{"sm_80", "sm_90"}, 2176, 25600, false}};
  for (const Case &c : cases) {
    const std::string what = c.archs[0] + ", " + std::to_string(c.in) + " -> " + std::to_string(c.out);
    ASSERT_EQ(gemv::rowsPays(4, c.in, c.out / gemv::kBulkTileRows), c.out == 25600) << what;
    TestPlan t(16, 64);
    const uint32_t x = t.addActivation("x", c.in);
    const uint32_t w = t.addDummyWeight("w", DType::Q4_G64, {c.out, c.in}, 3, 0.05f, 0.0f);
    t.addLogits(16, c.out);
    plan::LinearAttrsT a;
    a.in_features = c.in;
    a.out_features = c.out;
    t.addOp("linear", a, {x, w}, {t.logits});
    KernelOptions options;
    options.archs = c.archs;
    options.embedPtx = c.rows; // compute_90 PTX: the barrier check below
    Status status = emitKernels(t.plan, options);
    ASSERT_TRUE(status.isOk()) << what << ": " << status.message();
    const plan::KernelModuleT &kernels = *t.plan.kernels;
    const auto &launches = t.plan.ops[0]->launches;
    const bool sm90 = c.archs.size() == 1;
    ASSERT_EQ(launches.size(), sm90 ? 3u : 2u) << what; // (one token,) 2..8 rows, the GEMM
    const plan::LaunchT &gemv = *launches[sm90 ? 1 : 0];
    const std::string name = kernels.functions[gemv.function];
    EXPECT_EQ(name.find("_rows") != std::string::npos, c.rows) << what << ": " << name;
    EXPECT_EQ(kernels.tensor_maps.size(), c.rows ? 1u : 0u) << what;
    if (!c.rows) {
      EXPECT_EQ(gemv.block[0], uint32_t(gemv::kBlockThreads)) << what;
      continue;
    }
    const gemv::RowsLayout layout = gemv::bulkRowsLayout(4, 64, c.in, c.out);
    // 17 units: one part, a block per SM; 33 units: 16 + 16 + 1, two blocks per SM.
    const int parts = gemv::rowsParts(4, c.in), perSm = c.in == 2176 ? 1 : 2;
    EXPECT_EQ(parts, c.in == 2176 ? 1 : 3) << what;
    EXPECT_EQ(gemv.block[0], uint32_t(gemv::kRowsThreads)) << what;
    EXPECT_EQ(gemv.min_tokens, 2u) << what;
    EXPECT_EQ(gemv.max_tokens, 8u) << what;
    EXPECT_EQ(gemv.shared_bytes, uint32_t(layout.sharedBytes)) << what;
    EXPECT_EQ(gemv.grid_base[0], uint32_t(132 * perSm / parts * parts)) << what;
    const plan::TensorMapT &map = *kernels.tensor_maps[0];
    EXPECT_EQ(map.weight, w) << what;
    EXPECT_EQ(map.rows, uint32_t(c.out)) << what;
    EXPECT_EQ(map.cols, uint32_t(quant::quantRowWeightBytes(4, c.in))) << what;
    EXPECT_EQ(map.box_rows, uint32_t(gemv::kBulkTileRows)) << what;
    EXPECT_EQ(map.box_bytes, uint32_t(layout.boxBytes)) << what;
    EXPECT_EQ(layout.boxBytes, (c.in == 2176 ? 17 : 16) * 64) << what;
    // Every plain mbarrier arrive of the kernel (the threads' own, on its ring and fragment
    // barriers) comes after a fence since the thread's last shared memory access: without
    // it, some rows of blocks' first tiles came out wrong on the H200 (gemv_quant_rows.cuh).
    const size_t entry = kernels.ptx.find(".entry " + name + "(");
    ASSERT_NE(entry, std::string::npos) << what;
    const size_t end = kernels.ptx.find("\n}", entry);
    const std::string head = kernels.ptx.substr(entry, kernels.ptx.find('{', entry) - entry);
    EXPECT_NE(head.find(".minnctapersm " + std::to_string(perSm)), std::string::npos)
        << what << ": " << head;
    std::istringstream body(kernels.ptx.substr(entry, end - entry));
    int arrives = 0;
    bool fenced = false;
    for (std::string line; std::getline(body, line);) {
      if (line.find("ld.shared") != std::string::npos || line.find("st.shared") != std::string::npos)
        fenced = false;
      else if (line.find("membar.cta") != std::string::npos || line.find("fence.") != std::string::npos)
        fenced = true;
      else if (line.find("mbarrier.arrive.shared::cta.b64 _,") != std::string::npos) {
        ++arrives;
        EXPECT_TRUE(fenced) << what << ": an arrive without a fence before it: " << line;
      }
    }
    EXPECT_GE(arrives, 3) << what; // empty, tileDone, partialFree
  }
}

// The attention kernels for every cache dtype, GQA ratio, window and head_dim
// the parity test runs, compiled for sm_75..sm_90; launch shapes as documented
// in attention.cuh (decode: kv heads x head chunks by splits; prefill: heads by
// tokens, shared memory within sm_75's 64 KiB).
TEST(Nvrtc, AttentionVariantsCompile) {
  struct Case {
    int heads, kvHeads, headDim, window;
    DType cache;
    uint32_t decodeBlocks;
  };
  const int context = 5000;
  const std::vector<Case> cases = {
      {8, 8, 64, 0, DType::F16, 8},    {32, 8, 128, 0, DType::F16, 8},
      {16, 2, 128, 0, DType::Q8_KV, 2}, {8, 1, 256, 100, DType::F16, 1},
      {32, 1, 64, 0, DType::Q8_KV, 4},  {6, 3, 96, 7, DType::Q8_KV, 3},
      {4, 2, 48, 0, DType::F16, 2},     {12, 2, 80, 0, DType::Q8_KV, 2}};
  // sm_75 among the targets: CUDA-core decode and prefill everywhere. sm_80+ only: caches of
  // head_dim % 16 == 0 and <= 128 decode on tensor cores, and f16 ones prefill there too.
  for (bool tensorCores : {false, true}) {
    TestPlan t(512, context);
    const uint32_t workspace = t.addWorkspace("workspace", 8u << 20);
    for (const Case &c : cases) {
      const uint32_t q = t.addActivation("q", c.heads * c.headDim);
      const uint32_t k = t.addActivation("k", c.kvHeads * c.headDim);
      const uint32_t v = t.addActivation("v", c.kvHeads * c.headDim);
      const uint32_t o = t.addActivation("o", c.heads * c.headDim);
      t.addOp("attention",
              test::attentionAttrs(c.heads, c.kvHeads, c.headDim, 0.125f, context, c.window),
              {q, k, v, t.addKvCache("kc", context, c.kvHeads, c.headDim, c.cache),
               t.addKvCache("vc", context, c.kvHeads, c.headDim, c.cache), workspace},
              {o});
    }
    KernelOptions options;
    options.archs = tensorCores ? std::vector<std::string>{"sm_80", "sm_90"}
                                : std::vector<std::string>{"sm_75", "sm_86", "sm_90"};
    options.embedPtx = false;
    Status status = emitKernels(t.plan, options);
    ASSERT_TRUE(status.isOk()) << status.message();
    EXPECT_EQ(t.plan.kernels->cubins.size(), options.archs.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case &c = cases[i];
      const auto &launches = t.plan.ops[i]->launches;
      ASSERT_EQ(launches.size(), 3u);
      const bool mma = tensorCores && c.headDim % 16 == 0 && c.headDim <= 128;
      const bool mmaPrefill = mma && c.cache == DType::F16;
      // A layer of blocks (grid z) per split: up to 64 (kMaxDecodeSplits), and on tensor cores
      // up to 32, the most its rule takes (kDecodeMmaMaxSplits).
      EXPECT_EQ(launches[1]->grid_base,
                (std::vector<uint32_t>{c.decodeBlocks, 1, mma ? 32u : 64u}));
      EXPECT_EQ(launches[1]->grid_per_token, (std::vector<uint32_t>{0, 0, 0}));
      EXPECT_EQ(launches[0]->min_tokens, 0u); // the append runs in every step
      EXPECT_EQ(launches[0]->max_tokens, 0u);
      EXPECT_EQ(launches[1]->min_tokens, 1u); // decode: 1-token steps only
      EXPECT_EQ(launches[1]->max_tokens, 1u);
      EXPECT_EQ(launches[2]->min_tokens, 2u); // prefill: the others
      EXPECT_EQ(launches[2]->max_tokens, 0u);
      // Prefill: on tensor cores a block per (head, 64 queries of the longest step), two
      // stages of a 64-key K and V tile; else a block row per token.
      EXPECT_EQ(launches[2]->grid_base[0], uint32_t(c.heads));
      EXPECT_EQ(launches[2]->grid_base[1], mmaPrefill ? 512u / 64 : 0u);
      EXPECT_EQ(launches[2]->grid_per_token, (std::vector<uint32_t>{0, mmaPrefill ? 0u : 1u, 0}));
      if (mmaPrefill)
        EXPECT_EQ(launches[2]->shared_bytes, 2u * 2 * 64 * (c.headDim + 8) * 2);
      else
        EXPECT_LE(launches[2]->shared_bytes, 64u * 1024);
      EXPECT_GT(launches[2]->shared_bytes, 0u);
      const std::string prefill =
          std::string(mmaPrefill ? "attentionPrefillMma<" : "attentionPrefill<") +
          std::to_string(c.heads) + ", " + std::to_string(c.kvHeads) + ", " +
          std::to_string(c.headDim) + ", ";
      EXPECT_NE(t.plan.kernels->source.find(prefill), std::string::npos) << prefill;
      const std::string decode = std::string(mma ? "attentionDecodeMma<" : "attentionDecode<") +
                                 std::to_string(c.heads) + ", " + std::to_string(c.kvHeads) + ", " +
                                 std::to_string(c.headDim) + ", " + std::to_string(c.window) +
                                 ", " + std::to_string(context) + ", " +
                                 std::to_string(int(c.cache)) + ", ";
      EXPECT_NE(t.plan.kernels->source.find(decode), std::string::npos) << decode;
      // Batch rows' partials are read as float4: every row's workspace stays aligned.
      EXPECT_EQ(attentionWorkspaceBytes(c.heads, c.kvHeads, c.headDim, context) % 16, 0u);
      // Two stages of a 16-key K and V tile per warp, rows padded by 8 halves.
      EXPECT_EQ(launches[1]->shared_bytes, mma ? 4u * 4 * 16 * (c.headDim + 8) * 2 : 0u)
          << decode;
    }
  }
  // A workspace smaller than the decode partials is refused, naming the op.
  TestPlan small(8, context);
  const uint32_t q = small.addActivation("q", 64);
  small.addOp("attention", test::attentionAttrs(1, 1, 64, 0.125f, context),
              {q, small.addActivation("k", 64), small.addActivation("v", 64),
               small.addKvCache("kc", context, 1, 64), small.addKvCache("vc", context, 1, 64),
               small.addWorkspace("ws", 256)},
              {small.addActivation("o", 64)});
  KernelOptions options;
  options.archs = {"sm_90"};
  Status refused = emitKernels(small.plan, options);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.message().find("workspace buffer 'ws'"), std::string::npos)
      << refused.message();
}

TEST(Nvrtc, SyntaxErrorCarriesLog) {
  Result<std::string> result =
      nvrtc::compile("extern \"C\" __global__ void broken() { int x = ; }\n", "broken.cu", "sm_90");
  ASSERT_FALSE(result.isOk());
  const std::string &message = result.status().message();
  EXPECT_NE(message.find("broken.cu"), std::string::npos) << message;
  EXPECT_NE(message.find("error"), std::string::npos) << message;
  EXPECT_NE(message.find("expected an expression"), std::string::npos) << message;
}

TEST(Nvrtc, RejectsBadArch) {
  Result<std::string> result = nvrtc::compile("", "x.cu", "sm_x");
  ASSERT_FALSE(result.isOk());
  EXPECT_NE(result.status().message().find("sm_x"), std::string::npos);
  TestPlan t = smallModel(DType::F32);
  KernelOptions options;
  options.archs = {"gfx90a"};
  Status status = emitKernels(t.plan, options);
  EXPECT_FALSE(status.isOk());
  options.archs.clear();
  EXPECT_FALSE(emitKernels(t.plan, options).isOk());
}

TEST(Nvrtc, RejectsInvalidOpNamingIt) {
  TestPlan t = smallModel(DType::F32);
  t.plan.ops[2]->attrs.AsLinearAttrs()->in_features = 65; // weight is [64, 64]
  KernelOptions options;
  options.archs = {"sm_90"};
  Status status = emitKernels(t.plan, options);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("op 2 'q' (LinearAttrs)"), std::string::npos) << status.message();

  TestPlan u = smallModel(DType::F32);
  u.plan.ops[7]->attrs.AsAttentionAttrs()->kv_heads = 3;
  status = emitKernels(u.plan, options);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("not a multiple of kv_heads"), std::string::npos)
      << status.message();
}

TEST(Nvrtc, ArchNumbers) {
  EXPECT_EQ(nvrtc::archNumber("sm_90"), 90);
  EXPECT_EQ(nvrtc::archNumber("sm_90a"), 90);
  EXPECT_EQ(nvrtc::archNumber("compute_80"), 80);
  EXPECT_EQ(nvrtc::archNumber("sm_"), -1);
  EXPECT_EQ(nvrtc::archNumber("sm_90x"), -1);
  EXPECT_EQ(nvrtc::archNumber("gfx"), -1);
}

} // namespace
} // namespace ninfer
