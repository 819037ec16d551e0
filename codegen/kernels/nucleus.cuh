// Top-p sampling over a whole row on the device: the token ninfer::Sampler::sampleWith draws
// with a temperature and top-p (no top-k) from a row of logits (runtime/src/Sampler.cpp,
// drawNucleus): weights p_i = float(exp(double(l_i - max) / T)) of the non-NaN logits, in
// the order of higher logit first and lower id first among equal ones; the nucleus is that
// order's shortest prefix whose running sum reaches top_p * (the sum of all p); the draw is
// the first of the nucleus whose running sum passes u * (the nucleus's sum), its last where
// none does (rounding); the argmax where the row's max is not finite, 0 for a row of NaN.
// The CUDA executor runs it where top-p's candidates (topk.cuh) do not hold the nucleus,
// instead of bringing the row to the host.
// How: neither cut needs the order itself, only where a running sum crosses a bound, so
// each is a radix select on the logits' keys (orderedKey: the bits made monotonic) from the
// highest byte down, with each byte's 256 bins weighted by the weights: the bin where the
// sum crosses, the weight of the bins above it carried into the next byte. Then the elements
// of the final key are equal logits of equal weights, so how many of them the sum takes is
// a division, and which they are (lower ids first) a count. Sums are grouped differently
// from the host's walk in order (and partly in the order shared-memory adds land), so a pick
// can differ from the host's only where a bound falls within rounding (about 1e-16 of it) of
// a running sum.
// Launch: a cooperative grid (every block resident at once) of at most kNucleusMaxBlocks
// blocks of kNucleusThreads (StepAbi.h); block b takes the b-th slice of the row. Each
// pass over the row ends at a grid barrier where the blocks exchange their bins (or
// counts) through the scratch; every block then merges them in block order, so every block
// makes the same choices. (In one block each pass took about 65 us on a 128K row, the draw
// about 0.9 ms.)
// Not a plan op: every generated module carries it and the executor looks it up by name
// with its own parameters (like ninfer_argmax_rows).
#pragma once

#include "common.cuh"
#include "sample.cuh"

namespace ninfer {
namespace dev {

constexpr int kNucleusWarps = kNucleusThreads / kWarpSize;
constexpr int kNucleusUnroll = 8; // loads a thread issues before it uses them

// The executor's scratch: the grid barrier's arrivals, the blocks that have left, the id a
// count found, and each block's 256 bin sums and counts, in two sets that passes alternate
// (a block writes a set only after a barrier that every block passes after reading it).
struct NucleusScratch {
  unsigned int arrived;
  unsigned int left;
  int id;
  int padding; // (the sums start 16 bytes in)
  double sums[2][kNucleusMaxBlocks][256];
  int counts[2][kNucleusMaxBlocks][256];
};
static_assert(sizeof(NucleusScratch) == kNucleusScratchBytes, "StepAbi.h's size");

// The elements a selection weighs: the non-NaN ones with keys above cutKey, and those of
// cutKey with ids up to cutId (the whole row: cutKey 0, which no non-NaN logit has).
struct NucleusSet {
  unsigned int cutKey;
  int cutId;
  __device__ __forceinline__ bool holds(unsigned int key, int id) const {
    return key > cutKey || (key == cutKey && id <= cutId);
  }
};

// Where a running sum crosses its bound: the key, the sum over the set's higher keys, and
// how many of the set's elements have the key. found: false where the sum over the whole
// set never crosses (then `above` is that sum).
struct NucleusPick {
  unsigned int key;
  double above;
  int count;
  bool found;
};

struct NucleusShared {
  double bins[kNucleusWarps][256]; // per warp: only the warp's own lanes add to them
  double runs[256]; // the running sum before each bin (from the highest)
  // The bins' scan over threads 0..255: its warps' totals, its total, and per warp the first
  // thread whose bin crosses and the last whose bin holds elements.
  double scanTotals[256 / kWarpSize], setSum;
  int warpHit[256 / kWarpSize], warpLowest[256 / kWarpSize];
  int counts[256];
  int warpCounts[kNucleusWarps];
  double warpSums[kNucleusWarps];
  float warpMax[kNucleusWarps], warpMin[kNucleusWarps];
  NucleusPick pick;
};

// The row, this block's slice of it, the weights' parameters, and the grid barrier's state.
struct NucleusGrid {
  const float *row;
  int begin, end; // this block's ids
  float maxLogit, temperature;
  NucleusScratch *scratch;
  unsigned int epoch; // arrivals the last barrier waited for (the same in every block)
  int set;            // the scratch's set of sums and counts the next exchange writes

