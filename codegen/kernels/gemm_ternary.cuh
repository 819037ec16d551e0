// Long steps of ternary linears (TQ2: ninfer/TernaryFormat.h, TQ1: ninfer/Tq1Format.h) on the
// tensor-core GEMMs: gemm_wgmma.cuh on sm_90a (the emitter's x16 rows, x rounded to f16 by
// its rounding launch) and gemm_mma.cuh on sm_80+ (f32 x, rounded as staged). The weight
// tiles are decoded to f16 +-s / 0, s the tensor's scale rounded to f16 once, so a product
// is x's f16 times s's: relative error about 2^-11 against the select/add paths' f32.
// The emitter takes this where K is a multiple of the GEMM's 64-value k-step (every TQ2
// shape; TQ1 shapes whose rows are whole k-steps) and the targets are sm_80+.
//
// TernaryTileStager: thread t takes row n0 + t / 2 of the 128-row tile and values
// k0 + 32 (t % 2) .. +31 of it (as linear_quant.cuh's QuantTileStager), loads their codes
// raw one k-step ahead (CODES::load) and, after the math, decodes them into 16 pairs of
// adjacent values (CODES::pairs) and stores them as four 16-byte chunks of the tile.
//  * Tq2Codes: the 32 values are two u32 words of the row (16 values each).
//  * Tq1Codes: the 32 values are two runs of 16 values, run i of a chunk being digit i
//    of the chunk's 16 bytes, so a run is one 16-byte load and digitPairsF16 per word.
// ternarySwiGluGemm: a TQ1 gate/up pair's GEMM on sm_90a over GateUpRows tiles (each row
// decoded with its matrix's scale), writing the SwiGLU as the down projection's x16.
#pragma once

#include "TernaryFormat.h"
#include "Tq1Format.h"
#include "gemm_wgmma.cuh"
#include "gemv_quant_mma.cuh"

namespace ninfer {
namespace dev {

// Whether a step of ROWS runs here (else the select/add paths): the wgmma GEMM's rows, or
// the mma.sync GEMM's where the plan takes it (NINFER_LINEAR_MMA) and K is whole k-steps.
template <int K, int ROWS> __host__ __device__ constexpr bool ternaryTensorCoreGemm() {
  return ROWS == kRowsGemmX16 || ROWS == kRowsGemmX16Tall ||
         (ROWS == kRowsGemm && NINFER_LINEAR_MMA && K % kMmaTK == 0);
}

struct Tq2Codes {
  uint2 raw;
  // The tensor's f32 scale, which follows its N x K codes (a 16-byte aligned offset).
  template <int N, int K> __device__ __forceinline__ static float scale(const void *w) {
    return __ldg(reinterpret_cast<const float *>(static_cast<const char *>(w) +
                                                 ternary::scaleOffset(N, K)));
  }
  template <int K>
  __device__ __forceinline__ void load(const unsigned char *w, long long n, int k) {
    loadStreamed(raw, w + n * ternary::rowBytes(K) + k / 4);
  }
  __device__ __forceinline__ void pairs(unsigned int scaleBits, unsigned int (&v)[16]) const {
#pragma unroll
    for (int m = 0; m < 16; ++m)
      v[m] = ternary::codePairF16(m < 8 ? raw.x : raw.y, m % 8, scaleBits);
  }
};

struct Tq1Codes {
  uint4 raw[2];
  int digit[2];
  template <int N, int K> __device__ __forceinline__ static float scale(const void *w) { // as TQ2's
    return __ldg(reinterpret_cast<const float *>(static_cast<const char *>(w) +
                                                 tq1::scaleOffset(N, K)));
  }
  template <int K>
  __device__ __forceinline__ void load(const unsigned char *w, long long n, int k) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int run = k + 16 * r;
      digit[r] = run % tq1::kChunkValues / 16;
      loadStreamed(raw[r], w + n * tq1::rowBytes(K) +
                               run / tq1::kChunkValues * tq1::kChunkBytes);
    }
  }
  __device__ __forceinline__ void pairs(unsigned int scaleBits, unsigned int (&v)[16]) const {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const unsigned int words[4] = {raw[r].x, raw[r].y, raw[r].z, raw[r].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        unsigned int p[2];
        tq1::digitPairsF16(words[q], digit[r], scaleBits, p);
        v[8 * r + 2 * q] = p[0];
        v[8 * r + 2 * q + 1] = p[1];
      }
    }
  }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 // (gemm_mma.cuh's row policies)
