// Batched decode on the CUDA executor (plans of several sequences): a batch step
// of up to 8 sequences at different positions against (1) the same sequences run
// alone in single-sequence one-token steps on the CUDA executor, and (2) the CPU
// executor's batch step (the reference, itself bit-identical to its
// single-sequence steps, tests/runtime/CpuBatchTest.cpp). Every batch size 1..8,
// prompts of different lengths (prefilled into their own slots in 64-token
// chunks), rows in another order than the slots, four decode steps.
//   BatchParity.TinyModel: the hand-built two-layer model of TinyModelPlan.h with
//     f16 weights or dummy q4_g64 linears, f16 or int8 KV caches.
//   BatchParity.PlanFiles: plans compiled beforehand (ninferc --batch N), named
//     by $NINFER_BATCH_PLANS (comma-separated paths); skipped when unset.
// Skips (GTEST_SKIP) when libcuda.so.1 cannot be loaded or there is no GPU.
// BatchEmit.* need no GPU (CI): the launch layout the emitter writes for a plan
// of several sequences, and its kernels compiled by NVRTC for sm_80 and sm_90.
#include "BatchRun.h"
#include "GpuParity.h"
#include "TinyModelPlan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace ninfer {
namespace {

using plan::DType;
using test::gpu;
using test::LogitsGap;

struct Executors {
  std::unique_ptr<PlanFile> file;
  std::unique_ptr<Executor> cpu, cuda;
};

Executors open(const std::string &path) {
  Executors e;
  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(path);
  EXPECT_TRUE(file.isOk()) << file.status().message();
  if (!file.isOk())
    return e;
  e.file = std::move(*file);
  Result<std::unique_ptr<Executor>> cpu = createCpuExecutor(*e.file, 0);
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(*e.file, 0);
  EXPECT_TRUE(cpu.isOk()) << cpu.status().message();
  EXPECT_TRUE(cuda.isOk()) << cuda.status().message();
  if (cpu.isOk() && cuda.isOk()) {
    e.cpu = std::move(*cpu);
    e.cuda = std::move(*cuda);
  }
  return e;
}

// Every batch size of the plan: CUDA batched against CUDA alone (bound
// `aloneBound`: the same kernels on the same rows; the one-row GEMV is its own
// instantiation, so rounding may differ, hence a bound not equality) and against
// the CPU batch step (bound `cpuBound`). A row run against the wrong sequence,
// position or slot is off by an nMSE of order 1. Prompts of `shortest` tokens or more.
void expectBatchParity(Executors &e, const std::string &what, int idVocab, int scheduleContext,
                       double aloneBound, double cpuBound, int shortest = 1) {
  ASSERT_TRUE(e.cpu && e.cuda) << what;
  const plan::Plan &p = e.file->plan();
  const int vocab = p.model()->vocab_size(), maxStep = p.max_step_tokens();
  const int slots = p.max_batch();
  for (int batch = 1; batch <= slots; ++batch) {
    const test::BatchSchedule s =
        test::makeBatchSchedule(batch, slots, idVocab, scheduleContext, 4, batch, shortest);
    std::vector<std::vector<float>> cudaBatched, cudaAlone, cpuBatched;
    Status a = test::runBatched(*e.cuda, s, vocab, maxStep, cudaBatched);
    Status b = test::runAlone(*e.cuda, s, vocab, maxStep, false, cudaAlone);
    Status c = test::runBatched(*e.cpu, s, vocab, maxStep, cpuBatched);
    ASSERT_TRUE(a.isOk()) << what << ": " << a.message();
    ASSERT_TRUE(b.isOk()) << what << ": " << b.message();
    ASSERT_TRUE(c.isOk()) << what << ": " << c.message();
    const LogitsGap alone = test::logitsGap(cudaBatched, cudaAlone);
    const LogitsGap cpu = test::logitsGap(cudaBatched, cpuBatched);
    EXPECT_LE(alone.nmse, aloneBound) << what << ": batch " << batch << " against alone";
    EXPECT_LE(cpu.nmse, cpuBound) << what << ": batch " << batch << " against the CPU";
    std::printf("[batch] %-44s batch %d: vs alone nMSE %.3g (%zu values differ, max %.3g); "
                "vs cpu nMSE %.3g\n",
                what.c_str(), batch, alone.nmse, alone.differing, alone.maxAbs, cpu.nmse);
  }
}

// The launches of op `name`, as (kernel suffix, steps, min, max, grid base and per token
// y and z) rows.
struct LaunchRow {
  std::string kernel;
  plan::LaunchSteps steps;
  uint32_t minTokens, maxTokens, yBase, yPerToken, zBase, zPerToken;
  uint32_t function;
};

std::vector<LaunchRow> launchesOf(const plan::PlanT &p, const std::string &name) {
  std::vector<LaunchRow> rows;
  for (const auto &op : p.ops)
    if (op->name == name)
      for (const auto &l : op->launches) {
        const std::string &fn = p.kernels->functions[l->function];
        rows.push_back({fn.substr(fn.find('_') + 1), l->steps, l->min_tokens, l->max_tokens,
                        l->grid_base[1], l->grid_per_token[1], l->grid_base[2],
                        l->grid_per_token[2], l->function});
      }
  return rows;
}

test::TestPlan emittedTinyModel(int maxBatch, bool quant, DType cache,
                                std::vector<std::string> archs = {"sm_90"}, int context = 128) {
  test::TinyModelOptions options;
  options.context = context;
  options.dummy = true;
  options.linearsSet = quant;
  options.linears = DType::Q4_G64;
  options.cache = cache;
  options.maxBatch = maxBatch;
  test::TestPlan t = test::tinyModel(options);
  KernelOptions kernels;
  kernels.archs = std::move(archs);
  kernels.embedPtx = false;
  Status emitted = emitKernels(t.plan, kernels);
  EXPECT_TRUE(emitted.isOk()) << emitted.message();
  return t;
}

TEST(BatchEmit, LaunchLayoutOfAPlanOfSeveralSequences) {
  using S = plan::LaunchSteps;
  // Context 512: 16 splits of 32 keys in the decode workspace.
  test::TestPlan many = emittedTinyModel(8, false, DType::F16, {"sm_90"}, 512);
  test::TestPlan one = emittedTinyModel(1, false, DType::F16);
  ASSERT_TRUE(many.plan.kernels && one.plan.kernels);

  // The lm_head: its one-row GEMV in single-sequence steps, the GEMV of every
  // row (a row per sequence) in batch steps of up to 8.
  const std::vector<LaunchRow> head = launchesOf(many.plan, "lm_head");
  ASSERT_EQ(head.size(), 2u);
  EXPECT_EQ(head[0].kernel, "linear");
  EXPECT_EQ(head[0].steps, S::Sequence);
  EXPECT_EQ(head[1].kernel, "linear_gemv");
  EXPECT_EQ(head[1].steps, S::Batch);
  EXPECT_EQ(head[1].maxTokens, 8u);

  // Attention: no append (the fused RoPE launch or the one-token decode kernel appends), the
  // decode kernel without the RoPE once per row of a batch step (grid y = rows, z = at most
  // kBatchDecodeSplits splits) as a launch of its own, prefill in single-sequence steps only.
  // The split is grid z in both, so blocks of empty splits are dispatched last.
  const std::vector<LaunchRow> attention = launchesOf(many.plan, "l1.attn");
  ASSERT_EQ(attention.size(), 3u);
  EXPECT_EQ(attention[0].kernel, "attention_decode");
  EXPECT_EQ(attention[0].steps, S::Sequence);
  EXPECT_EQ(attention[0].maxTokens, 1u);
  EXPECT_EQ(attention[0].yBase, 1u);
  EXPECT_EQ(attention[0].yPerToken, 0u);
  EXPECT_EQ(attention[0].zBase, 16u);
  EXPECT_EQ(attention[0].zPerToken, 0u);
  EXPECT_EQ(attention[1].kernel, "attention_decode");
  EXPECT_NE(attention[1].function, attention[0].function);
  EXPECT_EQ(attention[1].steps, S::Batch);
  EXPECT_EQ(attention[1].maxTokens, 8u);
  EXPECT_EQ(attention[1].yBase, 0u);
  EXPECT_EQ(attention[1].yPerToken, 1u);
  EXPECT_EQ(attention[1].zBase, 8u);
  EXPECT_EQ(attention[1].zPerToken, 0u);
  EXPECT_EQ(attention[2].kernel, "attention_prefill");
  EXPECT_EQ(attention[2].steps, S::Sequence);
  // The batch launch takes the batch split rule, the single-sequence one the balanced rule
  // (AttentionShapes.h).
  const std::string &source = many.plan.kernels->source;
  auto callOf = [&](uint32_t function) {
    const size_t at = source.find(" " + many.plan.kernels->functions[function] + "(");
    return at == std::string::npos ? std::string() : source.substr(at, source.find("\n}\n", at) - at);
  };
  EXPECT_NE(callOf(attention[1].function).find("attentionDecodeMma<"), std::string::npos);
  EXPECT_NE(callOf(attention[1].function).find(", ninfer::attn::kSplitBatch>("),
            std::string::npos);
  EXPECT_NE(callOf(attention[0].function).find("attentionDecodeMma<"), std::string::npos);
  EXPECT_EQ(callOf(attention[0].function).find("kSplitBatch"), std::string::npos);
  // The batch launch waits itself (after copying cache tiles of earlier steps), so its
  // wrapper does not wait first.
  EXPECT_EQ(callOf(attention[1].function).find("gridDependencyWait"), std::string::npos);
  // Multi-row GEMV steps stage x in shared memory in plans of several sequences only.
  EXPECT_NE(many.plan.kernels->source.find("#define NINFER_GEMV_STAGE_X 1"), std::string::npos);
  EXPECT_EQ(one.plan.kernels->source.find("NINFER_GEMV_STAGE_X"), std::string::npos);
  // Both decode launches and both lm_head launches pass the same buffers (the batch
  // launch once passed none: a null-pointer read on the GPU).
  for (const auto &op : many.plan.ops)
    if (op->name == "l1.attn" || op->name == "lm_head") {
      const size_t batchLaunch = 1;
      EXPECT_FALSE(op->launches[batchLaunch]->args.empty()) << op->name;
      EXPECT_EQ(op->launches[batchLaunch]->args, op->launches[batchLaunch - 1]->args) << op->name;
    }

  // The fusions still happen: RoPE + append in batch steps and in single-sequence steps of
  // 2 tokens or more (in one-token steps the tensor-core decode kernel rotates and appends),
  // the grouped q/k/v GEMV in both kinds of step.
  const std::vector<LaunchRow> ropeQ = launchesOf(many.plan, "l0.rope_q");
  ASSERT_EQ(ropeQ.size(), 2u);
  EXPECT_EQ(ropeQ[0].kernel, "rope_append");
  EXPECT_EQ(ropeQ[0].steps, S::Sequence);
  EXPECT_EQ(ropeQ[0].minTokens, 2u);
  EXPECT_EQ(ropeQ[0].maxTokens, 0u);
  EXPECT_EQ(ropeQ[1].kernel, "rope_append");
  EXPECT_EQ(ropeQ[1].steps, S::Batch);
  EXPECT_EQ(ropeQ[1].minTokens, 0u);
  // The batch launch is a kernel of its own that lets the decode attention after it start
  // early in batch steps too; the single-sequence one triggers in one-token steps only.
  EXPECT_NE(ropeQ[1].function, ropeQ[0].function);
  EXPECT_NE(callOf(ropeQ[1].function).find("early = state->nTokens == 1 || state->batch > 0;"),
            std::string::npos);
  EXPECT_NE(callOf(ropeQ[0].function).find("early = state->nTokens == 1;"), std::string::npos);
  EXPECT_TRUE(launchesOf(many.plan, "l0.rope_k").empty());
  const std::vector<LaunchRow> q = launchesOf(many.plan, "l0.q");
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].kernel, "linear_group3_gemv");
  EXPECT_EQ(q[0].steps, S::Any);

  // Every other launch runs in both kinds of step (but those above); in the plan of one
  // sequence every launch is single-sequence, with one launch less per attention op, RoPE
  // and for the lm_head, and otherwise the same launches; the kernels are those, the
  // decode attention without the RoPE and the RoPE launch of batch steps.
  size_t manyLaunches = 0, oneLaunches = 0;
  for (const auto &op : many.plan.ops)
    for (const auto &l : op->launches) {
      ++manyLaunches;
      if (op->name != "lm_head" && op->name.find(".attn") == std::string::npos &&
          op->name.find(".rope_q") == std::string::npos) {
        EXPECT_EQ(l->steps, S::Any) << op->name;
      }
    }
  for (const auto &op : one.plan.ops)
    for (const auto &l : op->launches) {
      ++oneLaunches;
      EXPECT_EQ(l->steps, S::Sequence) << op->name;
    }
  EXPECT_EQ(manyLaunches, oneLaunches + 5); // two attention ops, two RoPE, the lm_head
  EXPECT_EQ(many.plan.kernels->functions.size(), one.plan.kernels->functions.size() + 3);
}

