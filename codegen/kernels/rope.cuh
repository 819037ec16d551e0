// Rotate-half RoPE on rows of [HEADS, HD] at row t's position (pos + t, or in a
// batch step the row's own position, StepAbi.h):
//   y[i] = x[i] cos - x[i + HD/2] sin,  y[i + HD/2] = x[i + HD/2] cos + x[i] sin,
// angle = position * inv_freq[i], cos/sin scaled by attention_factor.
// Scalings that depend on seq_len (the sequence's length as far as the forward pass takes it,
// stepSequenceEnd), from the original context orig on (template argument SCALING):
//  - dynamic NTK: base = theta * (factor * seq_len / orig - (factor - 1))^(HD / (HD - 2)) and
//    inv_freq[i] = 1 / base^(2i / HD), as transformers' dynamic rope update does;
//  - LongRoPE: inv_freq holds HD values, the short factors' table then the long factors'; the
//    long one once seq_len > orig, as transformers' longrope update does.
// Launch: block THREADS, grid (ceil(HEADS*HD/2 / THREADS) capped, n_tokens, 1); one
// thread per rotated pair, so in place (y = x) is safe. ropeAppend below also
// writes the KV cache.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

// SCALING: how RoPE's angles depend on the sequence's length.
constexpr int kRopeFixed = 0;       // inv_freq as the plan holds it
constexpr int kRopeDynamicNtk = 1;  // dynamic NTK past the original context
constexpr int kRopeLongFactors = 2; // LongRoPE: the long table past the original context

// The rotation of one step's token t: its position, with dynamic NTK past the original
// context the rescaled base, with LongRoPE the table's offset in inv_freq.
struct RopeStep {
  float position;
  bool rescaled;
  float base;
  int table;
};

template <int HD, int SCALING>
__device__ __forceinline__ RopeStep ropeStep(int t, float theta, float dynamicFactor,
                                             int originalMaxPositions, const StepState *state) {
  RopeStep r{static_cast<float>(stepPosition(state, t)), false, theta, 0};
  if constexpr (SCALING == kRopeLongFactors) {
    if (stepSequenceEnd(state, t) > originalMaxPositions)
      r.table = HD / 2;
  }
  if constexpr (SCALING == kRopeDynamicNtk) {
    const int seqLen = stepSequenceEnd(state, t);
    if (seqLen > originalMaxPositions) {
      r.rescaled = true;
      const float ratio =
          dynamicFactor * static_cast<float>(seqLen) / static_cast<float>(originalMaxPositions) -
          (dynamicFactor - 1.0f);
      r.base = theta * powf(ratio, static_cast<float>(HD) / static_cast<float>(HD - 2));
    }
  }
  return r;
}

// The rotation of pair i at r's position: cos and sin of the angle, scaled by
// attentionFactor. The rotation's constants only: it may run before a kernel's wait.
struct RopeAngle {
  float c, s;
};
template <int HD>
__device__ __forceinline__ RopeAngle ropeAngle(const RopeStep &r, const float *invFreq, int i,
                                               float attentionFactor) {
  const float inv =
      r.rescaled ? 1.0f / powf(r.base, static_cast<float>(2 * i) / static_cast<float>(HD))
                 : invFreq[r.table + i];
  float s, c;
  sincosf(r.position * inv, &s, &c);
  return {c * attentionFactor, s * attentionFactor};
}

// Rotates the pair (x0, x1) = (x[i], x[i + HD/2]) of one head in place by its angle.
__device__ __forceinline__ void rotatePair(const RopeAngle &a, float &x0, float &x1) {
  const float y0 = x0 * a.c - x1 * a.s;
  x1 = x1 * a.c + x0 * a.s;
  x0 = y0;
}

// Rotates the pair (x0, x1) = (x[i], x[i + HD/2]) of one head in place.
template <int HD>
__device__ __forceinline__ void ropePair(const RopeStep &r, const float *invFreq, int i,
                                         float attentionFactor, float &x0, float &x1) {
  rotatePair(ropeAngle<HD>(r, invFreq, i, attentionFactor), x0, x1);
}