// ROWS: where row n of the GEMM's weights is (gemm_mma.cuh's MatrixRows, or GateUpRows for a
// SwiGLU's gate and up matrices), scaleBits the f16 bits of each matrix's scale.
template <class CODES, int K, int N, class ROWS = MatrixRows<unsigned char>>
struct TernaryTileStager {
  static_assert(K % kMmaTK == 0, "whole k-steps");
  static constexpr int kMmaDType = kF16;
  static constexpr bool kCopiesAsync = false; // store decodes what fetch loaded
  static constexpr bool kBulk = false;
  ROWS w;
  unsigned int scaleBits[ROWS::kMatrices];
  CODES codes;
  unsigned int rowScaleBits; // of the matrix of the row this thread fetched

  template <class TILE> __device__ __forceinline__ void fetch(int n0, int k0, TILE) {
    // Rows past N read row N - 1 (not stored).
    const int n = min(n0 + static_cast<int>(threadIdx.x) / 2, N - 1);
    rowScaleBits = scaleBits[ROWS::index(n)];
    const int k = k0 + 32 * (static_cast<int>(threadIdx.x) % 2);
    codes.template load<K>(w.matrix(n), ROWS::row(n), k);
  }
  template <class TILE> __device__ __forceinline__ void store(TILE tile) {
    unsigned int v[16]; // v[m] = values (2m, 2m + 1) of the thread's 32
    codes.pairs(rowScaleBits, v);
#pragma unroll
    for (int q = 0; q < 4; ++q)
      *static_cast<uint4 *>(tile.chunk(threadIdx.x / 2, 4 * (threadIdx.x % 2) + q)) =
          make_uint4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
  }
};
#endif

// A long step of a ternary linear where ternaryTensorCoreGemm<K, ROWS>() (x: the x16 rows
// for ROWS kRowsGemmX16*, f32 rows for kRowsGemm).
template <class CODES, int BDT, bool HAS_BIAS, int K, int N, int ROWS>
__device__ __forceinline__ void ternaryGemm(const float *x, const void *w, float scale,
                                            const void *bias, const float *residual, float *y,
                                            const StepState *state, BlockSlice blocks) {
  static_assert(ternaryTensorCoreGemm<K, ROWS>(), "the select/add paths take this step");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Stager = TernaryTileStager<CODES, K, N>;
  Stager stager{{static_cast<const unsigned char *>(w)}, {f32ToF16(scale)}};
  if constexpr (ROWS == kRowsGemm) {
    gemmMma<Stager, BDT, HAS_BIAS, K, N>(x, state->nTokens, stager, bias, residual, y, blocks);
  } else {
#if NINFER_SM90A
    gemmWgmma<Stager, LinearOut<BDT, HAS_BIAS, N>, K, N, ROWS == kRowsGemmX16Tall ? 2 : 1>(
        reinterpret_cast<const unsigned short *>(x), state->nTokens, stager,
        {bias, residual, y}, blocks);
#endif
  }
#endif
}

// The long-step GEMM of a ternary gate/up pair on sm_90a (the emitter's swiGluGemmCall): one
// wgmma GEMM over tiles of 64 gate and the same 64 up rows (GateUpRows) whose epilogue writes
// silu(gate) * up rounded to ODT (rows of I) as the down projection's x (SwiGluOut).
template <class CODES, int ODT, int K, int I, int ROWS>
__device__ __forceinline__ void ternarySwiGluGemm(const float *x, const void *gate,
                                                  const void *up, unsigned short *y16,
                                                  const StepState *state) {
#if NINFER_SM90A
  static_assert(ROWS == kRowsGemmX16 || ROWS == kRowsGemmX16Tall, "wgmma");
  using Rows = GateUpRows<unsigned char>;
  using Stager = TernaryTileStager<CODES, K, 2 * I, Rows>;
  Stager stager{Rows{static_cast<const unsigned char *>(gate),
                     static_cast<const unsigned char *>(up)},
                {f32ToF16(CODES::template scale<I, K>(gate)),
                 f32ToF16(CODES::template scale<I, K>(up))}};
  gemmWgmma<Stager, SwiGluOut<ODT, 2 * I>, K, 2 * I, ROWS == kRowsGemmX16Tall ? 2 : 1>(
      reinterpret_cast<const unsigned short *>(x), state->nTokens, stager, {y16}, wholeGrid());
#endif
}

} // namespace dev
} // namespace ninfer
