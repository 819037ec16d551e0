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
// Launch: grid 1, block kNucleusThreads (StepAbi.h); weights: a float per id of the row.
// Not a plan op: every generated module carries it and the executor looks it up by name
// with its own parameters (like ninfer_argmax_rows).
#pragma once

#include "common.cuh"
#include "sample.cuh"

namespace ninfer {
namespace dev {

constexpr int kNucleusWarps = kNucleusThreads / kWarpSize;
constexpr int kNucleusUnroll = 8; // loads a thread issues before it uses them

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
  double merged[256];
  int counts[256];
  int warpCounts[kNucleusWarps];
  double warpSums[kNucleusWarps];
  float warpMax[kNucleusWarps], warpMin[kNucleusWarps];
  NucleusPick pick;
  int id;
};

// This thread's j-th id of the row's ids from i0 on, and the logits of all kNucleusUnroll of
// them (NaN past the row's end), their loads issued before any is used.
__device__ __forceinline__ int nucleusId(int i0, int j) {
  return i0 + j * kNucleusThreads + static_cast<int>(threadIdx.x);
}
__device__ __forceinline__ void loadLogits(const float *row, int vocab, int i0,
                                           float (&l)[kNucleusUnroll]) {
#pragma unroll
  for (int j = 0; j < kNucleusUnroll; ++j)
    l[j] = nucleusId(i0, j) < vocab ? row[nucleusId(i0, j)] : __int_as_float(0x7fffffff);
}

// f(i, logit) for each of this thread's ids of the row (NaN past its end).
template <class F>
__device__ __forceinline__ void forEachLogit(const float *row, int vocab, F &&f) {
  for (int i0 = 0; i0 < vocab; i0 += kNucleusUnroll * kNucleusThreads) {
    float l[kNucleusUnroll];
    loadLogits(row, vocab, i0, l);
#pragma unroll
    for (int j = 0; j < kNucleusUnroll; ++j)
      f(nucleusId(i0, j), l[j]);
  }
}

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
__device__ __noinline__ NucleusPick nucleusSelect(const float *row, const float *weights,
                                                  int vocab, NucleusSet set, double bound,
                                                  bool inclusive, NucleusShared &sh) {
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
    for (int i0 = 0; i0 < vocab; i0 += kNucleusUnroll * kNucleusThreads) {
      float l[kNucleusUnroll], w[kNucleusUnroll];
      bool on[kNucleusUnroll];
      loadLogits(row, vocab, i0, l);
#pragma unroll
      for (int j = 0; j < kNucleusUnroll; ++j) { // the weights of the matches, loaded together
        const unsigned int key = orderedKey(l[j]);
        on[j] = l[j] == l[j] && set.holds(key, nucleusId(i0, j)) && (key & mask) == prefix;
        w[j] = on[j] ? weights[nucleusId(i0, j)] : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kNucleusUnroll; ++j)
        addToBins(sh, on[j], (orderedKey(l[j]) >> shift) & 0xFFu, w[j]);
    }
    __syncthreads();
    if (threadIdx.x < 256) {
      double sum = 0.0;
      for (int w = 0; w < kNucleusWarps; ++w)
        sum += sh.bins[w][threadIdx.x];
      sh.merged[threadIdx.x] = sum;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // The bins from the highest: the first (holding elements) where the sum crosses;
      // where none does, the lowest that holds elements (only rounding leaves a byte past
      // the first without a crossing).
      int hit = -1, lowest = -1;
      double run = above, runToLowest = above;
      for (int b = 255; b >= 0; --b) {
        if (sh.counts[b] == 0)
          continue;
        const double next = run + sh.merged[b];
        if (inclusive ? next >= bound : next > bound) {
          hit = b;
          break;
        }
        lowest = b;
        runToLowest = run;
        run = next;
      }
      NucleusPick p{};
      if (hit < 0 && shift == 24) {
        p.found = false;
        p.above = run;
      } else {
        const int b = hit >= 0 ? hit : lowest;
        p.found = true;
        p.above = hit >= 0 ? run : runToLowest;
        p.key = prefix | (static_cast<unsigned int>(b) << shift);
        p.count = b >= 0 ? sh.counts[b] : 0;
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
// last such element where there are no more than n.
__device__ __noinline__ int nucleusNthId(const float *row, int vocab, unsigned int key, int n,
                                         NucleusShared &sh) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // Warp w counts the matches of its run of ids, kNucleusUnroll x 32 at a time.
  constexpr int kStep = kNucleusUnroll * kWarpSize;
  const int per = (vocab + kNucleusWarps - 1) / kNucleusWarps;
  const int begin = min(vocab, warp * per), end = min(vocab, begin + per);
  // The matches among ids i0 + 32 j + lane, as one mask per j.
  auto matches = [&](int i0, unsigned int (&hits)[kNucleusUnroll]) {
    float l[kNucleusUnroll];
#pragma unroll
    for (int j = 0; j < kNucleusUnroll; ++j) {
      const int i = i0 + j * kWarpSize + lane;
      l[j] = i < end ? row[i] : __int_as_float(0x7fffffff);
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
  if (threadIdx.x == 0)
    sh.id = -1;
  __syncthreads();
  int before = 0, total = 0;
  for (int w = 0; w < kNucleusWarps; ++w) {
    if (w < warp)
      before += sh.warpCounts[w];
    total += sh.warpCounts[w];
  }
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
      sh.id = at;
  }
  __syncthreads();
  const int id = sh.id;
  __syncthreads();
  return id;
}

} // namespace dev
} // namespace ninfer

// logits: the row; weights: vocab floats of scratch; out: the drawn id.
extern "C" __global__ void __launch_bounds__(ninfer::kNucleusThreads)
    ninfer_nucleus_row(const float *logits, int vocab, float temperature, float topP,
                       double uniform, float *weights, int *out) {
  using namespace ninfer;
  using namespace ninfer::dev;
  __shared__ NucleusShared sh;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // The row's highest and lowest non-NaN logits.
  float best = __int_as_float(0xff800000), least = __int_as_float(0x7f800000); // -inf, +inf
  int valid = 0;
  forEachLogit(logits, vocab, [&](int, float l) {
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
  float maxLogit = best, minLogit = least;
  valid = 0;
  for (int w = 0; w < kNucleusWarps; ++w) {
    maxLogit = fmaxf(maxLogit, sh.warpMax[w]);
    minLogit = fminf(minLogit, sh.warpMin[w]);
    valid += sh.warpCounts[w];
  }
  __syncthreads();
  if (valid == 0) { // every logit NaN
    if (threadIdx.x == 0)
      *out = 0;
    return;
  }
  // +inf present, or every logit -inf: the argmax, the first of the max's ids.
  if (!isfinite(maxLogit)) {
    const int id = nucleusNthId(logits, vocab, orderedKey(maxLogit), 0, sh);
    if (threadIdx.x == 0)
      *out = id;
    return;
  }
  double sum = 0.0;
  forEachLogit(logits, vocab, [&](int i, float l) {
    if (i < vocab) {
      const float p = sampleWeight(l, maxLogit, temperature);
      weights[i] = p;
      sum += p;
    }
  });
  for (int o = 16; o > 0; o /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0)
    sh.warpSums[warp] = sum;
  __syncthreads(); // also orders the weights' stores before the selections' loads
  double total = 0.0;
  for (int w = 0; w < kNucleusWarps; ++w)
    total += sh.warpSums[w];

  // The nucleus: through the element where the running sum reaches top_p * total. Its
  // elements of the cut's key are equal logits: the sum takes n of them, lower ids first.
  const NucleusSet row{0u, 0x7fffffff};
  const NucleusPick cut = nucleusSelect(logits, weights, vocab, row,
                                        static_cast<double>(topP) * total, true, sh);
  NucleusSet nucleus = row;
  double nucleusSum = cut.above;
  if (cut.found) {
    const double target = static_cast<double>(topP) * total;
    const double w = sampleWeight(orderedValue(cut.key), maxLogit, temperature);
    // (Clamped as doubles: a tiny w could take the quotient past int's range.)
    const double q = w > 0.0 ? ceil((target - cut.above) / w) : 1.0;
    int n = static_cast<int>(fmax(1.0, fmin(static_cast<double>(cut.count), q)));
    while (n > 1 && cut.above + (n - 1) * w >= target)
      --n;
    while (n < cut.count && cut.above + n * w < target)
      ++n;
    nucleus.cutKey = cut.key;
    nucleus.cutId = n < cut.count ? nucleusNthId(logits, vocab, cut.key, n - 1, sh) : 0x7fffffff;
    nucleusSum = cut.above + n * w;
  }

  // The draw: the first of the nucleus whose running sum passes u * its sum.
  const double threshold = uniform * nucleusSum;
  const NucleusPick draw = nucleusSelect(logits, weights, vocab, nucleus, threshold, false, sh);
  int id;
  if (draw.found) {
    const double w = sampleWeight(orderedValue(draw.key), maxLogit, temperature);
    const double q = w > 0.0 ? floor((threshold - draw.above) / w) : 0.0;
    int m = static_cast<int>(fmax(0.0, fmin(static_cast<double>(draw.count - 1), q)));
    while (m > 0 && draw.above + m * w > threshold)
      --m;
    while (m < draw.count - 1 && draw.above + (m + 1) * w <= threshold)
      ++m;
    id = nucleusNthId(logits, vocab, draw.key, m, sh);
  } else if (cut.found) { // the nucleus's last element
    id = nucleus.cutId != 0x7fffffff ? nucleus.cutId
                                      : nucleusNthId(logits, vocab, cut.key, 0x7fffffff, sh);
  } else { // the row's last element: the last id of its lowest logit
    id = nucleusNthId(logits, vocab, orderedKey(minLogit), 0x7fffffff, sh);
  }
  if (threadIdx.x == 0)
    *out = id;
}
