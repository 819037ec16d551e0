// Linear layer: y[t, o] = sum_k x[t, k] * W[o, k] (+ bias[o]), W stored [N, K] in
// its checkpoint dtype, x and y f32 rows, f32 accumulation.
//
// Three paths; the emitter instantiates each linear op twice (ROWS in common.cuh):
// a GEMV kernel for steps of up to 8 tokens and a GEMM kernel for longer ones.
//  * rows <= kGemvMaxRows (decode, short prefill, last_row_only): GEMV, bound by the
//    weight stream. A group of linearKSplit() warps owns linearRowsPerWarp(N) adjacent
//    output rows (ninfer/GemvShapes.h), each warp a slice of K, so short-N layers still
//    have ~4096 warps in flight; each lane
//    streams 16-byte chunks of them (VEC) with up to 8 independent 16-byte loads in flight
//    (kUnroll chunks x rows per warp), bypassing L1 (ld.global.nc.L1::no_allocate) so
//    the x rows (f32, read through L1 with coherent loads after the dependency wait,
//    reused by every warp of the SM) stay cached. Each x float4 is loaded once per
//    chunk and used for all the warp's rows.
//    Full unrolled iterations run unpredicated; only a K that is not a multiple of
//    32 x kUnroll chunks has a predicated tail. One butterfly reduction per output
//    and warp; the K slices' sums are added through shared memory in slice order.
//    Decode (one row) has its own instantiation, so it keeps one accumulator per
//    output row. Grid-stride over row groups. An RMSNorm before the linear may be fused
//    in (NORM, common.cuh): x is then the norm's input, multiplied by the norm's weight
//    as it is read, its squares summed alongside, and each row's sums scaled by 1 / rms.
//    Expected: >= 80% of HBM bandwidth for K = 4096/14336 and N >= 4096 (enough
//    loads in flight: 16 warps/SM x 32 lanes x 128 B = 64 KB per SM, more than the
//    bandwidth-latency product of ~25 KB per SM at 4.3 TB/s and ~1 us).
//  * more rows, f16/bf16 weights, sm_80+: tensor-core GEMM (gemm_mma.cuh).
//  * more rows otherwise (f32 weights, sm_75, unaligned): shared-memory tiled GEMM on
//    CUDA cores, a TM x TN output tile per block, each thread a 4x4 register tile.
// Tiles and row groups are grid-strided, so the grid does not depend on the token count.
// Launch: block THREADS = 256, grid (ceil(N / gemv::linearRowsPerBlock(SHAPE_N, K, elems)),
// 1, 1) (any grid is correct), no dynamic shared memory; the tensor-core GEMM's launch as
// gemm_mma.cuh says. SHAPE_N (N unless given) is the N the GEMV's split is chosen for: a
// grouped launch passes the group's total, so k and v (N = 1024 next to q's 4096) get
// q's blocks of 8 rows instead of 2-row blocks that each re-read all of x.
// last_row_only: x row n-1 -> y row 0.
#pragma once

#include "GemvShapes.h"
#include "common.cuh"
#include "gemm_wgmma.cuh"
#include "tiled_gemm.cuh"

