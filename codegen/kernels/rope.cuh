// Rotate-half RoPE on rows of [HEADS, HD] at positions pos + t:
//   y[i] = x[i] cos - x[i + HD/2] sin,  y[i + HD/2] = x[i + HD/2] cos + x[i] sin,
// angle = position * inv_freq[i], cos/sin scaled by attention_factor.
// Dynamic NTK (DYNAMIC): when seq_len = pos + n_tokens exceeds the original
// context, base = theta * (factor * seq_len / orig - (factor - 1))^(HD / (HD - 2)) and
// inv_freq[i] = 1 / base^(2i / HD), as transformers' dynamic rope update does.
// Launch: block THREADS, grid (ceil(HEADS*HD/2 / THREADS) capped, n_tokens, 1); one
// thread per rotated pair, so in place (y = x) is safe.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

template <int HEADS, int HD, bool DYNAMIC, int THREADS>
__device__ __forceinline__ void rope(const float *x, const float *invFreq, float *y,
                                     float attentionFactor, float theta, float dynamicFactor,
                                     int originalMaxPositions, const StepState *state) {
  constexpr int kHalf = HD / 2;
  constexpr int kPairs = HEADS * kHalf;
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const float position = static_cast<float>(state->pos + t);
  bool rescaled = false;
  float base = theta;
  if constexpr (DYNAMIC) {
    const int seqLen = state->pos + state->nTokens;
    if (seqLen > originalMaxPositions) {
      rescaled = true;
      const float ratio =
          dynamicFactor * static_cast<float>(seqLen) / static_cast<float>(originalMaxPositions) -
          (dynamicFactor - 1.0f);
      base = theta * powf(ratio, static_cast<float>(HD) / static_cast<float>(HD - 2));
    }
  }
  const long long rowBase = static_cast<long long>(t) * HEADS * HD;
  for (int idx = blockIdx.x * THREADS + threadIdx.x; idx < kPairs; idx += gridDim.x * THREADS) {
    const int h = idx / kHalf;
    const int i = idx % kHalf;
    const float inv = rescaled
                          ? 1.0f / powf(base, static_cast<float>(2 * i) / static_cast<float>(HD))
                          : invFreq[i];
    float s, c;
    sincosf(position * inv, &s, &c);
    c *= attentionFactor;
    s *= attentionFactor;
    const long long b = rowBase + static_cast<long long>(h) * HD;
    const float x0 = x[b + i];
    const float x1 = x[b + i + kHalf];
    y[b + i] = x0 * c - x1 * s;
    y[b + i + kHalf] = x1 * c + x0 * s;
  }
}

} // namespace dev
} // namespace ninfer