// f16 or q4 linears (the quantized GEMV for the lm_head's rows, and the q/k/v group's
// shared memory within 48 KB) with f16 caches (the fused RoPE + append) or int8 caches
// (the separate append).
TEST(BatchEmit, KernelsCompileForSm80AndSm90) {
  for (const auto &[cache, quant] :
       {std::pair{DType::F16, false}, std::pair{DType::Q8_KV, false}, std::pair{DType::F16, true},
        std::pair{DType::Q8_KV, true}}) {
      test::TestPlan t = emittedTinyModel(8, quant, cache, {"sm_80", "sm_90"});
      ASSERT_TRUE(t.plan.kernels);
      EXPECT_EQ(t.plan.kernels->cubins.size(), 2u);
      for (const auto &cubin : t.plan.kernels->cubins)
        EXPECT_GT(cubin->cubin.size(), 1000u) << cubin->arch;
    }
}

TEST(BatchEmit, RefusesCachesWithoutASlotPerSequence) {
  test::TinyModelOptions options;
  options.maxBatch = 4;
  test::TestPlan t = test::tinyModel(options);
  // A cache holding one sequence where the plan has four.
  for (auto &b : t.plan.buffers)
    if (b->kind == plan::BufferKind::KvCache)
      b->size_bytes /= 4;
  KernelOptions kernels;
  kernels.archs = {"sm_90"};
  Status emitted = emitKernels(t.plan, kernels);
  ASSERT_FALSE(emitted.isOk());
  EXPECT_NE(emitted.message().find("cache buffer 'l0.k_cache' holds"), std::string::npos)
      << emitted.message();
  test::TestPlan bad = test::tinyModel(test::TinyModelOptions{});
  bad.plan.max_batch = 9;
  Status nine = emitKernels(bad.plan, kernels);
  EXPECT_NE(nine.message().find("plan has max_batch 9, expected 1 to 8"), std::string::npos)
      << nine.message();
}

