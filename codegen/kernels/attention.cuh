// Causal GQA attention over a KV cache [CONTEXT, KVH, HD] of f16 (KVT = 1) or
// int8 codes with an f32 scale per (position, kv head) (KVT = 18, layout in
// KvFormat.h). HD is a multiple of 8. Query p = pos + t sees keys j in
// [lo, p], lo = max(0, p - WINDOW + 1) when WINDOW > 0 else 0; head h reads kv
// head h / (HEADS / KVH). Three launches per op with static grids; the plan
// runs the decode launch in 1-token steps only and the prefill launch in
// longer ones (Launch min/max_tokens), and each kernel also returns at once
// when the step is not its kind. A plan of several sequences holds one cache
// per sequence (slotCache), each laid out as above; a token reads and writes
// its own sequence's slot at its own position (StepAbi.h), and a batch step
// (one token of each of n sequences) runs the decode kernel with grid y = n,
// one row per y (the prefill kernel never runs in batch steps):
//
// kvAppend: writes the step's k, v rows at positions pos..pos+n-1. f16: f32 ->
//   f16 elementwise, block THREADS, grid (ceil(KVH*HD/THREADS) capped, n, 1).
//   int8: one warp per (token, kv head) row (max|x| by a warp reduction, then
//   the header's codes), grid (ceil(KVH / warps), n, 1). A separate launch, so
//   every query of a prefill sees all earlier keys of the step.
//
// attentionDecode (n == 1; flash-decoding): grid (KVH * HCH, 1, SPLITS), block
//   kDecodeThreads. A block takes up to HPB = min(GROUP, 8) query heads of one
//   kv head (HCH blocks cover a group) and one slice of the visible keys: the
//   run-time split count is ceil(len / kDecodeMinKeys) capped at SPLITS, so a
//   block whose split is empty returns. Each K/V row is read once per block
//   with one 16-byte (f16) or 8-byte (int8) load per lane: LPR lanes (CHUNKS =
//   HD/8 of them busy) cover a row, so a warp takes 32/LPR rows at a time, two
//   rows per lane in flight. Every lane keeps an online softmax per head in
//   f32 (the accumulators are rescaled only when a head's running max moves);
//   row groups merge by shuffles, warps through shared memory. With one
//   split the block writes the output; otherwise it writes (max, sum, acc)
//   partials to the workspace and the last block of the kv head (an atomic
//   ticket) combines them in split order, so results do not depend on block
//   timing, then resets its counter to 0 for the next op (finishDecodeBlock:
//   one round of loads for the split weights, float4 partials eight splits at
//   a time; a combine that walked the splits one load after another took 4.5
//   of the kernel's 11 us on the H200). attentionDecodeMma (below) is the same
//   kernel on tensor cores for f16 and int8 caches; in single-sequence one-token steps
//   over f16 caches it also takes the RoPE of q and k and the append (rope.cuh DecodeRope).
//   Workspace (f32 units): acc [HEADS][SPLITS][HD], max [HEADS][SPLITS],
//   sum [HEADS][SPLITS], then KVH * HCH u32 counters (zeroed at load), padded to 16 bytes;
//   attentionWorkspaceBytes in KernelEmitter.cpp sizes it the same way. A batch
//   step's row z uses the z-th such block (decodeWorkspaceFloats apart).
//
// attentionPrefill (n > 1; tiled flash attention on CUDA cores): grid (HEADS,
//   n, 1), block kPrefillThreads (8 warps); block (h, y) takes queries
//   y*BQ..y*BQ+BQ-1 (BQ = 8 * QPW; blocks past the step return). q tile in
//   shared memory as f32; K and V tiles of 32 keys staged as f16 (int8 codes
//   are exact in f16; their row scales are kept beside), K rows padded by 4
//   halves so the lane-per-key 8-byte reads are conflict free. Warp w owns QPW
//   queries: lane = key for the scores (q read as broadcast float4), online
//   softmax per query with warp max/sum, then lane = dims for P.V with the
//   probabilities broadcast by shuffles. Dynamic shared memory:
//   BQ*HD*4 + 32*(HD+4)*2 + 32*HD*2 + 256 bytes (prefillSharedBytes).
#pragma once

#include "AttentionShapes.h"
#include "KvFormat.h"
#include "common.cuh"
#include "gemm_mma.cuh"
#include "rope.cuh"

namespace ninfer {
namespace dev {

constexpr int kKvF16 = 1;  // plan DType F16
constexpr int kKvQ8 = 18;  // plan DType Q8_KV
using attn::decodeHeadChunks;
using attn::decodeHeadsPerBlock;
using attn::kDecodeMinKeys;
using attn::kDecodeMmaMinKeys;
using attn::kDecodeThreads;
using attn::kDecodeTileKeys;
using attn::kPrefillKeys;
using attn::kPrefillThreads;

template <int CONTEXT, int KVH, int HD>
__device__ __forceinline__ float *q8Scales(void *cache) {
  return reinterpret_cast<float *>(static_cast<char *>(cache) +
                                   kv::q8ScaleOffset(CONTEXT, KVH, HD));
}
template <int CONTEXT, int KVH, int HD>
__device__ __forceinline__ const float *q8Scales(const void *cache) {
  return reinterpret_cast<const float *>(static_cast<const char *>(cache) +
                                         kv::q8ScaleOffset(CONTEXT, KVH, HD));
}

// Sequence `slot`'s cache: the slots of a plan of several sequences follow each
// other, each a whole cache of one sequence (f16, or KvFormat.h's int8 layout).
template <int KVT, int CONTEXT, int KVH, int HD>
__device__ __forceinline__ void *slotCache(void *cache, int slot) {
  constexpr long long kSlotBytes = KVT == kKvQ8 ? kv::q8CacheBytes(CONTEXT, KVH, HD)
                                                : 2ll * CONTEXT * KVH * HD;
  return static_cast<char *>(cache) + slot * kSlotBytes;
}
template <int KVT, int CONTEXT, int KVH, int HD>
__device__ __forceinline__ const void *slotCache(const void *cache, int slot) {
  return slotCache<KVT, CONTEXT, KVH, HD>(const_cast<void *>(cache), slot);
}

// Sign-extends byte i of w.
__device__ __forceinline__ float q8Byte(unsigned int w, int i) {
  return float(static_cast<int>(w << (24 - 8 * i)) >> 24);
}

// Values d0..d0+7 of cache row `row` (= position * KVH + kv head), unscaled.
template <int KVT, int HD>
__device__ __forceinline__ void loadRow8(const void *cache, long long row, int d0, float *out) {
  if constexpr (KVT == kKvQ8) {
    const signed char *bytes = static_cast<const signed char *>(cache) + row * HD + d0;
    const uint2 raw = loadProduced(reinterpret_cast<const uint2 *>(bytes));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[i] = q8Byte(raw.x, i);
      out[4 + i] = q8Byte(raw.y, i);
    }
  } else {
    const unsigned short *halves = static_cast<const unsigned short *>(cache) + row * HD + d0;
    const uint4 raw = loadProduced(reinterpret_cast<const uint4 *>(halves));
    unpack16<kF16>(raw, out);
  }
}

// Row scale (1 for f16 caches).
template <int KVT, int CONTEXT, int KVH, int HD>
__device__ __forceinline__ float rowScale(const void *cache, long long row) {
  if constexpr (KVT == kKvQ8)
    return loadProducedScalar(q8Scales<CONTEXT, KVH, HD>(cache) + row);
  else
    return 1.0f;
}

// One warp quantizes a row of HD values (KvFormat.h).
template <int HD>
__device__ __forceinline__ void quantizeRowQ8(const float *x, signed char *codes, float *scale,
                                              int lane) {
  float absMax = 0.0f;
  for (int d = lane; d < HD; d += kWarpSize)
    absMax = fmaxf(absMax, fabsf(x[d]));
  const float s = kv::q8Scale(warpMax(absMax));
  for (int d = lane; d < HD; d += kWarpSize)
    codes[d] = kv::q8Code(x[d], s);
  if (lane == 0)
    *scale = s;
}

template <int KVT, int KVH, int HD, int CONTEXT, int THREADS>
__device__ __forceinline__ void kvAppend(const float *k, const float *v, void *kCache,
                                         void *vCache, const StepState *state) {
  constexpr int kWidth = KVH * HD;
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const int row = stepPosition(state, t);
  if (row < 0 || row >= CONTEXT)
    return;
  kCache = slotCache<KVT, CONTEXT, KVH, HD>(kCache, stepSequence(state, t));
  vCache = slotCache<KVT, CONTEXT, KVH, HD>(vCache, stepSequence(state, t));
  const long long src = static_cast<long long>(t) * kWidth;
  const long long dst = static_cast<long long>(row) * kWidth;
  if constexpr (KVT == kKvQ8) {
    const int h = blockIdx.x * (THREADS / kWarpSize) + threadIdx.x / kWarpSize;
    if (h >= KVH)
      return; // whole warps; nothing below synchronizes the block
    const int lane = threadIdx.x % kWarpSize;
    const long long scaleIndex = static_cast<long long>(row) * KVH + h;
    quantizeRowQ8<HD>(k + src + h * HD, static_cast<signed char *>(kCache) + dst + h * HD,
                      q8Scales<CONTEXT, KVH, HD>(kCache) + scaleIndex, lane);
    quantizeRowQ8<HD>(v + src + h * HD, static_cast<signed char *>(vCache) + dst + h * HD,
                      q8Scales<CONTEXT, KVH, HD>(vCache) + scaleIndex, lane);
  } else {
    unsigned short *kc = static_cast<unsigned short *>(kCache);
    unsigned short *vc = static_cast<unsigned short *>(vCache);
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < kWidth; i += gridDim.x * THREADS) {
      kc[dst + i] = f32ToF16(k[src + i]);
      vc[dst + i] = f32ToF16(v[src + i]);
    }
  }
}

