// Linear layer and embedding lookup with group-quantized weights (Q8/Q6/Q5/Q4/Q3/Q2,
// one fp16 scale per GROUP values, or K16's two-level scales; layout and reference decoding in
// QuantFormats.h, which the CPU executor uses too, so both decode the same
// bits): y[t, o] = sum_k x[t, k] * scale[o, k / GROUP] * q[o, k] (+ bias[o]).
//
// Two paths, picked per step from state->nTokens (a uniform branch):
//  * one row on sm_90+ plans (decode, last_row_only), where the emitter gives it a
//    launch of its own: the bulk-copy GEMV (gemv_quant_bulk.cuh, linearQuantOneToken).
//  * rows <= kQuantGemvMaxRows (decode, short prefill, last_row_only): fused
//    dequant GEMV, on tensor cores on sm_80+ (gemv_quant_mma.cuh), else (sm_75)
//    this CUDA-core one. A warp owns one output row and walks it one 128-value unit
//    per iteration: lane l takes values 4l..4l+3 of the unit, so the warp reads
//    the unit's 16 * BITS contiguous bytes (coalesced, one pass over the weight
//    plane) and each lane decodes its 4 codes with the header's shift-and-mask
//    accessor. The scale of those 4 values is one fp16 of the scale plane (4
//    values never straddle a group: GROUP >= 16). x rows (f32) are read through
//    L1 (loadProduced): every warp of the block reads the same x, and K x 8 rows of
//    f32 (up to 458 KB at K = 14336) does not fit shared memory. f32
//    accumulation, one butterfly reduction per output and row.
//  * more rows, sm_80+: the tensor-core GEMM of gemm_mma.cuh, each 32-value run
//    of a weight row decoded to f16 into its shared tile (QuantTileStager below).
//  * more rows otherwise (sm_75): tiled GEMM on CUDA cores. A block computes a 64 x 64 tile of
//    (tokens x outputs); per 64-value slice of K it dequantizes the 64 x 64
//    weight tile once into shared memory (f32) and stages the 64 x 64 x tile,
//    then each thread accumulates a 4 x 4 register tile. The dequantized tile
//    is reused by all 64 tokens, so decoding costs 1/64 of a multiply-add per
//    weight value. Tiles are grid-strided.
// Launch: block kQuantThreads = 256, grid (ceil(N / gemv::mmaRowsPerBlock(N)), 1, 1)
// (any grid is correct), no dynamic shared memory; the tensor-core GEMM's launch as
// gemm_mma.cuh says. last_row_only: x row n-1 -> y row 0.
//
// Embedding: out[t, :] = dequantized table row tokens[t]. Launch: block
// THREADS, grid (blocks per row, n_tokens, 1), grid-stride over the row.
#pragma once

#include "QuantFormats.h"
#include "common.cuh"
#include "gemv_quant_bulk.cuh"
#include "gemm_wgmma.cuh"
#include "gemv_quant_mma.cuh"
#include "gemv_quant_rows.cuh"
#include "tiled_gemm.cuh"

