// Linear layer with ternary weights (DType TQ2, layout in ninfer/TernaryFormat.h):
// y[t, o] = s * sum_k t[o, k] * x[t, k] (+ bias[o]), t in {-1, 0, +1}, x and y f32
// rows, f32 accumulation. No weight multiplications: x is added where the code
// says +1 and subtracted where it says -1; the tensor scale s multiplies each
// output once at the end.
// The GEMV and GEMM skeletons below take the packing as a LAYOUT parameter
// (rowWords, step, mask); TernaryTq2Layout is the one for TQ2, linear_tq1.cuh
// has the base-3 TQ1 one.
//
// One kernel, paths picked per step from state->nTokens (a uniform branch):
//  * rows <= kTernaryMaxRows (decode, short prefill, last_row_only): GEMV, bound by
//    the 2-bit weight stream. A warp owns RPW adjacent output rows; each lane
//    reads WORDS consecutive u32 code words of every row per step (the layout's
//    wordsPerLane: 4 is one 16-byte load per row; 1 spreads short rows over all
//    32 lanes), two steps of loads in flight, bypassing L1
//    (ld.global.nc.L1::no_allocate) so the x rows stay cached in L1 for every warp
//    of the SM. Each x float4 is loaded once per step and used for all RPW rows.
//    Per value: two bit tests on the code word that predicate one add and one
//    subtract (no decode table, no multiply). One butterfly reduction per output.
//    Decode (one row) has its own instantiation with one accumulator per row.
//  * more rows (prefill): the tensor-core GEMMs of gemm_ternary.cuh where the plan's
//    targets take them (sm_80+), else a shared-memory tiled GEMM on CUDA cores, a TM x TN
//    output tile per block, K in steps of TK. A weight tile is decoded once into select
//    masks m (+1 -> 0xFFFFFFFF, -1 -> 0x7FFFFFFF, 0 -> 0) reused by TM tokens, and
//    the inner loop applies them with one bitwise op per multiply-accumulate:
//    x' = (x & (m | S)) ^ (S & ~m), S = the sign bit, which is x, -x or +-0; then
//    one add. Each thread owns a 4x4 register tile.
// Tiles and row groups are grid-strided, so the grid does not depend on the token
// count. Launch: block 256 threads, grid (ceil(N / (8 * RPW)), 1, 1) (any grid is
// correct; TQ1 launches with the grid of its tensor-core GEMV, linear_tq1.cuh), no
// dynamic shared memory (16.9 KB static for the tiled path).
// last_row_only: x row n-1 -> y row 0.
#pragma once

#include "GemvShapes.h"
#include "TernaryFormat.h"
#include "common.cuh"
#include "gemm_ternary.cuh"
#include "tiled_gemm.cuh"

namespace ninfer {
namespace dev {

constexpr int kTernaryThreads = 256;
constexpr int kTernaryMaxRows = 8;

using gemv::ternaryRowsPerWarp;

template <int WORDS> struct TernaryCodes { unsigned int w[WORDS]; };

// One step's code words of a row: WORDS (1, 2 or 4) u32 starting at word index
// `word` (a multiple of WORDS), streamed past L1 (the weights are read once per
// step).
template <int WORDS>
__device__ __forceinline__ TernaryCodes<WORDS> ternaryLoadCodes(const unsigned int *row,
                                                                int word) {
  TernaryCodes<WORDS> c;
  if constexpr (WORDS == 4) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(c.w[0]), "=r"(c.w[1]), "=r"(c.w[2]), "=r"(c.w[3])
                 : "l"(row + word));
  } else if constexpr (WORDS == 2) {
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
                 : "=r"(c.w[0]), "=r"(c.w[1])
                 : "l"(row + word));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(c.w[0]) : "l"(row + word));
  }
  return c;
}

// Select mask of a weight t for the tiled path (see the file comment).
__device__ __forceinline__ unsigned int ternarySelectMask(int t) {
  return t > 0 ? 0xFFFFFFFFu : t < 0 ? 0x7FFFFFFFu : 0u;
}

// TQ2: 16 values per u32 word, word j of a row holds values 16j..16j+15.
struct TernaryTq2Layout {
  template <int K> __host__ __device__ static constexpr int rowWords() { return K / 16; }
  // u32 code words a lane reads per row and step: 4 (16 bytes) once a row has
  // at least 32 such 16-byte chunks, else 1 so short rows still spread over the
  // warp.
  template <int K> __host__ __device__ static constexpr int wordsPerLane() {
    return rowWords<K>() / 4 >= 32 ? 4 : 1;
  }

