// Tensor-core GEMM for prefill: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]), x and y f32
// rows, f32 accumulation, W [N, K] as f16/bf16 (linear.cuh) or group-quantized
// (linear_quant.cuh, decoded into the tile). sm_80 and newer (mma.sync m16n8k16, ldmatrix,
// cp.async); callers fall back to CUDA-core tiled paths elsewhere.
//
// Algorithm: output tiles of kMmaTM x kMmaTN = 128 tokens x 128 outputs, K in steps of
// kMmaTK = 64, strided over the blocks of the launch's BlockSlice (a grouped launch runs
// several linear ops, common.cuh) with the token tiles of one weight tile adjacent
// (the blocks that run at the same time share its weights in L2 instead of each
// streaming it from HBM). 8 warps as 2 (M) x 4 (N); each warp owns 64 x 32 outputs =
// 4 x 4 mma tiles of 16 x 8 (64 f32 accumulators per thread).
//  * A stager (policy class) brings the weight tile of a k-step to shared memory as 16-bit
//    values: cp.async copies for f16/bf16 (DenseTileStager below), register loads that
//    are decoded after the math for quantized weights (linear_quant.cuh).
//  * The x tile (f32) is loaded as float4 into registers one k-step ahead (16 threads per
//    row, coalesced), rounded to 16 bits and stored after the current step's math, so the
//    loads of step k+1 overlap the mma of step k. Rows past M and columns past K are zeros.
//  * Two shared stages, one barrier per k-step (see the ordering comment in gemmMma).
//  * Fragments come from shared memory with ldmatrix.x4 (4 per 16 mma for A, 2 for B).
//    Shared rows are kMmaLd = 72 halves (144 bytes): 16-byte aligned for cp.async and
//    vector stores, and 8 consecutive rows start 4 banks apart, so ldmatrix's 8 row reads
//    of 16 bytes hit all 32 banks once.
// Rounding the activations to f16/bf16 changes results at ~1e-3 (bf16) / ~1e-4 (f16)
// relative against the f32 CPU reference; tests bound the error accordingly.
// Launch: block 256 threads (kMmaThreads), any grid (gemm::tiles() gives every tile a
// block), gemm::kSharedBytes of dynamic shared memory (over the 48 KB default: the executor
// opts in; every sm_80+ GPU has it).
#pragma once

#include "GemvShapes.h"
#include "common.cuh"

// 0: prefill GEMMs on the CUDA-core tiled paths (the emitter sets it when a target lacks
// sm_80 or for A/B runs; the launches then ask for no dynamic shared memory).
#ifndef NINFER_LINEAR_MMA
#define NINFER_LINEAR_MMA 1
#endif

