// Linear layer: y[t, o] = sum_k x[t, k] * W[o, k] (+ bias[o]), W stored [N, K] in
// its checkpoint dtype, x and y f32 rows, f32 accumulation.
//
// One kernel, two paths picked per step from state->nTokens (a uniform branch):
//  * rows <= kGemvMaxRows (decode, short prefill, last_row_only): warp-per-output-row
//    GEMV. Each lane streams 16-byte chunks of the weight row (VEC) and dots them
//    with up to kGemvMaxRows x rows (f32, cached in L1/L2), so every weight byte is
//    read once per step; butterfly-shuffle reduction; grid-stride over rows.
//  * more rows (prefill): shared-memory tiled GEMM, a TM x TN output tile per block,
//    K in steps of TK; each weight tile is converted to f32 once and reused for TM
//    tokens; each thread owns a 4x4 register tile. Tiles are grid-strided, so the
//    grid does not depend on the token count. (CUDA cores; tensor cores are a later
//    step.)
// Launch: block THREADS = 256, grid (ceil(N / 8), 1, 1), no dynamic shared memory.
// last_row_only: x row n-1 -> y row 0.
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

constexpr int kLinearThreads = 256;
constexpr int kGemvMaxRows = 8;

// acc[r] += dot(x row r, wRow) over this lane's share of K, for r < rows.
template <int WDT, int K, bool VEC>
__device__ __forceinline__ void gemvDotRows(const float *x, int rows, const void *wRow, int lane,
                                            float (&acc)[kGemvMaxRows]) {
  if constexpr (VEC) {
    constexpr int kElems = elemsPer16<WDT>();
    constexpr int kChunks = K / kElems;
    constexpr int kUnroll = 4;
    const uint4 *w4 = static_cast<const uint4 *>(wRow);
    int c = lane;
    // Several independent 16-byte weight loads in flight before the first use.
    for (; c + (kUnroll - 1) * kWarpSize < kChunks; c += kUnroll * kWarpSize) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        wv[u] = __ldg(w4 + c + u * kWarpSize);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float wf[kElems];
        unpack16<WDT>(wv[u], wf);
        const int k0 = (c + u * kWarpSize) * kElems;
#pragma unroll
        for (int r = 0; r < kGemvMaxRows; ++r) {
          if (r < rows) {
            const float4 *xr =
                reinterpret_cast<const float4 *>(x + static_cast<long long>(r) * K + k0);
#pragma unroll
            for (int e = 0; e < kElems / 4; ++e) {
              const float4 xv = xr[e];
              acc[r] += wf[4 * e] * xv.x + wf[4 * e + 1] * xv.y + wf[4 * e + 2] * xv.z +
                        wf[4 * e + 3] * xv.w;
            }
          }
        }
      }
    }
    for (; c < kChunks; c += kWarpSize) {
      float wf[kElems];
      unpack16<WDT>(__ldg(w4 + c), wf);
      const int k0 = c * kElems;
#pragma unroll
      for (int r = 0; r < kGemvMaxRows; ++r) {
        if (r < rows) {
          const float4 *xr =
              reinterpret_cast<const float4 *>(x + static_cast<long long>(r) * K + k0);
#pragma unroll
          for (int e = 0; e < kElems / 4; ++e) {
            const float4 xv = xr[e];
            acc[r] += wf[4 * e] * xv.x + wf[4 * e + 1] * xv.y + wf[4 * e + 2] * xv.z +
                      wf[4 * e + 3] * xv.w;
          }
        }
      }
    }
  } else {
    for (int k = lane; k < K; k += kWarpSize) {
      const float wv = loadAsFloat<WDT>(wRow, k);
#pragma unroll
      for (int r = 0; r < kGemvMaxRows; ++r)
        if (r < rows)
          acc[r] += wv * x[static_cast<long long>(r) * K + k];
    }
  }
}

