// Decode GEMV for group-quantized weights (Q8/Q6/Q5/Q4/Q3/Q2, and Q4/Q3/Q2 K16;
// QuantFormats.h) on tensor cores, sm_80+:
// y[t, o] = sum_k x[t, k] * scale[o, k / GROUP] * q[o, k] for up to 8 token rows t.
//
// Why tensor cores for a matrix-vector product: decoding 4-bit codes to f32 and
// multiplying on CUDA cores costs ~4 instructions per weight, which caps a
// 4-bit GEMV near half of HBM bandwidth on an H200. Here codes become f16
// pairs with one LOP3 per pair (the 0x6400 exponent trick gives 1024 + code),
// one HSUB2 makes the signed level exact, one HMUL2 applies the group scale,
// and mma.sync m16n8k16 does 256 multiply-adds with f32 accumulation per
// instruction. The tokens are the mma's n dimension, so 1..8 rows cost the same.
//
// Mapping. A warp computes a tile of 16 output rows over a slice of K, one
// 128-value unit at a time. Lane (g = lane / 4, c = lane % 4) owns rows g and
// g + 8 of the tile and the c-th quarter ("run": 32 consecutive values) of the
// unit in both rows, loaded with one or two vector loads per row (the quad of
// lanes reads a row's unit contiguously). A run decodes to 16 f16 pairs in a
// format-specific order; pair j goes to mma step j / 2 of the unit, as the
// lane's A fragment k-slots (2c, 2c+1) for even j and (2c+8, 2c+9) for odd j.
// Every row uses the same order, so this is one fixed permutation of k inside
// the unit, and the B fragment (x) applies the same one: lane (g, c) loads
// token g's values of run c in pair order (f32, through L1, rounded to f16).
// D fragment: lane (g, c) holds rows g, g + 8 for tokens 2c, 2c + 1.
//
// Accuracy: weights become f16 exactly as q * scale rounded once (q is exact);
// x is rounded to f16 (relative error 2^-11; values beyond 65504 overflow);
// products are exact in the f32 accumulator.
//
// One-token steps (decode, the lm_head's last row) take their own path (OneToken
// below): the mma's n dimension holds the unit's groups instead of tokens, so the
// scale and the code offset are applied once per group in f32 after the mma, not
// per pair in f16 before it (there the weights are exact (1024 + code) pairs and the
// result is rounded once, in f32). Plans for sm_90+ run one-token steps of whole
// 16-row tiles in gemv_quant_bulk.cuh instead (the same math on weights that bulk
// copies stage in shared memory); this kernel runs them elsewhere.
//
// Blocks: 8 warps; RT row tiles per block, 8 / RT warps per tile splitting K
// (more loads in flight for short-N layers), partial sums combined through
// shared memory in a fixed order (deterministic). Grid: ceil(N / (16 RT))
// blocks, grid-strided.
#pragma once

#include "GemvShapes.h"
#include "QuantFormats.h"
#include "common.cuh"
#include "gemm_mma.cuh"

namespace ninfer {
namespace dev {

constexpr int kGemvMmaWarps = 8;
constexpr int kGemvMmaMaxTokens = 8;

// (1024 + lo, 1024 + hi) as an f16 pair from the two codes of `word` under MASK
// (bits 0.. and 16..): (word & MASK) | 0x64006400 as one LOP3. The exponent bits
// come from a register, so that the LOP3 has one immediate (with both as
// immediates ptxas emits an AND and an OR).
template <unsigned int MASK>
__device__ __forceinline__ unsigned int maskedCodePair(unsigned int word) {
  unsigned int d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(word), "n"(MASK), "r"(0x64006400u));
  return d;
}

__device__ __forceinline__ unsigned int hsub2(unsigned int a, unsigned int b) {
  unsigned int d;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

__device__ __forceinline__ unsigned int hmul2(unsigned int a, unsigned int b) {
  unsigned int d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

__device__ __forceinline__ unsigned int hfma2(unsigned int a, unsigned int b, unsigned int c) {
  unsigned int d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// (1024 + code offset) in both halves: (1024 + code) - this = the signed level, exact.
template <int BITS> __device__ __forceinline__ constexpr unsigned int levelBias() {
  constexpr unsigned int kOffset = quant::QuantPacking<BITS>::kCodeOffset;
  return 0x00010001u * (0x6400u + kOffset);
}

// Weight and scale loads as volatile asm (ld.global.nc, as __ldg). Volatile asm
// keeps its program order with the mma (volatile too), so the loads of a batch
// of units are issued before the batch's first multiply whatever the compiler's
// scheduling (with __ldg it issued the second unit's scales after the first
// unit's math). Measured on the 8B q4 plan's gate/up GEMV: 30.3 against 32.5 us.
__device__ __forceinline__ void loadStreamed(uint4 &v, const void *p) {
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
}
__device__ __forceinline__ void loadStreamed(uint2 &v, const void *p) {
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
}
__device__ __forceinline__ void loadStreamed(unsigned int &v, const void *p) {
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
}
__device__ __forceinline__ void loadStreamed(unsigned short &v, const void *p) {
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
}

// A weight or scale load from global memory (loadStreamed) or, SHARED, from shared
// memory (the one-token bulk GEMV's staged rows, gemv_quant_bulk.cuh).
template <bool SHARED, class T> __device__ __forceinline__ void loadRaw(T &v, const void *p) {
  if constexpr (SHARED)
    v = *static_cast<const T *>(p);
  else
    loadStreamed(v, p);
}

// The signed levels (code - offset) of (1024 + code) pairs, exact in f16.
template <int BITS> __device__ __forceinline__ void pairsToLevels(unsigned int (&p)[16]) {
#pragma unroll
  for (int j = 0; j < 16; ++j)
    p[j] = hsub2(p[j], levelBias<BITS>());
}

// One run (32 values) of a row as raw words, and how it decodes: pair j of the
// run holds run values (first(j), second(j)); decode() gives the 16 pairs as
// (1024 + code) f16 pairs (runLevels() below: as signed levels); loadXPairs()
// gives x in the same pair order (and the prefill GEMM stages x in it,
// linear_quant.cuh).
template <int BITS> struct RunCodec;

template <> struct RunCodec<4> { // 16 bytes: word t holds values 8t..8t+7
  uint4 raw;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned char *unit, int c) {
    loadRaw<SHARED>(raw, unit + 16 * c);
  }
  __device__ __forceinline__ void decode(unsigned int (&p)[16]) const {
    const unsigned int words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int t = 0; t < 4; ++t) // pair 4t + s = values (8t + s, 8t + s + 4)
#pragma unroll
      for (int s = 0; s < 4; ++s)
        p[4 * t + s] = maskedCodePair<0x000F000Fu>(words[t] >> (4 * s));
  }
  // The pairs with one shift and four LOP3s per word (decode() takes three shifts
  // and eight): the nibbles at bits 4.. and 20.. are taken in place, so odd pairs
  // are (1024 + 16 code) pairs and even pairs (1024 + code) pairs.
  __device__ __forceinline__ void inPlacePairs(unsigned int (&p)[16]) const {
    const unsigned int words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const unsigned int high = words[t] >> 8;
      p[4 * t] = maskedCodePair<0x000F000Fu>(words[t]);
      p[4 * t + 1] = maskedCodePair<0x00F000F0u>(words[t]);
      p[4 * t + 2] = maskedCodePair<0x000F000Fu>(high);
      p[4 * t + 3] = maskedCodePair<0x00F000F0u>(high);
    }
  }
  // The signed levels: inPlacePairs() and one HSUB2 (even pairs) or one HFMA2 that
  // also scales by 1/16 (odd pairs); all values are small integers: exact.
  __device__ __forceinline__ void levels(unsigned int (&p)[16]) const {
    constexpr unsigned int kSixteenth = 0x2C002C00u; // 1/16 in both halves
    constexpr unsigned int kHighBias = 0xD480D480u;  // -(1024 / 16 + 8) = -72
    inPlacePairs(p);
#pragma unroll
    for (int j = 0; j < 16; ++j)
      p[j] = j % 2 ? hfma2(p[j], kSixteenth, kHighBias) : hsub2(p[j], levelBias<4>());
  }
  NINFER_HD static constexpr int first(int j) { return 8 * (j / 4) + j % 4; }
  NINFER_HD static constexpr int second(int j) { return first(j) + 4; }
};

template <> struct RunCodec<8> { // 32 bytes: byte i holds value i
  uint4 raw[2];
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned char *unit, int c) {
    loadRaw<SHARED>(raw[0], unit + 32 * c);
    loadRaw<SHARED>(raw[1], unit + 32 * c + 16);
  }
  __device__ __forceinline__ void decode(unsigned int (&p)[16]) const {
    const unsigned int words[8] = {raw[0].x, raw[0].y, raw[0].z, raw[0].w,
                                   raw[1].x, raw[1].y, raw[1].z, raw[1].w};
#pragma unroll
    for (int t = 0; t < 8; ++t) { // pairs 2t, 2t + 1 = values (4t, 4t + 2), (4t + 1, 4t + 3)
      unsigned int even, odd;
      asm("prmt.b32 %0, %1, %2, 0x7250;" : "=r"(even) : "r"(words[t]), "r"(0x64646464u));
      asm("prmt.b32 %0, %1, %2, 0x7351;" : "=r"(odd) : "r"(words[t]), "r"(0x64646464u));
      p[2 * t] = even;
      p[2 * t + 1] = odd;
    }
  }
  NINFER_HD static constexpr int first(int j) { return 4 * (j / 2) + j % 2; }
  NINFER_HD static constexpr int second(int j) { return first(j) + 2; }
};

