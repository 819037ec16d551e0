// Causal GQA attention over an f16 KV cache [CONTEXT, KVH, HD]. Two launches:
//
// kvAppend: writes the step's k, v rows (f32 -> f16, round to nearest even) at
//   positions pos..pos+n-1. Block THREADS, grid (ceil(KVH*HD/THREADS) capped, n_tokens, 1).
//   A separate launch, so every query of a prefill sees all earlier keys of the step.
//
// attention: one block per (head, token), THREADS/32 warps. Query p = pos + t sees
//   keys j in [lo, p], lo = max(0, p - WINDOW + 1) when WINDOW > 0 else 0; head h
//   reads kv head h / (HEADS / KVH). Warp w takes keys lo + w, lo + w + warps, ...;
//   each lane holds ceil(HD/32) consecutive dims of q, the score is a warp butterfly
//   sum, and each warp keeps an online softmax (running max, sum, weighted v). The
//   warps' partial results are merged through shared memory with the usual rescale.
//   Grid (HEADS, n_tokens, 1). (A split over the keys for long contexts is a later step.)
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

template <int KVH, int HD, int CONTEXT, int THREADS>
__device__ __forceinline__ void kvAppend(const float *k, const float *v, unsigned short *kCache,
                                         unsigned short *vCache, const StepState *state) {
  constexpr int kWidth = KVH * HD;
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const int row = state->pos + t;
  if (row < 0 || row >= CONTEXT)
    return;
  const long long src = static_cast<long long>(t) * kWidth;
  const long long dst = static_cast<long long>(row) * kWidth;
  for (int i = blockIdx.x * THREADS + threadIdx.x; i < kWidth; i += gridDim.x * THREADS) {
    kCache[dst + i] = f32ToF16(k[src + i]);
    vCache[dst + i] = f32ToF16(v[src + i]);
  }
}

template <int HEADS, int KVH, int HD, int WINDOW, int CONTEXT, int THREADS>
__device__ __forceinline__ void attention(const float *q, const unsigned short *kCache,
                                          const unsigned short *vCache, float *out, float scale,
                                          const StepState *state) {
  constexpr int kWarps = THREADS / kWarpSize;
  constexpr int kDimsPerLane = (HD + kWarpSize - 1) / kWarpSize;
  constexpr int kGroup = HEADS / KVH;
  __shared__ float sMax[kWarps];
  __shared__ float sSum[kWarps];
  __shared__ float sAcc[kWarps][HD];

  const int h = blockIdx.x;
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return; // uniform for the whole block
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int p = state->pos + t;
  const int lo = WINDOW > 0 ? max(0, p - WINDOW + 1) : 0;
  const int kvh = h / kGroup;
  const float negInf = __int_as_float(0xff800000);

  const float *qRow = q + (static_cast<long long>(t) * HEADS + h) * HD;
  float qv[kDimsPerLane];
  float acc[kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane * kDimsPerLane + i;
    qv[i] = d < HD ? qRow[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float runMax = negInf;
  float runSum = 0.0f;
  for (int j = lo + warp; j <= p && j < CONTEXT; j += kWarps) {
    const long long rowOff = (static_cast<long long>(j) * KVH + kvh) * HD;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane * kDimsPerLane + i;
      if (d < HD)
        s += qv[i] * f16ToF32(kCache[rowOff + d]);
    }
    s = warpSum(s) * scale;
    const float newMax = fmaxf(runMax, s);
    const float correction = expf(runMax - newMax); // 0 on the first key
    const float weight = expf(s - newMax);
    runSum = runSum * correction + weight;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane * kDimsPerLane + i;
      const float vv = d < HD ? f16ToF32(vCache[rowOff + d]) : 0.0f;
      acc[i] = acc[i] * correction + weight * vv;
    }
    runMax = newMax;
  }
  if (lane == 0) {
    sMax[warp] = runMax;
    sSum[warp] = runSum;
  }
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane * kDimsPerLane + i;
    if (d < HD)
      sAcc[warp][d] = acc[i];
  }
  __syncthreads();
  float m = negInf;
#pragma unroll
  for (int w = 0; w < kWarps; ++w)
    m = fmaxf(m, sMax[w]);
  // Warp 0 always has key lo <= p, so m is finite; idle warps weigh exp(-inf) = 0.
  float total = 0.0f;
  float factor[kWarps];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    factor[w] = sSum[w] > 0.0f ? expf(sMax[w] - m) : 0.0f;
    total += sSum[w] * factor[w];
  }
  const float invTotal = 1.0f / total;
  float *oRow = out + (static_cast<long long>(t) * HEADS + h) * HD;
  for (int d = threadIdx.x; d < HD; d += THREADS) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      v += sAcc[w][d] * factor[w];
    oRow[d] = v * invTotal;
  }
}

} // namespace dev
} // namespace ninfer