TEST(BatchParity, TinyModel) {
  REQUIRE_GPU();
  struct Case {
    const char *name;
    bool quant; // dummy q4_g64 linears (else real f16 weights)
    DType cache;
    // Against the same sequences run alone: one-token steps of quantized linears take
    // their own GEMV path (gemv_quant_mma.cuh OneToken), which rounds once in f32 where
    // the several-row path rounds every weight to f16 (measured: nMSE 2.5e-8 to 4e-8).
    double aloneBound;
    double cpuBound; // the TinyModel bounds of OpParityTest
    int ffn = 512;   // 12,800: the gate/up pair's steps of 2..8 rows take the multi-row
                     // kernel with the SwiGLU fused (gemv_quant_rows.cuh) on sm_90
    int context = 128; // 512: prompts of 300 tokens or more, so batch steps' decode attention
                       // takes several splits of >= 128 keys (kSplitBatch)
  };
  for (const Case &c : {Case{"f16 weights, f16 KV", false, DType::F16, 1e-9, 1e-5},
                        Case{"f16 weights, int8 KV", false, DType::Q8_KV, 1e-9, 1e-5},
                        Case{"q4_g64 linears, f16 KV", true, DType::F16, 1e-6, 1e-4},
                        Case{"q4_g64 linears, int8 KV", true, DType::Q8_KV, 1e-6, 1e-4},
                        Case{"q4_g64 linears, MLP 12800 wide", true, DType::F16, 1e-6, 1e-4,
                             12800},
                        Case{"f16 weights, f16 KV, context 512", false, DType::F16, 1e-9, 1e-5,
                             512, 512}}) {
    test::TinyModelOptions options;
    options.type = DType::F16;
    options.dummy = c.quant;
    options.linearsSet = c.quant;
    options.linears = DType::Q4_G64;
    options.cache = c.cache;
    options.maxBatch = 8;
    options.ffn = c.ffn;
    options.swiGluOwnOutput = c.ffn != 512;
    options.context = c.context;
    test::TestPlan t = test::tinyModel(options);
    KernelOptions kernels;
    kernels.archs = {gpu().codeArch};
    kernels.embedPtx = false;
    ASSERT_TRUE(emitKernels(t.plan, kernels).isOk()) << c.name;
    const std::string path = test::tempPlanPath("batch");
    ASSERT_TRUE(t.write(path).isOk()) << c.name;
    Executors e = open(path);
    std::remove(path.c_str()); // the mapping stays valid
    expectBatchParity(e, std::string("TinyModel ") + c.name, test::kTokenVocab,
                      t.plan.context, c.aloneBound, c.cpuBound, c.context > 128 ? 300 : 1);
  }
}

