// One-token GEMV for base-3 ternary weights (DType TQ1, ninfer/Tq1Format.h) on sm_90+, with
// the weights streamed into shared memory by bulk copies as the quantized one-token GEMV
// streams its own (gemv_quant_bulk.cuh: read it first): y[o] = s * sum_k t[o, k] * x[k].
//
// Why: the register-fed TQ1 GEMV (gemv_tq1_mma.cuh) loads x per mma step and packs it to f16
// there, it issues a tile's first codes only after the dependency wait, and it cannot take
// the RMSNorm before it. Here a producer warp keeps a ring of stages in flight from before
// the wait, each math warp stages its x once per launch as the f16 B fragments of its
// chunks, and a fused norm (NORM::kOn) is applied while x is staged, so a TQ1 layer has two
// launches less. Measured on the H200, 8B TQ1 decode (every one-token TQ1 launch on this
// kernel, three alternating rounds): 464.5 / 466.7 / 467.7 -> 477.7 / 478.2 / 479.7 tok/s.
// Without the fused norms this kernel alone was 0.5% slower than the register-fed one
// (traced: gate/up 25.1 -> 25.7 us after its wait, q/k/v 6.0 -> 5.0, o 5.8 -> 5.0, down
// 10.9 -> 10.5): both are bound by the instructions of the base-3 decode, not by bytes.
//
// Layout (ninfer/GemvShapes.h, tq1BulkLayout): a tile is 16 weight rows (SWIGLU: gate rows
// 8t..8t+7, then up rows 8t..8t+7), a stage is a run of the tile's chunks, one copy per row
// (rows padded apart so that the 8 lanes of a shared-memory phase read two rows in different
// banks). Barriers: full / empty per ring slot.
//
// Math: gemv_tq1_mma.cuh's, one token. Lane (g, c) takes chunk 4q + c of quad q, rows g and
// g + 8; per word w and digit i the exact levels t = d - 1 of bytes 0, 2 (1, 3) as f16 pairs
// (a multiply by 3, a prmt, an hsub2 and a mask per pair) and one mma m16n8k16 with x as
// column 0 of B: lanes (0, c) read their chunk's B fragments from the staged x (8 bytes per
// step), the other lanes feed zeros. Math warp w takes quads w, w + 8, ... of every stage,
// the same chunks of K in every tile, so it stages their x once, after the dependency wait
// (x past K and chunks past the stage are zero, so their codes do not count); the warps'
// chunks cover the row once, so with a fused norm they add up its squares first. A tile's row
// sums (D column 0, lanes c = 0) go through shared memory and are summed in warp order
// (deterministic), then scaled by s once and stored with bias and residual (or as
// silu(gate) * up).
// Launch: block gemv::kBulkThreads, grid up to gemv::kBulkGridBlocks (tiles strided), dynamic
// shared memory tq1BulkLayout(...).sharedBytes; the wrapper does not wait for the previous
// kernel (the kernel does, before it reads x).
#pragma once

#include "GemvShapes.h"
#include "Tq1Format.h"
#include "bulk_copy.cuh"
#include "gemm_ternary.cuh"
#include "gemv_bulk_ring.cuh"
#include "gemv_tq1_mma.cuh"