// Q2 and the low plane of Q3: word t of the run holds values 16t..16t+15,
// pair 8t + s = values (16t + s, 16t + s + 8).
struct TwoBitPairs {
  NINFER_HD static constexpr int first(int j) { return 16 * (j / 8) + j % 8; }
  NINFER_HD static constexpr int second(int j) { return first(j) + 8; }
};

template <> struct RunCodec<2> { // 8 bytes
  uint2 raw;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned char *unit, int c) {
    loadRaw<SHARED>(raw, unit + 8 * c);
  }
  __device__ __forceinline__ void decode(unsigned int (&p)[16]) const {
    const unsigned int words[2] = {raw.x, raw.y};
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int s = 0; s < 8; ++s)
        p[8 * t + s] = maskedCodePair<0x00030003u>(words[t] >> (2 * s));
  }
  NINFER_HD static constexpr int first(int j) { return TwoBitPairs::first(j); }
  NINFER_HD static constexpr int second(int j) { return TwoBitPairs::second(j); }
};

template <> struct RunCodec<3> { // 8 bytes of the 2-bit plane + 4 bytes of the 1-bit plane
  uint2 low;
  unsigned int high;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned char *unit, int c) {
    loadRaw<SHARED>(low, unit + 8 * c);
    loadRaw<SHARED>(high, unit + 32 + 4 * c);
  }
  __device__ __forceinline__ void decode(unsigned int (&p)[16]) const {
    const unsigned int words[2] = {low.x, low.y};
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      // Bits 16t..16t+7 of the high plane to 0..7, 16t+8..16t+15 to 16..23.
      const unsigned int h =
          ((high >> (16 * t)) & 0xFFu) | (((high >> (16 * t + 8)) & 0xFFu) << 16);
#pragma unroll
      for (int s = 0; s < 8; ++s)
        p[8 * t + s] = ((words[t] >> (2 * s)) & 0x00030003u) | (((h >> s) & 0x00010001u) << 2) |
                       0x64006400u;
    }
  }
  NINFER_HD static constexpr int first(int j) { return TwoBitPairs::first(j); }
  NINFER_HD static constexpr int second(int j) { return TwoBitPairs::second(j); }
};

// Q6 and Q5: the low four bits as RunCodec<4> (same pair order), the high bits
// from the run's part of the high plane: two words of 2-bit fields (Q6) or one
// word of bits (Q5), value i of the run at field i.
template <> struct RunCodec<6> { // 16 bytes of the 4-bit plane + 8 bytes of the 2-bit plane
  RunCodec<4> low;
  uint2 high;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned char *unit, int c) {
    low.template load<SHARED>(unit, c);
    loadRaw<SHARED>(high, unit + 64 + 8 * c);
  }
  __device__ __forceinline__ void decode(unsigned int (&p)[16]) const {
    low.decode(p);
    const unsigned int words[2] = {high.x, high.y};
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      // Values 8t..8t+3 of the run to bits 0..7, 8t+4..8t+7 to 16..23.
      const unsigned int h16 = (words[t / 2] >> (16 * (t % 2))) & 0xFFFFu;
      const unsigned int h = (h16 & 0xFFu) | ((h16 >> 8) << 16);
#pragma unroll
      for (int s = 0; s < 4; ++s)
        p[4 * t + s] |= ((h >> (2 * s)) & 0x00030003u) << 4;
    }
  }
  NINFER_HD static constexpr int first(int j) { return RunCodec<4>::first(j); }
  NINFER_HD static constexpr int second(int j) { return RunCodec<4>::second(j); }
};