  // Every block's writes to the scratch before it are visible to every block's loads after
  // it (__ldcg: not through L1), as in lastBlockOf.
  __device__ __forceinline__ void barrier() {
    epoch += gridDim.x;
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&scratch->arrived)
                   : "memory");
      unsigned int seen;
      do
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                     : "=r"(seen)
                     : "l"(&scratch->arrived)
                     : "memory");
      while (seen < epoch);
    }
    __syncthreads();
  }
  // Thread 0 stores the warps' values added up in warp order at `slot` (this block's entry
  // of an exchange), then the blocks meet.
  template <class T>
  __device__ __forceinline__ void publishBlockTotal(const T (&perWarp)[kNucleusWarps], T *slot) {
    __syncthreads();
    if (threadIdx.x == 0) {
      T total = 0;
      for (int w = 0; w < kNucleusWarps; ++w)
        total += perWarp[w];
      *slot = total;
    }
    barrier();
  }
  __device__ __forceinline__ double *sums(int block) { return scratch->sums[set][block]; }
  __device__ __forceinline__ int *counts(int block) { return scratch->counts[set][block]; }
  // f(b, value at(b)) for every block b in block order, the loads (__ldcg) issued 8 at a
  // time rather than each after the last has arrived.
  template <class At, class F> __device__ __forceinline__ void forBlocks(At &&at, F &&f) const {
    constexpr int kBatch = 8;
    for (int b0 = 0; b0 < static_cast<int>(gridDim.x); b0 += kBatch) {
      decltype(__ldcg(at(0))) v[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (b0 + i < static_cast<int>(gridDim.x))
          v[i] = __ldcg(at(b0 + i));
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (b0 + i < static_cast<int>(gridDim.x))
          f(b0 + i, v[i]);
    }
  }

  // This thread's j-th id of the slice's ids from i0 on.
  __device__ __forceinline__ int id(int i0, int j) const {
    return i0 + j * kNucleusThreads + static_cast<int>(threadIdx.x);
  }
  // The logits of all kNucleusUnroll of them (NaN past the slice), loads issued together.
  __device__ __forceinline__ void load(int i0, float (&l)[kNucleusUnroll]) const {
#pragma unroll
    for (int j = 0; j < kNucleusUnroll; ++j)
      l[j] = id(i0, j) < end ? row[id(i0, j)] : __int_as_float(0x7fffffff);
  }
  // f(i, logit) for each of this thread's ids of the slice.
  template <class F> __device__ __forceinline__ void forEach(F &&f) const {
    for (int i0 = begin; i0 < end; i0 += kNucleusUnroll * kNucleusThreads) {
      float l[kNucleusUnroll];
      load(i0, l);
#pragma unroll
      for (int j = 0; j < kNucleusUnroll; ++j)
        if (id(i0, j) < end)
          f(id(i0, j), l[j]);
    }
  }
  __device__ __forceinline__ float weight(float l) const {
    return sampleWeight(l, maxLogit, temperature);
  }
};