// Merges softmax state (m2, l2, a2) into (m, l, a); l == 0 marks an empty state.
template <int N>
__device__ __forceinline__ void mergeSoftmax(float &m, float &l, float *a, float m2, float l2,
                                             const float *a2) {
  const float mNew = fmaxf(m, m2);
  const float f1 = l > 0.0f ? expf(m - mNew) : 0.0f;
  const float f2 = l2 > 0.0f ? expf(m2 - mNew) : 0.0f;
  l = l * f1 + l2 * f2;
#pragma unroll
  for (int i = 0; i < N; ++i)
    a[i] = a[i] * f1 + a2[i] * f2;
  m = mNew;
}

// f32 units of one row's decode workspace (layout above).
template <int HEADS, int KVH, int HD, int SPLITS>
__host__ __device__ constexpr long long decodeWorkspaceFloats() {
  // Rounded up to 4 floats, so every row's partials stay 16-byte aligned.
  return (static_cast<long long>(HEADS) * SPLITS * (HD + 2) +
          static_cast<long long>(KVH) * decodeHeadChunks(HEADS / KVH) + 3) / 4 * 4;
}

// Where a decode block works: the keys [j0, j1) of its split (of `splits`),
// its kv head and its query heads firstHead .. firstHead + heads - 1.
struct DecodeSlice {
  int splits, split, j0, j1, kvh, firstHead, heads;
};

// Moves q, the caches, out and the workspace to this block's row of the step
// (grid y in batch steps; single-sequence steps decode one token) and splits
// the visible keys by RULE (AttentionShapes.h): into at most SPLITS runs of up to minKeys
// keys (kSplitRounds), of whole rounds of minKeys keys (kSplitBalanced,
// kDecodeSplitBalance), or at most grid z runs of kBatchDecodeMinKeys keys or more, about
// kBatchDecodeBlocks blocks in all (kSplitBatch). The split is grid z. False when the block
// has nothing to do (not a decode step, a row past the step, an empty split).
template <int HEADS, int KVH, int HD, int WINDOW, int CONTEXT, int KVT, int SPLITS,
          int RULE = attn::kSplitRounds>
__device__ __forceinline__ bool decodeSlice(int minKeys, const float *&q, const void *&kCache,
                                            const void *&vCache, float *&out, void *&workspace,
                                            const StepState *state, DecodeSlice &slice) {
  constexpr int kGroup = HEADS / KVH;
  constexpr int kHpb = decodeHeadsPerBlock(kGroup);
  constexpr int kHch = decodeHeadChunks(kGroup);
  const int row = blockIdx.y;
  if ((state->batch == 0 && state->nTokens != 1) || row >= state->nTokens)
    return false;
  kCache = slotCache<KVT, CONTEXT, KVH, HD>(kCache, stepSequence(state, row));
  vCache = slotCache<KVT, CONTEXT, KVH, HD>(vCache, stepSequence(state, row));
  q += static_cast<long long>(row) * HEADS * HD;
  out += static_cast<long long>(row) * HEADS * HD;
  if (workspace)
    workspace = static_cast<float *>(workspace) +
                row * decodeWorkspaceFloats<HEADS, KVH, HD, SPLITS>();
  const int p = min(stepPosition(state, row), CONTEXT - 1);
  const int lo = WINDOW > 0 ? max(0, p - WINDOW + 1) : 0;
  const int len = p - lo + 1;
  int keys = minKeys, most = SPLITS; // keys per split, splits
  if constexpr (RULE == attn::kSplitBalanced) {
    const float rounds = sqrtf(static_cast<float>(len) / (minKeys * attn::kDecodeSplitBalance));
    keys *= max(1, __float2int_rn(rounds));
    most = min(SPLITS, attn::kDecodeMmaMaxSplits);
  } else if constexpr (RULE == attn::kSplitBatch) {
    keys = max(minKeys, attn::kBatchDecodeMinKeys);
    const int blocks = state->nTokens * static_cast<int>(gridDim.x);
    most = min(static_cast<int>(gridDim.z), max(1, attn::kBatchDecodeBlocks / blocks));
  }
  int splits = min(most, (len + keys - 1) / keys);
  const int chunk = (len + splits - 1) / splits;
  splits = (len + chunk - 1) / chunk; // every split below is non-empty
  slice.splits = splits;
  slice.split = blockIdx.z;
  if (slice.split >= splits)
    return false;
  slice.j0 = lo + slice.split * chunk;
  slice.j1 = min(slice.j0 + chunk, p + 1);
  slice.kvh = blockIdx.x / kHch;
  slice.firstHead = slice.kvh * kGroup + (blockIdx.x % kHch) * kHpb;
  slice.heads = min(kHpb, (slice.kvh + 1) * kGroup - slice.firstHead);
  return true;
}

