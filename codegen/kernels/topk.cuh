// Top-k sampling's candidates on the device: the k highest non-NaN logits of a row, higher
// first and lower id first among equal ones (ninfer::Sampler::sampleTopK's contract, the
// order of runtime/src/Sampler.cpp's `before`), and how many of the row's logits are not
// NaN. The host then draws from k pairs instead of copying vocab floats and sorting them.
// Launch: grid (slices, rows), block kTopKThreads (StepAbi.h), with slices =
// ceil(vocab / kTopKSliceValues) and slices * k <= kTopKSliceValues. Block (s, r) sorts
// slice s of row r (kTopKSliceValues keys in shared memory, bitonic) and writes its best k
// to partial[r][s]; the block whose ticket on row r comes last sorts the slices' bests and
// writes out[r] (value, id as float bits) and counts[r] (candidates, non-NaN logits), then
// resets the ticket (tickets: zero at load, zero after). Keys order logits totally (id
// included), so the result does not depend on which block merges.
// Not a plan op: every generated module carries it and the executor looks it up by name
// with its own parameters (like ninfer_argmax_rows).
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

// A logit and its id as one key whose unsigned order is the candidates' order: the float's
// bits made monotonic (-0 taken as +0, as the host compares them equal) above, the id
// inverted below. NaN is 0, below every float's key (-inf's is 0x007FFFFF...).
__device__ __forceinline__ unsigned long long topKKey(float v, int id) {
  if (v != v)
    return 0ull;
  const unsigned int b = v == 0.0f ? 0u : __float_as_uint(v);
  const unsigned int key = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<unsigned long long>(key) << 32) |
         (0xFFFFFFFFu - static_cast<unsigned int>(id));
}
__device__ __forceinline__ float topKValue(unsigned long long c) {
  const unsigned int key = static_cast<unsigned int>(c >> 32);
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}
__device__ __forceinline__ int topKId(unsigned long long c) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<unsigned int>(c));
}

// Sorts the block's kTopKSliceValues keys in shared memory, largest first (bitonic).
__device__ __forceinline__ void sortKeysDescending(unsigned long long *keys) {
  for (int size = 2; size <= kTopKSliceValues; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < kTopKSliceValues; i += kTopKThreads) {
        const int partner = i ^ stride;
        if (partner > i) {
          const unsigned long long a = keys[i], b = keys[partner];
          if ((i & size) == 0 ? a < b : a > b) {
            keys[i] = b;
            keys[partner] = a;
          }
        }
      }
      __syncthreads();
    }
}

} // namespace dev
} // namespace ninfer

// partial: rows x slices x kMaxTopKCandidates keys; partialValid: rows x slices; out: rows x
// kMaxTopKCandidates; counts: rows x 2; tickets: rows counters.
extern "C" __global__ void __launch_bounds__(ninfer::kTopKThreads)
    ninfer_topk_rows(const float *logits, int vocab, int k, float2 *out, int *counts,
                     unsigned long long *partial, int *partialValid, unsigned int *tickets) {
  using namespace ninfer;
  using namespace ninfer::dev;
  __shared__ unsigned long long keys[kTopKSliceValues];
  __shared__ int valid;
  const int row = blockIdx.y, slice = blockIdx.x, slices = gridDim.x;
  const long long rowBase = static_cast<long long>(row) * vocab;
  const int per = (vocab + slices - 1) / slices;
  const int begin = slice * per, end = min(vocab, begin + per);
  if (threadIdx.x == 0)
    valid = 0;
  __syncthreads();
  int mine = 0;
  for (int i = threadIdx.x; i < kTopKSliceValues; i += kTopKThreads) {
    const int id = begin + i;
    const unsigned long long key = id < end ? topKKey(logits[rowBase + id], id) : 0ull;
    mine += key != 0ull;
    keys[i] = key;
  }
  atomicAdd(&valid, mine);
  __syncthreads();
  sortKeysDescending(keys);
  unsigned long long *best = partial + (static_cast<long long>(row) * slices + slice) *
                                           kMaxTopKCandidates;
  for (int i = threadIdx.x; i < k; i += kTopKThreads)
    best[i] = keys[i];
  if (threadIdx.x == 0)
    partialValid[row * slices + slice] = valid;
  if (!lastBlockOf(&tickets[row], static_cast<unsigned int>(slices)))
    return;
  const unsigned long long *bests = partial + static_cast<long long>(row) * slices *
                                                  kMaxTopKCandidates;
  for (int i = threadIdx.x; i < kTopKSliceValues; i += kTopKThreads)
    keys[i] = i < slices * k ? __ldcg(&bests[(i / k) * kMaxTopKCandidates + i % k]) : 0ull;
  __syncthreads();
  sortKeysDescending(keys);
  for (int i = threadIdx.x; i < k; i += kTopKThreads) {
    const unsigned long long key = keys[i];
    out[row * kMaxTopKCandidates + i] =
        make_float2(key ? topKValue(key) : 0.0f, __int_as_float(key ? topKId(key) : -1));
  }
  if (threadIdx.x == 0) {
    int total = 0;
    for (int s = 0; s < slices; ++s)
      total += __ldcg(&partialValid[row * slices + s]);
    counts[2 * row] = min(k, total);
    counts[2 * row + 1] = total;
    tickets[row] = 0u;
  }
}