  // acc[t][r] += sum over this step's values of t(r, k) * x[t, k], for the
  // step whose first code word is `word` (values 16 * word ...).
  template <int K, int RPW, int WORDS, int MAXT>
  __device__ static __forceinline__ void step(const float *x, int rows, int word,
                                              const TernaryCodes<WORDS> (&codes)[RPW],
                                              float (&acc)[MAXT][RPW]) {
#pragma unroll
    for (int t = 0; t < MAXT; ++t) {
      if (MAXT == 1 || t < rows) {
        const float4 *xr = reinterpret_cast<const float4 *>(x + static_cast<long long>(t) * K) +
                           word * 4; // 16 values per word = 4 float4
#pragma unroll
        for (int q = 0; q < 4 * WORDS; ++q) {
          const float4 v = loadProduced(reinterpret_cast<const float *>(xr + q));
          const float xs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int r = 0; r < RPW; ++r) {
            const unsigned int code = codes[r].w[q / 4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int bit = 2 * (4 * (q % 4) + e); // value 4q + e of the step
              if (code & (1u << bit))
                acc[t][r] += xs[e];
              if (code & (2u << bit))
                acc[t][r] -= xs[e];
            }
          }
        }
      }
    }
  }

  // Select mask of weight (gn, gk) of the tensor whose codes start at w.
  template <int K>
  __device__ static __forceinline__ unsigned int mask(const unsigned int *w, int gn, int gk) {
    const unsigned int code =
        (__ldg(w + static_cast<long long>(gn) * rowWords<K>() + (gk >> 4)) >> (2 * (gk & 15))) &
        3u;
    return ternarySelectMask(ternary::codeValue(code));
  }
};

template <class LAYOUT, int BDT, bool HAS_BIAS, int K, int N, int RPW, int WORDS, int MAXT>
__device__ __forceinline__ void ternaryGemv(const float *x, int rows, const unsigned int *w,
                                            float scale, const void *bias,
                                            const float *residual, float *y, BlockSlice blocks) {
  constexpr int kRowWords = LAYOUT::template rowWords<K>();
  constexpr int kSteps = kRowWords / WORDS; // steps per row, spread over the lanes
  constexpr int kWarps = kTernaryThreads / kWarpSize;
  constexpr int kGroups = (N + RPW - 1) / RPW;
  static_assert(kRowWords % WORDS == 0, "rows are whole 16-byte chunks");
  const int lane = threadIdx.x % kWarpSize;
  for (int g = blocks.index * kWarps + threadIdx.x / kWarpSize; g < kGroups;
       g += blocks.count * kWarps) {
    const int o0 = g * RPW;
    const unsigned int *rowPtr[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) // rows past N re-read row N-1; their sums are dropped
      rowPtr[r] = w + static_cast<long long>(min(o0 + r, N - 1)) * kRowWords;
    float acc[MAXT][RPW];
#pragma unroll
    for (int t = 0; t < MAXT; ++t)
#pragma unroll
      for (int r = 0; r < RPW; ++r)
        acc[t][r] = 0.0f;
    int s = lane;
    // Two steps per iteration: all their loads are issued before the first use.
    for (; s + kWarpSize < kSteps; s += 2 * kWarpSize) {
      TernaryCodes<WORDS> a[RPW], b[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        a[r] = ternaryLoadCodes<WORDS>(rowPtr[r], s * WORDS);
        b[r] = ternaryLoadCodes<WORDS>(rowPtr[r], (s + kWarpSize) * WORDS);
      }
      LAYOUT::template step<K, RPW, WORDS, MAXT>(x, rows, s * WORDS, a, acc);
      LAYOUT::template step<K, RPW, WORDS, MAXT>(x, rows, (s + kWarpSize) * WORDS, b, acc);
    }
    if (s < kSteps) {
      TernaryCodes<WORDS> a[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r)
        a[r] = ternaryLoadCodes<WORDS>(rowPtr[r], s * WORDS);
      LAYOUT::template step<K, RPW, WORDS, MAXT>(x, rows, s * WORDS, a, acc);
    }
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
      const int o = o0 + r;
      if (o >= N) // uniform over the warp
        continue;
      float b = 0.0f;
      if constexpr (HAS_BIAS)
        b = loadAsFloat<BDT>(bias, o);
#pragma unroll
      for (int t = 0; t < MAXT; ++t) {
        if (MAXT == 1 || t < rows) {
          const float sum = warpSum(acc[t][r]);
          if (lane == 0)
            storeLinearOut(y, residual, static_cast<long long>(t) * N + o, sum * scale + b);
        }
      }
    }
  }
}

