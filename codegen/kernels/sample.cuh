// Temperature sampling on the device: the token ninfer::Sampler::sampleWith draws from a
// whole row with a temperature alone (runtime/src/Sampler.cpp, `draw`): weights p_i =
// float(exp(double(l_i - max) / T)) for the row's non-NaN logits, and the first id (in id
// order) whose running sum exceeds u * (the sum of all p), u the row's uniform
// (StepState::uniform); the row's last non-NaN id where none does; the argmax where the
// row's max is not finite (no distribution to draw from). The host sums in id order, one
// value after another; here a thread sums a run of ids in order, then the block scans its
// threads and the last block the slices, so a pick can differ from the host's only where u *
// sum falls within rounding (about 1e-16 of it) of a running sum.
// Launch: after ninfer_argmax_rows of the same logits (maxIds: its ids), the same grid
// (kArgmaxSlices, rows) and block (kArgmaxThreads), StepAbi.h. Block (s, r) takes slice s of
// row r, thread t a run of consecutive ids of the slice; it writes the slice's sum and last
// non-NaN id to partial[r][s] and partialLast[r][s]. The block whose ticket on row r comes
// last finds the slice where the running sum passes u * sum, sums that slice's runs again
// (the same values, so the same sums), and its threads walk their runs to the first id past
// u * sum; it writes out[r] and resets the ticket (tickets: zero at load, zero after).
// The row's sum of weights is also top-p sampling's mass (rowSums: the CUDA executor's
// nucleus steps, which take their candidates from topk.cuh and draw on the host).
// Not a plan op: every generated module carries it and the executor looks it up by name
// with its own parameters (like ninfer_argmax_rows).
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

// Thread threadIdx.x's run of ids [begin, end) in slice `slice` of a row of `vocab` ids.
struct SampleRun {
  int begin, end;
};
__device__ __forceinline__ SampleRun sampleRun(int vocab, int slice) {
  const int per = (vocab + kArgmaxSlices - 1) / kArgmaxSlices;
  const int sliceEnd = min(vocab, (slice + 1) * per);
  const int run = (per + kArgmaxThreads - 1) / kArgmaxThreads;
  const int begin = min(sliceEnd, slice * per + static_cast<int>(threadIdx.x) * run);
  return {begin, min(sliceEnd, begin + run)};
}

// Sampler's weight of logit l: the difference in float, the exponential in double, rounded
// to float; 0 for NaN.
__device__ __forceinline__ float sampleWeight(float l, float maxLogit, float temperature) {
  if (l != l)
    return 0.0f;
  return static_cast<float>(
      exp(static_cast<double>(l - maxLogit) / static_cast<double>(temperature)));
}

// The sum of the run's weights in id order, and its last non-NaN id (-1: none).
__device__ __forceinline__ double sampleRunSum(const float *row, SampleRun run, float maxLogit,
                                               float temperature, int &lastValid) {
  double sum = 0.0;
  for (int i = run.begin; i < run.end; ++i) {
    const float l = row[i];
    if (l == l)
      lastValid = i;
    sum += sampleWeight(l, maxLogit, temperature);
  }
  return sum;
}

// The block's inclusive scan of its threads' values, in threadIdx order (scan:
// kArgmaxThreads doubles; the same values give the same sums).
__device__ __forceinline__ double sampleScan(double v, double *scan) {
  scan[threadIdx.x] = v;
  __syncthreads();
  for (int d = 1; d < kArgmaxThreads; d *= 2) {
    const double add = threadIdx.x >= d ? scan[threadIdx.x - d] : 0.0;
    __syncthreads();
    scan[threadIdx.x] += add;
    __syncthreads();
  }
  return scan[threadIdx.x];
}

} // namespace dev
} // namespace ninfer

// partial: rows x kArgmaxSlices sums; partialLast: rows x kArgmaxSlices ids; tickets: rows
// counters; out: rows ids; rowSums: null, or rows sums of all the row's weights (top-p's mass:
// CudaExecutor::forwardSequenceNucleus; 0 where the row's max is not finite).
extern "C" __global__ void __launch_bounds__(ninfer::kArgmaxThreads)
    ninfer_sample_rows(const float *logits, int vocab, float temperature, const int *maxIds,
                       const ninfer::StepState *state, int *out, double *partial,
                       int *partialLast, unsigned int *tickets, double *rowSums) {
  using namespace ninfer;
  using namespace ninfer::dev;
  __shared__ double scan[kArgmaxThreads];
  __shared__ int sliceLast, pick, found;
  __shared__ double base, threshold;
  const int row = blockIdx.y, slice = blockIdx.x;
  const float *x = logits + static_cast<long long>(row) * vocab;
  const int maxId = maxIds[row];
  const float maxLogit = x[maxId];
  if (!isfinite(maxLogit)) { // every block returns here: no ticket is taken
    if (slice == 0 && threadIdx.x == 0) {
      out[row] = maxId;
      if (rowSums)
        rowSums[row] = 0.0;
    }
    return;
  }
  if (threadIdx.x == 0)
    sliceLast = -1;
  __syncthreads();
  int lastValid = -1;
  const double sum =
      sampleRunSum(x, sampleRun(vocab, slice), maxLogit, temperature, lastValid);
  atomicMax(&sliceLast, lastValid);
  const double total = sampleScan(sum, scan); // syncs: sliceLast is complete
  const int at = row * kArgmaxSlices + slice;
  if (threadIdx.x == kArgmaxThreads - 1) {
    partial[at] = total;
    partialLast[at] = sliceLast;
  }
  if (!lastBlockOf(&tickets[row], kArgmaxSlices))
    return;

  // The row's sum over the slices in order, and the first slice whose running sum passes
  // u * sum; where none does (rounding), the row's last non-NaN id.
  if (threadIdx.x == 0) {
    double rowSum = 0.0;
    for (int s = 0; s < kArgmaxSlices; ++s)
      rowSum += __ldcg(&partial[row * kArgmaxSlices + s]);
    if (rowSums)
      rowSums[row] = rowSum;
    threshold = state->uniform[row] * rowSum;
    double running = 0.0;
    found = -1;
    int rowLast = -1;
    for (int s = 0; s < kArgmaxSlices; ++s) {
      const double next = running + __ldcg(&partial[row * kArgmaxSlices + s]);
      if (found < 0 && threshold < next) {
        found = s;
        base = running;
      }
      running = next;
      rowLast = max(rowLast, __ldcg(&partialLast[row * kArgmaxSlices + s]));
    }
    pick = found < 0 ? rowLast : 0x7fffffff;
    tickets[row] = 0u;
  }
  __syncthreads();
  if (found >= 0) {
    // The slice again: each thread's run sum and the scan are those of its first pass.
    const SampleRun run = sampleRun(vocab, found);
    int unused = -1;
    sampleScan(sampleRunSum(x, run, maxLogit, temperature, unused), scan);
    double running = base + (threadIdx.x > 0 ? scan[threadIdx.x - 1] : 0.0);
    for (int i = run.begin; i < run.end; ++i) {
      const float p = sampleWeight(x[i], maxLogit, temperature);
      running += p;
      if (p > 0.0f && threshold < running) {
        atomicMin(&pick, i);
        break;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0 && pick == 0x7fffffff) // past every run's end by rounding
      pick = __ldcg(&partialLast[row * kArgmaxSlices + found]);
  }
  if (threadIdx.x == 0)
    out[row] = pick;
}
