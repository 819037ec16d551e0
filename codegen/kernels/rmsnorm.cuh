// RMS normalization over consecutive groups of DIM values of a row of WIDTH:
// y = x / sqrt(mean(x^2) + eps) * w. In place is allowed (each element is read
// and written by the same thread, writes come after the reduction).
// Two shapes, chosen by the emitter:
//   rmsNormBlock: one block of THREADS per group; grid (WIDTH/DIM, n_tokens, 1).
//   rmsNormWarp:  one warp per group, THREADS/32 groups per block;
//                 grid (ceil(groups/(THREADS/32)), n_tokens, 1). For head_dim-sized groups.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

template <int WDT, int DIM, int WIDTH, int THREADS>
__device__ __forceinline__ void rmsNormBlock(const float *x, const void *w, float *y, float eps,
                                             const StepState *state) {
  __shared__ float scratch[THREADS / kWarpSize];
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const long long base =
      static_cast<long long>(t) * WIDTH + static_cast<long long>(blockIdx.x) * DIM;
  float sumSq = 0.0f;
  for (int i = threadIdx.x; i < DIM; i += THREADS) {
    const float v = x[base + i];
    sumSq += v * v;
  }
  sumSq = blockSum<THREADS>(sumSq, scratch);
  const float inv = 1.0f / sqrtf(sumSq / static_cast<float>(DIM) + eps);
  for (int i = threadIdx.x; i < DIM; i += THREADS)
    y[base + i] = x[base + i] * inv * loadAsFloat<WDT>(w, i);
}

template <int WDT, int DIM, int WIDTH, int THREADS>
__device__ __forceinline__ void rmsNormWarp(const float *x, const void *w, float *y, float eps,
                                            const StepState *state) {
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
  const float inv = 1.0f / sqrtf(sumSq / static_cast<float>(DIM) + eps);
  for (int i = lane; i < DIM; i += kWarpSize)
    y[base + i] = x[base + i] * inv * loadAsFloat<WDT>(w, i);
}

} // namespace dev
} // namespace ninfer
