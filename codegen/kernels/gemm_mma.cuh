// Tensor-core GEMM for prefill: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) with W [N, K] in
// f16 or bf16, x and y f32, f32 accumulation. sm_80 and newer (mma.sync m16n8k16, cp.async);
// callers fall back to the CUDA-core tiled path elsewhere.
//
// Algorithm: output tiles of kMmaTM x kMmaTN = 128 x 128, K in steps of kMmaTK = 32, grid-strided
// over tiles (the grid does not depend on the token count). 8 warps as 2 (M) x 4 (N); each warp
// owns a 64 x 32 sub-tile = 4 x 4 mma tiles of 16 x 8 (64 f32 accumulators per thread).
//  * W tiles go global -> shared with 16-byte cp.async (zero-filled past N or K).
//  * x tiles are loaded as float4 into registers one k-step ahead, rounded to the weight dtype
//    (round to nearest even) and stored to shared memory after the current step's math, so the
//    global loads of step k+1 overlap the mma of step k. Rows past M are zeros.
//  * Two shared stages; one barrier per k-step (see the ordering comment in gemmMmaTile).
//  * Shared rows are kMmaLd = 40 halves (80 bytes): a multiple of 16 bytes for cp.async, and a
//    row stride of 20 words, so the fragment loads (8 rows x 4 words per warp) hit 32 banks.
// Rounding the activations to f16/bf16 changes results at ~1e-3 (bf16) / ~1e-4 (f16) relative
// against the f32 CPU reference; tests bound the error accordingly.
// Launch: block 256 threads (kMmaThreads), any grid; 40 KB of static shared memory.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

constexpr int kMmaTM = 128;
constexpr int kMmaTN = 128;
constexpr int kMmaTK = 32;
constexpr int kMmaLd = kMmaTK + 8; // halves per shared row (padding: see above)
constexpr int kMmaThreads = 256;   // 8 warps: the thread mappings below assume it

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

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

