// Linear layer with base-3 ternary weights (DType TQ1, layout in
// ninfer/Tq1Format.h): y[t, o] = s * sum_k t[o, k] * x[t, k] (+ bias[o]).
// Paths (ROWS of common.cuh):
//  * GEMV rows (1..8 tokens, last_row_only) on sm_80+: the tensor-core GEMV of
//    gemv_tq1_mma.cuh, which multiplies x (rounded to f16) by the exact levels
//    +-1 / 0 with f32 accumulation; no per-weight scale, s once per output. Plans whose
//    targets are all sm_90+ run one-token steps on gemv_tq1_bulk.cuh instead (the same math
//    on weights that bulk copies stage in shared memory; its own launches).
//  * Longer steps where K is a multiple of 64 and the targets take the tensor-core GEMMs
//    (sm_80+): gemm_ternary.cuh (weight tiles decoded to f16 +-s / 0, s rounded to f16).
//  * GEMV rows on sm_75, and the tiled GEMM for the other long steps (any arch):
//    the multiply-free select/add skeletons of linear_ternary.cuh with the TQ1
//    layout below (TernaryTq1Layout).
// Launch: block 256 threads, grid ceil(N / gemv::mmaRowsPerBlock(N)) blocks, the
// rule of the tensor-core GEMV (KernelEmitter.cpp); the other paths grid-stride,
// so any grid is correct for them.
//
// Decode (select/add GEMV, sm_75). A lane reads u32 words of a row per step (one 16-byte chunk =
// 4 words, or 2, or 1 so that the lanes' steps balance, see wordsPerLane). Word w of chunk c
// holds bytes 4w..4w+3, whose digit i are the values 80c + 16i + 4w .. +3: one float4 of x.
// Bytes 0 and 2 go to the 16-bit halves of one register, bytes 1 and 3 to
// another (tq1::evenLanes / oddLanes); per digit each register is multiplied
// by 3 (the decode's multiply-and-shift, on the codes, never on x), the digits
// are bits 8-9 and 24-25, and the fraction is masked back to 8 bits. A digit 2 (t = +1) adds x,
// a digit 0 (t = -1) subtracts it, a digit 1 does nothing: two bit tests
// predicating one add and one subtract, as for TQ2. Digits of padding values
// (past K, in the last chunk) are skipped whole: K is a multiple of 16.
// Decode (tiled GEMM): each weight of a K step is decoded on its own from its
// byte (tq1::digitAt) into the select mask of linear_ternary.cuh.
#pragma once

#include "Tq1Format.h"
#include "gemm_ternary.cuh"
#include "gemv_tq1_bulk.cuh"
#include "gemv_tq1_mma.cuh"
#include "linear_ternary.cuh"

namespace ninfer {
namespace dev {

struct TernaryTq1Layout {
  template <int K> __host__ __device__ static constexpr int rowWords() {
    return static_cast<int>(tq1::chunks(K)) * tq1::kWordsPerChunk;
  }
  // Lanes that finish a row together: the decode is bound by integer and add
  // issue, not by the weight stream, so the widest step (4 words, one 16-byte
  // load) that keeps at least 90 % of the lane-steps busy; else 1 word (the
  // warp still reads 128 contiguous bytes). K = 4096 (52 chunks) takes 1:
  // 208 words in 7 rounds of 32 against 52 chunks in 2 rounds.
  template <int K> __host__ __device__ static constexpr int wordsPerLane() {
    return mostlyBusy(rowWords<K>() / 4) ? 4 : mostlyBusy(rowWords<K>() / 2) ? 2 : 1;
  }
  // steps over 32 lanes in rounds: at least 90 % of the lane-rounds have work.
  __host__ __device__ static constexpr bool mostlyBusy(int steps) {
    return 10 * steps >= 9 * 32 * ((steps + 31) / 32);
  }

  // Adds x[e] to acc where digit bits `at` of `digits` say 2, subtracts it
  // where they say 0.
  __device__ static __forceinline__ void apply(unsigned int digits, int at, float x, float &acc) {
    if (digits & (2u << at))
      acc += x;
    if (!(digits & (3u << at)))
      acc -= x;
  }