// The end of a decode block: merges the softmax states its WARPS left in
// shared memory (sM, sL: [WARPS][HPB] max and sum in natural-log units, l == 0
// for an empty state; sAcc: [WARPS][HPB][HD] unnormalized outputs; sF:
// [WARPS][HPB] scratch), then writes the output (one split) or its split's
// partials, and the last block of the kv head combines the splits in order.
template <int HEADS, int HD, int SPLITS, int WARPS, int HPB>
__device__ __forceinline__ void finishDecodeBlock(const float *sM, const float *sL, float *sF,
                                                  const float *sAcc, const DecodeSlice &slice,
                                                  float *out, void *workspace) {
  __shared__ float sMax[HPB], sSum[HPB];
  const int heads = slice.heads, splits = slice.splits, s = slice.split;
  const float negInf = __int_as_float(0xff800000);
  __syncthreads();
  if (threadIdx.x < heads) {
    const int g = threadIdx.x;
    float mAll = negInf;
#pragma unroll
    for (int w = 0; w < WARPS; ++w)
      mAll = fmaxf(mAll, sM[w * HPB + g]);
    float lAll = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float f = sL[w * HPB + g] > 0.0f ? expf(sM[w * HPB + g] - mAll) : 0.0f;
      sF[w * HPB + g] = f;
      lAll += sL[w * HPB + g] * f;
    }
    sMax[g] = mAll;
    sSum[g] = lAll;
  }
  __syncthreads();

  float *partAcc = static_cast<float *>(workspace);
  float *partMax = partAcc + HEADS * SPLITS * HD;
  float *partSum = partMax + HEADS * SPLITS;
  unsigned int *counters = reinterpret_cast<unsigned int *>(partSum + HEADS * SPLITS);
  for (int idx = threadIdx.x; idx < heads * HD; idx += blockDim.x) {
    const int g = idx / HD;
    const int d = idx % HD;
    float a = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w)
      a += sAcc[(w * HPB + g) * HD + d] * sF[w * HPB + g];
    const int h = slice.firstHead + g;
    if (splits == 1) {
      out[static_cast<long long>(h) * HD + d] = a / sSum[g];
    } else {
      partAcc[(h * SPLITS + s) * HD + d] = a;
      if (d == 0) {
        partMax[h * SPLITS + s] = sMax[g];
        partSum[h * SPLITS + s] = sSum[g];
      }
    }
  }
  if (splits == 1)
    return;

  // The last block of this kv head's head chunk combines the splits in order: a float4 of
  // one head's output per thread, its splits' partials, maxima and sums loaded eight
  // splits at a time in one round, merged as an online softmax over the splits.
  if (!lastBlockOf(&counters[blockIdx.x], static_cast<unsigned int>(splits)))
    return;
  for (int idx = threadIdx.x; idx < heads * HD / 4; idx += blockDim.x) {
    const int g = idx / (HD / 4);
    const int d = 4 * (idx % (HD / 4));
    const int h = slice.firstHead + g;
    const float4 *part = reinterpret_cast<const float4 *>(partAcc + h * SPLITS * HD + d);
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float mAll = negInf, lAll = 0.0f;
    for (int i0 = 0; i0 < splits; i0 += 8) {
      float4 p[8];
      float mi[8], li[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const bool in = i0 + k < splits;
        p[k] = in ? __ldcg(part + (i0 + k) * (HD / 4)) : make_float4(0, 0, 0, 0);
        mi[k] = in ? __ldcg(partMax + h * SPLITS + i0 + k) : negInf;
        li[k] = in ? __ldcg(partSum + h * SPLITS + i0 + k) : 0.0f;
      }
      float m = mAll;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        m = fmaxf(m, mi[k]);
      const float r = expf(mAll - m); // 0 on the first batch (mAll is -inf)
      o = make_float4(o.x * r, o.y * r, o.z * r, o.w * r);
      lAll *= r;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float w = i0 + k < splits ? expf(mi[k] - m) : 0.0f;
        lAll += li[k] * w;
        o.x += p[k].x * w;
        o.y += p[k].y * w;
        o.z += p[k].z * w;
        o.w += p[k].w * w;
      }
      mAll = m;
    }
    const float inv = 1.0f / lAll;
    *reinterpret_cast<float4 *>(out + static_cast<long long>(h) * HD + d) =
        make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
  }
  if (threadIdx.x == 0)
    counters[blockIdx.x] = 0u;
}

template <int HEADS, int KVH, int HD, int WINDOW, int CONTEXT, int KVT, int SPLITS>
__device__ __forceinline__ void attentionDecode(const float *q, const void *kCache,
                                                const void *vCache, float *out, void *workspace,
                                                float scale, const StepState *state) {
  static_assert(HD % 8 == 0 && HD <= 256, "head_dim must be a multiple of 8, at most 256");
  constexpr int kGroup = HEADS / KVH;
  constexpr int kHpb = decodeHeadsPerBlock(kGroup);
  constexpr int kChunks = HD / 8;
  constexpr int kLpr = kChunks <= 1 ? 1 : kChunks <= 2 ? 2 : kChunks <= 4 ? 4 : kChunks <= 8 ? 8
                     : kChunks <= 16 ? 16 : 32;
  constexpr int kRpw = kWarpSize / kLpr;
  constexpr int kWarps = kDecodeThreads / kWarpSize;
  constexpr int kRowGroups = kWarps * kRpw;
  constexpr int kUnroll = 2;
  __shared__ float sM[kWarps][kHpb];
  __shared__ float sL[kWarps][kHpb];
  __shared__ float sF[kWarps][kHpb];
  __shared__ __align__(16) float sAcc[kWarps][kHpb][HD];

  DecodeSlice slice;
  if (!decodeSlice<HEADS, KVH, HD, WINDOW, CONTEXT, KVT, SPLITS>(kDecodeMinKeys, q, kCache, vCache,
                                                                 out, workspace, state, slice))
    return;
  const int j0 = slice.j0, j1 = slice.j1, kvh = slice.kvh;
  const int firstHead = slice.firstHead, heads = slice.heads;

  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int c = lane % kLpr; // this lane's 8 dims of a row: 8c..8c+7
  const bool busy = c < kChunks;
  const float negInf = __int_as_float(0xff800000);

  float qv[kHpb][8];
  float m[kHpb], l[kHpb], acc[kHpb][8];
#pragma unroll
  for (int g = 0; g < kHpb; ++g) {
    const bool use = busy && g < heads;
    const float *qRow = q + static_cast<long long>(firstHead + (use ? g : 0)) * HD + 8 * c;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      qv[g][i] = use ? qRow[i] : 0.0f;
      acc[g][i] = 0.0f;
    }
    m[g] = negInf;
    l[g] = 0.0f;
  }

  // Rows base + lane / kLpr + u * kRowGroups; base is uniform per warp, so the
  // shuffles below always run on full warps.
  for (int base = j0 + warp * kRpw; base < j1; base += kRowGroups * kUnroll) {
    float kf[kUnroll][8], vf[kUnroll][8], ks[kUnroll], vs[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + lane / kLpr + u * kRowGroups;
      ok[u] = j < j1;
      const long long row = static_cast<long long>(ok[u] ? j : j0) * KVH + kvh;
      if (ok[u] && busy) {
        loadRow8<KVT, HD>(kCache, row, 8 * c, kf[u]);
        loadRow8<KVT, HD>(vCache, row, 8 * c, vf[u]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i)
          kf[u][i] = vf[u][i] = 0.0f;
      }
      ks[u] = ok[u] ? rowScale<KVT, CONTEXT, KVH, HD>(kCache, row) : 0.0f;
      vs[u] = ok[u] ? rowScale<KVT, CONTEXT, KVH, HD>(vCache, row) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int g = 0; g < kHpb; ++g) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i)
          d += qv[g][i] * kf[u][i];
#pragma unroll
        for (int offset = kLpr / 2; offset > 0; offset >>= 1)
          d += __shfl_xor_sync(0xffffffffu, d, offset);
        if (ok[u]) {
          const float score = d * ks[u] * scale;
          if (score > m[g]) { // rescale only when the max moves (0 on the first key)
            const float correction = expf(m[g] - score);
            l[g] *= correction;
#pragma unroll
            for (int i = 0; i < 8; ++i)
              acc[g][i] *= correction;
            m[g] = score;
          }
          const float weight = expf(score - m[g]);
          l[g] += weight;
          const float wv = weight * vs[u];
#pragma unroll
          for (int i = 0; i < 8; ++i)
            acc[g][i] += wv * vf[u][i];
        }
      }
    }
  }

  // Row groups of a warp hold the same dims of different rows: merge them.
