// The pieces the one-token bulk GEMVs share (gemv_quant_bulk.cuh for quantized weights,
// gemv_tq1_bulk.cuh for TQ1): the producer's copy of one ring stage of a tile's 16 rows, and
// the end of a tile, where the math warps' row sums are added in warp order and stored.
#pragma once

#include "GemvShapes.h"
#include "bulk_copy.cuh"

namespace ninfer {
namespace dev {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The weight row that producer lane `lane` (< 16) copies of tile `tile`: rows 16 tile + lane
// of w, or for a SwiGLU pair gate rows 8 tile + lane (lanes 0..7) and the same up rows (wUp;
// lanes 8..15); rows `rowBytes` apart.
template <bool SWIGLU>
__device__ __forceinline__ const unsigned char *bulkLaneRow(const unsigned char *w,
                                                            const unsigned char *wUp, int tile,
                                                            int lane, long long rowBytes) {
  return SWIGLU ? (lane < 8 ? w : wUp) + (8ll * tile + lane % 8) * rowBytes
                : w + (16ll * tile + lane) * rowBytes;
}

// Stage `stage` of a ring of `slots` slots, by the producer warp: lane 0 waits until the
// slot's previous stage was taken (from the ring's second round on) and arms its full barrier
// for 16 rows of `bytes`; lane r < 16 copies its row's `bytes` from `src` to row r of the slot
// (`slot`: its shared address, rows `rowBytes` apart).
__device__ __forceinline__ void bulkRingStage(int lane, int stage, int slots, unsigned int full,
                                              unsigned int empty, unsigned int slot,
                                              int rowBytes, const unsigned char *src,
                                              unsigned int bytes) {
  const int round = stage / slots;
  if (lane == 0) {
    if (round >= 1)
      barrierWait(empty, (round - 1) & 1);
    barrierExpectBytes(full, gemv::kBulkTileRows * bytes);
  }
  __syncwarp();
  if (lane < gemv::kBulkTileRows)
    bulkCopyEvictFirst(slot + lane * rowBytes, src, bytes, full);
}

// The sum over the math warps of their lanes' `sq`, in warp order, through `sums` (one float
// per math warp; the block's second partial buffer, whose first use is the block's second
// tile, after the first tile's barrier, which every warp reaches after it has read the sums).
__device__ __forceinline__ float bulkBlockSum(float sq, float *sums, int warp, int lane) {
  sq = warpSum(sq);
  if (lane == 0)
    sums[warp] = sq;
  asm volatile("bar.sync 1, %0;" ::"n"(gemv::kBulkConsumerWarps * kWarpSize) : "memory");
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < gemv::kBulkConsumerWarps; ++w)
    total += sums[w];
  return total;
}

// A tile's row r summed over the math warps in warp order (row r of warp w at
// partial[w * 16 + r]).
struct BulkRowSums {
  const float *partial;
  __device__ __forceinline__ float operator()(int r) const {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < gemv::kBulkConsumerWarps; ++w)
      v += partial[w * gemv::kBulkTileRows + r];
    return v;
  }
};

// The end of a tile: the lanes where `writer` put their rows g and g + 8 (sum0, sum1) into
// `partial`, the math warps meet at a barrier, then threads t < outputs call store(rowSums).
template <class STORE>
__device__ __forceinline__ void bulkTileOutputs(float *partial, int warp, int g, bool writer,
                                                float sum0, float sum1, int outputs,
                                                const STORE &store) {
  if (writer) {
    partial[warp * gemv::kBulkTileRows + g] = sum0;
    partial[warp * gemv::kBulkTileRows + g + 8] = sum1;
  }
  asm volatile("bar.sync 1, %0;" ::"n"(gemv::kBulkConsumerWarps * kWarpSize) : "memory");
  if (threadIdx.x < outputs)
    store(BulkRowSums{partial});
}
#endif

} // namespace dev
} // namespace ninfer