template <int HEADS, int HD, int SCALING, int THREADS>
__device__ __forceinline__ void rope(const float *x, const float *invFreq, float *y,
                                     float attentionFactor, float theta, float dynamicFactor,
                                     int originalMaxPositions, const StepState *state) {
  constexpr int kHalf = HD / 2;
  constexpr int kPairs = HEADS * kHalf;
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const RopeStep r = ropeStep<HD, SCALING>(t, theta, dynamicFactor, originalMaxPositions, state);
  const long long rowBase = static_cast<long long>(t) * HEADS * HD;
  for (int idx = blockIdx.x * THREADS + threadIdx.x; idx < kPairs; idx += gridDim.x * THREADS) {
    const long long b = rowBase + static_cast<long long>(idx / kHalf) * HD + idx % kHalf;
    float x0 = x[b], x1 = x[b + kHalf];
    ropePair<HD>(r, invFreq, idx % kHalf, attentionFactor, x0, x1);
    y[b] = x0;
    y[b + kHalf] = x1;
  }
}

// RoPE of q and k and the f16 KV-cache append of k and v in one launch (the
// emitter fuses the two Rope ops and the Attention op's append this way, in
// every step): blocks [0, QB) rotate q in place, [QB, QB + KB) rotate k in
// place and store it in cache row (position of t) of the row's sequence slot,
// the rest copy v to its cache row. Launch: block THREADS, grid (QB + KB + VB,
// n_tokens, 1) with QB, KB, VB the rope / append grids of the separate kernels.
template <int HQ, int HK, int HD, int SCALING, int CONTEXT, int QB, int KB, int THREADS>
__device__ __forceinline__ void ropeAppend(float *q, float *k, const float *v,
                                           const float *invFreq, void *kCache, void *vCache,
                                           float attentionFactor, float theta,
                                           float dynamicFactor, int originalMaxPositions,
                                           const StepState *state) {
  constexpr int kHalf = HD / 2;
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const int row = stepPosition(state, t); // cache row
  const long long kvBase = static_cast<long long>(t) * HK * HD;
  // Slots of CONTEXT rows follow each other (f16 caches).
  const long long cacheBase =
      (static_cast<long long>(stepSequence(state, t)) * CONTEXT + row) * HK * HD;
  unsigned short *kc = static_cast<unsigned short *>(kCache);
  unsigned short *vc = static_cast<unsigned short *>(vCache);
  if (blockIdx.x >= QB + KB) { // v -> cache
    if (row >= CONTEXT)
      return;
    for (int i = (blockIdx.x - QB - KB) * THREADS + threadIdx.x; i < HK * HD;
         i += (gridDim.x - QB - KB) * THREADS)
      vc[cacheBase + i] = f32ToF16(v[kvBase + i]);
    return;
  }
  const RopeStep r = ropeStep<HD, SCALING>(t, theta, dynamicFactor, originalMaxPositions, state);
  const bool isQ = blockIdx.x < QB;
  const int heads = isQ ? HQ : HK;
  const int first = isQ ? blockIdx.x : blockIdx.x - QB;
  const int count = isQ ? QB : KB;
  float *x = isQ ? q + static_cast<long long>(t) * HQ * HD : k + kvBase;
  for (int idx = first * THREADS + threadIdx.x; idx < heads * kHalf; idx += count * THREADS) {
    const int b = idx / kHalf * HD + idx % kHalf;
    float x0 = x[b], x1 = x[b + kHalf];
    ropePair<HD>(r, invFreq, idx % kHalf, attentionFactor, x0, x1);
    x[b] = x0;
    x[b + kHalf] = x1;
    if (!isQ && row < CONTEXT) {
      kc[cacheBase + b] = f32ToF16(x0);
      kc[cacheBase + b + kHalf] = f32ToF16(x1);
    }
  }
}

// RoPE of q and k and the f16 KV-cache append done by the tensor-core decode attention
// kernel itself (attention.cuh, attentionDecodeMma with this argument), in single-sequence
// one-token steps: the emitter then runs ropeAppend in the other steps only, one launch less
// per layer and decode step. k and v are the step's rows as the k/v projections wrote them;
// kCache and vCache the attention's caches.
template <int HD, int SCALING> struct DecodeRope {
  static constexpr bool kOn = true;
  const float *k, *v, *invFreq;
  void *kCache, *vCache;
  float attentionFactor, theta, dynamicFactor;
  int originalMaxPositions;

  __device__ __forceinline__ RopeStep step(int t, const StepState *state) const {
    return ropeStep<HD, SCALING>(t, theta, dynamicFactor, originalMaxPositions, state);
  }
};

// The decode kernel's q and k come rotated (the ropeAppend launch ran before it).
struct NoDecodeRope {
  static constexpr bool kOn = false;
};

} // namespace dev
} // namespace ninfer