template <> struct RunCodec<5> { // 16 bytes of the 4-bit plane + 4 bytes of the 1-bit plane
  RunCodec<4> low;
  unsigned int high;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned char *unit, int c) {
    low.template load<SHARED>(unit, c);
    loadRaw<SHARED>(high, unit + 64 + 4 * c);
  }
  __device__ __forceinline__ void decode(unsigned int (&p)[16]) const {
    low.decode(p);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      // Bits 8t..8t+3 of the high plane to 0..3, 8t+4..8t+7 to 16..19.
      const unsigned int h = ((high >> (8 * t)) & 0xFu) | (((high >> (8 * t + 4)) & 0xFu) << 16);
#pragma unroll
      for (int s = 0; s < 4; ++s)
        p[4 * t + s] |= ((h >> s) & 0x00010001u) << 4;
    }
  }
  NINFER_HD static constexpr int first(int j) { return RunCodec<4>::first(j); }
  NINFER_HD static constexpr int second(int j) { return RunCodec<4>::second(j); }
};

// The scales of a run (32 values): one fp16 scale of the run's group, or for K16
// (GROUP 16, QuantFormats.h) the run's two groups' scales from its unit's record,
// fp16(d * s) rounded as the header does. load() only issues the load, resolve(c)
// (run c of the unit) makes the scales; scale(j) is the f16x2 scale of the run's pair j. Every
// codec's pairs 0..7 hold run values 0..15 (the first group) and pairs 8..15 values 16..31.
template <int GROUP> struct RunScales {
  unsigned short raw;
  unsigned int both;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned short *rowScales, int unit, int c) {
    loadRaw<SHARED>(raw, rowScales + (unit * quant::kQuantUnitValues + 32 * c) / GROUP);
  }
  __device__ __forceinline__ void resolve(int) { both = 0x00010001u * raw; }
  __device__ __forceinline__ unsigned int scale(int) const { return both; }
};

template <> struct RunScales<quant::kQuantK16Group> {
  uint2 record;
  unsigned int first, second;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned short *rowScales, int unit, int) {
    loadRaw<SHARED>(record, reinterpret_cast<const uint2 *>(rowScales) + unit);
  }
  // The f16 scales of sub-groups 2c and 2c + 1 (bits 16 + 12c .. 16 + 12c + 11 of
  // the record).
  __device__ __forceinline__ static void subScales(uint2 record, int c, unsigned short &s0,
                                                   unsigned short &s1) {
    const unsigned long long subs =
        (static_cast<unsigned long long>(record.y) << 16) | (record.x >> 16);
    const unsigned int two = static_cast<unsigned int>(subs >> (12 * c)) & 0xFFFu;
    const float d = f16ToF32(static_cast<unsigned short>(record.x & 0xFFFFu));
    s0 = f32ToF16(d * static_cast<float>(static_cast<int>(two << 26) >> 26));
    s1 = f32ToF16(d * static_cast<float>(static_cast<int>(two << 20) >> 26));
  }
  __device__ __forceinline__ void resolve(int c) {
    unsigned short s0, s1;
    subScales(record, c, s0, s1);
    first = 0x00010001u * s0;
    second = 0x00010001u * s1;
  }
  __device__ __forceinline__ unsigned int scale(int j) const { return j < 8 ? first : second; }
};

// A run's 16 pairs as signed levels: Q4 by its own decoder, the rest as decode()
// minus the bias.
template <int BITS> __device__ __forceinline__ void runLevels(const RunCodec<BITS> &run,
                                                              unsigned int (&p)[16]) {
  if constexpr (BITS == 4) {
    run.levels(p);
  } else {
    run.decode(p);
    pairsToLevels<BITS>(p);
  }
}

// Where run value v sits in a codec's pairs (the prefill GEMM regroups them).
template <class CODEC> NINFER_HD constexpr int pairOfValue(int v) {
  for (int j = 0; j < 16; ++j)
    if (CODEC::first(j) == v || CODEC::second(j) == v)
      return j;
  return -1;
}
template <class CODEC> NINFER_HD constexpr bool isSecondOfPair(int v) {
  return CODEC::second(pairOfValue<CODEC>(v)) == v;
}
// Whether pairs 0..7 hold run values 0..15 (RunScales' K16 split).
template <class CODEC> NINFER_HD constexpr bool firstHalfPairsHoldFirstGroup() {
  for (int j = 0; j < 16; ++j)
    if ((CODEC::first(j) < 16) != (j < 8) || (CODEC::second(j) < 16) != (j < 8))
      return false;
  return true;
}
// Whether values 2u and 2u + 1 always sit in the same half of their pairs.
template <class CODEC> NINFER_HD constexpr bool adjacentPairsShareHalves() {
  for (int u = 0; u < 16; ++u)
    if (isSecondOfPair<CODEC>(2 * u) != isSecondOfPair<CODEC>(2 * u + 1))
      return false;
  return true;
}

// Bytes of (a, b) picked by selector nibbles (bytes 0-3: a, 4-7: b).
__device__ __forceinline__ unsigned int prmt(unsigned int a, unsigned int b, unsigned int sel) {
  unsigned int d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// x values 0..31 of a run (f32, through L1) as f16 pairs in the order of PAIRS (a
// RunCodec: first(j), second(j) are the run values of pair j).
template <class PAIRS>
__device__ __forceinline__ void loadXPairs(const float *x, unsigned int (&p)[16]) {
  float v[32];
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const float4 a = loadProduced(x + 4 * q);
    v[4 * q] = a.x;
    v[4 * q + 1] = a.y;
    v[4 * q + 2] = a.z;
    v[4 * q + 3] = a.w;
  }
#pragma unroll
  for (int j = 0; j < 16; ++j)
    p[j] = packPair<kF16>(v[PAIRS::first(j)], v[PAIRS::second(j)]);
}