namespace ninfer {
namespace dev {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
template <int K, int N, bool SWIGLU> struct BulkTq1Gemv {
  static constexpr gemv::Tq1BulkLayout kLayout = gemv::tq1BulkLayout(K, N, SWIGLU);
  static_assert(kLayout.fits, "the emitter checks tq1BulkLayout(...).fits");
  static constexpr int kChunks = static_cast<int>(tq1::chunks(K));
  static constexpr long long kRowBytes = tq1::rowBytes(K);
  static constexpr int kTiles = gemv::bulkTiles(N, SWIGLU);
  static constexpr int kSteps = tq1::kWordsPerChunk * tq1::kDigits; // mma steps per chunk
  static constexpr int kJ = kLayout.quadsPerWarp;
  static_assert(gemv::kTq1ChunkXBytes == kSteps * 8, "GemvShapes.h's staged x per chunk");

  unsigned char *smem;
  unsigned int base; // shared address of smem

  __device__ __forceinline__ unsigned int full(int slot) const { return base + 8 * slot; }
  __device__ __forceinline__ unsigned int empty(int slot) const {
    return base + 8 * (gemv::kBulkMaxSlots + slot);
  }
  // Chunks of stage s (the last may be shorter).
  __device__ __forceinline__ static int stageChunks(int s) {
    return min(kLayout.stageChunks, kChunks - s * kLayout.stageChunks);
  }

  // The producer warp: per tile and stage, one copy per row into the ring.
  __device__ __forceinline__ void produce(const unsigned char *w, const unsigned char *wUp,
                                          BlockSlice blocks) const {
    const int lane = threadIdx.x % kWarpSize;
    int stage = 0;
    for (int tile = blocks.index; tile < kTiles; tile += blocks.count) {
      const unsigned char *row = bulkLaneRow<SWIGLU>(w, wUp, tile, lane, kRowBytes);
      for (int s = 0; s < kLayout.stages; ++s, ++stage) {
        const int slot = stage % kLayout.slots;
        bulkRingStage(lane, stage, kLayout.slots, full(slot), empty(slot),
                      base + kLayout.offSlots + slot * kLayout.slotBytes, kLayout.slotRowBytes,
                      row + static_cast<long long>(s) * kLayout.stageChunks * tq1::kChunkBytes,
                      stageChunks(s) * tq1::kChunkBytes);
      }
    }
  }

  // A math warp: stages the B fragments of its chunks (row nTokens - 1 of x when lastRow)
  // after the dependency wait, then per tile and stage its quads, then the tile's outputs.
  template <int BDT, bool HAS_BIAS, class NORM>
  __device__ __forceinline__ void consume(const float *x, bool lastRow, const void *bias,
                                          const float *residual, float *y,
                                          const StepState *state, BlockSlice blocks, float scale,
                                          float upScale, const NORM &norm) const {
    constexpr int kLastDigits = (K - (kChunks - 1) * tq1::kChunkValues) / 16;
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    const int g = lane / 4, c = lane % 4;
    // Staged x: [stage][quad j][lane c][step] as two f16 pairs (b0, b1).
    uint2 *xs = reinterpret_cast<uint2 *>(smem + kLayout.offX + warp * kLayout.xWarpBytes);
    const bool oneToken = state->nTokens == 1;
    // Entry e of the warp's staged x: its 4 values of x from value k, or none (-1). x (row
    // nTokens - 1 when lastRow) is written by the previous kernel: read after the wait.
    constexpr int kEntries = kLayout.stages * kJ * 4 * kSteps;
    auto valuesOf = [&](int e) {
      const int s = e / (kJ * 4 * kSteps), j = e / (4 * kSteps) % kJ;
      const int cc = e / kSteps % 4, step = e % kSteps;
      const int word = step / tq1::kDigits, digit = step % tq1::kDigits;
      const int inStage = 4 * (warp + gemv::kBulkConsumerWarps * j) + cc;
      const int ch = s * kLayout.stageChunks + inStage;
      const bool in = e < kEntries && inStage < stageChunks(s) &&
                      (ch < kChunks - 1 || digit < kLastDigits);
      return in ? ch * tq1::kChunkValues + 16 * digit + 4 * word : -1;
    };
    auto stageX = [&](int e, float4 v) {
      xs[e] = make_uint2(packPair<kF16>(v.x, v.z), packPair<kF16>(v.y, v.w));
    };
    if constexpr (NORM::kOn) {
      // x * (1 / rms) * weight, as the norm would have written it: the warps' entries hold
      // every value of the row once, so the math warps first add up the squares of theirs
      // (bulkBlockSum). The norm's weights are constants, loaded before the dependency wait;
      // every load of x is issued before any is used.
      constexpr int kPerLane = (kEntries + kWarpSize - 1) / kWarpSize;
      int k[kPerLane];
      float gw[kPerLane][4];
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        k[i] = valuesOf(lane + kWarpSize * i);
        if (k[i] >= 0)
          norm.weights(k[i], gw[i]);
      }
      gridDependencyWait();
      gridDependencyTrigger(oneToken);
      if (lastRow)
        x += static_cast<long long>(state->nTokens - 1) * K;
      float4 v[kPerLane];
      float sq = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        v[i] = k[i] >= 0 ? loadProduced(x + k[i]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        sq += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
      float *sums = reinterpret_cast<float *>(smem + kLayout.offPartial) +
                    gemv::kBulkConsumerWarps * gemv::kBulkTileRows;
      const float inv = norm.inverse(bulkBlockSum(sq, sums, warp, lane), K);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        if (lane + kWarpSize * i < kEntries)
          stageX(lane + kWarpSize * i,
                k[i] >= 0 ? make_float4(v[i].x * inv * gw[i][0], v[i].y * inv * gw[i][1],
                                        v[i].z * inv * gw[i][2], v[i].w * inv * gw[i][3])
                          : v[i]);
    } else {
      gridDependencyWait();
      gridDependencyTrigger(oneToken);
      if (lastRow)
        x += static_cast<long long>(state->nTokens - 1) * K;
#pragma unroll 4
      for (int e = lane; e < kEntries; e += kWarpSize) {
        const int k = valuesOf(e);
        stageX(e, k >= 0 ? loadProduced(x + k) : make_float4(0.0f, 0.0f, 0.0f, 0.0f));
      }
    }
    __syncwarp();

    constexpr int kOutputs = SWIGLU ? 8 : gemv::kBulkTileRows;
    int stage = 0, n = 0;
    for (int tile = blocks.index; tile < kTiles; tile += blocks.count, ++n) {
      // The output's bias and residual, loaded while the tile streams.
      const int o = tile * kOutputs + threadIdx.x;
      float bv = 0.0f, rv = 0.0f;
      if (!SWIGLU && threadIdx.x < kOutputs) {
        if constexpr (HAS_BIAS)
          bv = loadAsFloat<BDT>(bias, o);
        if (residual)
          rv = loadProducedScalar(residual + o);
      }
      float acc[4] = {}, acc2[4] = {};
      for (int s = 0; s < kLayout.stages; ++s, ++stage) {
        const int slot = stage % kLayout.slots, round = stage / kLayout.slots;
        barrierWait(full(slot), round & 1);
        const unsigned char *rows = smem + kLayout.offSlots + slot * kLayout.slotBytes;
        // The warp's codes of the stage into registers, then the slot goes back.
        const int quads = (stageChunks(s) + 3) / 4;
        TernaryCodes<4> code0[kJ], code1[kJ];
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
          const int q = warp + gemv::kBulkConsumerWarps * j;
          if (q < quads) {
            const int at = min(4 * q + c, stageChunks(s) - 1) * tq1::kChunkBytes;
            const uint4 r0 = *reinterpret_cast<const uint4 *>(rows + g * kLayout.slotRowBytes + at);
            const uint4 r1 =
                *reinterpret_cast<const uint4 *>(rows + (g + 8) * kLayout.slotRowBytes + at);
            code0[j].w[0] = r0.x, code0[j].w[1] = r0.y, code0[j].w[2] = r0.z, code0[j].w[3] = r0.w;
            code1[j].w[0] = r1.x, code1[j].w[1] = r1.y, code1[j].w[2] = r1.z, code1[j].w[3] = r1.w;
          }
        }
        __syncwarp();
        if (lane == 0)
          barrierArrive(empty(slot));
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
          if (warp + gemv::kBulkConsumerWarps * j >= quads)
            break;
          const uint2 *xq = xs + ((s * kJ + j) * 4 + c) * kSteps;
#pragma unroll
          for (int word = 0; word < tq1::kWordsPerChunk; ++word)
            tq1WordMma(
                code0[j].w[word], code1[j].w[word], word,
                [&](int digit) {
                  return g == 0 ? xq[tq1::kDigits * word + digit] : make_uint2(0u, 0u);
                },
                acc, acc2);
        }
      }
      // Column 0 of D (lanes c = 0): rows g and g + 8; then the warps' sums in order.
      float *partial = reinterpret_cast<float *>(smem + kLayout.offPartial) +
                       (n % 2) * gemv::kBulkConsumerWarps * gemv::kBulkTileRows;
      bulkTileOutputs(partial, warp, g, c == 0, acc[0] + acc2[0], acc[2] + acc2[2], kOutputs,
                      [&](const BulkRowSums &rowSum) {
                        if constexpr (SWIGLU)
                          y[o] = siluTimes(rowSum(threadIdx.x) * scale,
                                           rowSum(threadIdx.x + 8) * upScale);
                        else
                          y[o] = residual ? rowSum(threadIdx.x) * scale + bv + rv
                                          : rowSum(threadIdx.x) * scale + bv;
                      });
    }
  }
};