namespace ninfer {
namespace dev {

constexpr int kQuantThreads = 256;
constexpr int kQuantGemvMaxRows = 8;

// Value k of row `o`: weight plane at w, scale plane right after it.
template <int BITS, int GROUP, int K, int N>
__device__ __forceinline__ float quantValue(const unsigned char* w, long long o, int k) {
  using Packing = quant::QuantPacking<BITS>;
  const unsigned int* row = reinterpret_cast<const unsigned int*>(
      w + o * quant::quantRowWeightBytes(BITS, K));
  const unsigned short* scales = reinterpret_cast<const unsigned short*>(
      w + quant::quantScalePlaneOffset(BITS, N, K) + o * quant::quantRowScaleBytes(GROUP, K));
  const int q = static_cast<int>(Packing::codeAt(row, k)) - Packing::kCodeOffset;
  return f16ToF32(quant::quantGroupScaleBits<GROUP>(scales, k / GROUP)) * static_cast<float>(q);
}

template <int BITS, int GROUP, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void linearQuantGemv(const float* x, int rows, const unsigned char* w,
                                                const void* bias, const float* residual,
                                                float* y, BlockSlice blocks) {
  using Packing = quant::QuantPacking<BITS>;
  constexpr int kUnits = K / quant::kQuantUnitValues;
  constexpr int kWarps = kQuantThreads / kWarpSize;
  constexpr long long kRowWeightBytes = quant::quantRowWeightBytes(BITS, K);
  constexpr long long kRowScaleBytes = quant::quantRowScaleBytes(GROUP, K);
  constexpr long long kScalePlane = quant::quantScalePlaneOffset(BITS, N, K);
  const int lane = threadIdx.x % kWarpSize;
  for (int o = blocks.index * kWarps + threadIdx.x / kWarpSize; o < N;
       o += blocks.count * kWarps) {
    const unsigned int* row =
        reinterpret_cast<const unsigned int*>(w + static_cast<long long>(o) * kRowWeightBytes);
    const unsigned short* scales = reinterpret_cast<const unsigned short*>(
        w + kScalePlane + static_cast<long long>(o) * kRowScaleBytes);
    float acc[kQuantGemvMaxRows];
#pragma unroll
    for (int r = 0; r < kQuantGemvMaxRows; ++r)
      acc[r] = 0.0f;
    for (int u = 0; u < kUnits; ++u) {
      const unsigned int* unit = row + u * Packing::kUnitWords;
      const int k = u * quant::kQuantUnitValues + 4 * lane;
      const float scale = f16ToF32(quant::quantGroupScaleBits<GROUP>(scales, k / GROUP));
      float wv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        wv[e] = scale *
                static_cast<float>(static_cast<int>(Packing::codeInUnit(unit, 4 * lane + e)) -
                                   Packing::kCodeOffset);
#pragma unroll
      for (int r = 0; r < kQuantGemvMaxRows; ++r) {
        if (r < rows) {
          const float4 xv = loadProduced(x + static_cast<long long>(r) * K + k);
          acc[r] += wv[0] * xv.x + wv[1] * xv.y + wv[2] * xv.z + wv[3] * xv.w;
        }
      }
    }
    float b = 0.0f;
    if constexpr (HAS_BIAS)
      b = loadAsFloat<BDT>(bias, o);
#pragma unroll
    for (int r = 0; r < kQuantGemvMaxRows; ++r) {
      if (r < rows) {
        const float sum = warpSum(acc[r]);
        if (lane == 0)
          storeLinearOut(y, residual, static_cast<long long>(r) * N + o, sum + b);
      }
    }
  }
}

template <int BITS, int GROUP, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void linearQuantTiled(const float* x, int rows, const unsigned char* w,
                                                 const void* bias, const float* residual,
                                                 float* y) {
  constexpr int TK = 64;
  static_assert(kQuantThreads == 256, "the tile mapping assumes 256 threads");
  static_assert(K % TK == 0, "K is a multiple of 128");
  // Loading: thread -> (tile row threadIdx.x / 4, 16 consecutive k at 16 * (threadIdx.x % 4)).
  const int loadRow = threadIdx.x / 4;
  const int loadK = 16 * (threadIdx.x % 4);
  auto stage = [&](float (&xs)[kTiledGemmRows][TK + 1], float (&ws)[kTiledGemmRows][TK + 1],
                   int m0, int n0, int k0) {
    const int gn = n0 + loadRow;
    const int gm = m0 + loadRow;
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      const int k = k0 + loadK + e;
      ws[loadRow][loadK + e] = gn < N ? quantValue<BITS, GROUP, K, N>(w, gn, k) : 0.0f;
      xs[loadRow][loadK + e] = gm < rows ? x[static_cast<long long>(gm) * K + k] : 0.0f;
    }
  };
  tiledGemm<TK, float, BDT, HAS_BIAS, K, N>(rows, bias, residual, y, stage);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// Weight tiles of the tensor-core GEMM (gemm_mma.cuh) from group-quantized rows: thread t
// takes row n0 + t / 2 of the tile, run 2 k0 / 32 + t % 2 of it (a 32-value quarter of a
// unit, one scale), loads it raw one k-step ahead and, after the math, decodes it to f16
// values (level x scale, exact up to the one rounding of the product; K16: the run's
// two groups' scales, RunScales in gemv_quant_mma.cuh). The codec's pairs
// are regrouped into pairs of adjacent values with one byte permute each (RunCodec's
// pairs keep both values of an adjacent pair in the same half), so x needs no reordering.
template <int BITS, int GROUP, int K, int N, class ROWS = MatrixRows<unsigned char>>
struct QuantTileStager {
  static constexpr int kMmaDType = kF16;
  static constexpr bool kCopiesAsync = false; // store decodes what fetch loaded
  static constexpr bool kBulk = false;        // gemm_wgmma.cuh's TmaTileStager: true
  using Codec = RunCodec<BITS>;
  static_assert(adjacentPairsShareHalves<Codec>(), "one prmt per adjacent pair");
  static_assert(firstHalfPairsHoldFirstGroup<Codec>(), "RunScales' pair split");
  using Packing = quant::QuantPacking<BITS>;
  static constexpr int kMatrixRows = N / ROWS::kMatrices; // the rows of each matrix
  ROWS w;
  Codec run;
  RunScales<GROUP> scale;
  int run_; // which run of its unit this thread stages