// The row-tile loop of a tensor-core GEMV (format-independent): warp w of a
// block takes K split w % kSplit of row tile w / kSplit, tiles grid-strided.
// body(r0, r1, acc, acc2) accumulates the warp's K split of rows r0 = g and
// r1 = g + 8 of its tile into the D fragments acc and acc2 (two chains; rows
// past N come as N - 1, and are not stored). Then the fragments go through
// shared memory and each (row, token) output sums its tile's K splits in a fixed
// order (deterministic), times `scale`, plus the bias, and is stored (with the
// residual). SWIGLU (a SwiGLU's gate/up pair, gemvQuantMmaSwiGlu): a tile is 8
// outputs, r0 = r1 = output g of the tile (body reads r0 of gate and r1 of up),
// and output o stores silu(row g) * row g + 8, split as the pair's 2N rows.
template <int BDT, bool HAS_BIAS, int N, bool SWIGLU = false, class BODY>
__device__ __forceinline__ void gemvMmaTiles(int rows, float scale, const void *bias,
                                             const float *residual, float *y, BlockSlice blocks,
                                             BODY &&body) {
  constexpr int kRowTiles = gemv::mmaRowTiles(SWIGLU ? 2 * N : N);
  constexpr int kSplit = kGemvMmaWarps / kRowTiles;
  constexpr int kTileOutputs = SWIGLU ? 8 : 16;
  constexpr int kTiles = (N + kTileOutputs - 1) / kTileOutputs;
  __shared__ float partial[kGemvMmaWarps][32][4];
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  for (int tileBase = blocks.index * kRowTiles; tileBase < kTiles;
       tileBase += blocks.count * kRowTiles) {
    const int tile = tileBase + warp / kSplit;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (tile < kTiles) {
      const int r0 = tile * kTileOutputs + g;
      body(static_cast<long long>(min(r0, N - 1)),
           static_cast<long long>(min(SWIGLU ? r0 : r0 + 8, N - 1)), acc, acc2);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      partial[warp][lane][e] = acc[e] + acc2[e];
    __syncthreads();
    // Thread -> (tile in block, output in tile, token).
    for (int item = threadIdx.x; item < kRowTiles * kTileOutputs * kGemvMmaMaxTokens;
         item += kGemvMmaWarps * kWarpSize) {
      const int t = item % kGemvMmaMaxTokens;
      const int outInTile = (item / kGemvMmaMaxTokens) % kTileOutputs;
      const int tib = item / (kGemvMmaMaxTokens * kTileOutputs);
      const int o = (tileBase + tib) * kTileOutputs + outInTile;
      if (t >= rows || o >= N)
        continue;
      // Row `row` of the tile summed over its K splits. D fragment: lane 4 * (row % 8) +
      // token / 2, element 2 * (row / 8) + token % 2.
      auto rowSum = [&](int row) {
        float sum = 0.0f;
        for (int s = 0; s < kSplit; ++s)
          sum += partial[tib * kSplit + s][4 * (row % 8) + t / 2][2 * (row / 8) + t % 2];
        return sum;
      };
      if constexpr (SWIGLU) {
        y[static_cast<long long>(t) * N + o] = siluTimes(rowSum(outInTile), rowSum(outInTile + 8));
      } else {
        float b = 0.0f;
        if constexpr (HAS_BIAS)
          b = loadAsFloat<BDT>(bias, o);
        storeLinearOut(y, residual, static_cast<long long>(t) * N + o,
                       rowSum(outInTile) * scale + b);
      }
    }
    __syncthreads();
  }
}

// A warp's x of one unit for every token row, staged in shared memory as f16: lane (g, c)
// needs run c of token g, 128 contiguous bytes, so its own
// eight 16-byte loads touch 32 cache lines per warp instruction; the warp instead loads
// each token's 512 bytes together (a 128-byte line per 8 lanes), stores them as f16 pairs
// of adjacent values, and each lane reads its run back (64 bytes) and regroups the pairs
// into its codec's order (one byte permute each: both values of a codec pair have the
// same parity). Runs are 80 bytes apart, so a shared-memory phase hits distinct banks.
// Steps of several rows stage x only in plans of several sequences (the emitter defines
// NINFER_GEMV_STAGE_X 1 there), on sm_90: on the H200 it took 8-sequence batch steps of the
// 8B q4 plan from 7.55 to 4.92 ms, but its 20 KB of shared memory slowed one-row steps by
// 6% (3.04 against 2.85 ms), and on sm_8x the kernel spilled at 80 registers with it.
// One-token steps take the OneToken path below.
#ifndef NINFER_GEMV_STAGE_X
#define NINFER_GEMV_STAGE_X 0
#endif
#if NINFER_GEMV_STAGE_X && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool kStageGemvX = true;
#else
constexpr bool kStageGemvX = false;
#endif
struct XStage { // [token][run]: 4 x 16 bytes of pairs, 16 of padding
  uint4 run[kStageGemvX ? kGemvMmaMaxTokens : 1][4][5];
};

template <int K>
__device__ __forceinline__ void stageXUnit(const float *x, int rows, XStage &stage) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int t = 0; t < kGemvMmaMaxTokens; ++t)
    if (t < rows) {
      const float4 v = loadProduced(x + static_cast<long long>(t) * K + 4 * lane);
      reinterpret_cast<uint2 *>(stage.run[t][lane / 8])[lane % 8] =
          make_uint2(packPair<kF16>(v.x, v.y), packPair<kF16>(v.z, v.w));
    }
  __syncwarp();
}

template <class CODEC> NINFER_HD constexpr bool pairsShareParity() {
  for (int j = 0; j < 16; ++j)
    if (CODEC::first(j) % 2 != CODEC::second(j) % 2)
      return false;
  return true;
}

// Pair j of a run in CODEC's order from the run's adjacent pairs (words[m]: values 2m, 2m + 1).
template <class CODEC, class WORDS>
__device__ __forceinline__ unsigned int codecPair(const WORDS &words, int j) {
  const int f = CODEC::first(j), s = CODEC::second(j);
  return prmt(words[f / 2], words[s / 2], f % 2 ? 0x7632u : 0x5410u);
}

// Run c of token g from the stage as f16 pairs in CODEC's order.
template <class CODEC>
__device__ __forceinline__ void stagedXPairs(const XStage &stage, int g, int c,
                                             unsigned int (&p)[16]) {
  static_assert(pairsShareParity<CODEC>(), "one prmt per pair");
  unsigned int v[16]; // v[u] = run values (2u, 2u + 1)
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint4 a = stage.run[g][c][q];
    v[4 * q] = a.x;
    v[4 * q + 1] = a.y;
    v[4 * q + 2] = a.z;
    v[4 * q + 3] = a.w;
  }
#pragma unroll
  for (int j = 0; j < 16; ++j)
    p[j] = codecPair<CODEC>(v, j);
}