// SWIGLU: w is the gate and wUp the up matrix, y gets silu(x gate^T) * (x up^T).
template <int BDT, bool HAS_BIAS, int K, int N, bool SWIGLU, class NORM>
__device__ __forceinline__ void gemvTq1Bulk(const float *x, const void *w, const void *bias,
                                            const float *residual, float *y, BlockSlice blocks,
                                            const void *wUp, const StepState *state,
                                            bool lastRow, const NORM &norm) {
  extern __shared__ __align__(128) unsigned char bulkShared[];
  using Op = BulkTq1Gemv<K, N, SWIGLU>;
  const Op op{bulkShared, sharedAddress(bulkShared)};
  if (threadIdx.x == 0) {
    for (int s = 0; s < Op::kLayout.slots; ++s) {
      barrierInit(op.full(s), 1);
      barrierInit(op.empty(s), gemv::kBulkConsumerWarps);
    }
    barrierInitFence();
  }
  __syncthreads();
  if (threadIdx.x / kWarpSize == gemv::kBulkConsumerWarps) {
    op.produce(static_cast<const unsigned char *>(w), static_cast<const unsigned char *>(wUp),
               blocks);
  } else {
    // The tensors' scales are constants: loaded before the dependency wait.
    const float scale = Tq1Codes::scale<N, K>(w);
    const float upScale = SWIGLU ? Tq1Codes::scale<N, K>(wUp) : 0.0f;
    op.template consume<BDT, HAS_BIAS>(x, lastRow, bias, residual, y, state, blocks, scale,
                                       upScale, norm);
  }
}
#endif

