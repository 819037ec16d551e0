// Embedding lookup: out[t, :] = table[tokens[t], :] as f32.
// Launch: block THREADS, grid (ceil(DIM/THREADS) capped by the emitter, n_tokens, 1);
// grid-stride loop over the row. An out-of-range id (the executor rejects those before
// the step) yields a zero row instead of a wild read.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

template <int DT, int DIM, int VOCAB, int THREADS>
__device__ __forceinline__ void embedding(const int *tokens, const void *table, float *out,
                                          const StepState *state) {
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const int id = tokens[t];
  float *row = out + static_cast<long long>(t) * DIM;
  if (id < 0 || id >= VOCAB) {
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < DIM; i += gridDim.x * THREADS)
      row[i] = 0.0f;
    return;
  }
  const long long base = static_cast<long long>(id) * DIM;
  for (int i = blockIdx.x * THREADS + threadIdx.x; i < DIM; i += gridDim.x * THREADS)
    row[i] = loadAsFloat<DT>(table, base + i);
}

} // namespace dev
} // namespace ninfer