namespace ninfer {
namespace dev {

constexpr int kLinearThreads = 256;
constexpr int kGemvMaxRows = 8;
static_assert(kLinearThreads == kMmaThreads && kLinearThreads == gemv::kBlockThreads,
              "one block shape for every path");

using gemv::linearKSplit;
using gemv::linearRowsPerWarp;

// 16-byte read-only load that does not allocate in L1 (weights are read once). Volatile,
// so the first loads stay ahead of the dependency wait that follows them (linearGemvVec).
__device__ __forceinline__ uint4 loadStream16(const uint4 *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// acc[i][r] += dot(x row r, weight chunk wv of row i) for r < rows; chunk index c. With a
// fused norm (NORM::kOn) x is multiplied by the norm's weight and sq[r] gets the squares of
// row r's x values (the caller applies the 1 / rms to the sums).
template <int WDT, int K, int MAXR, int RPW, class NORM>
__device__ __forceinline__ void gemvChunk(const float *x, int rows, int c, const uint4 (&wv)[RPW],
                                          float (&acc)[RPW][MAXR], float (&sq)[MAXR],
                                          const NORM &norm) {
  constexpr int kElems = elemsPer16<WDT>();
  float wf[RPW][kElems];
#pragma unroll
  for (int i = 0; i < RPW; ++i)
    unpack16<WDT>(wv[i], wf[i]);
  float g[kElems]; // the norm's weights of the chunk (constants)
  norm.weights(static_cast<long long>(c) * kElems, g);
#pragma unroll
  for (int r = 0; r < MAXR; ++r) {
    if (MAXR == 1 || r < rows) {
      const float *xr = x + static_cast<long long>(r) * K + c * kElems;
#pragma unroll
      for (int e = 0; e < kElems / 4; ++e) {
        float4 xv = loadProduced(xr + 4 * e); // after the GEMV's dependency wait
        if constexpr (NORM::kOn) {
          sq[r] += xv.x * xv.x + xv.y * xv.y + xv.z * xv.z + xv.w * xv.w;
          xv = make_float4(xv.x * g[4 * e], xv.y * g[4 * e + 1], xv.z * g[4 * e + 2],
                           xv.w * g[4 * e + 3]);
        }
#pragma unroll
        for (int i = 0; i < RPW; ++i)
          acc[i][r] += wf[i][4 * e] * xv.x + wf[i][4 * e + 1] * xv.y + wf[i][4 * e + 2] * xv.z +
                       wf[i][4 * e + 3] * xv.w;
      }
    }
  }
}

// GEMV with 16-byte weight loads (K % elemsPer16 == 0, 16-byte aligned rows).
// Warp w of a block takes row group w / KS and the K slice w % KS: full steps of
// kUnroll x 32 chunks go to the slices in turn, the tail to the next slice.
// The launch waits for the previous kernel here, not in its wrapper: each warp after
// issuing its first weight loads (weights are constants), before it reads x; in
// one-token steps it then lets the next launch be scheduled (gridDependencyTrigger).
// SWIGLU: the gate/up GEMV of a SwiGLU MLP with the activation fused (w: gate, wUp:
// up, both [N, K]): a warp's two rows are gate row o and up row o, and it stores
// silu(gate) * up as the SwiGLU op does; no bias or residual.
// NORM: an RMSNorm of x fused in (common.cuh): the warps of a row group add their squares
// of x over the K slices, in slice order, and scale the row sums by the row's 1 / rms.
template <int WDT, int BDT, bool HAS_BIAS, int K, int N, int MAXR, int SHAPE_N,
          bool SWIGLU = false, class NORM = NoNorm>
__device__ __forceinline__ void linearGemvVec(const float *x, int rows, const void *w,
                                              const void *bias, const float *residual, float *y,
                                              BlockSlice blocks, bool oneToken,
                                              const void *wUp = nullptr, NORM norm = {}) {
  static_assert(!SWIGLU || !HAS_BIAS, "a fused SwiGLU has no bias");
  constexpr int RPW = SWIGLU ? 2 : linearRowsPerWarp(SHAPE_N);
  constexpr int kOutputsPerWarp = SWIGLU ? 1 : RPW;
  constexpr int kElems = elemsPer16<WDT>();
  constexpr int KS = linearKSplit(SHAPE_N, K, kElems);
  constexpr int kChunks = K / kElems;
  // 8 loads in flight per lane, fewer when a slice would get no full step (short
  // rows, KS = 1, may have none: they are all tail).
  constexpr int kSliceSteps = kChunks / (kWarpSize * KS);
  constexpr int kUnroll = kSliceSteps < 1 ? 8 / RPW : kSliceSteps < 8 / RPW ? kSliceSteps : 8 / RPW;
  constexpr int kStep = kUnroll * kWarpSize;
  constexpr int kFull = kChunks / kStep;
  constexpr int kTailIters = (kChunks - kFull * kStep + kWarpSize - 1) / kWarpSize;
  constexpr int kWarps = kLinearThreads / kWarpSize;
  constexpr int kRowsPerBlock = kWarps / KS * kOutputsPerWarp;
  __shared__ float partial[KS > 1 ? kWarps : 1][RPW][MAXR];
  __shared__ float partialSq[KS > 1 && NORM::kOn ? kWarps : 1][MAXR];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int slice = warp % KS;
  bool waited = false;
  auto waitOnce = [&] {
    if (!waited) {
      gridDependencyWait();
      gridDependencyTrigger(oneToken);
      waited = true;
    }
  };
  for (int block0 = blocks.index * kRowsPerBlock; block0 < N;
       block0 += blocks.count * kRowsPerBlock) {
    const int o0 = block0 + warp / KS * kOutputsPerWarp;
    const uint4 *wRow[RPW];
#pragma unroll
    for (int i = 0; i < RPW; ++i) // a row past N re-reads row N-1 and is not stored
      wRow[i] = reinterpret_cast<const uint4 *>(
          static_cast<const char *>(SWIGLU && i == 1 ? wUp : w) +
          static_cast<long long>(min(SWIGLU ? o0 : o0 + i, N - 1)) * K * elemBytes<WDT>());
    float acc[RPW][MAXR], sq[MAXR];
#pragma unroll
    for (int r = 0; r < MAXR; ++r) {
      sq[r] = 0.0f;
#pragma unroll
      for (int i = 0; i < RPW; ++i)
        acc[i][r] = 0.0f;
    }
    // The lane that stores the outputs loads their bias and residual right after the wait
    // (the first step of slice 0, full or tail), so the loads overlap the dot products.
    float bv[RPW], rv[RPW][MAXR];
    auto loadAddends = [&] {
      if (SWIGLU || slice != 0 || lane != 0)
        return;
#pragma unroll
      for (int i = 0; i < RPW; ++i) {
        const int o = min(o0 + i, N - 1);
        bv[i] = HAS_BIAS ? loadAsFloat<BDT>(bias, o) : 0.0f;
#pragma unroll
        for (int r = 0; r < MAXR; ++r)
          rv[i][r] = residual && (MAXR == 1 || r < rows)
                         ? loadProducedScalar(residual + static_cast<long long>(r) * N + o)
                         : 0.0f;
      }
    };
    for (int it = slice; it < kFull; it += KS) {
      const int base = it * kStep + lane;
      uint4 wv[kUnroll][RPW];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) // every load issued before the first use
#pragma unroll
        for (int i = 0; i < RPW; ++i)
          wv[u][i] = loadStream16(wRow[i] + base + u * kWarpSize);
      waitOnce();
      if (it == slice)
        loadAddends();
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        gemvChunk<WDT, K, MAXR, RPW>(x, rows, base + u * kWarpSize, wv[u], acc, sq, norm);
    }
    if constexpr (kTailIters > 0) {
      if (slice == kFull % KS) {
        const int base = kFull * kStep + lane;
        uint4 wv[kTailIters][RPW];
#pragma unroll
        for (int u = 0; u < kTailIters; ++u)
#pragma unroll
          for (int i = 0; i < RPW; ++i)
            wv[u][i] = base + u * kWarpSize < kChunks ? loadStream16(wRow[i] + base + u * kWarpSize)
                                                       : make_uint4(0, 0, 0, 0);
        waitOnce();
        if (kFull == 0)
          loadAddends();
#pragma unroll
        for (int u = 0; u < kTailIters; ++u)
          if (base + u * kWarpSize < kChunks)
            gemvChunk<WDT, K, MAXR, RPW>(x, rows, base + u * kWarpSize, wv[u], acc, sq, norm);
      }
    }
    waitOnce(); // before the outputs, also in warps without a step
#pragma unroll
    for (int i = 0; i < RPW; ++i)
#pragma unroll
      for (int r = 0; r < MAXR; ++r)
        if (MAXR == 1 || r < rows) {
          const float sum = warpSum(acc[i][r]);
          if constexpr (KS > 1)
            if (lane == 0)
              partial[warp][i][r] = sum;
          acc[i][r] = sum;
        }
    if constexpr (NORM::kOn)
#pragma unroll
      for (int r = 0; r < MAXR; ++r)
        if (MAXR == 1 || r < rows) {
          sq[r] = warpSum(sq[r]);
          if constexpr (KS > 1)
            if (lane == 0)
              partialSq[warp][r] = sq[r];
        }
    if constexpr (KS > 1)
      __syncthreads();
    if (slice == 0) {
      auto total = [&](int i, int r) { // row i's sum over the K slices, in slice order
        float sum = acc[i][r];
        if constexpr (KS > 1)
          for (int k = 1; k < KS; ++k)
            sum += partial[warp + k][i][r];
        if constexpr (NORM::kOn) {
          float sumSq = sq[r];
          if constexpr (KS > 1)
            for (int k = 1; k < KS; ++k)
              sumSq += partialSq[warp + k][r];
          sum *= norm.inverse(sumSq, K);
        }
        return sum;
      };
      if constexpr (SWIGLU) {
#pragma unroll
        for (int r = 0; r < MAXR; ++r)
          if ((MAXR == 1 || r < rows) && lane == 0 && o0 < N)
            y[static_cast<long long>(r) * N + o0] = siluTimes(total(0, r), total(1, r));
      } else {
#pragma unroll
        for (int i = 0; i < RPW; ++i) {
          const int o = o0 + i;
#pragma unroll
          for (int r = 0; r < MAXR; ++r)
            if ((MAXR == 1 || r < rows) && lane == 0 && o < N) {
              const float v = total(i, r) + bv[i];
              y[static_cast<long long>(r) * N + o] = residual ? v + rv[i][r] : v;
            }
        }
      }
    }
    if constexpr (KS > 1)
      __syncthreads(); // partial is reused by the next row block
  }
  waitOnce(); // a block without rows still finishes after the previous kernel
}

// GEMV with scalar weight loads (any K and alignment): warp per output row.
template <int WDT, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void linearGemvScalar(const float *x, int rows, const void *w,
                                                 const void *bias, const float *residual,
                                                 float *y, BlockSlice blocks, bool oneToken) {
  constexpr int kWarps = kLinearThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  gridDependencyWait(); // the launch leaves the wait to the GEMV (linearGemvVec)
  gridDependencyTrigger(oneToken);
  for (int o = blocks.index * kWarps + threadIdx.x / kWarpSize; o < N;
       o += blocks.count * kWarps) {
    float acc[kGemvMaxRows];
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r)
      acc[r] = 0.0f;
    const char *wRow =
        static_cast<const char *>(w) + static_cast<long long>(o) * K * elemBytes<WDT>();
    for (int k = lane; k < K; k += kWarpSize) {
      const float wv = loadAsFloat<WDT>(wRow, k);
#pragma unroll
      for (int r = 0; r < kGemvMaxRows; ++r)
        if (r < rows)
          acc[r] += wv * x[static_cast<long long>(r) * K + k];
    }
    float b = 0.0f;
    if constexpr (HAS_BIAS)
      b = loadAsFloat<BDT>(bias, o);
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r) {
      if (r < rows) {
        const float sum = warpSum(acc[r]);
        if (lane == 0)
          storeLinearOut(y, residual, static_cast<long long>(r) * N + o, sum + b);
      }
    }
  }
}