TEST(BatchParity, PlanFiles) {
  REQUIRE_GPU();
  const char *list = std::getenv("NINFER_BATCH_PLANS");
  if (!list || !*list)
    GTEST_SKIP() << "set NINFER_BATCH_PLANS to plans compiled with ninferc --batch N";
  std::stringstream paths(list);
  std::string path;
  while (std::getline(paths, path, ',')) {
    if (path.empty())
      continue;
    Executors e = open(path);
    ASSERT_TRUE(e.file) << path;
    EXPECT_GT(e.file->plan().max_batch(), 1) << path << " holds one sequence";
    // Prompts of 150 to 300 positions: several decode splits of >= 128 keys (kSplitBatch).
    const int context = std::min(e.file->plan().context(), 300);
    expectBatchParity(e, path, e.file->plan().model()->vocab_size(), context, 1e-6, 1e-3,
                      context / 2);
  }
}

// The CUDA executor refuses what the CPU one refuses, with the same words.
TEST(BatchParity, RejectsBadBatchSteps) {
  REQUIRE_GPU();
  test::TinyModelOptions options;
  options.maxBatch = 4;
  test::TestPlan t = test::tinyModel(options);
  KernelOptions kernels;
  kernels.archs = {gpu().codeArch};
  kernels.embedPtx = false;
  ASSERT_TRUE(emitKernels(t.plan, kernels).isOk());
  const std::string path = test::tempPlanPath("batch_errors");
  ASSERT_TRUE(t.write(path).isOk());
  Executors e = open(path);
  std::remove(path.c_str());
  ASSERT_TRUE(e.cuda);
  std::vector<int32_t> tokens(8, 1), positions(8, 3), sequences = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<float> logits(8 * 300);
  Status tooMany = e.cuda->forwardBatch(tokens.data(), positions.data(), sequences.data(), 5,
                                        logits.data());
  EXPECT_NE(tooMany.message().find("got 5: compile the plan with ninferc --batch 5"),
            std::string::npos)
      << tooMany.message();
  sequences[1] = 0;
  Status twice = e.cuda->forwardBatch(tokens.data(), positions.data(), sequences.data(), 2,
                                      logits.data());
  EXPECT_NE(twice.message().find("sequence 0 appears twice"), std::string::npos)
      << twice.message();
  sequences[1] = 1;
  positions[0] = 128;
  Status past = e.cuda->forwardBatch(tokens.data(), positions.data(), sequences.data(), 2,
                                     logits.data());
  EXPECT_NE(past.message().find("exceeds the plan's context of 128"), std::string::npos)
      << past.message();
}