// Adds `weight` to bin `bin` of the warp's bins where `on`. Lanes of few distinct bins
// (a row of near-equal logits) first sum per bin across the warp; otherwise each lane adds
// its own (shared-memory double adds are compare-and-swap loops, which lanes of one bin
// would take in turn).
__device__ __forceinline__ void addToBins(NucleusShared &sh, bool on, unsigned int bin,
                                          float weight) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  unsigned int pending = __ballot_sync(0xffffffffu, on);
  const unsigned int peers = __match_any_sync(0xffffffffu, on ? bin : 0xFFFFFFFFu);
  const bool first = on && (peers & ((1u << lane) - 1u)) == 0u; // the lowest lane of its bin
  if (__popc(__ballot_sync(0xffffffffu, first)) > 4) {
    if (on) {
      atomicAdd(&sh.bins[warp][bin], static_cast<double>(weight));
      atomicAdd(&sh.counts[bin], 1);
    }
    return;
  }
  while (pending) {
    const unsigned int b = __shfl_sync(0xffffffffu, bin, __ffs(pending) - 1);
    const unsigned int group = __ballot_sync(0xffffffffu, on && bin == b);
    double sum = (group >> lane) & 1u ? static_cast<double>(weight) : 0.0;
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == __ffs(group) - 1) {
      sh.bins[warp][b] += sum;
      atomicAdd(&sh.counts[b], __popc(group));
    }
    pending &= ~group;
  }
}

// The key of the set where the running sum of weights, over keys from the highest, first
// passes `bound` (reaches it, when `inclusive`). Four passes over the row, a byte each.
// (Not inlined, nor nucleusNthId: the kernel calls each two to four times, and inlined they
// took NVRTC about 4 s more per module, a plan's compile from 6 to 10 s.)
__device__ __noinline__ NucleusPick nucleusSelect(NucleusGrid &grid, NucleusSet set,
                                                  double bound, bool inclusive,
                                                  NucleusShared &sh) {
  const int warp = threadIdx.x / kWarpSize;
  unsigned int prefix = 0u, mask = 0u;
  double above = 0.0;
  bool found = true;
  int count = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x % kWarpSize; b < 256; b += kWarpSize)
      sh.bins[warp][b] = 0.0;
    if (threadIdx.x < 256)
      sh.counts[threadIdx.x] = 0;
    __syncthreads();
    for (int i0 = grid.begin; i0 < grid.end; i0 += kNucleusUnroll * kNucleusThreads) {
      float l[kNucleusUnroll], w[kNucleusUnroll];
      bool on[kNucleusUnroll];
      grid.load(i0, l);
#pragma unroll
      for (int j = 0; j < kNucleusUnroll; ++j) {
        const unsigned int key = orderedKey(l[j]);
        on[j] = l[j] == l[j] && set.holds(key, grid.id(i0, j)) && (key & mask) == prefix;
        w[j] = on[j] ? grid.weight(l[j]) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kNucleusUnroll; ++j)
        addToBins(sh, on[j], (orderedKey(l[j]) >> shift) & 0xFFu, w[j]);
    }
    __syncthreads();
    if (threadIdx.x < 256) { // the block's bins out, then every block's in, in block order
      double sum = 0.0;
      for (int w = 0; w < kNucleusWarps; ++w)
        sum += sh.bins[w][threadIdx.x];
      grid.sums(blockIdx.x)[threadIdx.x] = sum;
      grid.counts(blockIdx.x)[threadIdx.x] = sh.counts[threadIdx.x];
    }
    grid.barrier();
    if (threadIdx.x < 256) {
      // Thread t takes bin 255 - t: the blocks' sums and counts of it, then the running sum
      // before it over the higher bins (a scan over the threads), and whether it crosses.
      const int bin = 255 - static_cast<int>(threadIdx.x), lane = threadIdx.x % kWarpSize;
      double v = 0.0;
      int n = 0;
      grid.forBlocks([&](int b) { return grid.sums(b) + bin; }, [&](int, double x) { v += x; });
      grid.forBlocks([&](int b) { return grid.counts(b) + bin; }, [&](int, int x) { n += x; });
      double through = v; // the warp's bins through this one
      for (int o = 1; o < kWarpSize; o *= 2) {
        const double up = __shfl_up_sync(0xffffffffu, through, o);
        if (lane >= o)
          through += up;
      }
      const double previous = __shfl_up_sync(0xffffffffu, through, 1); // (in every lane)
      const double upTo = lane == 0 ? 0.0 : previous;
      if (lane == kWarpSize - 1)
        sh.scanTotals[warp] = through;
      asm volatile("bar.sync 1, 256;" ::: "memory"); // the 8 warps of the bins
      double before = above;
      for (int w = 0; w < warp; ++w)
        before += sh.scanTotals[w];
      const double run = before + upTo, next = before + through;
      const bool crosses = n > 0 && (inclusive ? next >= bound : next > bound);
      const unsigned int hits = __ballot_sync(0xffffffffu, crosses);
      const unsigned int held = __ballot_sync(0xffffffffu, n > 0);
      sh.runs[bin] = run;
      sh.counts[bin] = n;
      if (lane == 0) {
        sh.warpHit[warp] = hits ? warp * kWarpSize + __ffs(hits) - 1 : 256;
        sh.warpLowest[warp] = held ? warp * kWarpSize + 31 - __clz(held) : -1;
      }
      if (threadIdx.x == 255)
        sh.setSum = next;
    }
    grid.set ^= 1;
    __syncthreads();
    if (threadIdx.x == 0) {
      // The first bin from the highest (holding elements) where the sum crosses; where
      // none does, the lowest that holds elements (only rounding leaves a byte past the
      // first without a crossing).
      int first = 256, last = -1;
      for (int w = 0; w < 256 / kWarpSize; ++w) {
        first = min(first, sh.warpHit[w]);
        last = max(last, sh.warpLowest[w]);
      }
      NucleusPick p{};
      if (first == 256 && shift == 24) {
        p.found = false;
        p.above = sh.setSum;
      } else {
        const int t = first < 256 ? first : last; // -1: no element under the prefix
        const int b = 255 - t;
        p.found = true;
        p.above = t >= 0 ? sh.runs[b] : above;
        p.key = prefix | (static_cast<unsigned int>(b & 0xFF) << shift);
        p.count = t >= 0 ? sh.counts[b] : 0;
      }
      sh.pick = p;
    }
    __syncthreads();
    const NucleusPick p = sh.pick;
    __syncthreads(); // every thread has read it before the next pass writes it
    if (!p.found || p.count == 0) {
      found = p.found && p.count > 0;
      above = p.above;
      break;
    }
    prefix = p.key;
    mask |= 0xFFu << shift;
    above = p.above;
    count = p.count;
  }
  return {prefix, above, count, found};
}