// The one-token launches of a TQ1 linear (ROWS kRowsGemv: steps of one token; kRowsLast: the
// last row of a step), for plans whose targets are all sm_90+ and shapes tq1BulkLayout(...)
// takes (the emitter checks both). norm: an RMSNorm fused into the input (common.cuh), or
// NoNorm.
template <int BDT, bool HAS_BIAS, int K, int N, int ROWS, class NORM = NoNorm>
__device__ __forceinline__ void linearTq1OneToken(const float *x, const void *w, const void *bias,
                                                  const float *residual, float *y,
                                                  const StepState *state,
                                                  BlockSlice blocks = wholeGrid(),
                                                  NORM norm = {}) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  gemvTq1Bulk<BDT, HAS_BIAS, K, N, false>(x, w, bias, residual, y, blocks, nullptr, state,
                                          ROWS == kRowsLast, norm);
#endif
}

// A SwiGLU MLP's TQ1 gate/up pair in one-token steps: y = silu(x gate^T) * (x up^T).
template <int K, int N, class NORM = NoNorm>
__device__ __forceinline__ void linearTq1SwiGluOneToken(const float *x, const void *gate,
                                                        const void *up, float *y,
                                                        const StepState *state, NORM norm = {}) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  gemvTq1Bulk<0, false, K, N, true>(x, gate, nullptr, nullptr, y, wholeGrid(), up, state, false,
                                    norm);
#endif
}

} // namespace dev
} // namespace ninfer
