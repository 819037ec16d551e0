// How the linear kernels split their work, shared by the kernels
// (codegen/kernels/linear.cuh, gemv_quant_mma.cuh, gemv_tq1_mma.cuh,
// linear_ternary.cuh, gemm_mma.cuh) and the kernel emitter, which sizes each
// launch's grid and shared memory with the same functions.
// Compiles as host C++ and as NVRTC device code: no standard header.
#pragma once

#include "HostDevice.h"

namespace ninfer {
namespace gemv {

constexpr int kBlockThreads = 256; // every linear kernel: 8 warps
constexpr int kBlockWarps = kBlockThreads / 32;
// Warps the GPU should have in flight for a GEMV to cover the memory latency
// (an H200 holds 132 SMs x 64 warps; about half of that, measured on the fp16
// GEMV's short layers, docs/performance.md).
constexpr int kTargetWarps = 4096;

// ---- f16/bf16/f32 weights (linear.cuh) ----

// Output rows per warp: 2 for wide layers (x reuse), 1 for narrow ones.
NINFER_HD constexpr int linearRowsPerWarp(int n) { return n >= 4096 ? 2 : 1; }

// Warps that share a row group, each taking a slice of K (1, 2, 4 or 8), until
// about kTargetWarps warps are busy; every lane keeps at least one 16-byte chunk
// of each row. elems: weights per 16 bytes.
NINFER_HD constexpr int linearKSplit(int n, int k, int elems) {
  int split = 1;
  const int groups = (n + linearRowsPerWarp(n) - 1) / linearRowsPerWarp(n);
  while (split < kBlockWarps && groups * split < kTargetWarps && k / elems >= 2 * 32 * split)
    split *= 2;
  return split;
}

NINFER_HD constexpr int linearRowsPerBlock(int n, int k, int elems) {
  return kBlockWarps / linearKSplit(n, k, elems) * linearRowsPerWarp(n);
}

// A SwiGLU's gate/up GEMV with the activation fused (linearSwiGlu): a warp per
// output (its gate and up rows), split as the pair's grouped GEMV of 2n rows.
NINFER_HD constexpr int linearSwiGluOutputsPerBlock(int n, int k, int elems) {
  return kBlockWarps / linearKSplit(2 * n, k, elems);
}

// ---- tensor-core GEMVs (gemv_quant_mma.cuh, gemv_tq1_mma.cuh) ----

// Row tiles of 16 per block: enough blocks to cover the SMs for short N, fewer
// K splits (less reduction) for long N.
NINFER_HD constexpr int mmaRowTiles(int n) { return n >= 32768 ? 4 : n >= 8192 ? 2 : 1; }
NINFER_HD constexpr int mmaRowsPerBlock(int n) { return 16 * mmaRowTiles(n); }
// With a SwiGLU fused (gemvQuantMmaSwiGlu): a tile is 8 outputs (their gate rows
// and up rows), tiles per block as for the pair's 2n rows.
NINFER_HD constexpr int mmaSwiGluOutputsPerBlock(int n) { return 8 * mmaRowTiles(2 * n); }

// ---- ternary weights on CUDA cores (linear_ternary.cuh: TQ2, and TQ1 on sm_75) ----

// Output rows per warp: more rows share each x load, fewer give more warps for small N.
NINFER_HD constexpr int ternaryRowsPerWarp(int n) { return n >= 8192 ? 4 : n >= 2048 ? 2 : 1; }
NINFER_HD constexpr int ternaryRowsPerBlock(int n) { return kBlockWarps * ternaryRowsPerWarp(n); }

} // namespace gemv

// ---- tensor-core prefill GEMM (gemm_mma.cuh) ----
namespace gemm {

constexpr int kTileM = 128; // tokens per tile
constexpr int kTileN = 128; // outputs per tile
constexpr int kTileK = 64;  // K per step
constexpr int kLd = kTileK + 8; // 16-bit values per shared row (bank padding)
constexpr int kStageHalves = (kTileM + kTileN) * kLd;
constexpr int kSharedBytes = 2 * kStageHalves * 2; // two stages of 16-bit values

// Blocks that give every tile of an n-output layer at `rows` tokens its own block.
NINFER_HD constexpr int tiles(int n, int rows) {
  return ((n + kTileN - 1) / kTileN) * ((rows + kTileM - 1) / kTileM);
}

} // namespace gemm
} // namespace ninfer