#pragma unroll
  for (int offset = kLpr; offset < kWarpSize; offset <<= 1) {
#pragma unroll
    for (int g = 0; g < kHpb; ++g) {
      float other[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        other[i] = __shfl_xor_sync(0xffffffffu, acc[g][i], offset);
      const float m2 = __shfl_xor_sync(0xffffffffu, m[g], offset);
      const float l2 = __shfl_xor_sync(0xffffffffu, l[g], offset);
      mergeSoftmax<8>(m[g], l[g], acc[g], m2, l2, other);
    }
  }
  if (lane < kLpr) {
#pragma unroll
    for (int g = 0; g < kHpb; ++g) {
      if (lane == 0) {
        sM[warp][g] = m[g];
        sL[warp][g] = l[g];
      }
      if (busy)
#pragma unroll
        for (int i = 0; i < 8; ++i)
          sAcc[warp][g][8 * c + i] = acc[g][i];
    }
  }
  finishDecodeBlock<HEADS, HD, SPLITS, kWarps, kHpb>(&sM[0][0], &sL[0][0], &sF[0][0],
                                                     &sAcc[0][0][0], slice, out, workspace);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// Two floats as a pair of halves (hi) plus the pair of their rounding errors
// (lo): hi + lo carries ~22 bits, so two f16 mma passes give f32-grade products.
__device__ __forceinline__ void splitHalves(float a, float b, unsigned int &hi, unsigned int &lo) {
  hi = packPair<kF16>(a, b);
  lo = packPair<kF16>(a - f16ToF32(static_cast<unsigned short>(hi & 0xffffu)),
                      b - f16ToF32(static_cast<unsigned short>(hi >> 16)));
}

// A warp widens a tile of kDecodeTileKeys rows of HD int8 codes (rows HD bytes apart) into
// f16 rows LD halves apart: per 4 codes, the biased bytes (code + 128) become the low bytes
// of 0x64xx halves (1024 + code + 128, exact) and one HSUB2 per pair removes 1152.
template <int HD, int LD>
__device__ __forceinline__ void widenCodes(const unsigned char *codes, unsigned short *tile,
                                           int lane) {
  const unsigned int bias = 0x64806480u; // 1152 in both halves
#pragma unroll
  for (int c = lane; c < kDecodeTileKeys * HD / 16; c += kWarpSize) {
    const int r = c / (HD / 16), col = (c % (HD / 16)) * 16;
    const uint4 w = *reinterpret_cast<const uint4 *>(codes + r * HD + col);
    const unsigned int words[4] = {w.x ^ 0x80808080u, w.y ^ 0x80808080u, w.z ^ 0x80808080u,
                                   w.w ^ 0x80808080u};
    unsigned int h[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      unsigned int lo, hi;
      asm("prmt.b32 %0, %1, 0x64646464, 0x7170;" : "=r"(lo) : "r"(words[i]));
      asm("prmt.b32 %0, %1, 0x64646464, 0x7372;" : "=r"(hi) : "r"(words[i]));
      asm("sub.f16x2 %0, %1, %2;" : "=r"(h[2 * i]) : "r"(lo), "r"(bias));
      asm("sub.f16x2 %0, %1, %2;" : "=r"(h[2 * i + 1]) : "r"(hi), "r"(bias));
    }
    uint4 *dst = reinterpret_cast<uint4 *>(tile + r * LD + col);
    dst[0] = make_uint4(h[0], h[1], h[2], h[3]);
    dst[1] = make_uint4(h[4], h[5], h[6], h[7]);
  }
}

// The rotations of decodeRopeAppend's pairs: thread t's query pairs t + j kDecodeThreads
// (q[j]) and, in the last split's blocks, the key's pair t (k). Constants of the step
// (its position, the inverse frequencies), so the kernel computes them before its wait,
// and the loads of the frequencies are not on the path from the wait to the attention.
// Measured on the H200: 8B q4 decode 622.2-622.7 -> 625.4-629.8 tok/s, 23M f16
// 10,540-10,715 -> 10,663-10,954 (alternating rounds; byte-identical logits).
template <int HD, int HPB> struct DecodeAngles {
  static constexpr int kQPairs = (HPB * (HD / 2) + kDecodeThreads - 1) / kDecodeThreads;
  RopeAngle q[kQPairs], k;
};
template <int HD, int HPB, int SCALING>
__device__ __forceinline__ DecodeAngles<HD, HPB> decodeAngles(const DecodeRope<HD, SCALING> &rope,
                                                              const StepState *state) {
  constexpr int kHalf = HD / 2;
  DecodeAngles<HD, HPB> a;
  const RopeStep r = rope.step(blockIdx.y, state);
  const int t = threadIdx.x;
  a.k = ropeAngle<HD>(r, rope.invFreq, t % kHalf, rope.attentionFactor);
#pragma unroll
  for (int j = 0; j < a.kQPairs; ++j) // the same pair index as k's where kHalf divides the block
    a.q[j] = kDecodeThreads % kHalf == 0
                 ? a.k
                 : ropeAngle<HD>(r, rope.invFreq, (t + j * kDecodeThreads) % kHalf,
                                 rope.attentionFactor);
  return a;
}

// The fused decode RoPE (rope.cuh DecodeRope), after the block's wait for the previous
// kernel: rotates the block's query heads of its row into sQ ([HPB][HD] f32) and, in the
// blocks of the last split (the only ones that read the row's own key), appends the row's
// rotated k and its v to the caches at its position (each head chunk's block writes the
// same bytes) and keeps them in sKV ([2][HD] f16) for the block's own ring, whose copy of
// that row was fetched before it was written. Returns the index of the tile that holds the
// row in the block's split, or -1. The same ropePair as ropeAppend, so q and the cache hold
// what the separate launch would have written. Every load is issued before the math.
template <int KVH, int HD, int CONTEXT, int HPB, int SCALING>
__device__ __forceinline__ int decodeRopeAppend(const DecodeRope<HD, SCALING> &rope,
                                                const DecodeAngles<HD, HPB> &angles,
                                                const float *q, const DecodeSlice &slice,
                                                const StepState *state, float (*sQ)[HD],
                                                unsigned short (*sKV)[HD]) {
  constexpr int kHalf = HD / 2;
  constexpr int kQPairs = DecodeAngles<HD, HPB>::kQPairs;
  static_assert(HD <= kDecodeThreads, "a thread per value of the k and v rows");
  const int row = blockIdx.y, t = threadIdx.x;
  const int position = stepPosition(state, row);
  const bool appends = slice.split == slice.splits - 1 && position < CONTEXT;
  const long long in = (static_cast<long long>(row) * KVH + slice.kvh) * HD;
  float q0[kQPairs], q1[kQPairs], k0 = 0.0f, k1 = 0.0f, v = 0.0f;
#pragma unroll
  for (int j = 0; j < kQPairs; ++j) {
    const int idx = t + j * kDecodeThreads;
    if (idx < slice.heads * kHalf) {
      const float *x = q + static_cast<long long>(slice.firstHead + idx / kHalf) * HD + idx % kHalf;
      q0[j] = loadProducedScalar(x);
      q1[j] = loadProducedScalar(x + kHalf);
    }
  }
  if (appends) {
    if (t < kHalf) {
      k0 = loadProducedScalar(rope.k + in + t);
      k1 = loadProducedScalar(rope.k + in + t + kHalf);
    }
    if (t < HD)
      v = loadProducedScalar(rope.v + in + t);
  }
#pragma unroll
  for (int j = 0; j < kQPairs; ++j) {
    const int idx = t + j * kDecodeThreads;
    if (idx < slice.heads * kHalf) {
      rotatePair(angles.q[j], q0[j], q1[j]);
      sQ[idx / kHalf][idx % kHalf] = q0[j];
      sQ[idx / kHalf][idx % kHalf + kHalf] = q1[j];
    }
  }
  if (appends) {
    const int sequence = stepSequence(state, row);
    const long long at = (static_cast<long long>(position) * KVH + slice.kvh) * HD;
    unsigned short *kc =
        static_cast<unsigned short *>(slotCache<kKvF16, CONTEXT, KVH, HD>(rope.kCache, sequence)) +
        at;
    unsigned short *vc =
        static_cast<unsigned short *>(slotCache<kKvF16, CONTEXT, KVH, HD>(rope.vCache, sequence)) +
        at;
    if (t < kHalf) {
      rotatePair(angles.k, k0, k1);
      kc[t] = sKV[0][t] = f32ToF16(k0);
      kc[t + kHalf] = sKV[0][t + kHalf] = f32ToF16(k1);
    }
    if (t < HD)
      vc[t] = sKV[1][t] = f32ToF16(v);
  }
  __syncthreads();
  return appends ? (position - slice.j0) / kDecodeTileKeys : -1;
}

// attentionDecode on tensor cores, for f16 and int8 caches with HD % 16 == 0 and
// HD <= 128 (the emitter picks it on sm_80+): same grid, block, workspace and
// split combine, splits of whole rounds of kDecodeMmaMinKeys keys. Warp w takes the
// 16-key tiles w, w + 4, ... of its block's split, each copied into its own
// two-stage shared ring with cp.async (rows padded to HD + 8 halves, so
// ldmatrix's 8 rows fall in distinct banks), the next one in flight while it
// computes this one. An int8 cache's tiles travel as codes with their row scales
// into a two-stage int8 ring after the f16 tiles, and the warp widens a tile's codes
// into one f16 K and V tile before its mma (codes of -127..127 are exact in f16); a
// key's scale multiplies its score after Q K^T and its probability before P V (the
// softmax sum takes the unscaled probability):
//   S = Q K^T  as m16n8k16 with the block's heads as the 16 rows (the first
//              HPB used), two key tiles of 8 as n, HD / 16 k-steps; q is
//              scaled by scale * log2(e) and split into f16 hi + lo parts
//              (two mma passes), K fragments by ldmatrix;
//   softmax    online, in the accumulator layout: lane l owns head l / 4 and
//              keys 2 (l % 4), +1, +8, +9; row max over the 4 lanes by shuffles;
//   O += P V   P's accumulator registers are already the A fragment of the
//              next mma (hi + lo again), V fragments by ldmatrix.trans.
// Then the warps' states go through finishDecodeBlock in natural-log units.
// With a DecodeRope (rope.cuh) q and k come unrotated, and the block rotates and appends
// them first (decodeRopeAppend; f16 caches). RULE: how the keys are split (decodeSlice;
// batch steps take kSplitBatch).
template <int HEADS, int KVH, int HD, int WINDOW, int CONTEXT, int KVT, int SPLITS,
          int RULE = attn::kSplitBalanced,
          class ROPE = NoDecodeRope>
__device__ __forceinline__ void attentionDecodeMma(const float *q, const void *kCache,
                                                   const void *vCache, float *out,
                                                   void *workspace, float scale,
                                                   const StepState *state,
                                                   const ROPE &rope = {}) {
  static_assert(HD % 16 == 0 && HD <= 128, "tensor-core decode: head_dim % 16 == 0, <= 128");
  static_assert(KVT == kKvF16 || (KVT == kKvQ8 && !ROPE::kOn),
                "f16 caches, or int8 caches with their own RoPE and append launches");
  constexpr bool kInt8 = KVT == kKvQ8;
  constexpr int kGroup = HEADS / KVH;
  constexpr int kHpb = decodeHeadsPerBlock(kGroup);
  constexpr int kWarps = kDecodeThreads / kWarpSize;
  constexpr int kSteps = HD / 16;
  constexpr int kLd = attn::decodeMmaRowHalves(HD);
  constexpr int kTile = kDecodeTileKeys * kLd; // halves of one K or V tile
  extern __shared__ __align__(16) unsigned char decodeShared[];

  DecodeSlice slice;
  if (!decodeSlice<HEADS, KVH, HD, WINDOW, CONTEXT, KVT, SPLITS, RULE>(
          kDecodeMmaMinKeys, q, kCache, vCache, out, workspace, state, slice))
    return;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4; // head row of this lane (C and A fragments)
  const int t = lane % 4;
  const float negInf = __int_as_float(0xff800000);

  // This warp's ring of 4 kTile halves: f16 caches' stage st holds K at ring + 2 st kTile, V
  // after it. Int8 caches: the f16 K and V tiles of the tile in use at ring, then from byte
  // 4 kTile two stages of kStage8 bytes: K codes, V codes (16 rows of HD), K scales, V scales.
  unsigned short *ring = reinterpret_cast<unsigned short *>(decodeShared) + warp * 4 * kTile;
  constexpr int kStage8 = 2 * kDecodeTileKeys * HD + 2 * kDecodeTileKeys * 4;
  static_assert(2 * kStage8 <= 4 * kTile, "two int8 stages fit beside the f16 tiles");
  unsigned char *stage8 = reinterpret_cast<unsigned char *>(ring + 2 * kTile);
  const unsigned short *kc = static_cast<const unsigned short *>(kCache);
  const unsigned short *vc = static_cast<const unsigned short *>(vCache);
  const int tiles = (slice.j1 - slice.j0 + kDecodeTileKeys - 1) / kDecodeTileKeys;
  const auto fetch = [&](int tile, int st) {
    const int t0 = slice.j0 + tile * kDecodeTileKeys;
    if constexpr (kInt8) {
      unsigned char *codes = stage8 + st * kStage8;
      const signed char *kc8 = static_cast<const signed char *>(kCache);
      const signed char *vc8 = static_cast<const signed char *>(vCache);
#pragma unroll
      for (int c = lane; c < kDecodeTileKeys * HD / 16; c += kWarpSize) {
        const int r = c / (HD / 16), col = (c % (HD / 16)) * 16;
        const int j = t0 + r;
        const bool in = j < slice.j1;
        const long long at =
            (static_cast<long long>(in ? j : slice.j0) * KVH + slice.kvh) * HD + col;
        cpAsync16(codes + r * HD + col, kc8 + at, in ? 16 : 0);
        cpAsync16(codes + (kDecodeTileKeys + r) * HD + col, vc8 + at, in ? 16 : 0);
      }
      // Lane l < 16 copies key l's K scale, lane 16 + l its V scale.
      const int r = lane % kDecodeTileKeys, j = t0 + r;
      const bool in = j < slice.j1;
      const long long row = static_cast<long long>(in ? j : slice.j0) * KVH + slice.kvh;
      cpAsync4(codes + 2 * kDecodeTileKeys * HD + 4 * lane,
               q8Scales<CONTEXT, KVH, HD>(lane < kDecodeTileKeys ? kCache : vCache) + row,
               in ? 4 : 0);
    } else {
      unsigned short *kS = ring + 2 * st * kTile;
#pragma unroll
      for (int c = lane; c < kDecodeTileKeys * HD / 8; c += kWarpSize) {
        const int r = c / (HD / 8), col = (c % (HD / 8)) * 8;
        const int j = t0 + r;
        const bool in = j < slice.j1;
        const long long at =
            (static_cast<long long>(in ? j : slice.j0) * KVH + slice.kvh) * HD + col;
        cpAsync16(kS + r * kLd + col, kc + at, in ? 16 : 0);
        cpAsync16(kS + kTile + r * kLd + col, vc + at, in ? 16 : 0);
      }
    }
    cpAsyncCommit();
  };
  // Batch steps (RULE kSplitBatch) wait here themselves: the previous launch (the RoPE and
  // KV append) writes q and the row of this step, the last key of the last split, so a warp
  // whose first tile holds that row copies it after the wait, the others before.
  constexpr bool kBatchWaits = RULE == attn::kSplitBatch;
  static_assert(!(kBatchWaits && ROPE::kOn), "batch steps keep the RoPE launch");
  const bool holdsOwnRow = slice.split + 1 == slice.splits && warp + 1 == tiles;
  if (warp < tiles && !(kBatchWaits && holdsOwnRow))
    fetch(warp, 0);
  if constexpr (kBatchWaits) {
    gridDependencyWait(); // batch steps do not trigger early (common.cuh)
    if (holdsOwnRow)
      fetch(warp, 0);
  }
  // With a DecodeRope the launch waits here, after its first copies (rows of earlier steps;
  // the row of this step is patched in below), and the block rotates its query heads.
  const float *qHeads = q + static_cast<long long>(slice.firstHead) * HD;
  int ownTile = -1;
  const unsigned short(*ownKV)[HD] = nullptr; // the row's k and v (f16)
  if constexpr (ROPE::kOn) {
    __shared__ float sQ[kHpb][HD];
    __shared__ unsigned short sKV[2][HD];
    const DecodeAngles<HD, kHpb> angles = decodeAngles<HD, kHpb>(rope, state);
    gridDependencyWait();
    gridDependencyTrigger(state->batch == 0); // one-token steps, as the wrappers (common.cuh)
    ownTile = decodeRopeAppend<KVH, HD, CONTEXT, kHpb>(rope, angles, q, slice, state, sQ, sKV);
    qHeads = &sQ[0][0];
    ownKV = sKV;
  }

  // Q as A fragments: row g = head firstHead + g (zero past the block's heads),
  // k-step ks columns 16 ks + 2t, +1 (a[0]) and +8, +9 (a[2]); rows 8-15 are zero.
  const float qScale = scale * 1.4426950408889634f;
  unsigned int qHi[kSteps][2], qLo[kSteps][2];
  const float *qRow = qHeads + min(g, slice.heads - 1) * HD;
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int d = 16 * ks + 8 * half + 2 * t;
      const bool use = g < slice.heads;
      splitHalves(use ? qRow[d] * qScale : 0.0f, use ? qRow[d + 1] * qScale : 0.0f,
                  qHi[ks][half], qLo[ks][half]);
    }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m = negInf, l = 0.0f; // log2 units; l is this lane's share of its row's sum

  for (int i = 0; warp + kWarps * i < tiles; ++i) {
    const int st = i & 1;
    const int tile = warp + kWarps * i;
    if (tile + kWarps < tiles) {
      fetch(tile + kWarps, st ^ 1);
      cpAsyncWait<1>();
    } else {
      cpAsyncWait<0>();
    }
    __syncwarp();
    if (ROPE::kOn && tile == ownTile) { // the step's own row, copied before it was written
      const int r = slice.j1 - 1 - slice.j0 - tile * kDecodeTileKeys;
      unsigned short *own = ring + 2 * st * kTile + r * kLd;
      for (int c = lane; c < HD; c += kWarpSize) {
        own[c] = ownKV[0][c];
        own[kTile + c] = ownKV[1][c];
      }
      __syncwarp();
    }
    const float *kScale = nullptr, *vScale = nullptr; // int8: the tile's row scales
    if constexpr (kInt8) {
      const unsigned char *codes = stage8 + st * kStage8;
      widenCodes<HD, kLd>(codes, ring, lane);
      widenCodes<HD, kLd>(codes + kDecodeTileKeys * HD, ring + kTile, lane);
      kScale = reinterpret_cast<const float *>(codes + 2 * kDecodeTileKeys * HD);
      vScale = kScale + kDecodeTileKeys;
      __syncwarp();
    }
    const unsigned short *kS = kInt8 ? ring : ring + 2 * st * kTile;
    const unsigned short *vS = kS + kTile;

    float sHi[2][4] = {}, sLo[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      unsigned int kb[4];
      ldmatrix4(kb, kS + ((lane / 16) * 8 + lane % 8) * kLd + 16 * ks + ((lane / 8) % 2) * 8);
      const unsigned int aHi[4] = {qHi[ks][0], 0u, qHi[ks][1], 0u};
      const unsigned int aLo[4] = {qLo[ks][0], 0u, qLo[ks][1], 0u};
      mma16816<kF16>(sHi[0], aHi, kb[0], kb[1]);
      mma16816<kF16>(sLo[0], aLo, kb[0], kb[1]);
      mma16816<kF16>(sHi[1], aHi, kb[2], kb[3]);
      mma16816<kF16>(sLo[1], aLo, kb[2], kb[3]);
    }
    const int t0 = slice.j0 + tile * kDecodeTileKeys;
    float s[2][2];
    float mx = negInf;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool in = t0 + 8 * n + 2 * t + e < slice.j1;
        const float score = sHi[n][e] + sLo[n][e];
        s[n][e] = in ? (kInt8 ? score * kScale[8 * n + 2 * t + e] : score) : negInf;
        mx = fmaxf(mx, s[n][e]);
      }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mNew = fmaxf(m, mx); // finite: key t0 is in every tile
    const float correction = exp2f(m - mNew);
    m = mNew;
    float p[2][2];
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        p[n][e] = exp2f(s[n][e] - mNew);
        sum += p[n][e];
      }
    l = l * correction + sum;
    if constexpr (kInt8)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          p[n][e] *= vScale[8 * n + 2 * t + e];
    unsigned int pHi[4] = {0u, 0u, 0u, 0u}, pLo[4] = {0u, 0u, 0u, 0u};
    splitHalves(p[0][0], p[0][1], pHi[0], pLo[0]);
    splitHalves(p[1][0], p[1][1], pHi[2], pLo[2]);
