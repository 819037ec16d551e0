// Which launches the kernel emitter (KernelEmitter.cpp) shares between ops, decided over
// the whole plan before any kernel is written: consecutive linears with one input in one
// GEMV grid (q/k/v, gate/up), the SwiGLU computed by its gate/up GEMV, RoPE of q and k with
// the KV append (in decode steps by the attention kernel), and RMSNorms computed by the
// GEMVs that read them.
#pragma once

#include "PlanQueries.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ninfer {

// Most linear ops one grouped GEMV launch covers (q, k, v).
constexpr size_t kMaxLinearGroup = 3;

// Steps of any token count (LaunchFusions::normRunsFrom).
constexpr uint32_t kEveryStep = UINT32_MAX;

// The most weight bytes of an f16/bf16/f32 linear that an RMSNorm is fused into.
constexpr uint64_t kNormFusionMaxWeightBytes = uint64_t(16) << 20;

// Consecutive linear ops that read the same input and share one GEMV launch
// (decode steps; longer steps run each op's GEMM): q/k/v, gate/up.
struct LinearGroup {
  size_t head = 0;
  size_t size = 1;
};

// RoPE of q, RoPE of k and the KV append of the Attention op after them as one
// launch (f16 caches), carried by the first Rope op. decodeRopes: the tensor-core decode
// kernel rotates and appends itself in single-sequence one-token steps (no other op reads
// the rotated q or k), so that launch runs the longer steps and batch steps only.
struct RopeAppend {
  size_t first = 0, second = 0, attention = 0; // op indices
  bool decodeRopes = false;
};

// What the targets and options allow.
struct FusionChoices {
  bool fuseLaunches = true;   // KernelOptions::fuseLaunches; off: none of the fusions
  bool tensorCoreGemm = true; // every target is sm_80+ (the quantized SwiGLU GEMV)
  bool bulkGemv = false;      // every target is sm_90+ (gemv_quant_bulk.cuh)
  bool wgmmaGemm = false;     // every target is sm_90a: prefill GEMMs on gemm_wgmma.cuh
  bool fuseNorms = true;      // RMSNorms into their readers (NINFER_NO_NORM_FUSION unset)
  bool deepBulkRing = false;  // KernelOptions::deepBulkRing, with bulkGemv (GemvShapes.h)
};

// Whether decode attention runs on tensor cores (attentionDecodeMma): sm_80+ targets, f16
// or int8 caches, head_dim 16..128 in steps of 16.
bool tensorCoreDecode(const FusionChoices &choices, plan::DType kvType, int headDim);
// Whether prefill attention does (attentionPrefillMma, which also writes the 16-bit x of
// the GEMM after it): where decode does, with f16 caches.
bool tensorCorePrefill(const FusionChoices &choices, plan::DType kvType, int headDim);

struct LaunchFusions {
  // Op index -> its group (a group of one where it has none).
  std::vector<LinearGroup> linearGroups;
  // Group head -> the SwiGLU op fused into its decode launch, or -1; SwiGLU op ->
  // whether it is.
  std::vector<int> swiGluOfGroup;
  std::vector<bool> swiGluFused;
  // sm_90a: fused SwiGLU op -> the 16-bit type (plan DType) in which its gate/up group's
  // GEMM writes silu(gate) * up in long steps, as the x of the next op (the down
  // projection), into a workspace of its own (0: not fused; else the SwiGLU op has no
  // launch); linear op -> the SwiGLU op whose GEMM writes its x so, or -1.
  std::vector<int> swiGluGemmType;
  std::vector<int> swiGluGemmOf;
  std::vector<RopeAppend> ropeAppends;
  // Op index -> index into ropeAppends, or -1.
  std::vector<int> ropeAppendOf;
  // Linear op -> the RMSNorm op fused into its GEMV launches, or -1; RMSNorm op -> the
  // fewest tokens of the steps its own launch runs (0: all; kEveryStep: none).
  std::vector<int> normOf;
  std::vector<uint32_t> normRunsFrom;
  // sm_90a: op (an RMSNorm or a tensor-core attention) -> the 16-bit type (plan DType) in
  // which its long steps write their output to the x16 workspace instead (0: none); linear
  // op -> whether its GEMM finds its x there (its group's head: no rounding launch).
  std::vector<int> roundsOutput;
  std::vector<bool> inputRounded;
};

// The fusions of a plan whose ops and buffers exist (the emitter checks each op as it
// writes its kernels; ops with missing buffers are left unfused).
LaunchFusions findLaunchFusions(const plan::PlanT &plan, const FusionChoices &choices);

} // namespace ninfer
