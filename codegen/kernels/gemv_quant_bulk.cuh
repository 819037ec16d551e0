// One-token GEMV for group-quantized weights on sm_90+, with the weights streamed into
// shared memory by bulk copies (cp.async.bulk: the TMA's 1D copies, completing on an
// mbarrier): y[o] = sum_k x[k] * scale[o, k / GROUP] * q[o, k] for one token row.
//
// Why: the register-fed GEMV (gemv_quant_mma.cuh) issues a warp's next loads only when
// its current batch's math is done, so the bytes in flight per SM are capped by the
// registers of the warps that are waiting; on the H200 it reached 21-48% of HBM
// bandwidth on the 8B q4 layers. Here a producer warp keeps a ring of stages in flight
// while the math warps work from shared memory, and it issues the first stages before
// the launch waits for the previous kernel (the weights are constants; x is not).
// Measured on the H200, 8B q4_g64 decode: 456.8 -> 508.3-509.9 tok/s (ncu: gate/up with
// its SwiGLU 27.0 -> 21.6 us, DRAM 48 -> 60% of peak; down 14.7 -> 16.0 us: one tile per
// block, three ring slots beside its 40 KB of staged x).
//
// Layout (ninfer/GemvShapes.h, bulkLayout): a tile is 16 weight rows (SWIGLU: gate rows
// 8t..8t+7 then up rows 8t..8t+7), K is cut into chunks of bulkChunkUnits units (twice
// that in wide launches: kBulkWideTiles, but in the deep ring), and a
// stage is one chunk of one tile's 16 rows (one copy per row, rows padded apart so the
// math warps' reads of two rows hit different banks). The tile's scale rows are
// contiguous in the scale plane and come as one copy (two for SWIGLU) into one of two to
// four scale buffers (BulkLayout::scaleBuffers). Barriers: full/empty per ring slot,
// full/empty per scale buffer.
//
// Math: OneToken of gemv_quant_mma.cuh, unchanged (the same B fragments, corrections,
// mma and f32 epilogue). Math warp w takes units w * U .. w * U + U - 1 of every chunk (U
// = units per warp), the same units of K for every tile, so it stages its x once, after
// the dependency wait. A tile's rows: each warp's two row sums per lane (rows g, g + 8)
// go through shared memory and are summed in warp order (deterministic), then stored
// with bias and residual (or as silu(gate) * up).
// Launch: block gemv::kBulkThreads, grid up to gemv::kBulkGridBlocks (tiles strided),
// dynamic shared memory bulkLayout(...).sharedBytes; the wrapper does not wait for the
// previous kernel (the kernel does, before it reads x).
#pragma once

#include "GemvShapes.h"
#include "QuantFormats.h"
#include "bulk_copy.cuh"
#include "common.cuh"
#include "gemv_bulk_ring.cuh"
#include "gemv_quant_mma.cuh"