// ---- One-token steps (decode) ----
// With one token the mma's n dimension is free, and it takes the columns of the unit's
// groups instead: lane (g, c) fills B column g with x where run c's values belong to
// column g and with zeros elsewhere, so D[row][n] is the row's sum over column n's
// values alone, with the raw (1024 + code) pairs as weights. Then per unit and lane, in
// f32: row sum += scale(group) * (D[row][n] + corr[n]), corr[n] = -(sum over column n of
// bias * x): the offset of the raw pairs from the signed levels, from x alone (computed
// once per unit and warp while x is staged; with the f16-rounded x the mma sees, so the
// 1024 cancels to f32 accuracy). That takes the HSUB2 (offset) and the HMUL2 (scale) of
// every pair out of the general path's unit.
// Measured on the H200, 8B q4_g64 decode (tok/s): the general path 422.8; this path with
// one unit staged at a time and one mma chain 407.4 (the 8-deep chain and the serial
// stages are latency the warp cannot hide); two units staged together and two chains
// 455.5; the same with 3 or 4 units and 2 blocks per SM 409 / 417, with 4 blocks per SM
// (64 registers) 401; prefetching the next batch or the warp's whole range into L2
// 429-441 / 380. ncu: the gate/up GEMV with its SwiGLU 27.0 us and 9.0M warp instructions
// (29.8 us and 11.1M on the general path before the SwiGLU was fused).
// Columns: one per group (K16: the unit's 8 groups), except Q4 with groups of 32 or
// more: two per group, the even pairs as (1024 + code) and the odd pairs in place as
// (1024 + 16 code) (RunCodec<4>::inPlacePairs), the odd column weighted 1/16.
// Slots: a run's 16 pairs in mma order, k-step m taking slots 2m (b0) and 2m + 1 (b1);
// slots 0..7 belong to one column of the run and 8..15 to one. D fragment: lane (g, c)
// holds rows g, g + 8 of columns 2c, 2c + 1.
template <int BITS, int GROUP> struct OneToken {
  static constexpr bool kHighColumns = BITS == 4 && GROUP >= 32;
  static constexpr int kGroups = quant::kQuantUnitValues / GROUP;
  static constexpr int kOffset = quant::QuantPacking<BITS>::kCodeOffset;
  static constexpr float kLowBias = 1024.0f + kOffset;      // (1024 + code) - level
  static constexpr float kHighBias = 1024.0f / 16 + kOffset; // (1024 + 16 code) / 16 - level
  static_assert(kHighColumns ? 2 * kGroups <= 8 : kGroups <= 8, "8 columns per unit");
  NINFER_HD static constexpr int pairOfSlot(int s) {
    return !kHighColumns ? s : s < 8 ? 2 * s : 2 * (s - 8) + 1;
  }
  NINFER_HD static constexpr int slotOfPair(int j) {
    return !kHighColumns ? j : j % 2 == 0 ? j / 2 : 8 + j / 2;
  }
  // The column of run c's slots 0..7 (half 0) or 8..15 (half 1).
  NINFER_HD static constexpr int column(int c, int half) {
    return kHighColumns ? 2 * (32 * c / GROUP) + half : (32 * c + 16 * half) / GROUP;
  }
  // The run's pairs as the mma weighs them (without offset or scale).
  __device__ __forceinline__ static void pairs(const RunCodec<BITS> &run, unsigned int (&p)[16]) {
    if constexpr (kHighColumns)
      run.inPlacePairs(p);
    else
      run.decode(p);
  }
};

// A warp's x of a batch of units as OneToken B fragments, and each unit's corrections.
// Runs are 80 bytes apart, and the zero fragments sit at banks that no run's read of
// the same instruction uses.
constexpr int kOneTokenBatch = 2; // units staged together
struct OneTokenUnitStage {
  uint4 run[4][5]; // [run][4 x 16 bytes of slots, 16 of padding]
  float corr[8];   // [group] (kHighColumns: both columns of the group together)
};
struct OneTokenStage {
  OneTokenUnitStage unit[kOneTokenBatch];
  uint4 zeroLow[2];  // slots 0..7 of lanes that are not their column
  uint4 zeroHigh[2]; // slots 8..15 of them
};
// The warps' stages, one kind per step (one token or several), in a plain function: a
// template's shared array would be one per instantiation, and a grouped launch
// instantiates the GEMV per member (the 8B q/k/v group of a batch plan went past 48 KB).
union GemvStages {
  XStage rows[kGemvMmaWarps];
  OneTokenStage one[kGemvMmaWarps];
};
__device__ __forceinline__ GemvStages &gemvStages() {
  __shared__ GemvStages stages;
  return stages;
}
__device__ __forceinline__ OneTokenStage &oneTokenStage() {
  return gemvStages().one[threadIdx.x / kWarpSize];
}

// Zeroes a warp's zero fragments and corrections (groups past the unit's stay 0).
__device__ __forceinline__ void clearOneTokenStage(OneTokenStage &st, int lane) {
  if (lane < 4)
    (lane < 2 ? st.zeroLow : st.zeroHigh)[lane % 2] = make_uint4(0u, 0u, 0u, 0u);
  if (lane < 8 * kOneTokenBatch)
    st.unit[lane / 8].corr[lane % 8] = 0.0f;
  __syncwarp();
}

// Byte offset in OneTokenStage of unit value v (lane l stages values 4l..4l+3).
template <int BITS, int GROUP> NINFER_HD constexpr int oneTokenSlotByte(int v) {
  using Codec = RunCodec<BITS>;
  return 80 * (v / 32) + 4 * OneToken<BITS, GROUP>::slotOfPair(pairOfValue<Codec>(v % 32)) +
         (isSecondOfPair<Codec>(v % 32) ? 2 : 0);
}
// Whether every lane's 4 values sit at the same offsets from its first one (so one
// address register and immediate offsets stage them).
template <int BITS, int GROUP> NINFER_HD constexpr bool oneTokenLanesAlike() {
  for (int l = 0; l < kWarpSize; ++l)
    for (int e = 0; e < 4; ++e)
      if (oneTokenSlotByte<BITS, GROUP>(4 * l + e) - oneTokenSlotByte<BITS, GROUP>(4 * l) !=
          oneTokenSlotByte<BITS, GROUP>(e) - oneTokenSlotByte<BITS, GROUP>(0))
        return false;
  return true;
}