  template <int K, int RPW, int WORDS, int MAXT>
  __device__ static __forceinline__ void step(const float *x, int rows, int word,
                                              const TernaryCodes<WORDS> (&codes)[RPW],
                                              float (&acc)[MAXT][RPW]) {
#pragma unroll
    for (int q = 0; q < WORDS; ++q) {
      const int chunk = (word + q) / tq1::kWordsPerChunk;
      const int inChunk = (word + q) % tq1::kWordsPerChunk;
      unsigned int even[RPW], odd[RPW]; // bytes 0, 2 and bytes 1, 3, as 16-bit lanes
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        even[r] = tq1::evenLanes(codes[r].w[q]);
        odd[r] = tq1::oddLanes(codes[r].w[q]);
      }
#pragma unroll
      for (int digit = 0; digit < tq1::kDigits; ++digit) {
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
          even[r] *= 3u; // lanes stay below 2^16: 255 * 3 = 765
          odd[r] *= 3u;
        }
        const int k = chunk * tq1::kChunkValues + 16 * digit + 4 * inChunk;
        if (K % tq1::kChunkValues == 0 || chunk * tq1::kChunkValues + 16 * digit < K) {
#pragma unroll
          for (int t = 0; t < MAXT; ++t) {
            if (MAXT == 1 || t < rows) {
              const float4 v = loadProduced(x + static_cast<long long>(t) * K + k);
#pragma unroll
              for (int r = 0; r < RPW; ++r) {
                apply(even[r], 8, v.x, acc[t][r]);
                apply(odd[r], 8, v.y, acc[t][r]);
                apply(even[r], 24, v.z, acc[t][r]);
                apply(odd[r], 24, v.w, acc[t][r]);
              }
            }
          }
        }
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
          even[r] &= tq1::kLaneMask;
          odd[r] &= tq1::kLaneMask;
        }
      }
    }
  }

  template <int K>
  __device__ static __forceinline__ unsigned int mask(const unsigned int *w, int gn, int gk) {
    const int chunk = gk / tq1::kChunkValues;
    const int inChunk = gk % tq1::kChunkValues;
    const unsigned char *row =
        reinterpret_cast<const unsigned char *>(w) + static_cast<long long>(gn) * tq1::rowBytes(K);
    const unsigned int byte = __ldg(row + chunk * tq1::kChunkBytes + inChunk % 16);
    return ternarySelectMask(static_cast<int>(tq1::digitAt(byte, inChunk / 16)) - 1);
  }
};

template <int BDT, bool HAS_BIAS, int K, int N, int ROWS>
__device__ __forceinline__ void linearTq1(const float *x, const void *w, const void *bias,
                                          const float *residual, float *y,
                                          const StepState *state,
                                          BlockSlice blocks = wholeGrid()) {
  static_assert(tq1::isPackableCols(K), "TQ1 needs K to be a multiple of 16");
  const float scale = Tq1Codes::scale<N, K>(w);
  const unsigned int *codes = static_cast<const unsigned int *>(w);
  if constexpr (ternaryTensorCoreGemm<K, ROWS>()) { // long steps (gemm_ternary.cuh)
    ternaryGemm<Tq1Codes, BDT, HAS_BIAS, K, N, ROWS>(x, w, scale, bias, residual, y, state,
                                                     blocks);
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // Tensor-core GEMV (gemv_tq1_mma.cuh) for decode, short steps and last_row_only; the
    // select/add GEMV of ternaryLinear stays for sm_75, the tiled GEMM for the long steps
    // the tensor-core GEMMs do not take.
    if constexpr (ROWS != kRowsGemm) {
      static_assert(kGemvMmaMaxTokens == kLinearGemvMaxRows, "the emitter's GEMV/GEMM split");
      const int n = state->nTokens;
      const float *rows = ROWS == kRowsLast ? x + static_cast<long long>(n - 1) * K : x;
      gemvTq1Mma<BDT, HAS_BIAS, K, N>(rows, ROWS == kRowsLast ? 1 : n, codes, scale, bias,
                                      residual, y, blocks);
    } else {
      ternaryLinear<TernaryTq1Layout, BDT, HAS_BIAS, K, N, ROWS>(x, codes, scale, bias, residual,
                                                                 y, state, blocks);
    }
#else
    ternaryLinear<TernaryTq1Layout, BDT, HAS_BIAS, K, N, ROWS>(x, codes, scale, bias, residual, y,
                                                               state, blocks);
#endif
  }
}

// The decode launch of a TQ1 gate/up pair with its SwiGLU (steps of 1..8 rows, sm_80+
// targets; the emitter's swiGluCall): y = silu(x gate^T) * (x up^T) on the tensor-core GEMV.
// Launch: block 256 threads, grid ceil(N / gemv::mmaSwiGluOutputsPerBlock(N)).
template <int K, int N>
__device__ __forceinline__ void linearTq1SwiGlu(const float *x, const void *gate, const void *up,
                                                float *y, const StepState *state) {
  static_assert(tq1::isPackableCols(K), "TQ1 needs K to be a multiple of 16");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  gemvTq1Mma<0, false, K, N, true>(x, state->nTokens, static_cast<const unsigned int *>(gate),
                                   Tq1Codes::scale<N, K>(gate), nullptr, nullptr, y,
                                   wholeGrid(), static_cast<const unsigned int *>(up),
                                   Tq1Codes::scale<N, K>(up));
#endif
}

} // namespace dev
} // namespace ninfer