namespace ninfer {
namespace dev {

// Plans whose every target card streams at least gemv::kDeepRingBandwidth define it to 1:
// the wide launches take the deep ring (GemvShapes.h bulkLayout).
#ifndef NINFER_DEEP_BULK_RING
#define NINFER_DEEP_BULK_RING 0
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
template <int BITS, int GROUP, int K, int N, bool SWIGLU> struct BulkGemv {
  using Packing = quant::QuantPacking<BITS>;
  using T = OneToken<BITS, GROUP>;
  using Scales = OneTokenScales<BITS, GROUP>;
  static constexpr gemv::BulkLayout kLayout =
      gemv::bulkLayout(BITS, GROUP, K, N, SWIGLU, NINFER_DEEP_BULK_RING);
  static_assert(kLayout.fits, "the emitter checks bulkLayout(...).fits");
  static_assert(gemv::kBulkUnitStageBytes == sizeof(OneTokenUnitStage), "GemvShapes.h's size");
  static_assert(Packing::kUnitBytes == gemv::bulkUnitBytes(BITS), "GemvShapes.h's unit bytes");
  static constexpr int kUnits = K / quant::kQuantUnitValues;
  static constexpr int kTiles = gemv::bulkTiles(N, SWIGLU);
  static constexpr long long kRowWeightBytes = quant::quantRowWeightBytes(BITS, K);
  static constexpr long long kRowScaleBytes = quant::quantRowScaleBytes(GROUP, K);
  static constexpr long long kScalePlane = quant::quantScalePlaneOffset(BITS, N, K);
  static_assert(kRowScaleBytes == gemv::bulkRowScaleBytes(GROUP, K), "GemvShapes.h's scales");

  unsigned char *smem;
  unsigned int base; // shared address of smem

  // Barriers: full[slot], empty[slot], then full and empty of each scale buffer.
  __device__ __forceinline__ unsigned int full(int slot) const { return base + 8 * slot; }
  __device__ __forceinline__ unsigned int empty(int slot) const {
    return base + 8 * (kLayout.barrierSlots + slot);
  }
  __device__ __forceinline__ unsigned int scalesFull(int b) const {
    return base + 8 * (2 * kLayout.barrierSlots + b);
  }
  __device__ __forceinline__ unsigned int scalesEmpty(int b) const {
    return base + 8 * (2 * kLayout.barrierSlots + kLayout.barrierScaleBuffers + b);
  }
  __device__ __forceinline__ static int chunkUnits(int j) {
    return min(kLayout.chunkUnits, kUnits - j * kLayout.chunkUnits);
  }

  // WORDS (1 or 2) words from shared memory at p, aligned to their size.
  template <int WORDS>
  __device__ __forceinline__ static void loadWords(const unsigned short *p,
                                                   unsigned int (&w)[WORDS]) {
    static_assert(WORDS == 1 || WORDS == 2, "4 or 8 bytes");
    if constexpr (WORDS == 2) {
      const uint2 v = *reinterpret_cast<const uint2 *>(p);
      w[0] = v.x;
      w[1] = v.y;
    } else {
      w[0] = *reinterpret_cast<const unsigned int *>(p);
    }
  }

  // The producer warp: per tile its scale rows, then its chunks into the ring.
  __device__ __forceinline__ void produce(const unsigned char *w, const unsigned char *wUp,
                                          BlockSlice blocks) const {
    const int lane = threadIdx.x % kWarpSize;
    int stage = 0, n = 0;
    for (int tile = blocks.index; tile < kTiles; tile += blocks.count, ++n) {
      constexpr int kBuffers = kLayout.scaleBuffers;
      const int b = n % kBuffers;
      if (lane == 0) {
        if (n >= kBuffers)
          barrierWait(scalesEmpty(b), (n / kBuffers - 1) & 1);
        barrierExpectBytes(scalesFull(b), kLayout.scaleBytes);
        const unsigned int dst = base + kLayout.offScales + b * kLayout.scaleBytes;
        if constexpr (SWIGLU) {
          constexpr unsigned int kHalf = 8 * kRowScaleBytes;
          bulkCopyEvictFirst(dst, w + kScalePlane + tile * kHalf, kHalf, scalesFull(b));
          bulkCopyEvictFirst(dst + kHalf, wUp + kScalePlane + tile * kHalf, kHalf, scalesFull(b));
        } else {
          bulkCopyEvictFirst(dst, w + kScalePlane + tile * (16 * kRowScaleBytes),
                             16 * kRowScaleBytes, scalesFull(b));
        }
      }
      const unsigned char *row = bulkLaneRow<SWIGLU>(w, wUp, tile, lane, kRowWeightBytes);
      for (int j = 0; j < kLayout.chunks; ++j, ++stage) {
        const int slot = stage % kLayout.slots;
        bulkRingStage(lane, stage, kLayout.slots, full(slot), empty(slot),
                      base + kLayout.offSlots + slot * kLayout.slotBytes, kLayout.slotRowBytes,
                      row + static_cast<long long>(j) * kLayout.chunkUnits * Packing::kUnitBytes,
                      chunkUnits(j) * Packing::kUnitBytes);
      }
    }
  }

  // A math warp: stages its x (row nTokens - 1 of x when lastRow) after the dependency
  // wait, then per tile and chunk its units of the stage, then the tile's outputs. With a
  // fused norm (NORM::kOn) it stages x * (1 / rms) * weight, as the norm would have
  // written it: the math warps first add up the squares of the x values they stage (each
  // value of the row is staged by one warp), in warp order.
  template <int BDT, bool HAS_BIAS, class NORM>
  __device__ __forceinline__ void consume(const float *x, bool lastRow, const void *bias,
                                          const float *residual, float *y,
                                          const StepState *state, BlockSlice blocks,
                                          const NORM &norm) const {
    constexpr int kUpw = kLayout.unitsPerWarp;
    constexpr int kStaged = kLayout.chunks * kUpw;
    // K is whole chunks: the units' loop of a chunk needs no exit, and the compiler
    // interleaves the math of a warp's units (8B q4 decode: 578.6 -> 587.0 tok/s on the H200;
    // with the exit it ran them one after the other).
    constexpr bool kWholeChunks = kUnits % kLayout.chunkUnits == 0;
    // A row's scales of the warp's units of a chunk are contiguous, so launches of one or two
    // units per warp and chunk take them by one 4- or 8-byte load per row (was a 16-bit load
    // per unit and row: a warp's rows g = 0..7 in one bank, 8-way conflicts, a third of the
    // kernel's shared-memory wavefronts). Measured on the H200, 8B q4_g64 decode (q/k/v, o
    // and down take it): 618.5 / 618.6 / 619.1 / 620.8 -> 616.4 / 620.8 / 622.5 / 622.7 and
    // 618.6 / 620.4 / 617.6 / 617.0 -> 622.5 / 621.6 / 621.3 / 621.9 tok/s in alternating
    // rounds, bit-identical logits. The wide launches' four units (16 bytes, in one or two
    // loads) left gate/up and the lm_head 24 bytes of spills: 614.3 / 610.8 / 615.0 / 615.6.
    constexpr int kScaleBytes = kUpw * Scales::kUnitHalves * 2; // a row's, per warp and chunk
    constexpr int kLoadBytes = kScaleBytes < 8 ? kScaleBytes : 8;
    constexpr int kLoadUnits = kLoadBytes / (Scales::kUnitHalves * 2);
    constexpr bool kScaleLoads = kUpw <= 2 && kWholeChunks &&
                                 (kLoadBytes == 4 || kLoadBytes == 8) && kLoadUnits >= 1 &&
                                 kRowScaleBytes % kLoadBytes == 0;
    constexpr int kScaleWords = kScaleLoads ? kLoadBytes / 4 : 1;
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    const int g = lane / 4, c = lane % 4;
    unsigned char *xw = smem + kLayout.offX + warp * kLayout.xWarpBytes;
    uint4 *zeroLow = reinterpret_cast<uint4 *>(xw), *zeroHigh = zeroLow + 2;
    OneTokenUnitStage *staged = reinterpret_cast<OneTokenUnitStage *>(xw + gemv::kBulkZeroBytes);
    if (lane < 4)
      (lane < 2 ? zeroLow : zeroHigh)[lane % 2] = make_uint4(0u, 0u, 0u, 0u);
    for (int i = lane; i < 8 * kStaged; i += kWarpSize)
      staged[i / 8].corr[i % 8] = 0.0f;
    __syncwarp();

    // Staged unit s = j * kUpw + i is unit j * chunkUnits + warp * kUpw + i of K, staged in
    // batches of kBatch units: their loads are all issued before any is used. The norm's
    // weights are constants, so the first batch's are loaded before the dependency wait.
    constexpr int kBatch = 16;
    auto unitOf = [&](int s) { return s / kUpw * kLayout.chunkUnits + warp * kUpw + s % kUpw; };
    auto staging = [&](int s) { return s < kStaged && unitOf(s) < kUnits; };
    float gw[kBatch][4];
    auto normWeights = [&](int s0) {
      if constexpr (NORM::kOn) {
#pragma unroll
        for (int i = 0; i < kBatch; ++i)
          if (staging(s0 + i))
            norm.weights(unitOf(s0 + i) * quant::kQuantUnitValues + 4 * lane, gw[i]);
      }
    };
    normWeights(0);
    const bool oneToken = state->nTokens == 1;
    gridDependencyWait();
    gridDependencyTrigger(oneToken);
    if (lastRow) // the last row of the step (x is written by the previous kernel)
      x += static_cast<long long>(state->nTokens - 1) * K;
    const int stageByte = oneTokenSlotByte<BITS, GROUP>(4 * lane);
    float4 xv[kBatch];
    auto loadX = [&](int s0) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (staging(s0 + i))
          xv[i] = loadProduced(x + unitOf(s0 + i) * quant::kQuantUnitValues + 4 * lane);
    };
    float inv = 1.0f;
    if constexpr (NORM::kOn) {
      float sq = 0.0f;
#pragma unroll
      for (int s0 = 0; s0 < kStaged; s0 += kBatch) {
        loadX(s0);
#pragma unroll
        for (int i = 0; i < kBatch; ++i)
          if (staging(s0 + i))
            sq += xv[i].x * xv[i].x + xv[i].y * xv[i].y + xv[i].z * xv[i].z + xv[i].w * xv[i].w;
      }
      float *sums = reinterpret_cast<float *>(smem + kLayout.offPartial) +
                    gemv::kBulkConsumerWarps * gemv::kBulkTileRows;
      inv = norm.inverse(bulkBlockSum(sq, sums, warp, lane), K);
    }
#pragma unroll
    for (int s0 = 0; s0 < kStaged; s0 += kBatch) {
      if (!NORM::kOn || kStaged > kBatch) // else the norm's pass left the one batch in xv
        loadX(s0);
      if (s0 > 0)
        normWeights(s0);
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (staging(s0 + i)) {
          if constexpr (NORM::kOn)
            xv[i] = make_float4(xv[i].x * inv * gw[i][0], xv[i].y * inv * gw[i][1],
                                xv[i].z * inv * gw[i][2], xv[i].w * inv * gw[i][3]);
          stageOneTokenValues<BITS, GROUP>(xv[i], staged[s0 + i], stageByte, lane);
        }
    }
    __syncwarp();
    const bool low = g == T::column(c, 0), high = g == T::column(c, 1);
    const unsigned char *xLow =
        reinterpret_cast<const unsigned char *>(low ? &staged[0].run[c][0] : zeroLow);
    const unsigned char *xHigh =
        reinterpret_cast<const unsigned char *>(high ? &staged[0].run[c][2] : zeroHigh);
    const int xLowStep = low ? sizeof(OneTokenUnitStage) : 0;
    const int xHighStep = high ? sizeof(OneTokenUnitStage) : 0;

    constexpr int kOutputs = SWIGLU ? 8 : gemv::kBulkTileRows;
    int stage = 0, n = 0;
    for (int tile = blocks.index; tile < kTiles; tile += blocks.count, ++n) {
      const int b = n % 2, sb = n % kLayout.scaleBuffers; // row sums' and scales' buffers
      // The output's bias and residual, loaded while the tile streams.
      const int o = tile * kOutputs + threadIdx.x;
      float bv = 0.0f, rv = 0.0f;
      if (!SWIGLU && threadIdx.x < kOutputs) {
        if constexpr (HAS_BIAS)
          bv = loadAsFloat<BDT>(bias, o);
        if (residual)
          rv = loadProducedScalar(residual + o);
      }
      barrierWait(scalesFull(sb), (n / kLayout.scaleBuffers) & 1);
      const unsigned short *scales = reinterpret_cast<const unsigned short *>(
          smem + kLayout.offScales + sb * kLayout.scaleBytes);
      const unsigned short *s0 = scales + g * (kRowScaleBytes / 2);
      const unsigned short *s1 = scales + (g + 8) * (kRowScaleBytes / 2);
      float sum0 = 0.0f, sum1 = 0.0f;
      for (int j = 0; j < kLayout.chunks; ++j, ++stage) {
        const int slot = stage % kLayout.slots, round = stage / kLayout.slots;
        barrierWait(full(slot), round & 1);
        const unsigned char *rows = smem + kLayout.offSlots + slot * kLayout.slotBytes;
        // The warp's units of the stage into registers, then the slot goes back to the
        // producer, then the math: the slot is held for the loads, not for the math.
        RunCodec<BITS> run0[kUpw], run1[kUpw];
#pragma unroll
        for (int i = 0; i < kUpw; ++i) {
          const int inChunk = warp * kUpw + i;
          if (!kWholeChunks && inChunk >= chunkUnits(j))
            break;
          run0[i].template load<true>(
              rows + g * kLayout.slotRowBytes + inChunk * Packing::kUnitBytes, c);
          run1[i].template load<true>(
              rows + (g + 8) * kLayout.slotRowBytes + inChunk * Packing::kUnitBytes, c);
        }
        __syncwarp();
        if (lane == 0)
          barrierArrive(empty(slot));
        unsigned int words0[kScaleWords], words1[kScaleWords];
#pragma unroll
        for (int i = 0; i < kUpw; ++i) {
          const int inChunk = warp * kUpw + i;
          if (!kWholeChunks && inChunk >= chunkUnits(j))
            break;
          const int u = j * kLayout.chunkUnits + inChunk;
          Scales sc0, sc1;
          if constexpr (kScaleLoads) {
            if (i % kLoadUnits == 0) {
              loadWords(s0 + u * Scales::kUnitHalves, words0);
              loadWords(s1 + u * Scales::kUnitHalves, words1);
            }
            sc0.select(words0, i % kLoadUnits, c);
            sc1.select(words1, i % kLoadUnits, c);
          } else {
            sc0.template load<true>(s0 + u * Scales::kUnitHalves, c);
            sc1.template load<true>(s1 + u * Scales::kUnitHalves, c);
          }
          const int s = j * kUpw + i;
          oneTokenUnitMath<BITS, GROUP>(run0[i], run1[i], sc0, sc1, staged[s],
                                        xLow + s * xLowStep, xHigh + s * xHighStep, sum0, sum1);
        }
      }
      if (lane == 0)
        barrierArrive(scalesEmpty(sb));
      // The quad's columns together, then the warps' sums in order.
      sum0 += __shfl_xor_sync(0xffffffffu, sum0, 1);
      sum1 += __shfl_xor_sync(0xffffffffu, sum1, 1);
      sum0 += __shfl_xor_sync(0xffffffffu, sum0, 2);
      sum1 += __shfl_xor_sync(0xffffffffu, sum1, 2);
      float *partial = reinterpret_cast<float *>(smem + kLayout.offPartial) +
                       b * gemv::kBulkConsumerWarps * gemv::kBulkTileRows;
      bulkTileOutputs(partial, warp, g, c == 0, sum0, sum1, kOutputs,
                      [&](const BulkRowSums &rowSum) {
                        if constexpr (SWIGLU)
                          y[o] = siluTimes(rowSum(threadIdx.x), rowSum(threadIdx.x + 8));
                        else
                          y[o] = residual ? rowSum(threadIdx.x) + bv + rv
                                          : rowSum(threadIdx.x) + bv;
                      });
    }
  }
};

// SWIGLU: w is the gate and wUp the up matrix, y gets silu(x gate^T) * (x up^T).
template <int BITS, int GROUP, int BDT, bool HAS_BIAS, int K, int N, bool SWIGLU, class NORM>
__device__ __forceinline__ void gemvQuantBulk(const float *x, const unsigned char *w,
                                              const void *bias, const float *residual,
                                              float *y, BlockSlice blocks,
                                              const unsigned char *wUp, const StepState *state,
                                              bool lastRow, const NORM &norm) {
  extern __shared__ __align__(128) unsigned char bulkShared[];
  using Op = BulkGemv<BITS, GROUP, K, N, SWIGLU>;
  const Op op{bulkShared, sharedAddress(bulkShared)};
  if (threadIdx.x == 0) {
    for (int s = 0; s < Op::kLayout.slots; ++s) {
      barrierInit(op.full(s), 1);
      barrierInit(op.empty(s), gemv::kBulkConsumerWarps);
    }
    for (int b = 0; b < Op::kLayout.scaleBuffers; ++b) {
      barrierInit(op.scalesFull(b), 1);
      barrierInit(op.scalesEmpty(b), gemv::kBulkConsumerWarps);
    }
    barrierInitFence();
  }
  __syncthreads();
  if (threadIdx.x / kWarpSize == gemv::kBulkConsumerWarps)
    op.produce(w, wUp, blocks);
  else
    op.template consume<BDT, HAS_BIAS>(x, lastRow, bias, residual, y, state, blocks, norm);
}
#endif

// The one-token launches of a quantized linear (ROWS kRowsGemv: steps of one token;
// kRowsLast: the last row of a step), for plans whose targets are all sm_90+ and shapes
// bulkLayout(...) takes (the emitter checks both). norm: an RMSNorm fused into the input
// (common.cuh), or NoNorm.
template <int BITS, int GROUP, int BDT, bool HAS_BIAS, int K, int N, int ROWS,
          class NORM = NoNorm>
__device__ __forceinline__ void linearQuantOneToken(const float *x, const void *w,
                                                    const void *bias, const float *residual,
                                                    float *y, const StepState *state,
                                                    BlockSlice blocks = wholeGrid(),
                                                    NORM norm = {}) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  gemvQuantBulk<BITS, GROUP, BDT, HAS_BIAS, K, N, false>(
      x, static_cast<const unsigned char *>(w), bias, residual, y, blocks, nullptr, state,
      ROWS == kRowsLast, norm);
#endif
}

// A SwiGLU MLP's gate/up pair in one-token steps: y = silu(x gate^T) * (x up^T).
template <int BITS, int GROUP, int K, int N, class NORM = NoNorm>
__device__ __forceinline__ void linearQuantSwiGluOneToken(const float *x, const void *gate,
                                                          const void *up, float *y,
                                                          const StepState *state,
                                                          NORM norm = {}) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  gemvQuantBulk<BITS, GROUP, 0, false, K, N, true>(
      x, static_cast<const unsigned char *>(gate), nullptr, nullptr, y, wholeGrid(),
      static_cast<const unsigned char *>(up), state, false, norm);
#endif
}

} // namespace dev
} // namespace ninfer