#pragma unroll
    for (int d0 = 0; d0 < HD; d0 += 16) {
      o[d0 / 8][0] *= correction;
      o[d0 / 8][1] *= correction;
      o[d0 / 8 + 1][0] *= correction;
      o[d0 / 8 + 1][1] *= correction;
      unsigned int vb[4];
      ldmatrix4Trans(vb, vS + (((lane / 8) % 2) * 8 + lane % 8) * kLd + d0 + (lane / 16) * 8);
      mma16816<kF16>(o[d0 / 8], pHi, vb[0], vb[1]);
      mma16816<kF16>(o[d0 / 8], pLo, vb[0], vb[1]);
      mma16816<kF16>(o[d0 / 8 + 1], pHi, vb[2], vb[3]);
      mma16816<kF16>(o[d0 / 8 + 1], pLo, vb[2], vb[3]);
    }
    __syncwarp(); // every lane is done with this stage before it is refilled
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);

  // The rings are done with (every copy was waited for): reuse them for the merge.
  __syncthreads();
  float *sM = reinterpret_cast<float *>(decodeShared);
  float *sL = sM + kWarps * kHpb;
  float *sF = sL + kWarps * kHpb;
  float *sAcc = sF + kWarps * kHpb;
  if (g < kHpb) {
    if (t == 0) {
      sM[warp * kHpb + g] = m * 0.6931471805599453f; // natural-log units
      sL[warp * kHpb + g] = l;
    }
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      sAcc[(warp * kHpb + g) * HD + 8 * n + 2 * t] = o[n][0];
      sAcc[(warp * kHpb + g) * HD + 8 * n + 2 * t + 1] = o[n][1];
    }
  }
  finishDecodeBlock<HEADS, HD, SPLITS, kWarps, kHpb>(sM, sL, sF, sAcc, slice, out, workspace);
}