// The id of the n-th element (from 0, lower ids first) of the row whose logit has `key`; the
// last such element where there are no more than n. In every block.
__device__ __noinline__ int nucleusNthId(NucleusGrid &grid, unsigned int key, int n,
                                         NucleusShared &sh) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // Warp w counts the matches of its run of the slice's ids, kNucleusUnroll x 32 at a time.
  constexpr int kStep = kNucleusUnroll * kWarpSize;
  const int per = (grid.end - grid.begin + kNucleusWarps - 1) / kNucleusWarps;
  const int begin = min(grid.end, grid.begin + warp * per), end = min(grid.end, begin + per);
  // The matches among ids i0 + 32 j + lane, as one mask per j.
  auto matches = [&](int i0, unsigned int (&hits)[kNucleusUnroll]) {
    float l[kNucleusUnroll];
#pragma unroll
    for (int j = 0; j < kNucleusUnroll; ++j) {
      const int i = i0 + j * kWarpSize + lane;
      l[j] = i < end ? grid.row[i] : __int_as_float(0x7fffffff);
    }
#pragma unroll
    for (int j = 0; j < kNucleusUnroll; ++j)
      hits[j] = __ballot_sync(0xffffffffu, l[j] == l[j] && orderedKey(l[j]) == key);
  };
  int count = 0;
  for (int i0 = begin; i0 < end; i0 += kStep) {
    unsigned int hits[kNucleusUnroll];
    matches(i0, hits);
#pragma unroll
    for (int j = 0; j < kNucleusUnroll; ++j)
      count += __popc(hits[j]);
  }
  if (lane == 0)
    sh.warpCounts[warp] = count;
  grid.publishBlockTotal(sh.warpCounts, grid.counts(blockIdx.x));
  int before = 0, total = 0;
  grid.forBlocks([&](int b) { return grid.counts(b); }, [&](int b, int c) {
    before += b < static_cast<int>(blockIdx.x) ? c : 0;
    total += c;
  });
  for (int w = 0; w < warp; ++w)
    before += sh.warpCounts[w];
  grid.set ^= 1;
  const int target = min(n, total - 1); // the last where there are no more
  if (target >= 0 && before <= target && target < before + count) {
    int seen = before, at = -1;
    for (int i0 = begin; i0 < end && at < 0; i0 += kStep) {
      unsigned int hits[kNucleusUnroll];
      matches(i0, hits);
#pragma unroll
      for (int j = 0; j < kNucleusUnroll; ++j) {
        if (at < 0 && seen + __popc(hits[j]) > target) {
          unsigned int h = hits[j]; // its (target - seen)-th set bit
          for (int k = seen; k < target; ++k)
            h &= h - 1;
          at = i0 + j * kWarpSize + __ffs(h) - 1;
        }
        seen += __popc(hits[j]);
      }
    }
    if (lane == 0)
      grid.scratch->id = at;
  }
  grid.barrier(); // (the next write of the id comes after another barrier)
  return __ldcg(&grid.scratch->id);
}