template <int WDT, int BDT, bool HAS_BIAS, int K, int N, bool VEC>
__device__ __forceinline__ void linearGemv(const float *x, int rows, const void *w,
                                           const void *bias, float *y) {
  constexpr int kWarps = kLinearThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int o = blockIdx.x * kWarps + threadIdx.x / kWarpSize; o < N; o += gridDim.x * kWarps) {
    float acc[kGemvMaxRows];
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r)
      acc[r] = 0.0f;
    const char *wRow =
        static_cast<const char *>(w) + static_cast<long long>(o) * K * elemBytes<WDT>();
    gemvDotRows<WDT, K, VEC>(x, rows, wRow, lane, acc);
    float b = 0.0f;
    if constexpr (HAS_BIAS)
      b = loadAsFloat<BDT>(bias, o);
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r) {
      if (r < rows) {
        const float sum = warpSum(acc[r]);
        if (lane == 0)
          y[static_cast<long long>(r) * N + o] = sum + b;
      }
    }
  }
}

template <int WDT, int BDT, bool HAS_BIAS, int K, int N>
__device__ __forceinline__ void linearTiled(const float *x, int rows, const void *w,
                                            const void *bias, float *y) {
  constexpr int TM = 64, TN = 64, TK = 32;
  static_assert(kLinearThreads == 256, "the tile mapping assumes 256 threads");
  // +1 column: the k-major reads below hit 32 different banks.
  __shared__ float xs[TM][TK + 1];
  __shared__ float ws[TN][TK + 1];
  const int tx = threadIdx.x % 16; // outputs tx + 16 j
  const int ty = threadIdx.x / 16; // tokens ty + 16 i
  const int loadK = threadIdx.x % TK;
  const int loadRow = threadIdx.x / TK; // 0..7
  constexpr int tilesN = (N + TN - 1) / TN;
  const int tilesM = (rows + TM - 1) / TM;
  for (int tile = blockIdx.x; tile < tilesN * tilesM; tile += gridDim.x) {
    const int n0 = (tile % tilesN) * TN;
    const int m0 = (tile / tilesN) * TM;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TK) {
      const int gk = k0 + loadK;
#pragma unroll
      for (int r = 0; r < TN / 8; ++r) {
        const int o = loadRow + 8 * r;
        const int gn = n0 + o;
        ws[o][loadK] =
            (gn < N && gk < K) ? loadAsFloat<WDT>(w, static_cast<long long>(gn) * K + gk) : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < TM / 8; ++r) {
        const int m = loadRow + 8 * r;
        const int gm = m0 + m;
        xs[m][loadK] = (gm < rows && gk < K) ? x[static_cast<long long>(gm) * K + gk] : 0.0f;
      }
      __syncthreads();
#pragma unroll 8
      for (int k = 0; k < TK; ++k) {
        float a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          a[i] = xs[ty + 16 * i][k];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          b[j] = ws[tx + 16 * j][k];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            acc[i][j] += a[i] * b[j];
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int gm = m0 + ty + 16 * i;
      if (gm >= rows)
        continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int gn = n0 + tx + 16 * j;
        if (gn < N) {
          float b = 0.0f;
          if constexpr (HAS_BIAS)
            b = loadAsFloat<BDT>(bias, gn);
          y[static_cast<long long>(gm) * N + gn] = acc[i][j] + b;
        }
      }
    }
  }
}

template <int WDT, int BDT, bool HAS_BIAS, int K, int N, bool LAST_ROW_ONLY, bool VEC>
__device__ __forceinline__ void linear(const float *x, const void *w, const void *bias, float *y,
                                       const StepState *state) {
  const int n = state->nTokens;
  if (LAST_ROW_ONLY) {
    linearGemv<WDT, BDT, HAS_BIAS, K, N, VEC>(x + static_cast<long long>(n - 1) * K, 1, w, bias, y);
  } else if (n <= kGemvMaxRows) {
    linearGemv<WDT, BDT, HAS_BIAS, K, N, VEC>(x, n, w, bias, y);
  } else {
    linearTiled<WDT, BDT, HAS_BIAS, K, N>(x, n, w, bias, y);
  }
}

} // namespace dev
} // namespace ninfer