template <int WDT, int BDT, bool HAS_BIAS, int K, int N, bool VEC, int SHAPE_N, class NORM>
__device__ __forceinline__ void linearGemv(const float *x, int rows, const void *w,
                                           const void *bias, const float *residual, float *y,
                                           BlockSlice blocks, bool oneToken, NORM norm) {
  if constexpr (VEC) {
    if (rows == 1)
      linearGemvVec<WDT, BDT, HAS_BIAS, K, N, 1, SHAPE_N>(x, 1, w, bias, residual, y, blocks,
                                                          oneToken, nullptr, norm);
    else
      linearGemvVec<WDT, BDT, HAS_BIAS, K, N, kGemvMaxRows, SHAPE_N>(
          x, rows, w, bias, residual, y, blocks, oneToken, nullptr, norm);
  } else {
    static_assert(!NORM::kOn, "the emitter fuses norms into the 16-byte GEMV only");
    linearGemvScalar<WDT, BDT, HAS_BIAS, K, N>(x, rows, w, bias, residual, y, blocks, oneToken);
  }
}

// The decode launch of a SwiGLU MLP's gate/up linears (the emitter's fusion, steps of at
// most kGemvMaxRows tokens): y = silu(x gate^T) * (x up^T) without their outputs. A warp
// takes an output's gate and up rows; the K slices are those of the pair's grouped GEMV
// (SHAPE_N = 2N). Launch: as linear's GEMV, grid ceil(N / gemv::linearSwiGluOutputsPerBlock(N,
// K, elems)).
// norm: the RMSNorm fused into its input (common.cuh), or NoNorm.
template <int WDT, int K, int N, class NORM = NoNorm>
__device__ __forceinline__ void linearSwiGlu(const float *x, const void *gate, const void *up,
                                             float *y, const StepState *state, NORM norm = {}) {
  const int rows = state->nTokens;
  if (rows == 1)
    linearGemvVec<WDT, 0, false, K, N, 1, 2 * N, true>(x, 1, gate, nullptr, nullptr, y,
                                                        wholeGrid(), true, up, norm);
  else
    linearGemvVec<WDT, 0, false, K, N, kGemvMaxRows, 2 * N, true>(
        x, rows, gate, nullptr, nullptr, y, wholeGrid(), false, up, norm);
}