// The draw of ninfer_nucleus_grid, in every block.
__device__ __forceinline__ int nucleusDraw(NucleusGrid &grid, float topP, double uniform,
                                           NucleusShared &sh) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // The row's highest and lowest non-NaN logits, and how many there are.
  float best = __int_as_float(0xff800000), least = __int_as_float(0x7f800000); // -inf, +inf
  int valid = 0;
  grid.forEach([&](int, float l) {
    if (l == l) {
      best = fmaxf(best, l);
      least = fminf(least, l);
      ++valid;
    }
  });
  best = warpMax(best);
  for (int o = 16; o > 0; o /= 2) {
    least = fminf(least, __shfl_xor_sync(0xffffffffu, least, o));
    valid += __shfl_xor_sync(0xffffffffu, valid, o);
  }
  if (lane == 0) {
    sh.warpMax[warp] = best;
    sh.warpMin[warp] = least;
    sh.warpCounts[warp] = valid;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 0; w < kNucleusWarps; ++w) {
      best = fmaxf(best, sh.warpMax[w]);
      least = fminf(least, sh.warpMin[w]);
    }
    int blockValid = 0;
    for (int w = 0; w < kNucleusWarps; ++w)
      blockValid += sh.warpCounts[w];
    grid.sums(blockIdx.x)[0] = best;
    grid.sums(blockIdx.x)[1] = least;
    grid.counts(blockIdx.x)[0] = blockValid;
  }
  grid.barrier();
  float maxLogit = __int_as_float(0xff800000), minLogit = __int_as_float(0x7f800000);
  valid = 0;
  grid.forBlocks([&](int b) { return grid.sums(b); },
                 [&](int, double v) { maxLogit = fmaxf(maxLogit, static_cast<float>(v)); });
  grid.forBlocks([&](int b) { return grid.sums(b) + 1; },
                 [&](int, double v) { minLogit = fminf(minLogit, static_cast<float>(v)); });
  grid.forBlocks([&](int b) { return grid.counts(b); }, [&](int, int c) { valid += c; });
  grid.set ^= 1;
  if (valid == 0) // every logit NaN
    return 0;
  // +inf present, or every logit -inf: the argmax, the first of the max's ids.
  if (!isfinite(maxLogit))
    return nucleusNthId(grid, orderedKey(maxLogit), 0, sh);
  grid.maxLogit = maxLogit;
  double sum = 0.0;
  grid.forEach([&](int, float l) { sum += grid.weight(l); });
  for (int o = 16; o > 0; o /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0)
    sh.warpSums[warp] = sum;
  grid.publishBlockTotal(sh.warpSums, grid.sums(blockIdx.x));
  double total = 0.0;
  grid.forBlocks([&](int b) { return grid.sums(b); }, [&](int, double v) { total += v; });
  grid.set ^= 1;

  // The nucleus: through the element where the running sum reaches top_p * total. Its
  // elements of the cut's key are equal logits: the sum takes n of them, lower ids first.
  const NucleusSet row{0u, 0x7fffffff};
  const double target = static_cast<double>(topP) * total;
  const NucleusPick cut = nucleusSelect(grid, row, target, true, sh);
  NucleusSet nucleus = row;
  double nucleusSum = cut.above;
  if (cut.found) {
    const double w = grid.weight(orderedValue(cut.key));
    // (Clamped as doubles: a tiny w could take the quotient past int's range.)
    const double q = w > 0.0 ? ceil((target - cut.above) / w) : 1.0;
    int n = static_cast<int>(fmax(1.0, fmin(static_cast<double>(cut.count), q)));
    while (n > 1 && cut.above + (n - 1) * w >= target)
      --n;
    while (n < cut.count && cut.above + n * w < target)
      ++n;
    nucleus.cutKey = cut.key;
    nucleus.cutId = n < cut.count ? nucleusNthId(grid, cut.key, n - 1, sh) : 0x7fffffff;
    nucleusSum = cut.above + n * w;
  }

  // The draw: the first of the nucleus whose running sum passes u * its sum.
  const double threshold = uniform * nucleusSum;
  const NucleusPick draw = nucleusSelect(grid, nucleus, threshold, false, sh);
  if (draw.found) {
    const double w = grid.weight(orderedValue(draw.key));
    const double q = w > 0.0 ? floor((threshold - draw.above) / w) : 0.0;
    int m = static_cast<int>(fmax(0.0, fmin(static_cast<double>(draw.count - 1), q)));
    while (m > 0 && draw.above + m * w > threshold)
      --m;
    while (m < draw.count - 1 && draw.above + (m + 1) * w <= threshold)
      ++m;
    return nucleusNthId(grid, draw.key, m, sh);
  }
  if (cut.found) // the nucleus's last element
    return nucleus.cutId != 0x7fffffff ? nucleus.cutId
                                       : nucleusNthId(grid, cut.key, 0x7fffffff, sh);
  // The row's last element: the last id of its lowest logit.
  return nucleusNthId(grid, orderedKey(minLogit), 0x7fffffff, sh);
}

} // namespace dev
} // namespace ninfer

// logits: the row; scratch: kNucleusScratchBytes, zero (and zero again after the draw);
// out: the drawn id.
extern "C" __global__ void __launch_bounds__(ninfer::kNucleusThreads)
    ninfer_nucleus_grid(const float *logits, int vocab, float temperature, float topP,
                        double uniform, void *scratch, int *out) {
  using namespace ninfer;
  using namespace ninfer::dev;
  __shared__ NucleusShared sh;
  const int per = (vocab + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int begin = min(vocab, static_cast<int>(blockIdx.x) * per);
  NucleusGrid grid{logits, begin, min(vocab, begin + per), 0.0f, temperature,
                   static_cast<NucleusScratch *>(scratch), 0u, 0};
  const int id = nucleusDraw(grid, topP, uniform, sh);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *out = id;
  // The last block to leave (every other one past its last barrier) zeroes the counters.
  if (lastBlockOf(&grid.scratch->left, gridDim.x) && threadIdx.x == 0) {
    grid.scratch->arrived = 0u;
    grid.scratch->left = 0u;
  }
}