// attentionPrefill on tensor cores (flash attention), for f16 caches with HD % 16 == 0 and
// HD <= 128 (the emitter picks it on sm_80+): grid (HEADS, ceil(max_step_tokens / 64)),
// block kPrefillMmaThreads (4 warps). Block (h, y) takes 64 queries of head h, the last
// tiles first (y = 0 has the most keys to visit); warp w owns 16 of them as the 16 rows of
// its m16n8k16 tiles. The keys of the block, 64 at a time, come through a two-stage shared
// ring (K and V tiles by cp.async, rows padded to HD + 8 halves for ldmatrix), the next
// tile in flight while this one is used:
//   S = Q K^T  q scaled by scale * log2(e) and split into f16 hi + lo parts (two mma
//              passes: f32-grade scores), K fragments by ldmatrix; 16 x 64 per warp;
//   softmax    causal / window mask where a tile needs it, online in the accumulator
//              layout (lane l: rows l / 4 and l / 4 + 8, keys 2 (l % 4), +1 of each 8), row
//              max over the lane quad by shuffles;
//   O += P V   P's accumulators become the A fragments (hi + lo again), V by ldmatrix.trans.
// A warp skips tiles that none of its queries sees. X16 (plan DType f16/bf16, sm_90a
// plans; 0: none): in steps of more than kLinearGemvMaxRows tokens the output goes to x16 in
// that type instead (the x of the wgmma GEMM that reads it). Dynamic shared memory:
// prefillMmaSharedBytes(HD).
template <int HEADS, int KVH, int HD, int WINDOW, int CONTEXT, int X16 = 0>
__device__ __forceinline__ void attentionPrefillMma(const float *q, const void *kCache,
                                                    const void *vCache, float *out, float scale,
                                                    const StepState *state,
                                                    unsigned short *x16 = nullptr) {
  static_assert(HD % 16 == 0 && HD <= 128, "tensor-core prefill: head_dim % 16 == 0, <= 128");
  constexpr int kGroup = HEADS / KVH;
  constexpr int kBq = attn::kPrefillMmaQueries;
  constexpr int kBk = attn::kPrefillMmaKeys;
  constexpr int kThreads = attn::kPrefillMmaThreads;
  static_assert(kBq == 16 * (kThreads / kWarpSize) && kBk % 16 == 0, "16 query rows per warp");
  constexpr int kLd = attn::prefillMmaRowHalves(HD);
  constexpr int kTile = kBk * kLd; // halves of one K or V tile
  constexpr int kSteps = HD / 16;
  extern __shared__ __align__(16) unsigned char prefillShared[];
  unsigned short *const ring = reinterpret_cast<unsigned short *>(prefillShared);

  const int n = state->nTokens;
  const int t0 = (gridDim.y - 1 - blockIdx.y) * kBq;
  if (n <= 1 || t0 >= n || state->batch)
    return; // uniform for the whole block
  const unsigned short *kc =
      static_cast<const unsigned short *>(slotCache<kKvF16, CONTEXT, KVH, HD>(kCache, state->seq));
  const unsigned short *vc =
      static_cast<const unsigned short *>(slotCache<kKvF16, CONTEXT, KVH, HD>(vCache, state->seq));
  const int h = blockIdx.x;
  const int kvh = h / kGroup;
  const int pos = state->pos;
  const int tEnd = min(t0 + kBq, n);
  const int jLo = WINDOW > 0 ? max(0, pos + t0 - WINDOW + 1) : 0;
  const int jHi = min(pos + tEnd - 1, CONTEXT - 1); // the block's last key
  const int tiles = (jHi - jLo) / kBk + 1;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const float negInf = __int_as_float(0xff800000);

  // Stage st holds the K tile at ring + 2 st kTile, the V tile after it.
  const auto fetch = [&](int tile, int st) {
    const int k0 = jLo + tile * kBk;
    unsigned short *kS = ring + 2 * st * kTile;
    for (int c = threadIdx.x; c < kBk * HD / 8; c += kThreads) {
      const int r = c / (HD / 8), col = (c % (HD / 8)) * 8;
      const int j = k0 + r;
      const bool in = j <= jHi;
      const long long at = (static_cast<long long>(in ? j : jLo) * KVH + kvh) * HD + col;
      cpAsync16(kS + r * kLd + col, kc + at, in ? 16 : 0);
      cpAsync16(kS + kTile + r * kLd + col, vc + at, in ? 16 : 0);
    }
    cpAsyncCommit();
  };
  fetch(0, 0);

  // Q as A fragments: a[r] holds row g + 8 (r % 2), columns 16 ks + 8 (r / 2) + 2t, +1;
  // rows past the step are zeros.
  const int qw = t0 + 16 * warp; // the warp's first query
  const float qScale = scale * 1.4426950408889634f;
  unsigned int qHi[kSteps][4], qLo[kSteps][4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = qw + g + 8 * (r % 2);
    const float *qRow = q + (static_cast<long long>(row < n ? row : 0) * HEADS + h) * HD;
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const int d = 16 * ks + 8 * (r / 2) + 2 * t;
      const uint2 v = row < n ? loadProduced(reinterpret_cast<const uint2 *>(qRow + d))
                              : make_uint2(0u, 0u);
      splitHalves(__uint_as_float(v.x) * qScale, __uint_as_float(v.y) * qScale, qHi[ks][r],
                  qLo[ks][r]);
    }
  }

  float o[HD / 8][4];