template <int WDT, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void linearTiled(const float *x, int rows, const void *w,
                                            const void *bias, const float *residual,
                                            float *y) {
  constexpr int TK = 32;
  static_assert(kLinearThreads == 256, "the tile mapping assumes 256 threads");
  const int loadK = threadIdx.x % TK;
  const int loadRow = threadIdx.x / TK; // 0..7
  auto stage = [&](float (&xs)[kTiledGemmRows][TK + 1], float (&ws)[kTiledGemmRows][TK + 1],
                   int m0, int n0, int k0) {
    const int gk = k0 + loadK;
#pragma unroll
    for (int r = 0; r < kTiledGemmRows / 8; ++r) {
      const int o = loadRow + 8 * r;
      const int gn = n0 + o;
      ws[o][loadK] =
          (gn < N && gk < K) ? loadAsFloat<WDT>(w, static_cast<long long>(gn) * K + gk) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kTiledGemmRows / 8; ++r) {
      const int m = loadRow + 8 * r;
      const int gm = m0 + m;
      xs[m][loadK] = (gm < rows && gk < K) ? x[static_cast<long long>(gm) * K + gk] : 0.0f;
    }
  };
  tiledGemm<TK, float, BDT, HAS_BIAS, K, N>(rows, bias, residual, y, stage);
}