  template <class TILE> __device__ __forceinline__ void fetch(int n0, int k0, TILE) {
    // Rows past N read row N - 1 (not stored); K is whole units, so k < K.
    const int n = min(n0 + static_cast<int>(threadIdx.x) / 2, N - 1);
    const unsigned char *matrix = w.matrix(n);
    const long long o = ROWS::row(n);
    const int k = k0 + 32 * (threadIdx.x % 2);
    run.load(matrix + o * quant::quantRowWeightBytes(BITS, K) +
                 static_cast<long long>(k / quant::kQuantUnitValues) * Packing::kUnitBytes,
             (k % quant::kQuantUnitValues) / 32);
    scale.load(reinterpret_cast<const unsigned short *>(
                   matrix + quant::quantScalePlaneOffset(BITS, kMatrixRows, K) +
                   o * quant::quantRowScaleBytes(GROUP, K)),
               k / quant::kQuantUnitValues, (k % quant::kQuantUnitValues) / 32);
    run_ = (k % quant::kQuantUnitValues) / 32;
  }
  template <class TILE> __device__ __forceinline__ void store(TILE tile) {
    unsigned int p[16];
    runLevels(run, p);
    scale.resolve(run_);
#pragma unroll
    for (int j = 0; j < 16; ++j)
      p[j] = hmul2(p[j], scale.scale(j));
    unsigned int v[16]; // v[u] = run values (2u, 2u + 1)
#pragma unroll
    for (int u = 0; u < 16; ++u)
      v[u] = prmt(p[pairOfValue<Codec>(2 * u)], p[pairOfValue<Codec>(2 * u + 1)],
                  isSecondOfPair<Codec>(2 * u) ? 0x7632u : 0x5410u);
#pragma unroll
    for (int q = 0; q < 4; ++q)
      *static_cast<uint4 *>(tile.chunk(threadIdx.x / 2, 4 * (threadIdx.x % 2) + q)) =
          make_uint4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
  }
};
#endif

template <int BITS, int GROUP, int BDT, bool HAS_BIAS, int K, int N, int ROWS>
__device__ __forceinline__ void linearQuant(const float* x, const void* w, const void* bias,
                                            const float* residual, float* y,
                                            const StepState* state,
                                            BlockSlice blocks = wholeGrid()) {
  static_assert(K % quant::kQuantUnitValues == 0, "quantized rows are whole 128-value units");
  const unsigned char* wb = static_cast<const unsigned char*>(w);
  const int n = state->nTokens;
  static_assert(kGemvMmaMaxTokens == kLinearGemvMaxRows && kQuantGemvMaxRows == kLinearGemvMaxRows,
                "the emitter's GEMV/GEMM split");
  if constexpr (ROWS == kRowsGemmX16 || ROWS == kRowsGemmX16Tall) {
#if NINFER_SM90A
    QuantTileStager<BITS, GROUP, K, N> stager{wb};
    gemmWgmma<QuantTileStager<BITS, GROUP, K, N>, LinearOut<BDT, HAS_BIAS, N>, K, N,
              ROWS == kRowsGemmX16Tall ? 2 : 1>(reinterpret_cast<const unsigned short *>(x), n,
                                                stager, {bias, residual, y}, blocks);
#endif
  } else if constexpr (ROWS == kRowsGemm) {
#if NINFER_LINEAR_MMA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    QuantTileStager<BITS, GROUP, K, N> stager{wb};
    gemmMma<QuantTileStager<BITS, GROUP, K, N>, BDT, HAS_BIAS, K, N>(x, n, stager, bias,
                                                                     residual, y, blocks);
#else
    linearQuantTiled<BITS, GROUP, BDT, HAS_BIAS, K, N>(x, n, wb, bias, residual, y);
#endif
  } else {
    const float* rows = ROWS == kRowsLast ? x + static_cast<long long>(n - 1) * K : x;
    const int count = ROWS == kRowsLast ? 1 : n;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // Tensor-core GEMV (gemv_quant_mma.cuh); the CUDA-core one above is for sm_75.
    gemvQuantMma<BITS, GROUP, BDT, HAS_BIAS, K, N>(rows, count, wb, bias, residual, y, blocks);
#else
    linearQuantGemv<BITS, GROUP, BDT, HAS_BIAS, K, N>(rows, count, wb, bias, residual, y, blocks);
#endif
  }
}

// The decode launch of a SwiGLU MLP's gate/up linears (same format) with the activation
// fused (the emitter's fusion, steps of at most kQuantGemvMaxRows tokens, plans for sm_80+
// only): y = silu(x gate^T) * (x up^T), on the tensor-core GEMV. Launch: block
// kQuantThreads, grid ceil(N / gemv::mmaSwiGluOutputsPerBlock(N)).
template <int BITS, int GROUP, int K, int N>
__device__ __forceinline__ void linearQuantSwiGlu(const float *x, const void *gate, const void *up,
                                                  float *y, const StepState *state) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  gemvQuantMma<BITS, GROUP, 0, false, K, N, true>(
      x, state->nTokens, static_cast<const unsigned char *>(gate), nullptr, nullptr, y,
      wholeGrid(), static_cast<const unsigned char *>(up));
#endif
}

// linearSwiGluGemm (linear.cuh) for group-quantized gate and up matrices: one GEMM over
// tiles of their rows (GateUpRows) on sm_90a, writing silu(gate) * up rounded to ODT (rows of
// I).
template <int BITS, int GROUP, int ODT, int K, int I, int ROWS>
__device__ __forceinline__ void linearQuantSwiGluGemm(const float *x, const void *gate,
                                                      const void *up, unsigned short *y16,
                                                      const StepState *state,
                                                      BlockSlice blocks = wholeGrid()) {
#if NINFER_SM90A
  static_assert(ROWS == kRowsGemmX16 || ROWS == kRowsGemmX16Tall, "wgmma");
  using Rows = GateUpRows<unsigned char>;
  using Stager = QuantTileStager<BITS, GROUP, K, 2 * I, Rows>;
  Stager stager{Rows{static_cast<const unsigned char *>(gate),
                     static_cast<const unsigned char *>(up)}};
  gemmWgmma<Stager, SwiGluOut<ODT, 2 * I>, K, 2 * I, ROWS == kRowsGemmX16Tall ? 2 : 1>(
      reinterpret_cast<const unsigned short *>(x), state->nTokens, stager, {y16}, blocks);
#endif
}

template <int BITS, int GROUP, int DIM, int VOCAB, int THREADS>
__device__ __forceinline__ void embeddingQuant(const int* tokens, const void* table, float* out,
                                               const StepState* state) {
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  const int id = tokens[t];
  float* row = out + static_cast<long long>(t) * DIM;
  const unsigned char* w = static_cast<const unsigned char*>(table);
  for (int i = blockIdx.x * THREADS + threadIdx.x; i < DIM; i += gridDim.x * THREADS)
    row[i] = (id < 0 || id >= VOCAB) ? 0.0f : quantValue<BITS, GROUP, DIM, VOCAB>(w, id, i);
}

} // namespace dev
} // namespace ninfer
