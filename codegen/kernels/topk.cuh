// Top-k sampling's candidates on the device: the k highest non-NaN logits of a row, higher
// first and lower id first among equal ones (ninfer::Sampler::sampleTopK's contract, the
// order of runtime/src/Sampler.cpp's `before`), and how many of the row's logits are not
// NaN. The host then draws from k pairs instead of copying vocab floats and sorting them.
// Launch: grid (slices, rows), block kTopKThreads (StepAbi.h), with slices =
// ceil(vocab / kTopKSliceValues) and slices * k <= kTopKSliceValues. Block (s, r) selects
// the best k of slice s of row r (kTopKSliceValues keys in shared memory: selectTopKeys) and
// writes them to partial[r][s]; the block whose ticket on row r comes last selects the best
// k of the slices' bests and writes out[r] (value, id as float bits) and counts[r]
// (candidates, non-NaN logits), then resets the ticket (tickets: zero at load, zero after).
// Keys order logits totally (id included), so the result does not depend on which block
// merges.
// Not a plan op: every generated module carries it and the executor looks it up by name
// with its own parameters (like ninfer_argmax_rows).
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

// A logit and its id as one key whose unsigned order is the candidates' order: the logit's
// orderedKey above, the id inverted below. NaN is 0, below every float's key (-inf's is
// 0x007FFFFF...).
__device__ __forceinline__ unsigned long long topKKey(float v, int id) {
  if (v != v)
    return 0ull;
  return (static_cast<unsigned long long>(orderedKey(v)) << 32) |
         (0xFFFFFFFFu - static_cast<unsigned int>(id));
}
__device__ __forceinline__ float topKValue(unsigned long long c) {
  return orderedValue(static_cast<unsigned int>(c >> 32));
}
__device__ __forceinline__ int topKId(unsigned long long c) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<unsigned int>(c));
}

// Sorts the block's N keys in shared memory, largest first (bitonic; N a power of 2).
template <int N> __device__ __forceinline__ void sortKeysDescending(unsigned long long *keys) {
  for (int size = 2; size <= N; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < N; i += kTopKThreads) {
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

struct TopKShared {
  int bins[256];
  int digit, need, taken;
  unsigned long long best[kMaxTopKCandidates]; // the k largest, then sorted
};

// The k (<= kMaxTopKCandidates) largest of the block's kTopKSliceValues keys in shared memory,
// largest first, into sh.best. A radix select finds the k-th largest key a byte at a time from
// the highest (a count per byte value, then the value where the count from the top reaches
// k), then the keys above it and as many copies of it as k needs are sorted: keys are unique
// but for 0 (NaN, or no logit), so the copies are the key itself. (A bitonic sort of the whole
// slice took about 0.16 ms per step, most of it waiting on its stages.)
__device__ __forceinline__ void selectTopKeys(const unsigned long long *keys, int k,
                                              TopKShared &sh) {
  const int lane = threadIdx.x % kWarpSize;
  unsigned long long prefix = 0ull, mask = 0ull;
  int need = k; // rank of the k-th largest among the keys of the prefix
  for (int shift = 56; shift >= 0; shift -= 8) {
    if (threadIdx.x < 256)
      sh.bins[threadIdx.x] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < kTopKSliceValues; i += kTopKThreads) {
      const unsigned long long key = keys[i];
      if ((key & mask) == prefix)
        atomicAdd(&sh.bins[(key >> shift) & 0xFF], 1);
    }
    __syncthreads();
    if (threadIdx.x < kWarpSize) {
      // Lane l takes values 255 - 8l .. 248 - 8l; the counts from the top, across lanes.
      int count = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        count += sh.bins[255 - 8 * lane - j];
      int through = count;
#pragma unroll
      for (int o = 1; o < kWarpSize; o *= 2) {
        const int v = __shfl_up_sync(0xffffffffu, through, o);
        if (lane >= o)
          through += v;
      }
      const unsigned int reached = __ballot_sync(0xffffffffu, through >= need);
      if (lane == __ffs(reached) - 1) {
        int above = through - count;
        for (int j = 0; j < 8; ++j) {
          const int b = 255 - 8 * lane - j;
          if (above + sh.bins[b] >= need) {
            sh.digit = b;
            sh.need = need - above;
            break;
          }
          above += sh.bins[b];
        }
      }
    }
    __syncthreads();
    prefix |= static_cast<unsigned long long>(sh.digit) << shift;
    mask |= 0xFFull << shift;
    need = sh.need;
  }
  // The keys above the k-th largest in any order, then copies of it; sorted.
  if (threadIdx.x == 0)
    sh.taken = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < kTopKSliceValues; i += kTopKThreads) {
    const unsigned long long key = keys[i];
    if (key > prefix)
      sh.best[atomicAdd(&sh.taken, 1)] = key;
  }
  __syncthreads();
  for (int i = sh.taken + threadIdx.x; i < kMaxTopKCandidates; i += kTopKThreads)
    sh.best[i] = i < k ? prefix : 0ull;
  __syncthreads();
  sortKeysDescending<kMaxTopKCandidates>(sh.best);
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
  __shared__ TopKShared sh;
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
  selectTopKeys(keys, k, sh);
  unsigned long long *best = partial + (static_cast<long long>(row) * slices + slice) *
                                           kMaxTopKCandidates;
  for (int i = threadIdx.x; i < k; i += kTopKThreads)
    best[i] = sh.best[i];
  if (threadIdx.x == 0)
    partialValid[row * slices + slice] = valid;
  if (!lastBlockOf(&tickets[row], static_cast<unsigned int>(slices)))
    return;
  const unsigned long long *bests = partial + static_cast<long long>(row) * slices *
                                                  kMaxTopKCandidates;
  for (int i = threadIdx.x; i < kTopKSliceValues; i += kTopKThreads)
    keys[i] = i < slices * k ? __ldcg(&bests[(i / k) * kMaxTopKCandidates + i % k]) : 0ull;
  __syncthreads();
  selectTopKeys(keys, k, sh);
  for (int i = threadIdx.x; i < k; i += kTopKThreads) {
    const unsigned long long key = sh.best[i];
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