namespace ninfer {
namespace dev {

constexpr int kMmaTM = gemm::kTileM;
constexpr int kMmaTN = gemm::kTileN;
constexpr int kMmaTK = gemm::kTileK;
constexpr int kMmaLd = gemm::kLd;          // halves per shared row (padding: see above)
constexpr int kMmaThreads = 256;           // 8 warps: the thread mappings below assume it
constexpr int kMmaStageHalves = gemm::kStageHalves;
static_assert(kMmaTM == 128 && kMmaTN == 128 && kMmaTK == 64, "the mappings below assume it");

// (Templates: their PTX is emitted only where a kernel instantiates them, sm_80+.)
// Two floats -> one 32-bit word of two halves of dtype DT; `lo` at the lower address.
template <int DT> __device__ __forceinline__ unsigned int packPair(float lo, float hi) {
  unsigned int out;
  // cvt.rn.{f16,bf16}x2.f32 d, a, b puts a in the upper half and b in the lower half.
  if constexpr (DT == kF16)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
}

// d += a * b for one m16n8k16 tile (A row-major, B column-major, f32 accumulators).
template <int DT>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned int (&a)[4],
                                         unsigned int b0, unsigned int b1) {
  if constexpr (DT == kF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// 16-byte global -> shared copy that bypasses L1; bytes = 0 writes zeros and reads nothing.
__device__ __forceinline__ void cpAsync16(void *sharedDst, const void *globalSrc, int bytes) {
  const unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(sharedDst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(globalSrc),
               "r"(bytes)
               : "memory");
}
// 4-byte global -> shared copy (through L1: .cg takes 16 bytes only); bytes = 0 writes zeros.
__device__ __forceinline__ void cpAsync4(void *sharedDst, const void *globalSrc, int bytes) {
  const unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(sharedDst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(globalSrc),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 matrices of 16-bit values; lane l gives the address of row l % 8 of matrix
// l / 8 and receives, of each matrix, row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1.
__device__ __forceinline__ void ldmatrix4(unsigned int (&r)[4], const unsigned short *p) {
  const unsigned int a = static_cast<unsigned int>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// The same, each matrix transposed: lane l receives row 2 (l % 4) and 2 (l % 4) + 1 of
// column l / 4 (B fragments of a row-major [k][n] tile).
__device__ __forceinline__ void ldmatrix4Trans(unsigned int (&r)[4], const unsigned short *p) {
  const unsigned int a = static_cast<unsigned int>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// The x tile of a k-step (128 rows x 64 f32) as 8 float4 per thread: float4 q = tid + 256 j
// is row q / 16, columns 4 (q % 16) .. +3, so 16 consecutive threads read a row's 256 bytes.
template <int K>
__device__ __forceinline__ void loadXTile(const float *x, int rows, int m0, int k0,
                                          float4 (&v)[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = threadIdx.x + j * kMmaThreads;
    const int m = m0 + q / 16;
    const int k = k0 + (q % 16) * 4;
    // K % 4 == 0 (the caller's condition), so a float4 is wholly inside or outside K.
    v[j] = (m < rows && k < K)
               ? loadProduced(x + static_cast<long long>(m) * K + k)
               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The x tile rounded to dtype DT, to the A stage.
template <int DT>
__device__ __forceinline__ void storeXTile(unsigned short (*as)[kMmaLd], const float4 (&v)[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = threadIdx.x + j * kMmaThreads;
    *reinterpret_cast<uint2 *>(&as[q / 16][(q % 16) * 4]) =
        make_uint2(packPair<DT>(v[j].x, v[j].y), packPair<DT>(v[j].z, v[j].w));
  }
}

// Where the 16-byte chunk c (values 8c .. 8c + 7) of row r of a weight tile goes: padded
// rows here; gemm_wgmma.cuh's tiles are swizzled. Stagers write their tiles through it.
struct PaddedTile {
  unsigned short (*rows)[kMmaLd];
  __device__ __forceinline__ void *chunk(int r, int c) const { return &rows[r][8 * c]; }
};

// Where QuantTileStager (linear_quant.cuh) finds row n of the GEMM's weights: row n of one
// matrix W ...
template <class T> struct MatrixRows {
  static constexpr int kMatrices = 1;
  const T *w;
  __device__ __forceinline__ static int index(int) { return 0; } // which matrix holds row n
  __device__ __forceinline__ const T *matrix(int) const { return w; }
  __device__ __forceinline__ static int row(int n) { return n; }
};
// ... or, for a SwiGLU MLP's gate and up matrices in one GEMM (gemm_wgmma.cuh's SwiGluOut),
// 128-row tiles of 64 gate rows then the same 64 up rows: row n is row 64 (n / 128) + n % 64
// of gate (n % 128 < 64) or of up. The thread that holds output column c of a tile then
// holds c + 64 too. Each matrix has a multiple of 64 rows.
template <class T> struct GateUpRows {
  static constexpr int kMatrices = 2;
  const T *gate, *up;
  __device__ __forceinline__ static int index(int n) { return n % 128 < 64 ? 0 : 1; }
  __device__ __forceinline__ const T *matrix(int n) const { return index(n) ? up : gate; }
  __device__ __forceinline__ static int row(int n) { return n / 128 * 64 + n % 64; }
};

// Weight tiles of a dense f16/bf16 W [N, K]: 128 rows x 64 halves = 1024 chunks of 16 bytes,
// 4 per thread (chunk q = tid + 256 j is row q / 8, halves 8 (q % 8) .. +7), copied with
// cp.async (zeros past N or K).
template <int WDT, int K, int N> struct DenseTileStager {
  static_assert(K % 8 == 0, "16-byte weight chunks need K % 8 == 0");
  static constexpr int kMmaDType = WDT;
  static constexpr bool kCopiesAsync = true; // fetch's copies land by themselves
  const unsigned short *w;

  template <class TILE> __device__ __forceinline__ void fetch(int n0, int k0, TILE tile) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = threadIdx.x + j * kMmaThreads;
      const int r = q / 8;
      const int c = (q % 8) * 8;
      const bool inside = n0 + r < N && k0 + c < K;
      // Outside: a valid dummy address (W's start) and 0 bytes, so the chunk becomes zeros.
      const unsigned short *src = inside ? w + static_cast<long long>(n0 + r) * K + k0 + c : w;
      cpAsync16(tile.chunk(r, c / 8), src, inside ? 16 : 0);
    }
  }
  // The copies land by themselves (cp.async); nothing to decode.
  template <class TILE> __device__ __forceinline__ void store(TILE) {}
};

// The bias of output columns n and n + 1 (zeros without a bias, or past N).
template <int BDT, bool HAS_BIAS, int N>
__device__ __forceinline__ float2 biasPair(const void *bias, int n) {
  float2 b = make_float2(0.0f, 0.0f);
  if constexpr (HAS_BIAS) {
    if (n < N)
      b.x = loadAsFloat<BDT>(bias, n);
    if (n + 1 < N)
      b.y = loadAsFloat<BDT>(bias, n + 1);
  }
  return b;
}

// A GEMM tile's outputs (m, n) and (m, n + 1) (n even), those inside [rows, N]: one 8-byte
// store where N is even (then both lie inside, 8-byte aligned), else one or two 4-byte ones.
// The residual may alias y: it is read before y is written, by the same thread.
template <int N>
__device__ __forceinline__ void storePair(float *y, const float *residual, int rows, int m, int n,
                                          float v0, float v1) {
  if (m >= rows || n >= N)
    return;
  const long long i = static_cast<long long>(m) * N + n;
  if constexpr (N % 2 == 0) {
    if (residual) {
      const float2 r = *reinterpret_cast<const float2 *>(residual + i);
      v0 += r.x;
      v1 += r.y;
    }
    *reinterpret_cast<float2 *>(y + i) = make_float2(v0, v1);
  } else {
    storeLinearOut(y, residual, i, v0);
    if (n + 1 < N)
      storeLinearOut(y, residual, i + 1, v1);
  }
}

// The tile loop. STAGER: kMmaDType (the 16-bit type of both operands), kCopiesAsync,
// fetch(n0, k0, tile) starts bringing the weight tile of a k-step (rows n0.., columns k0..;
// rows past N may hold anything, their outputs are not stored) and store(tile) completes it
// (tile: where its chunks go, PaddedTile here) after the math of the previous step.
template <class STAGER, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void gemmMma(const float *x, int rows, STAGER &stager,
                                        const void *bias, const float *residual, float *y,
                                        BlockSlice blocks) {
  static_assert(K % 4 == 0, "x rows are read as float4");
  constexpr int DT = STAGER::kMmaDType;
  extern __shared__ __align__(16) unsigned short gemmShared[];
  // Stage s: the x tile (kMmaTM rows), then the weight tile (kMmaTN rows).
  using Rows = unsigned short (*)[kMmaLd];
  const auto aS = [&](int s) { return reinterpret_cast<Rows>(gemmShared + s * kMmaStageHalves); };
  const auto bS = [&](int s) {
    return reinterpret_cast<Rows>(gemmShared + s * kMmaStageHalves + kMmaTM * kMmaLd);
  };
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4; // mma "groupID": row (A, C) or column (B) within the 8
  const int t = lane % 4; // mma "threadID_in_group": column pair (C)
  const int wm = (warp / 4) * 64;
  const int wn = (warp % 4) * 32;
  // ldmatrix row and column of this lane: A matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15)
  // in that order give a[0..3]; B matrices (n 0-7: k 0-7 | 8-15), (n 8-15: ...) give the
  // b pairs of two column tiles.
  const int aRow = lane % 16, aCol = (lane / 16) * 8;
  const int bRow = lane % 8 + (lane / 16) * 8, bCol = ((lane / 8) % 2) * 8;
  constexpr int tilesN = (N + kMmaTN - 1) / kMmaTN;
  constexpr int kSteps = (K + kMmaTK - 1) / kMmaTK;
  const int tilesM = (rows + kMmaTM - 1) / kMmaTM;

  for (int tile = blocks.index; tile < tilesN * tilesM; tile += blocks.count) {
    const int m0 = (tile % tilesM) * kMmaTM;
    const int n0 = (tile / tilesM) * kMmaTN;
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[i][j][e] = 0.0f;

    // Prologue: stage 0 holds k-step 0. (Every thread passed the previous tile's last
    // barrier, so nobody still reads stage 0.)
    float4 xTile[8];
    stager.fetch(n0, 0, PaddedTile{bS(0)});
    cpAsyncCommit();
    loadXTile<K>(x, rows, m0, 0, xTile);
    stager.store(PaddedTile{bS(0)});
    storeXTile<DT>(aS(0), xTile);
    cpAsyncWait<0>();
    __syncthreads();

    for (int ks = 0; ks < kSteps; ++ks) {
      const int cur = ks & 1;
      const bool more = ks + 1 < kSteps;
      // Ordering: stage cur ^ 1 was last read by step ks - 1, which every thread finished
      // before the barrier that ended step ks - 1; so it may be refilled now. The barrier at
      // the end of this step publishes it (cp.async waited, stores done) for step ks + 1.
      if (more) {
        stager.fetch(n0, (ks + 1) * kMmaTK, PaddedTile{bS(cur ^ 1)});
        cpAsyncCommit();
        loadXTile<K>(x, rows, m0, (ks + 1) * kMmaTK, xTile);
      }
#pragma unroll
      for (int kk = 0; kk < kMmaTK; kk += 16) {
        unsigned int b[4][2];
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          unsigned int r[4];
          ldmatrix4(r, &bS(cur)[wn + jj * 16 + bRow][kk + bCol]);
          b[2 * jj][0] = r[0];
          b[2 * jj][1] = r[1];
          b[2 * jj + 1][0] = r[2];
          b[2 * jj + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          unsigned int a[4];
          ldmatrix4(a, &aS(cur)[wm + i * 16 + aRow][kk + aCol]);
#pragma unroll
          for (int j = 0; j < 4; ++j)
            mma16816<DT>(acc[i][j], a, b[j][0], b[j][1]);
        }
      }
      if (more) {
        stager.store(PaddedTile{bS(cur ^ 1)});
        storeXTile<DT>(aS(cur ^ 1), xTile);
      }
      cpAsyncWait<0>();
      __syncthreads();
    }

    // Epilogue: c0, c1 at (row g, columns 2t, 2t + 1); c2, c3 at row g + 8.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + wn + j * 8 + 2 * t;
      const float2 b = biasPair<BDT, HAS_BIAS, N>(bias, n);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          storePair<N>(y, residual, rows, m0 + wm + i * 16 + g + half * 8, n,
                       acc[i][j][2 * half] + b.x, acc[i][j][2 * half + 1] + b.y);
    }
  }
}

template <int WDT, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void linearMma(const float *x, int rows, const void *w,
                                          const void *bias, const float *residual, float *y,
                                          BlockSlice blocks) {
  static_assert(WDT == kF16 || WDT == kBF16, "tensor-core path takes f16 or bf16 weights");
  DenseTileStager<WDT, K, N> stager{static_cast<const unsigned short *>(w)};
  gemmMma<DenseTileStager<WDT, K, N>, BDT, HAS_BIAS, K, N>(x, rows, stager, bias, residual, y,
                                                          blocks);
}

#endif // __CUDA_ARCH__ >= 800

} // namespace dev
} // namespace ninfer
