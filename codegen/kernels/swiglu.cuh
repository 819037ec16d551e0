// SwiGLU: y = silu(gate) * up, silu(g) = g / (1 + exp(-g)), on rows of DIM.
// Launch: block THREADS, grid (ceil(DIM/THREADS) capped by the emitter, n_tokens, 1);
// block-stride loop over the row. In place (y = gate or y = up) is allowed.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

template <int DIM, int THREADS>
__device__ __forceinline__ void swiGlu(const float *gate, const float *up, float *y,
                                       const StepState *state) {
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const long long base = static_cast<long long>(t) * DIM;
  for (int i = blockIdx.x * THREADS + threadIdx.x; i < DIM; i += gridDim.x * THREADS)
    y[base + i] = siluTimes(gate[base + i], up[base + i]);
}

} // namespace dev
} // namespace ninfer