// `ninfer bench --batch B --profile`: a batch step timed launch by launch times the launches
// of batch steps (their own launches and those of every step), not those of single-sequence
// steps; a batch of one those of a single-sequence step; and it refuses what forwardBatch
// refuses.
TEST(BatchParity, ProfilesABatchStep) {
  REQUIRE_GPU();
  test::TestPlan t = emittedTinyModel(4, true, DType::F16, {gpu().codeArch});
  const std::string path = test::tempPlanPath("batch_profile");
  ASSERT_TRUE(t.write(path).isOk());
  Executors e = open(path);
  std::remove(path.c_str());
  ASSERT_TRUE(e.cuda);
  std::map<std::pair<uint32_t, uint32_t>, plan::LaunchSteps> kinds; // (op, function)
  int batchOnly = 0;
  for (size_t op = 0; op < t.plan.ops.size(); ++op)
    for (const auto &l : t.plan.ops[op]->launches) {
      kinds[{uint32_t(op), l->function}] = l->steps;
      batchOnly += l->steps == plan::LaunchSteps::Batch;
    }
  ASSERT_GT(batchOnly, 0) << "the plan has no launches of its own for batch steps";
  std::vector<int32_t> tokens = {5, 6, 7}, positions = {3, 9, 4}, sequences = {2, 0, 1};
  Result<std::vector<LaunchTiming>> timed =
      e.cuda->profileBatchStep(tokens.data(), positions.data(), sequences.data(), 3);
  ASSERT_TRUE(timed.isOk()) << timed.status().message();
  int timedBatchOnly = 0;
  for (const LaunchTiming &l : *timed) {
    auto kind = kinds.find({l.op, l.function});
    ASSERT_NE(kind, kinds.end()) << "op " << l.op << " has no launch of function " << l.function;
    EXPECT_NE(kind->second, plan::LaunchSteps::Sequence) << "op " << l.op;
    EXPECT_GT(l.microseconds, 0.0) << "op " << l.op;
    timedBatchOnly += kind->second == plan::LaunchSteps::Batch;
  }
  EXPECT_EQ(timedBatchOnly, batchOnly);
  // A batch of one runs as a single-sequence step: none of the batch steps' own launches.
  Result<std::vector<LaunchTiming>> one =
      e.cuda->profileBatchStep(tokens.data(), positions.data(), sequences.data(), 1);
  ASSERT_TRUE(one.isOk()) << one.status().message();
  EXPECT_FALSE(one->empty());
  for (const LaunchTiming &l : *one)
    EXPECT_NE((kinds[{l.op, l.function}]), plan::LaunchSteps::Batch) << "op " << l.op;
  sequences[1] = 2;
  Result<std::vector<LaunchTiming>> twice =
      e.cuda->profileBatchStep(tokens.data(), positions.data(), sequences.data(), 3);
  ASSERT_FALSE(twice.isOk());
  EXPECT_NE(twice.status().message().find("sequence 2 appears twice"), std::string::npos)
      << twice.status().message();
}

} // namespace
} // namespace ninfer