#pragma unroll
  for (int d = 0; d < HD / 8; ++d)
    o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m[2] = {negInf, negInf}, l[2] = {0.0f, 0.0f}; // rows g, g + 8; log2 units
  const int lastRow = min(qw + 15, n - 1);

  for (int i = 0; i < tiles; ++i) {
    const int st = i & 1;
    if (i + 1 < tiles) {
      fetch(i + 1, st ^ 1);
      cpAsyncWait<1>();
    } else {
      cpAsyncWait<0>();
    }
    __syncthreads(); // every thread's copies of tile i landed
    const int k0 = jLo + i * kBk;
    // Warp-uniform: some query of the warp sees some key of the tile.
    const bool seen = qw < n && k0 <= pos + lastRow &&
                      (WINDOW == 0 || k0 + kBk - 1 >= pos + qw - WINDOW + 1);
    if (seen) {
      const unsigned short *kS = ring + 2 * st * kTile;
      const unsigned short *vS = kS + kTile;
      float s[kBk / 8][4];
#pragma unroll
      for (int nt = 0; nt < kBk / 8; ++nt)
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
        for (int nb = 0; nb < kBk / 16; ++nb) {
          unsigned int kb[4];
          ldmatrix4(kb, kS + (16 * nb + (lane / 16) * 8 + lane % 8) * kLd + 16 * ks +
                            ((lane / 8) % 2) * 8);
          mma16816<kF16>(s[2 * nb], qHi[ks], kb[0], kb[1]);
          mma16816<kF16>(s[2 * nb], qLo[ks], kb[0], kb[1]);
          mma16816<kF16>(s[2 * nb + 1], qHi[ks], kb[2], kb[3]);
          mma16816<kF16>(s[2 * nb + 1], qLo[ks], kb[2], kb[3]);
        }
      // Masks: keys past the query (causal), past the window, past the block's keys.
      const bool masked = k0 + kBk - 1 > pos + qw || k0 + kBk - 1 > jHi ||
                          (WINDOW > 0 && k0 < pos + lastRow - WINDOW + 1);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int p = pos + qw + g + 8 * r; // this row's position
        float mx = negInf;
#pragma unroll
        for (int nt = 0; nt < kBk / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = k0 + 8 * nt + 2 * t + e;
            float &v = s[nt][2 * r + e];
            if (masked && (j > p || j > jHi || (WINDOW > 0 && p - j >= WINDOW)))
              v = negInf;
            mx = fmaxf(mx, v);
          }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mNew = fmaxf(m[r], mx);
        // A row that has seen no key yet keeps -inf: its weights are 0, not NaN.
        const float base = mNew == negInf ? 0.0f : mNew;
        const float correction = exp2f(m[r] - base);
        m[r] = mNew;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kBk / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float &v = s[nt][2 * r + e];
            v = exp2f(v - base);
            sum += v;
          }
        l[r] = l[r] * correction + sum;
#pragma unroll
        for (int d = 0; d < HD / 8; ++d) {
          o[d][2 * r] *= correction;
          o[d][2 * r + 1] *= correction;
        }
      }
#pragma unroll
      for (int kk = 0; kk < kBk / 16; ++kk) {
        // A fragment of keys 16 kk ..: (row g, keys 2t) (row g + 8, 2t) (row g, 2t + 8)
        // (row g + 8, 2t + 8).
        unsigned int pHi[4], pLo[4];
        splitHalves(s[2 * kk][0], s[2 * kk][1], pHi[0], pLo[0]);
        splitHalves(s[2 * kk][2], s[2 * kk][3], pHi[1], pLo[1]);
        splitHalves(s[2 * kk + 1][0], s[2 * kk + 1][1], pHi[2], pLo[2]);
        splitHalves(s[2 * kk + 1][2], s[2 * kk + 1][3], pHi[3], pLo[3]);
#pragma unroll
        for (int d0 = 0; d0 < HD; d0 += 16) {
          unsigned int vb[4];
          ldmatrix4Trans(vb, vS + (16 * kk + ((lane / 8) % 2) * 8 + lane % 8) * kLd + d0 +
                                 (lane / 16) * 8);
          mma16816<kF16>(o[d0 / 8], pHi, vb[0], vb[1]);
          mma16816<kF16>(o[d0 / 8], pLo, vb[0], vb[1]);
          mma16816<kF16>(o[d0 / 8 + 1], pHi, vb[2], vb[3]);
          mma16816<kF16>(o[d0 / 8 + 1], pLo, vb[2], vb[3]);
        }
      }
    }
    __syncthreads(); // every warp is done with stage st before it is refilled
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = qw + g + 8 * r;
    if (row >= n)
      continue;
    const float inv = 1.0f / sum;
    const long long at = (static_cast<long long>(row) * HEADS + h) * HD + 2 * t;
    if constexpr (X16 != 0) {
      if (n > kLinearGemvMaxRows) {
#pragma unroll
        for (int d = 0; d < HD / 8; ++d)
          *reinterpret_cast<unsigned int *>(
              x16 + x16Index<HEADS * HD>(row, h * HD + 8 * d + 2 * t)) =
              packPair<X16>(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
        continue;
      }
    }
#pragma unroll
    for (int d = 0; d < HD / 8; ++d)
      *reinterpret_cast<float2 *>(out + at + 8 * d) =
          make_float2(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
  }
}

#endif // __CUDA_ARCH__ >= 800