// 16-byte global -> shared copy that bypasses L1; bytes = 0 writes zeros and reads nothing.
__device__ __forceinline__ void cpAsync16(void *sharedDst, const void *globalSrc, int bytes) {
  const unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(sharedDst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(globalSrc),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cpAsyncWaitAll() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// d += a * b for one m16n8k16 tile (A row-major, B column-major, f32 accumulators).
template <int DT>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned int (&a)[4],
                                         const unsigned int (&b)[2]) {
  if constexpr (DT == kF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// x tile (128 x 32 f32 = 1024 float4) as 4 float4 per thread: float4 q = tid + 256 j sits at
// row q / 8, columns 4 (q % 8) .. +3; 8 consecutive threads read one row's 128 bytes.
template <int K>
__device__ __forceinline__ void loadXTile(const float *x, int rows, int m0, int k0,
                                          float4 (&regs)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int q = threadIdx.x + j * kMmaThreads;
    const int m = m0 + q / 8;
    const int k = k0 + (q % 8) * 4;
    // K % 8 == 0 (the caller's condition), so a float4 is wholly inside or outside K.
    regs[j] = (m < rows && k < K)
                  ? __ldg(reinterpret_cast<const float4 *>(x + static_cast<long long>(m) * K + k))
                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

template <int WDT>
__device__ __forceinline__ void storeXTile(unsigned short (*as)[kMmaLd], const float4 (&regs)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int q = threadIdx.x + j * kMmaThreads;
    uint2 packed;
    packed.x = packPair<WDT>(regs[j].x, regs[j].y);
    packed.y = packPair<WDT>(regs[j].z, regs[j].w);
    *reinterpret_cast<uint2 *>(&as[q / 8][(q % 8) * 4]) = packed;
  }
}

// W tile (128 rows x 32 halves = 512 chunks of 16 bytes), 2 chunks per thread: chunk
// q = tid + 256 j is row q / 4, halves 8 (q % 4) .. +7.
template <int K, int N>
__device__ __forceinline__ void loadWTile(const unsigned short *w, int n0, int k0,
                                          unsigned short (*bs)[kMmaLd]) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int q = threadIdx.x + j * kMmaThreads;
    const int r = q / 4;
    const int c = (q % 4) * 8;
    const bool inside = n0 + r < N && k0 + c < K;
    // Outside: a valid dummy address (W's start) and 0 bytes, so the chunk becomes zeros.
    const unsigned short *src = inside ? w + static_cast<long long>(n0 + r) * K + k0 + c : w;
    cpAsync16(&bs[r][c], src, inside ? 16 : 0);
  }
}

template <int WDT, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void linearMma(const float *x, int rows, const void *wRaw,
                                          const void *bias, const float *residual,
                                          float *y) {
  static_assert(WDT == kF16 || WDT == kBF16, "tensor-core path takes f16 or bf16 weights");
  static_assert(K % 8 == 0, "16-byte weight chunks need K % 8 == 0");
  __shared__ __align__(16) unsigned short aS[2][kMmaTM][kMmaLd];
  __shared__ __align__(16) unsigned short bS[2][kMmaTN][kMmaLd];
  const unsigned short *w = static_cast<const unsigned short *>(wRaw);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4; // mma "groupID": row (A, C) or column (B) within the 8
  const int t = lane % 4; // mma "threadID_in_group": k pair (A, B) or column pair (C)
  const int wm = (warp / 4) * 64;
  const int wn = (warp % 4) * 32;
  constexpr int tilesN = (N + kMmaTN - 1) / kMmaTN;
  constexpr int kSteps = (K + kMmaTK - 1) / kMmaTK;
  const int tilesM = (rows + kMmaTM - 1) / kMmaTM;

  for (int tile = blockIdx.x; tile < tilesN * tilesM; tile += gridDim.x) {
    const int n0 = (tile % tilesN) * kMmaTN;
    const int m0 = (tile / tilesN) * kMmaTM;
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
    float4 xRegs[4];
    loadWTile<K, N>(w, n0, 0, bS[0]);
    cpAsyncCommit();
    loadXTile<K>(x, rows, m0, 0, xRegs);
    storeXTile<WDT>(aS[0], xRegs);
    cpAsyncWaitAll();
    __syncthreads();

    for (int ks = 0; ks < kSteps; ++ks) {
      const int cur = ks & 1;
      const bool more = ks + 1 < kSteps;
      // Ordering: stage cur ^ 1 was last read by step ks - 1, which every thread finished
      // before the barrier that ended step ks - 1; so it may be refilled now. The barrier at
      // the end of this step publishes it (cp.async waited, x stores done) for step ks + 1.
      if (more) {
        loadWTile<K, N>(w, n0, (ks + 1) * kMmaTK, bS[cur ^ 1]);
        cpAsyncCommit();
        loadXTile<K>(x, rows, m0, (ks + 1) * kMmaTK, xRegs);
      }
#pragma unroll
      for (int kk = 0; kk < kMmaTK; kk += 16) {
        // B fragments for the warp's 4 column tiles, then one row tile's A fragment at a
        // time (fewer live registers than holding all 4).
        unsigned int b[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = wn + j * 8 + g;
          b[j][0] = *reinterpret_cast<const unsigned int *>(&bS[cur][c][kk + 2 * t]);
          b[j][1] = *reinterpret_cast<const unsigned int *>(&bS[cur][c][kk + 2 * t + 8]);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = wm + i * 16 + g;
          unsigned int a[4];
          a[0] = *reinterpret_cast<const unsigned int *>(&aS[cur][r][kk + 2 * t]);
          a[1] = *reinterpret_cast<const unsigned int *>(&aS[cur][r + 8][kk + 2 * t]);
          a[2] = *reinterpret_cast<const unsigned int *>(&aS[cur][r][kk + 2 * t + 8]);
          a[3] = *reinterpret_cast<const unsigned int *>(&aS[cur][r + 8][kk + 2 * t + 8]);
#pragma unroll
          for (int j = 0; j < 4; ++j)
            mma16816<WDT>(acc[i][j], a, b[j]);
        }
      }
      if (more)
        storeXTile<WDT>(aS[cur ^ 1], xRegs);
      cpAsyncWaitAll();
      __syncthreads();
    }

    // Epilogue: c0, c1 at (row g, columns 2t, 2t + 1); c2, c3 at row g + 8.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + wn + j * 8 + 2 * t;
      float b0 = 0.0f, b1 = 0.0f;
      if constexpr (HAS_BIAS) {
        if (n < N)
          b0 = loadAsFloat<BDT>(bias, n);
        if (n + 1 < N)
          b1 = loadAsFloat<BDT>(bias, n + 1);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int m = m0 + wm + i * 16 + g + half * 8;
          if (m >= rows)
            continue;
          const long long row = static_cast<long long>(m) * N;
          if (n < N)
            storeLinearOut(y, residual, row + n, acc[i][j][2 * half] + b0);
          if (n + 1 < N)
            storeLinearOut(y, residual, row + n + 1, acc[i][j][2 * half + 1] + b1);
        }
      }
    }
  }
}

#endif // __CUDA_ARCH__ >= 800

} // namespace dev
} // namespace ninfer