// Lane `lane` stages its 4 values v of a unit: as f16 into their slots (the first at
// byte `at` of the unit's stage), and the sum of bias * x over its group's lanes into
// corr. The caller synchronizes the warp.
template <int BITS, int GROUP>
__device__ __forceinline__ void stageOneTokenValues(float4 v, OneTokenUnitStage &st, int at,
                                                    int lane) {
  using T = OneToken<BITS, GROUP>;
  static_assert(oneTokenLanesAlike<BITS, GROUP>(), "one address per lane");
  const unsigned short h[4] = {f32ToF16(v.x), f32ToF16(v.y), f32ToF16(v.z), f32ToF16(v.w)};
  unsigned char *first = reinterpret_cast<unsigned char *>(&st) + at;
#pragma unroll
  for (int e = 0; e < 4; ++e)
    *reinterpret_cast<unsigned short *>(first + oneTokenSlotByte<BITS, GROUP>(e) -
                                        oneTokenSlotByte<BITS, GROUP>(0)) = h[e];
  const float even = f16ToF32(h[0]) + f16ToF32(h[2]), odd = f16ToF32(h[1]) + f16ToF32(h[3]);
  float corr = T::kHighColumns ? -(T::kLowBias * even + T::kHighBias * odd)
                               : -T::kLowBias * (even + odd);
#pragma unroll
  for (int o = 1; o < GROUP / 4; o *= 2) // the group's GROUP / 4 lanes
    corr += __shfl_xor_sync(0xffffffffu, corr, o);
  if (lane % (GROUP / 4) == 0)
    st.corr[4 * lane / GROUP] = corr;
}

// The scales of a lane's two D columns (0 for columns past the unit's groups), as f32,
// from the unit's scales (kUnitHalves apart).
template <int BITS, int GROUP> struct OneTokenScales {
  using T = OneToken<BITS, GROUP>;
  static constexpr int kUnitHalves = T::kGroups;
  // kHighColumns: group c; else groups 2c, 2c + 1 (two halves of one word).
  static constexpr bool kWord = !T::kHighColumns && T::kGroups >= 2;
  unsigned int raw = 0u;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned short *unitScales, int c) {
    const int group = T::kHighColumns ? c : 2 * c;
    if (group >= T::kGroups)
      return;
    if constexpr (kWord) {
      loadRaw<SHARED>(raw, unitScales + group);
    } else {
      unsigned short h;
      loadRaw<SHARED>(h, unitScales + group);
      raw = h;
    }
  }
  // What load() reads, taken from words that hold the scale records of consecutive units
  // (unit u's halves from half u * kUnitHalves on; `unit` a constant once unrolled).
  template <int N>
  __device__ __forceinline__ void select(const unsigned int (&words)[N], int unit, int c) {
    const int group = T::kHighColumns ? c : 2 * c;
    if (group >= T::kGroups)
      return;
    const int first = unit * kUnitHalves, base = first / 2;
    const unsigned int word =
        (first % 2 + group) / 2 == 0 ? words[base] : words[base + 1 < N ? base + 1 : base];
    if constexpr (kWord)
      raw = word;
    else
      raw = (first + group) % 2 ? word >> 16 : word & 0xFFFFu;
  }
  __device__ __forceinline__ void resolve(int, float &a, float &b) const {
    a = f16ToF32(static_cast<unsigned short>(raw & 0xFFFFu));
    b = f16ToF32(static_cast<unsigned short>(raw >> 16));
  }
};
template <int BITS> struct OneTokenScales<BITS, quant::kQuantK16Group> {
  static constexpr int kUnitHalves = 4; // one 8-byte record per unit
  uint2 record;
  template <bool SHARED = false>
  __device__ __forceinline__ void load(const unsigned short *unitScales, int) {
    loadRaw<SHARED>(record, unitScales);
  }
  template <int N>
  __device__ __forceinline__ void select(const unsigned int (&words)[N], int unit, int) {
    record = make_uint2(words[2 * unit], words[2 * unit + 1]);
  }
  __device__ __forceinline__ void resolve(int c, float &a, float &b) const {
    unsigned short s0, s1;
    RunScales<quant::kQuantK16Group>::subScales(record, c, s0, s1);
    a = f16ToF32(s0);
    b = f16ToF32(s1);
  }
};

// One unit of a row pair (OneToken) into the lane's row sums: the B fragments at xLow and
// xHigh (the unit's staged runs or the zero fragments), the corrections of `staged`, the
// mma over the columns (two chains) and the f32 epilogue.
template <int BITS, int GROUP>
__device__ __forceinline__ void oneTokenUnitMath(const RunCodec<BITS> &run0,
                                                 const RunCodec<BITS> &run1,
                                                 const OneTokenScales<BITS, GROUP> &sc0,
                                                 const OneTokenScales<BITS, GROUP> &sc1,
                                                 const OneTokenUnitStage &staged,
                                                 const unsigned char *xLow,
                                                 const unsigned char *xHigh, float &sum0,
                                                 float &sum1) {
  using T = OneToken<BITS, GROUP>;
  const int c = threadIdx.x % kWarpSize % 4;
  unsigned int xs[16];
  const uint4 *low = reinterpret_cast<const uint4 *>(xLow);
  const uint4 *high = reinterpret_cast<const uint4 *>(xHigh);
  const uint4 q[4] = {low[0], low[1], high[0], high[1]};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    xs[4 * k] = q[k].x;
    xs[4 * k + 1] = q[k].y;
    xs[4 * k + 2] = q[k].z;
    xs[4 * k + 3] = q[k].w;
  }
  float corrA, corrB;
  if constexpr (T::kHighColumns) {
    corrA = staged.corr[c];
    corrB = 0.0f;
  } else {
    const float2 two = *reinterpret_cast<const float2 *>(&staged.corr[2 * c]);
    corrA = two.x;
    corrB = two.y;
  }
  unsigned int p0[16], p1[16];
  T::pairs(run0, p0);
  T::pairs(run1, p1);
  float d[2][4] = {};
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const int ja = T::pairOfSlot(2 * m), jb = T::pairOfSlot(2 * m + 1);
    const unsigned int a[4] = {p0[ja], p1[ja], p0[jb], p1[jb]};
    mma16816<kF16>(d[m % 2], a, xs[2 * m], xs[2 * m + 1]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e)
    d[0][e] += d[1][e];
  float a0, b0, a1, b1;
  sc0.resolve(c, a0, b0);
  sc1.resolve(c, a1, b1);
  if constexpr (T::kHighColumns) {
    sum0 = fmaf(a0, fmaf(d[0][1], 1.0f / 16, d[0][0]) + corrA, sum0);
    sum1 = fmaf(a1, fmaf(d[0][3], 1.0f / 16, d[0][2]) + corrA, sum1);
  } else {
    sum0 = fmaf(a0, d[0][0] + corrA, fmaf(b0, d[0][1] + corrB, sum0));
    sum1 = fmaf(a1, d[0][2] + corrA, fmaf(b1, d[0][3] + corrB, sum1));
  }
}

