// Greedy sampling on the device: ids[r] = the argmax of logits row r (vocab floats),
// with ninfer::argmaxToken's rule (runtime/src/Sampler.cpp): the lowest id among equal
// maxima, NaN never wins, 0 when every logit is NaN. So a decode step hands the host one
// id per row instead of vocab floats (4 MB per step for a batch of 8 with a 128K vocab).
// Launch: grid (kArgmaxSlices, rows), block kArgmaxThreads (StepAbi.h). Block (s, r)
// takes slice s of row r and writes its best (value, id) to partial[r][s]; the block
// whose ticket on row r comes last merges the slices' bests, writes ids[r] and resets
// the ticket (tickets: zero at load, zero after). The order of (value, id) pairs is
// total, so the result does not depend on which block merges.
// Not a plan op: every generated module carries it and the executor looks it up by name
// with its own parameters (like ninfer_fill_dummy).
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

// Whether candidate (v, i) comes before (best, bestId) in the argmax order. An id of -1
// is no candidate (a thread or slice that saw none); it and NaN never come first.
__device__ __forceinline__ bool argmaxBefore(float v, int i, float best, int bestId) {
  if (v != v || i < 0)
    return false;
  return bestId < 0 || v > best || (v == best && i < bestId);
}

// The block's best pair, in every thread.
__device__ __forceinline__ void argmaxBlock(float &best, int &bestId) {
  __shared__ float values[kArgmaxThreads / kWarpSize];
  __shared__ int ids[kArgmaxThreads / kWarpSize];
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const int i = __shfl_xor_sync(0xffffffffu, bestId, offset);
    if (argmaxBefore(v, i, best, bestId)) {
      best = v;
      bestId = i;
    }
  }
  const int warp = threadIdx.x / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) {
    values[warp] = best;
    ids[warp] = bestId;
  }
  __syncthreads();
  best = values[0];
  bestId = ids[0];
  for (int w = 1; w < kArgmaxThreads / kWarpSize; ++w)
    if (argmaxBefore(values[w], ids[w], best, bestId)) {
      best = values[w];
      bestId = ids[w];
    }
}

// partial: rows x kArgmaxSlices (value, id) pairs; tickets: rows counters.
__device__ __forceinline__ void argmaxRows(const float* logits, int vocab, int* ids,
                                           float2* partial, unsigned int* tickets) {
  const int row = blockIdx.y, slice = blockIdx.x;
  const long long rowBase = static_cast<long long>(row) * vocab;
  const int per = (vocab + kArgmaxSlices - 1) / kArgmaxSlices;
  const int begin = slice * per, end = min(vocab, begin + per);
  float best = 0.0f;
  int bestId = -1;
  // Ascending ids per thread, so a strict > keeps the lowest id of equal maxima.
#pragma unroll 8
  for (int i = begin + threadIdx.x; i < end; i += kArgmaxThreads) {
    const float v = logits[rowBase + i];
    if (argmaxBefore(v, i, best, bestId)) {
      best = v;
      bestId = i;
    }
  }
  argmaxBlock(best, bestId);
  if (threadIdx.x == 0)
    partial[row * kArgmaxSlices + slice] = make_float2(best, __int_as_float(bestId));
  if (!lastBlockOf(&tickets[row], kArgmaxSlices))
    return;
  best = 0.0f;
  bestId = -1;
  if (threadIdx.x < kArgmaxSlices) {
    const float2 p = __ldcg(&partial[row * kArgmaxSlices + threadIdx.x]);
    best = p.x;
    bestId = __float_as_int(p.y);
  }
  argmaxBlock(best, bestId);
  if (threadIdx.x == 0) {
    ids[row] = bestId < 0 ? 0 : bestId;
    tickets[row] = 0u;
  }
}
} // namespace dev
} // namespace ninfer

// The kernel (not an emitted wrapper: the executor launches it after a step's kernels), with
// the timeline's events in plans compiled with --trace.
extern "C" __global__ void __launch_bounds__(ninfer::kArgmaxThreads)
    ninfer_argmax_rows(const float* logits, int vocab, int* ids, float2* partial,
                       unsigned int* tickets) {
#if NINFER_TRACE
  const ninfer::dev::TraceBlock trace = ninfer::dev::traceBegin();
#endif
  ninfer::dev::argmaxRows(logits, vocab, ids, partial, tickets);
#if NINFER_TRACE
  ninfer::dev::traceEnd(trace);
#endif
}