template <int HEADS, int KVH, int HD, int WINDOW, int CONTEXT, int KVT, int QPW>
__device__ __forceinline__ void attentionPrefill(const float *q, const void *kCache,
                                                 const void *vCache, float *out, float scale,
                                                 const StepState *state) {
  static_assert(HD % 8 == 0 && HD <= 256, "head_dim must be a multiple of 8, at most 256");
  constexpr int kGroup = HEADS / KVH;
  constexpr int kWarps = kPrefillThreads / kWarpSize;
  constexpr int kBq = kWarps * QPW;
  constexpr int kBk = kPrefillKeys; // one key per lane
  constexpr int kKStride = HD + 4;  // halves per staged K row
  constexpr int kDpl = (HD + kWarpSize - 1) / kWarpSize;
  extern __shared__ __align__(16) unsigned char smem[];
  float *sQ = reinterpret_cast<float *>(smem);
  unsigned short *sK = reinterpret_cast<unsigned short *>(smem + kBq * HD * 4);
  unsigned short *sV = sK + kBk * kKStride;
  float *sKs = reinterpret_cast<float *>(sV + kBk * HD);
  float *sVs = sKs + kBk;

  const int n = state->nTokens;
  const int t0 = blockIdx.y * kBq;
  if (n <= 1 || t0 >= n || state->batch)
    return; // uniform for the whole block
  kCache = slotCache<KVT, CONTEXT, KVH, HD>(kCache, state->seq);
  vCache = slotCache<KVT, CONTEXT, KVH, HD>(vCache, state->seq);
  const int h = blockIdx.x;
  const int kvh = h / kGroup;
  const int pos = state->pos;
  const int tEnd = min(t0 + kBq, n);
  const int jLo = WINDOW > 0 ? max(0, pos + t0 - WINDOW + 1) : 0;
  const int jHi = min(pos + tEnd - 1, CONTEXT - 1);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const float negInf = __int_as_float(0xff800000);

  for (int idx = threadIdx.x; idx < kBq * (HD / 4); idx += kPrefillThreads) {
    const int r = idx / (HD / 4);
    const int c4 = idx % (HD / 4);
    float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (t0 + r < n)
      value = *reinterpret_cast<const float4 *>(
          q + (static_cast<long long>(t0 + r) * HEADS + h) * HD + 4 * c4);
    *reinterpret_cast<float4 *>(sQ + r * HD + 4 * c4) = value;
  }

  const int firstT = t0 + warp * QPW; // this warp's queries: firstT .. firstT + QPW - 1
  const int lastT = min(firstT + QPW, n) - 1;
  float m[QPW], l[QPW], acc[QPW][kDpl];
#pragma unroll
  for (int qi = 0; qi < QPW; ++qi) {
    m[qi] = negInf;
    l[qi] = 0.0f;
#pragma unroll
    for (int i = 0; i < kDpl; ++i)
      acc[qi][i] = 0.0f;
  }

  for (int kt = jLo; kt <= jHi; kt += kBk) {
    __syncthreads(); // the previous tile is consumed (and sQ is written)
    for (int idx = threadIdx.x; idx < kBk * (HD / 8); idx += kPrefillThreads) {
      const int r = idx / (HD / 8);
      const int c = idx % (HD / 8);
      const int j = kt + r;
      float kf[8], vf[8];
      if (j <= jHi) {
        const long long row = static_cast<long long>(j) * KVH + kvh;
        loadRow8<KVT, HD>(kCache, row, 8 * c, kf);
        loadRow8<KVT, HD>(vCache, row, 8 * c, vf);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i)
          kf[i] = vf[i] = 0.0f;
      }
      unsigned int kw[4], vw[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) { // exact: f16 values or int8 codes
        kw[i] = f32ToF16(kf[2 * i]) | (static_cast<unsigned int>(f32ToF16(kf[2 * i + 1])) << 16);
        vw[i] = f32ToF16(vf[2 * i]) | (static_cast<unsigned int>(f32ToF16(vf[2 * i + 1])) << 16);
      }
      uint2 *kDst = reinterpret_cast<uint2 *>(sK + r * kKStride + 8 * c); // 8-byte aligned rows
      kDst[0] = make_uint2(kw[0], kw[1]);
      kDst[1] = make_uint2(kw[2], kw[3]);
      *reinterpret_cast<uint4 *>(sV + r * HD + 8 * c) = make_uint4(vw[0], vw[1], vw[2], vw[3]);
    }
    if (threadIdx.x < kBk) {
      const int j = kt + threadIdx.x;
      const long long row = static_cast<long long>(j <= jHi ? j : jHi) * KVH + kvh;
      sKs[threadIdx.x] = rowScale<KVT, CONTEXT, KVH, HD>(kCache, row);
      sVs[threadIdx.x] = j <= jHi ? rowScale<KVT, CONTEXT, KVH, HD>(vCache, row) : 0.0f;
    }
    __syncthreads();

    // Warp-uniform skips: no queries, or the tile lies after the last query
    // or before the first query's window.
    if (firstT >= n || kt > pos + lastT ||
        (WINDOW > 0 && kt + kBk - 1 < pos + firstT - WINDOW + 1))
      continue;
    float sc[QPW];
#pragma unroll
    for (int qi = 0; qi < QPW; ++qi)
      sc[qi] = 0.0f;
    const unsigned short *kRow = sK + lane * kKStride;
#pragma unroll 4
    for (int d = 0; d < HD; d += 4) {
      const uint2 raw = *reinterpret_cast<const uint2 *>(kRow + d);
      const float k0 = f16ToF32(static_cast<unsigned short>(raw.x & 0xffffu));
      const float k1 = f16ToF32(static_cast<unsigned short>(raw.x >> 16));
      const float k2 = f16ToF32(static_cast<unsigned short>(raw.y & 0xffffu));
      const float k3 = f16ToF32(static_cast<unsigned short>(raw.y >> 16));
#pragma unroll
      for (int qi = 0; qi < QPW; ++qi) {
        const float4 qq = *reinterpret_cast<const float4 *>(sQ + (warp * QPW + qi) * HD + d);
        sc[qi] += qq.x * k0 + qq.y * k1 + qq.z * k2 + qq.w * k3;
      }
    }
    const int j = kt + lane;
    float pr[QPW];
#pragma unroll
    for (int qi = 0; qi < QPW; ++qi) {
      const int t = firstT + qi;
      const int pq = pos + t;
      const bool visible =
          t < n && j <= pq && j <= jHi && (WINDOW == 0 || pq - j < WINDOW);
      const float score = visible ? sc[qi] * sKs[lane] * scale : negInf;
      const float tileMax = warpMax(score);
      pr[qi] = 0.0f;
      if (tileMax == negInf)
        continue; // uniform: no visible key for this query in the tile
      const float mNew = fmaxf(m[qi], tileMax);
      const float correction = expf(m[qi] - mNew);
      const float e = visible ? expf(score - mNew) : 0.0f;
      l[qi] = l[qi] * correction + warpSum(e);
#pragma unroll
      for (int i = 0; i < kDpl; ++i)
        acc[qi][i] *= correction;
      m[qi] = mNew;
      pr[qi] = e * sVs[lane];
    }
    const int rows = min(kBk, jHi - kt + 1);
    for (int r = 0; r < rows; ++r) {
      float vv[kDpl];
#pragma unroll
      for (int i = 0; i < kDpl; ++i) {
        const int d = lane + kWarpSize * i;
        vv[i] = d < HD ? f16ToF32(sV[r * HD + d]) : 0.0f;
      }
#pragma unroll
      for (int qi = 0; qi < QPW; ++qi) {
        const float w = __shfl_sync(0xffffffffu, pr[qi], r);
#pragma unroll
        for (int i = 0; i < kDpl; ++i)
          acc[qi][i] += w * vv[i];
      }
    }
  }

#pragma unroll
  for (int qi = 0; qi < QPW; ++qi) {
    const int t = firstT + qi;
    if (t >= n)
      continue;
    const float inv = 1.0f / l[qi];
    float *oRow = out + (static_cast<long long>(t) * HEADS + h) * HD;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) {
      const int d = lane + kWarpSize * i;
      if (d < HD)
        oRow[d] = acc[qi][i] * inv;
    }
  }
}

} // namespace dev
} // namespace ninfer