// norm: an RMSNorm fused into the GEMV's input (common.cuh); the GEMM launches take
// normalized rows.
template <int WDT, int BDT, bool HAS_BIAS, int K, int N, int ROWS, bool VEC, int SHAPE_N = N,
          class NORM = NoNorm>
__device__ __forceinline__ void linear(const float *x, const void *w, const void *bias,
                                       const float *residual, float *y, const StepState *state,
                                       BlockSlice blocks = wholeGrid(), NORM norm = {}) {
  static_assert(kGemvMaxRows == kLinearGemvMaxRows, "the emitter's GEMV/GEMM split");
  static_assert(ROWS != kRowsGemm || !NORM::kOn, "the GEMM takes normalized rows");
  const int n = state->nTokens;
  // The GEMV launches wait for the previous kernel in the GEMV (after its first weight
  // loads); n comes from the StepState, which no kernel writes.
  if constexpr (ROWS == kRowsLast) {
    linearGemv<WDT, BDT, HAS_BIAS, K, N, VEC, SHAPE_N>(x + static_cast<long long>(n - 1) * K, 1,
                                                       w, bias, residual, y, blocks, n == 1, norm);
  } else if constexpr (ROWS == kRowsGemv) {
    linearGemv<WDT, BDT, HAS_BIAS, K, N, VEC, SHAPE_N>(x, n, w, bias, residual, y, blocks, n == 1,
                                                       norm);
  } else if constexpr (ROWS == kRowsGemmX16 || ROWS == kRowsGemmX16Tall) {
#if NINFER_SM90A
    static_assert(WDT != kF32 && VEC, "the emitter's choice of GEMM (describeLinear)");
    // w: the weight's tensor map (KernelModule.tensor_maps), not its values.
    TmaTileStager<WDT> stager{{w}};
    gemmWgmma<TmaTileStager<WDT>, LinearOut<BDT, HAS_BIAS, N>, K, N,
              ROWS == kRowsGemmX16Tall ? 2 : 1>(reinterpret_cast<const unsigned short *>(x), n,
                                                stager, {bias, residual, y}, blocks);
#endif
  } else {
#if NINFER_LINEAR_MMA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // Only one GEMM path is instantiated per kernel: their static shared memory adds up.
    if constexpr (WDT != kF32 && VEC)
      linearMma<WDT, BDT, HAS_BIAS, K, N>(x, n, w, bias, residual, y, blocks);
    else
      linearTiled<WDT, BDT, HAS_BIAS, K, N>(x, n, w, bias, residual, y);
#else
    linearTiled<WDT, BDT, HAS_BIAS, K, N>(x, n, w, bias, residual, y);
#endif
  }
}

// A SwiGLU MLP's gate and up projections (f16/bf16 weights, I outputs each) in long steps of
// sm_90a plans: one GEMM over tiles of 64 gate rows and the same 64 up rows, which writes
// silu(gate) * up rounded to ODT as the down projection's 16-bit x (y16: rows of I;
// LaunchFusion.cpp's findSwiGluGemms); x is the step's 16-bit copy of the input, gate and up
// the matrices' tensor maps (boxes of 64 rows, KernelModule.tensor_maps). ROWS:
// kRowsGemmX16(Tall).
template <int WDT, int ODT, int K, int I, int ROWS>
__device__ __forceinline__ void linearSwiGluGemm(const float *x, const void *gate, const void *up,
                                                 unsigned short *y16, const StepState *state,
                                                 BlockSlice blocks = wholeGrid()) {
#if NINFER_SM90A
  static_assert(WDT != kF32 && (ROWS == kRowsGemmX16 || ROWS == kRowsGemmX16Tall), "wgmma");
  TmaTileStager<WDT, 2> stager{{gate, up}};
  gemmWgmma<TmaTileStager<WDT, 2>, SwiGluOut<ODT, 2 * I>, K, 2 * I,
            ROWS == kRowsGemmX16Tall ? 2 : 1>(reinterpret_cast<const unsigned short *>(x),
                                              state->nTokens, stager, {y16}, blocks);
#endif
}

} // namespace dev
} // namespace ninfer
