// The CUDA-core tiled GEMM that the f32/f16 (linear.cuh), quantized (linear_quant.cuh) and
// ternary (linear_ternary.cuh) linears fall back on where no tensor-core path applies:
// 64 x 64 tiles of (tokens, outputs) strided over the grid, 256 threads, thread (ty, tx)
// computing tokens ty + 16 i and outputs tx + 16 j of its tile.
//
// Per step of TK values of K the caller's stage(xs, ws, m0, n0, k0) fills the tile's x rows
// and weight rows (WS: a weight element as the product takes it) between two barriers;
// product(a, b) is one x value times one weight element (default: a * b), and output(sum)
// what an output's sum becomes before its bias and the fused residual are added (default:
// the sum).
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

constexpr int kTiledGemmRows = 64; // tokens and outputs of a tile

struct TiledProduct {
  __device__ __forceinline__ float operator()(float a, float b) const { return a * b; }
};
struct TiledSum {
  __device__ __forceinline__ float operator()(float sum) const { return sum; }
};

template <int TK, class WS, int BDT, bool HAS_BIAS, int K, int N, class Stage,
          class Product = TiledProduct, class Output = TiledSum>
__device__ __forceinline__ void tiledGemm(int rows, const void *bias, const float *residual,
                                          float *y, const Stage &stage, Product product = {},
                                          Output output = {}) {
  constexpr int TM = kTiledGemmRows, TN = kTiledGemmRows;
  // +1 column: the k-major reads below hit 32 different banks.
  __shared__ float xs[TM][TK + 1];
  __shared__ WS ws[TN][TK + 1];
  const int tx = threadIdx.x % 16; // outputs tx + 16 j
  const int ty = threadIdx.x / 16; // tokens ty + 16 i
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
      stage(xs, ws, m0, n0, k0);
      __syncthreads();
#pragma unroll 8
      for (int k = 0; k < TK; ++k) {
        float a[4];
        WS b[4];
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
            acc[i][j] += product(a[i], b[j]);
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
          storeLinearOut(y, residual, static_cast<long long>(gm) * N + gn, output(acc[i][j]) + b);
        }
      }
    }
  }
}

} // namespace dev
} // namespace ninfer
