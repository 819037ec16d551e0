// RMS normalization over consecutive groups of DIM values of a row of WIDTH:
// y = x / sqrt(mean(x^2) + eps) * w. In place is allowed (each element is read
// and written by the same thread, writes come after the reduction).
// X16 (plan DType f16/bf16, sm_90a plans; 0: none): in steps of more than
// kLinearGemvMaxRows tokens y goes to x16 in that type instead (the x of the
// wgmma GEMMs that read it, gemm_wgmma.cuh).
// Two shapes, chosen by the emitter:
//   rmsNormBlock: one block of THREADS per group; grid (WIDTH/DIM, n_tokens, 1).
//   rmsNormWarp:  one warp per group, THREADS/32 groups per block;
//                 grid (ceil(groups/(THREADS/32)), n_tokens, 1). For head_dim-sized groups.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

// Stores normalized value v at element i of y (f32), or X16 (see above) at element (t, k) of
// the GEMM's x (common.cuh's x16Index: rows of WIDTH).
template <int X16, int WIDTH>
__device__ __forceinline__ void storeNormalized(float *y, unsigned short *x16, bool rounded,
                                                long long i, int t, int k, float v) {
  if constexpr (X16 != 0) {
    if (rounded) {
      x16[x16Index<WIDTH>(t, k)] = X16 == kF16 ? f32ToF16(v) : f32ToBf16(v);
      return;
    }
  }
  y[i] = v;
}

template <int WDT, int DIM, int WIDTH, int THREADS, int X16 = 0>
__device__ __forceinline__ void rmsNormBlock(const float *x, const void *w, float *y, float eps,
                                             const StepState *state,
                                             unsigned short *x16 = nullptr) {
  // Each thread keeps its DIM / THREADS values (and weights) in registers and
  // issues all of its loads before the first use: one memory round trip per
  // block instead of one per loop iteration.
  constexpr int kPer = (DIM + THREADS - 1) / THREADS;
  static_assert(kPer <= 64, "rmsNormBlock keeps DIM / THREADS values per thread in registers");
  __shared__ float scratch[THREADS / kWarpSize];
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const long long base =
      static_cast<long long>(t) * WIDTH + static_cast<long long>(blockIdx.x) * DIM;
  float v[kPer], scale[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = threadIdx.x + j * THREADS;
    v[j] = (DIM % THREADS == 0 || i < DIM) ? x[base + i] : 0.0f;
    scale[j] = (DIM % THREADS == 0 || i < DIM) ? loadAsFloat<WDT>(w, i) : 0.0f;
  }
  float sumSq = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    sumSq += v[j] * v[j];
  sumSq = blockSum<THREADS>(sumSq, scratch);
  const float inv = rmsInverse(sumSq, DIM, eps);
  const bool rounded = state->nTokens > kLinearGemvMaxRows;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = threadIdx.x + j * THREADS;
    if (DIM % THREADS == 0 || i < DIM)
      storeNormalized<X16, WIDTH>(y, x16, rounded, base + i, t, blockIdx.x * DIM + i,
                                  v[j] * inv * scale[j]);
  }
}

template <int WDT, int DIM, int WIDTH, int THREADS, int X16 = 0>
__device__ __forceinline__ void rmsNormWarp(const float *x, const void *w, float *y, float eps,
                                            const StepState *state,
                                            unsigned short *x16 = nullptr) {
  constexpr int kGroups = WIDTH / DIM;
  constexpr int kWarps = THREADS / kWarpSize;
  const int t = blockIdx.y;
  const int group = blockIdx.x * kWarps + threadIdx.x / kWarpSize;
  if (t >= state->nTokens || group >= kGroups)
    return;
  const int lane = threadIdx.x % kWarpSize;
  const long long base = static_cast<long long>(t) * WIDTH + static_cast<long long>(group) * DIM;
  float sumSq = 0.0f;
  for (int i = lane; i < DIM; i += kWarpSize) {
    const float v = x[base + i];
    sumSq += v * v;
  }
  sumSq = warpSum(sumSq);
  const float inv = rmsInverse(sumSq, DIM, eps);
  const bool rounded = state->nTokens > kLinearGemvMaxRows;
  for (int i = lane; i < DIM; i += kWarpSize)
    storeNormalized<X16, WIDTH>(y, x16, rounded, base + i, t, group * DIM + i,
                                x[base + i] * inv * loadAsFloat<WDT>(w, i));
}

} // namespace dev
} // namespace ninfer