// x, -x or +-0 by the mask: one LOP3.
__device__ __forceinline__ float ternarySelect(float x, unsigned int m) {
  constexpr unsigned int kSign = 0x80000000u;
  return __uint_as_float((__float_as_uint(x) & (m | kSign)) ^ (kSign & ~m));
}

template <class LAYOUT, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void ternaryTiled(const float *x, int rows, const unsigned int *w,
                                             float scale, const void *bias,
                                             const float *residual, float *y) {
  constexpr int TK = 32;
  static_assert(kTernaryThreads == 256, "the tile mapping assumes 256 threads");
  static_assert(K % 16 == 0, "K is a multiple of 16");
  const int loadK = threadIdx.x % TK;
  const int loadRow = threadIdx.x / TK; // 0..7
  auto stage = [&](float (&xs)[kTiledGemmRows][TK + 1],
                   unsigned int (&ws)[kTiledGemmRows][TK + 1], int m0, int n0, int k0) {
    const int gk = k0 + loadK;
    const bool inK = K % TK == 0 || gk < K; // the last K step may be half a tile
#pragma unroll
    for (int r = 0; r < kTiledGemmRows / 8; ++r) {
      const int o = loadRow + 8 * r;
      const int gn = n0 + o;
      // Neighbouring threads read the same code word or byte through L1 together.
      ws[o][loadK] = gn < N && inK ? LAYOUT::template mask<K>(w, gn, gk) : 0u;
    }
#pragma unroll
    for (int r = 0; r < kTiledGemmRows / 8; ++r) {
      const int m = loadRow + 8 * r;
      const int gm = m0 + m;
      xs[m][loadK] = gm < rows && inK ? x[static_cast<long long>(gm) * K + gk] : 0.0f;
    }
  };
  tiledGemm<TK, unsigned int, BDT, HAS_BIAS, K, N>(
      rows, bias, residual, y, stage, ternarySelect, [&](float sum) { return sum * scale; });
}

// The paths of the file comment for one layout, given the codes and the scale.
template <class LAYOUT, int BDT, bool HAS_BIAS, int K, int N, int ROWS>
__device__ __forceinline__ void ternaryLinear(const float *x, const unsigned int *codes,
                                              float scale, const void *bias,
                                              const float *residual, float *y,
                                              const StepState *state, BlockSlice blocks) {
  constexpr int RPW = ternaryRowsPerWarp(N);
  constexpr int WORDS = LAYOUT::template wordsPerLane<K>();
  static_assert(kTernaryMaxRows == kLinearGemvMaxRows, "the emitter's GEMV/GEMM split");
  const int n = state->nTokens;
  if constexpr (ROWS == kRowsLast) {
    ternaryGemv<LAYOUT, BDT, HAS_BIAS, K, N, RPW, WORDS, 1>(
        x + static_cast<long long>(n - 1) * K, 1, codes, scale, bias, residual, y, blocks);
  } else if constexpr (ROWS == kRowsGemm) {
    ternaryTiled<LAYOUT, BDT, HAS_BIAS, K, N>(x, n, codes, scale, bias, residual, y);
  } else if (n == 1) {
    ternaryGemv<LAYOUT, BDT, HAS_BIAS, K, N, RPW, WORDS, 1>(x, 1, codes, scale, bias, residual, y,
                                                            blocks);
  } else {
    ternaryGemv<LAYOUT, BDT, HAS_BIAS, K, N, RPW, WORDS, kTernaryMaxRows>(
        x, n, codes, scale, bias, residual, y, blocks);
  }
}

template <int BDT, bool HAS_BIAS, int K, int N, int ROWS>
__device__ __forceinline__ void linearTernary(const float *x, const void *w, const void *bias,
                                              const float *residual, float *y,
                                              const StepState *state,
                                              BlockSlice blocks = wholeGrid()) {
  static_assert(ternary::isPackableCols(K), "TQ2 needs K to be a multiple of 64");
  const float scale = Tq2Codes::scale<N, K>(w);
  if constexpr (ternaryTensorCoreGemm<K, ROWS>()) // long steps on tensor cores
    ternaryGemm<Tq2Codes, BDT, HAS_BIAS, K, N, ROWS>(x, w, scale, bias, residual, y, state,
                                                     blocks);
  else
    ternaryLinear<TernaryTq2Layout, BDT, HAS_BIAS, K, N, ROWS>(
        x, static_cast<const unsigned int *>(w), scale, bias, residual, y, state, blocks);
}

} // namespace dev
} // namespace ninfer