// Where a warp's one-token loop stands: the next unit's x and the two rows' weights and
// scales.
struct OneTokenCursor {
  const float *x;
  const unsigned char *w0, *w1;
  const unsigned short *s0, *s1;
};

// COUNT (<= kOneTokenBatch) units of a row pair (OneToken) at the cursor, which moves past
// them: every load of the batch before the first use, the batch's x staged together,
// then per unit the mma over the columns (two chains) and the f32 epilogue into the
// lane's row sums. xLowStep, xHighStep: how far the lane's B fragments move per unit of
// the stage (0 for the zero fragments).
template <int BITS, int GROUP, int COUNT>
__device__ __forceinline__ void oneTokenUnits(OneTokenCursor &at, OneTokenStage &st,
                                              int stageByte, const unsigned char *xLow,
                                              const unsigned char *xHigh, int xLowStep,
                                              int xHighStep, float &sum0, float &sum1) {
  using Packing = quant::QuantPacking<BITS>;
  using Scales = OneTokenScales<BITS, GROUP>;
  static_assert(COUNT <= kOneTokenBatch, "the stage holds kOneTokenBatch units");
  const int lane = threadIdx.x % kWarpSize, c = lane % 4;
  RunCodec<BITS> run0[COUNT], run1[COUNT];
  Scales sc0[COUNT], sc1[COUNT];
  float4 xv[COUNT];
#pragma unroll
  for (int i = 0; i < COUNT; ++i) {
    run0[i].load(at.w0 + i * Packing::kUnitBytes, c);
    run1[i].load(at.w1 + i * Packing::kUnitBytes, c);
    sc0[i].load(at.s0 + i * Scales::kUnitHalves, c);
    sc1[i].load(at.s1 + i * Scales::kUnitHalves, c);
    xv[i] = loadProduced(at.x + i * quant::kQuantUnitValues + 4 * lane);
  }
  at.w0 += COUNT * Packing::kUnitBytes;
  at.w1 += COUNT * Packing::kUnitBytes;
  at.s0 += COUNT * Scales::kUnitHalves;
  at.s1 += COUNT * Scales::kUnitHalves;
  at.x += COUNT * quant::kQuantUnitValues;
  __syncwarp(); // the previous batch's fragments are read
#pragma unroll
  for (int i = 0; i < COUNT; ++i)
    stageOneTokenValues<BITS, GROUP>(xv[i], st.unit[i], stageByte, lane);
  __syncwarp();
#pragma unroll
  for (int i = 0; i < COUNT; ++i)
    oneTokenUnitMath<BITS, GROUP>(run0[i], run1[i], sc0[i], sc1[i], st.unit[i], xLow + i * xLowStep,
                                  xHigh + i * xHighStep, sum0, sum1);
}

// The one-token loop of a row pair (OneToken): rows r0 and r1 of the tile (weights w0,
// w1, scales s0, s1), units [unitBegin, unitEnd), row sums into acc[0] (row g) and
// acc[2] (row g + 8) of lanes c = 0, the D fragment of token 0.
template <int BITS, int GROUP>
__device__ __forceinline__ void oneTokenRows(const float *x, const unsigned char *w0,
                                             const unsigned char *w1, const unsigned short *s0,
                                             const unsigned short *s1, int unitBegin,
                                             int unitEnd, float (&acc)[4]) {
  using Packing = quant::QuantPacking<BITS>;
  using T = OneToken<BITS, GROUP>;
  using Scales = OneTokenScales<BITS, GROUP>;
  constexpr int kUnroll = BITS == 8 ? 1 : kOneTokenBatch;
  OneTokenStage &st = oneTokenStage();
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
  // Where this lane stages its x values and reads its B fragments.
  const int stageByte = oneTokenSlotByte<BITS, GROUP>(4 * lane);
  constexpr int kUnitStep = sizeof(OneTokenUnitStage);
  const bool low = g == T::column(c, 0), high = g == T::column(c, 1);
  const unsigned char *xLow = reinterpret_cast<const unsigned char *>(
      low ? &st.unit[0].run[c][0] : st.zeroLow);
  const unsigned char *xHigh = reinterpret_cast<const unsigned char *>(
      high ? &st.unit[0].run[c][2] : st.zeroHigh);
  const int xLowStep = low ? kUnitStep : 0, xHighStep = high ? kUnitStep : 0;
  OneTokenCursor at{x + static_cast<long long>(unitBegin) * quant::kQuantUnitValues,
                    w0 + static_cast<long long>(unitBegin) * Packing::kUnitBytes,
                    w1 + static_cast<long long>(unitBegin) * Packing::kUnitBytes,
                    s0 + unitBegin * Scales::kUnitHalves, s1 + unitBegin * Scales::kUnitHalves};
  float sum0 = 0.0f, sum1 = 0.0f;
  int u = unitBegin;
  for (; u + kUnroll <= unitEnd; u += kUnroll)
    oneTokenUnits<BITS, GROUP, kUnroll>(at, st, stageByte, xLow, xHigh, xLowStep, xHighStep,
                                        sum0, sum1);
  if constexpr (kUnroll > 1)
    for (; u < unitEnd; ++u)
      oneTokenUnits<BITS, GROUP, 1>(at, st, stageByte, xLow, xHigh, xLowStep, xHighStep, sum0,
                                     sum1);
  // The quad's columns together, in lane c = 0.
  sum0 += __shfl_xor_sync(0xffffffffu, sum0, 1);
  sum1 += __shfl_xor_sync(0xffffffffu, sum1, 1);
  sum0 += __shfl_xor_sync(0xffffffffu, sum0, 2);
  sum1 += __shfl_xor_sync(0xffffffffu, sum1, 2);
  acc[0] = c == 0 ? sum0 : 0.0f;
  acc[2] = c == 0 ? sum1 : 0.0f;
}

