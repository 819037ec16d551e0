// Elementwise add: y = a + b on rows of DIM (y may alias a or b).
// Launch: block THREADS, grid (ceil(DIM/THREADS) capped by the emitter, n_tokens, 1);
// block-stride loop over the row.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

template <int DIM, int THREADS>
__device__ __forceinline__ void add(const float *a, const float *b, float *y,
                                    const StepState *state) {
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const long long base = static_cast<long long>(t) * DIM;
  for (int i = blockIdx.x * THREADS + threadIdx.x; i < DIM; i += gridDim.x * THREADS)
    y[base + i] = a[base + i] + b[base + i];
}

} // namespace dev
} // namespace ninfer