// One unit of rows g and g + 8 of a tile for every token row (the general path): the
// runs' levels times their scales as A, x's pairs xp as B, the unit's eight mma steps
// (even ones into acc, odd ones into acc2: two chains).
// This math does not bound 8-row steps (8B q4 batch plan, H200, timing variants with wrong
// results): the mma on the raw pairs with no levels and no scales took the step 2.663-2.670
// against 2.660-2.662 ms, and no math at all 2.520-2.523; the gate/up launch with no math
// ran 30.9 us (main 29.9). So OneToken's trick (scales and offsets applied to f32 sums)
// would not pay here.
template <int BITS, int GROUP>
__device__ __forceinline__ void rowsUnitMath(const RunCodec<BITS> &run0,
                                             const RunCodec<BITS> &run1, RunScales<GROUP> sc0,
                                             RunScales<GROUP> sc1, int c,
                                             const unsigned int (&xp)[16], float (&acc)[4],
                                             float (&acc2)[4]) {
  unsigned int p0[16], p1[16];
  runLevels(run0, p0);
  runLevels(run1, p1);
  sc0.resolve(c);
  sc1.resolve(c);
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const unsigned int a[4] = {hmul2(p0[2 * m], sc0.scale(2 * m)),
                               hmul2(p1[2 * m], sc1.scale(2 * m)),
                               hmul2(p0[2 * m + 1], sc0.scale(2 * m + 1)),
                               hmul2(p1[2 * m + 1], sc1.scale(2 * m + 1))};
    mma16816<kF16>(m % 2 ? acc2 : acc, a, xp[2 * m], xp[2 * m + 1]);
  }
}

// SWIGLU: w is a SwiGLU's gate and wUp its up matrix (same format), and y gets
// silu(x gate^T) * (x up^T) (gemvMmaTiles); no bias or residual.
template <int BITS, int GROUP, int BDT, bool HAS_BIAS, int K, int N, bool SWIGLU = false>
__device__ __forceinline__ void gemvQuantMma(const float *x, int rows, const unsigned char *w,
                                             const void *bias, const float *residual, float *y,
                                             BlockSlice blocks,
                                             const unsigned char *wUp = nullptr) {
  using Packing = quant::QuantPacking<BITS>;
  constexpr int kUnits = K / quant::kQuantUnitValues;
  constexpr int kRowTiles = gemv::mmaRowTiles(SWIGLU ? 2 * N : N);
  constexpr int kSplit = kGemvMmaWarps / kRowTiles; // warps per row tile, splitting K
  constexpr long long kRowWeightBytes = quant::quantRowWeightBytes(BITS, K);
  constexpr long long kRowScaleBytes = quant::quantRowScaleBytes(GROUP, K);
  constexpr long long kScalePlane = quant::quantScalePlaneOffset(BITS, N, K);
  static_assert(firstHalfPairsHoldFirstGroup<RunCodec<BITS>>(), "RunScales' pair split");
  // Units in flight per lane: 2 keeps the kernel under 85 registers (3 blocks of
  // 256 threads per SM); more warps hide latency better than deeper unrolling. In 8-row
  // steps (8B q4 batch plan, H200) 4 took the step from 2.65 to 2.80 ms, and staging the
  // x of both units before their math (two XStages per warp) to 2.73.
  constexpr int kUnroll = BITS == 8 ? 1 : 2;

  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, c = lane % 4;
  const int split = threadIdx.x / kWarpSize % kSplit;
  const int unitBegin = split * kUnits / kSplit;
  const int unitEnd = (split + 1) * kUnits / kSplit;
  const bool hasToken = g < rows;
  const float *xRow = x + static_cast<long long>(hasToken ? g : 0) * K + 32 * c;
  // Steps of several rows stage x per unit (XStage) in batch plans on sm_90; the
  // others read their runs directly.
  XStage &stage = gemvStages().rows[threadIdx.x / kWarpSize];
  const bool oneToken = rows == 1;
  if (oneToken)
    clearOneTokenStage(oneTokenStage(), lane);

  const unsigned char *wSecond = SWIGLU ? wUp : w; // the matrix of rows r1
  gemvMmaTiles<BDT, HAS_BIAS, N, SWIGLU>(
      rows, 1.0f, bias, residual, y, blocks,
      [&](long long r0, long long r1, float(&acc)[4], float(&acc2)[4]) {
        const unsigned char *w0 = w + r0 * kRowWeightBytes;
        const unsigned char *w1 = wSecond + r1 * kRowWeightBytes;
        const unsigned short *s0 =
            reinterpret_cast<const unsigned short *>(w + kScalePlane + r0 * kRowScaleBytes);
        const unsigned short *s1 = reinterpret_cast<const unsigned short *>(
            wSecond + kScalePlane + r1 * kRowScaleBytes);
        if (oneToken) {
          oneTokenRows<BITS, GROUP>(x, w0, w1, s0, s1, unitBegin, unitEnd, acc);
          return;
        }
        for (int u0 = unitBegin; u0 < unitEnd; u0 += kUnroll) {
          RunCodec<BITS> run0[kUnroll], run1[kUnroll];
          RunScales<GROUP> sc0[kUnroll], sc1[kUnroll];
#pragma unroll
          for (int i = 0; i < kUnroll; ++i) { // every load of the batch before the first use
            const int u = min(u0 + i, unitEnd - 1);
            run0[i].load(w0 + static_cast<long long>(u) * Packing::kUnitBytes, c);
            run1[i].load(w1 + static_cast<long long>(u) * Packing::kUnitBytes, c);
            sc0[i].load(s0, u, c);
            sc1[i].load(s1, u, c);
          }
#pragma unroll
          for (int i = 0; i < kUnroll; ++i) {
            if (u0 + i >= unitEnd)
              break;
            unsigned int xp[16];
            const long long xUnit = static_cast<long long>(u0 + i) * quant::kQuantUnitValues;
            if constexpr (kStageGemvX)
              stageXUnit<K>(x + xUnit, rows, stage);
            // Lanes past the rows load nothing: with all 32 lanes loading (row 0's x for
            // the idle ones) the L1 returned 8x the bytes per load, and the 8B q4 gate/up
            // GEMV took 51 instead of 30 us.
            if (hasToken && kStageGemvX)
              stagedXPairs<RunCodec<BITS>>(stage, g, c, xp);
            else if (hasToken)
              loadXPairs<RunCodec<BITS>>(xRow + xUnit, xp);
            else
#pragma unroll
              for (int j = 0; j < 16; ++j)
                xp[j] = 0u;
            if constexpr (kStageGemvX)
              __syncwarp(); // every lane has its run before the next unit overwrites them
            rowsUnitMath(run0[i], run1[i], sc0[i], sc1[i], c, xp, acc, acc2);
          }
        }
      });
}

} // namespace dev
} // namespace ninfer
