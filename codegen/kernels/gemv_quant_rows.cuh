// Steps of 2..8 token rows (batched decode: a row per sequence) of a group-quantized
// linear on sm_90+, with the weights streamed into shared memory by bulk copies as in
// one-token steps (gemv_quant_bulk.cuh): y[t, o] = sum_k x[t, k] * scale[o, k / GROUP] * q[o, k].
//
// Why: the register-fed GEMV (gemv_quant_mma.cuh) re-reads x for every 16-row tile and
// keeps its loads in flight only as far as its warps' registers reach; on the H200 the
// 8B q4 plan's 8-row steps took 4.22 ms against 1.94 ms for one row. Here the weights
// stream through a producer's ring as in one-token steps, and x is staged once per block:
// the block takes one part of K (gemv::rowsPartUnits: all of K up to 32 units, else 16),
// so its x for 8 rows stays within 64 KB as f16 however long K is. Measured (8B q4, 8-row
// steps, plain launches):
// gate/up 45.4 -> 28.6 us, down 24.5 -> 20.5; the emitter takes it where gemv::rowsPays
// (the 8B's gate/up group, down and lm_head). Layers whose block groups get few tiles
// lose to its fixed costs (x staged per block, the parts' sums through global memory):
// q/k/v 13.1 -> 21.6, o 11.2 -> 14.5 us. A gate/up pair's SwiGLU computed by its finish
// (SWIGLU) instead of its own launch: 28.6 + 5.2 -> 30.0 us.
//
// Work: blocks form groups of gemv::rowsParts(K) blocks, block (group, part); the
// groups stride over the tiles of 16 rows, and each block of a group produces, for each
// of the group's tiles, the tile's sums over its part. A producer lane brings each
// tile's part into a ring slot, ahead of the dependency wait: one TMA box of the code
// plane (16 rows x the part's bytes; the emitter's tensor map, box_bytes) and the tile's
// scale rows by one bulk copy, completing on the slot's barrier. One copy per row (1D
// bulk copies) ran gate/up at 32.8-47.9 us: the copies' count set the pace. The scale
// rows are copied whole although the part reads only its slice: a timing variant that
// copied a slice's bytes (the down projection's slot 23 -> 17 KB, so 3 slots instead of 2)
// ran the 8B q4 8-row step at 2.650 / 2.648 ms against 2.625 / 2.634 (H200). Math warp w
// takes units w, w + 8, ... of the part in every tile (their x B fragments stay in
// registers), with the general path's math (rowsUnitMath: levels times f16 scales,
// tokens as the mma's n). A combiner warp sums the math warps' fragments of a tile in
// warp order, a batch of tiles at a time; with one part it stores the outputs, with
// several it writes the part's sums to `partials`, and the block whose atomic ticket on
// the tile comes last adds the parts in part order (deterministic), stores the outputs
// and resets the ticket (`tickets`: zero at load, zero after). Tickets one tile after
// another (a round trip each) took gate/up to 72.8 us.
//
// x staging: row t of unit u as 16 f16 pairs per run in the codec's pair order (lane
// (g, c) reads row g's run c: the B fragments of the unit's 8 mma steps, 64 bytes),
// the four 16-byte pieces of a run rotated by (c / 2, t % 2) so that a phase of 8 lanes
// reads 8 different banks; rows past the step's are zero.
// Launch: block gemv::kRowsThreads, gemv::rowsBlocksPerSm(BITS, K) blocks per SM, grid a
// multiple of rowsParts (blocks past the last whole group only wait), dynamic shared
// memory bulkRowsLayout(...).sharedBytes;
// the wrapper does not wait for the previous kernel (the kernel does, before x).
#pragma once

#include "GemvShapes.h"
#include "bulk_copy.cuh"
#include "gemv_quant_mma.cuh"

namespace ninfer {
namespace dev {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The parts' sums go through L2 (.cg: not cached in L1; loaded by __ldcg), since other
// blocks read them.
__device__ __forceinline__ void storeGlobal(float4 *p, float4 v) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y),
               "f"(v.z), "f"(v.w)
               : "memory");
}
// Adds one to a tile's ticket (acq_rel at GPU scope: the warp's part sums, stored before
// a __syncwarp, are visible before it; the other parts' after it) and returns the old count.
__device__ __forceinline__ unsigned int ticketArrive(unsigned int *ticket) {
  unsigned int old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(ticket) : "memory");
  return old;
}

// SWIGLU: N outputs silu(x gate^T) * (x up^T) from an N x K gate and up matrix, a tile
// being 8 gate rows and the same 8 up rows (slot rows 0..7 and 8..15).
template <int BITS, int GROUP, int K, int N, bool SWIGLU> struct RowsGemv {
  using Packing = quant::QuantPacking<BITS>;
  using Codec = RunCodec<BITS>;
  static constexpr gemv::RowsLayout kLayout =
      gemv::bulkRowsLayout(BITS, GROUP, K, SWIGLU ? 2 * N : N);
  static_assert(kLayout.fits, "the emitter checks bulkRowsLayout(...).fits");
  static constexpr int kUnits = K / quant::kQuantUnitValues;
  static constexpr int kTileOutputs = SWIGLU ? 8 : gemv::kBulkTileRows;
  static constexpr int kTiles = N / kTileOutputs;
  static constexpr int kParts = gemv::rowsParts(BITS, K);
  static constexpr long long kRowScaleBytes = quant::quantRowScaleBytes(GROUP, K);
  static constexpr long long kScalePlane = quant::quantScalePlaneOffset(BITS, N, K);
  static constexpr int kMathThreads = gemv::kBulkConsumerWarps * kWarpSize;
  static_assert(kRowScaleBytes == gemv::bulkRowScaleBytes(GROUP, K), "GemvShapes.h's scales");
  static_assert(pairsShareParity<Codec>(), "one prmt per staged pair");
  static_assert(firstHalfPairsHoldFirstGroup<Codec>(), "RunScales' pair split");
  static_assert(gemv::kRowsTokens == gemv::kBulkConsumerWarps, "math warp t stages row t");

  unsigned char *smem;
  unsigned int base;      // shared address of smem
  int part, unit0, units; // the block's part of K: units unit0 .. unit0 + units - 1

  // Barriers (gemv::kRowsBarrierBytes): full / empty per ring slot, then tileDone /
  // partialFree per fragment buffer. Every thread that read a slot or a buffer, or wrote
  // a buffer, fences (fence.cta) and arrives itself. With one arrive per warp after a
  // __syncwarp, ptxas made the __syncwarp a NOP and issued the arrive with no fence, and
  // some rows of the blocks' first tiles (the tiles the combiner was already waiting on)
  // came out wrong: QuantParity.LinearWide/Q2_K16 failed in 12 of 12 runs on the H200;
  // with every lane arriving but no fence in 11 of 21; with the fences in 0 of 15.
  __device__ __forceinline__ unsigned int full(int slot) const { return base + 8 * slot; }
  __device__ __forceinline__ unsigned int empty(int slot) const {
    return base + 8 * (gemv::kRowsMaxSlots + slot);
  }
  __device__ __forceinline__ unsigned int tileDone(int b) const {
    return base + 8 * (2 * gemv::kRowsMaxSlots + b);
  }
  __device__ __forceinline__ unsigned int partialFree(int b) const {
    return base + 8 * (2 * gemv::kRowsMaxSlots + gemv::kRowsBuffers + b);
  }
  __device__ __forceinline__ void initBarriers() const {
    for (int s = 0; s < kLayout.slots; ++s) {
      barrierInit(full(s), 1);
      barrierInit(empty(s), kMathThreads);
    }
    for (int b = 0; b < gemv::kRowsBuffers; ++b) {
      barrierInit(tileDone(b), kMathThreads);
      barrierInit(partialFree(b), kWarpSize);
    }
    barrierInitFence();
  }

  // The producer warp (one lane): per tile, once its ring slot is free, the box of its 16
  // code rows' part (TMA; codes: the code plane's tensor map) and the tile's scale rows
  // (SWIGLU: a box of 8 rows and 8 scale rows from the gate, then from the up matrix).
  __device__ __forceinline__ void produce(const unsigned char *w, const void *codes,
                                          const unsigned char *wUp, const void *upCodes,
                                          int tileBegin, int tileStep) const {
    if (threadIdx.x % kWarpSize != 0)
      return;
    tensorMapAcquire(codes);
    if constexpr (SWIGLU)
      tensorMapAcquire(upCodes);
    const int boxColumn = unit0 * Packing::kUnitBytes / 8; // in the map's 8-byte elements
    int n = 0;
    for (int tile = tileBegin; tile < kTiles; tile += tileStep, ++n) {
      const int slot = n % kLayout.slots, round = n / kLayout.slots;
      if (round >= 1)
        barrierWait(empty(slot), (round - 1) & 1);
      barrierExpectBytes(full(slot), gemv::kBulkTileRows * kLayout.boxBytes + kLayout.scaleBytes);
      const unsigned int stage = base + kLayout.offSlots + slot * kLayout.slotBytes;
      const unsigned int scales = stage + gemv::kBulkTileRows * kLayout.boxBytes;
      if constexpr (SWIGLU) {
        constexpr unsigned int kHalf = 8 * kRowScaleBytes;
        tensorCopy2d(stage, codes, boxColumn, 8 * tile, full(slot));
        tensorCopy2d(stage + 8 * kLayout.boxBytes, upCodes, boxColumn, 8 * tile, full(slot));
        bulkCopy(scales, w + kScalePlane + tile * static_cast<long long>(kHalf), kHalf, full(slot));
        bulkCopy(scales + kHalf, wUp + kScalePlane + tile * static_cast<long long>(kHalf), kHalf,
                 full(slot));
      } else {
        tensorCopy2d(stage, codes, boxColumn, gemv::kBulkTileRows * tile, full(slot));
        const long long tileScales =
            kScalePlane + gemv::kBulkTileRows * static_cast<long long>(tile) * kRowScaleBytes;
        bulkCopy(scales, w + tileScales, kLayout.scaleBytes, full(slot));
      }
    }
  }

  // Byte offset in the x stage of word `word` (0..15) of run c of row t of unit u.
  __device__ __forceinline__ static int xOffset(int u, int t, int c, int word) {
    const int piece = (word / 4) ^ ((c >> 1) | ((t & 1) << 1));
    return kLayout.offX + u * gemv::kRowsUnitXBytes + (t * 4 + c) * 64 + piece * 16 +
           (word % 4) * 4;
  }

  // Math warp w stages row w of every unit of the part (zeros past the step's rows), then
  // the warps meet on named barrier 1. scratch: the warp's 64 words to regroup pairs in.
  // The units' loads go out kRowsPartUnits at a time, before any is used.
  __device__ __forceinline__ void stageX(const float *x, int rows, unsigned int *scratch) const {
#pragma unroll
    for (int u0 = 0; u0 < kLayout.partUnits; u0 += gemv::kRowsPartUnits)
      stageUnits<(kLayout.partUnits < gemv::kRowsPartUnits ? kLayout.partUnits
                                                           : gemv::kRowsPartUnits)>(x, rows, u0,
                                                                                   scratch);
    asm volatile("bar.sync 1, %0;" ::"n"(kMathThreads) : "memory");
  }
  template <int COUNT>
  __device__ __forceinline__ void stageUnits(const float *x, int rows, int u0,
                                             unsigned int *scratch) const {
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    const int c = lane / 8, j = 2 * (lane % 8); // this lane writes pairs j, j + 1 of run c
    float4 v[COUNT];
#pragma unroll
    for (int i = 0; i < COUNT; ++i)
      if (u0 + i < units && warp < rows)
        v[i] = loadProduced(x + static_cast<long long>(warp) * K +
                            (unit0 + u0 + i) * quant::kQuantUnitValues + 4 * lane);
#pragma unroll
    for (int i = 0; i < COUNT; ++i) {
      const int u = u0 + i;
      if (u >= units)
        break;
      unsigned int p[2] = {0u, 0u};
      if (warp < rows) {
        // Adjacent pairs: word m of the unit holds values 2m, 2m + 1 (run m / 16).
        scratch[2 * lane] = packPair<kF16>(v[i].x, v[i].y);
        scratch[2 * lane + 1] = packPair<kF16>(v[i].z, v[i].w);
        __syncwarp();
#pragma unroll
        for (int e = 0; e < 2; ++e)
          p[e] = codecPair<Codec>(scratch + 16 * c, j + e);
        __syncwarp();
      }
      *reinterpret_cast<uint2 *>(smem + xOffset(u, warp, c, j)) = make_uint2(p[0], p[1]);
    }
  }

  // A math warp: its unit's B fragments, then per tile its unit of rows g, g + 8 into the
  // tile's partial buffer (32 lanes x 4 floats per warp).
  __device__ __forceinline__ void multiply(const float *x, int rows, int tileBegin,
                                           int tileStep) const {
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    const int g = lane / 4, c = lane % 4;
    float4 *partial = reinterpret_cast<float4 *>(smem + kLayout.offPartial);
    stageX(x, rows, reinterpret_cast<unsigned int *>(partial) + 64 * warp);
    // The warp's units of the part: warp, warp + 8, ...
    constexpr int kUpw =
        (kLayout.partUnits + gemv::kBulkConsumerWarps - 1) / gemv::kBulkConsumerWarps;
    // Every warp has kUpw units of every part: the units' loop below needs no exit, and
    // the compiler interleaves their math (as in gemv_quant_bulk.cuh).
    constexpr bool kWholeParts = kUnits % kLayout.partUnits == 0 &&
                                 kLayout.partUnits % gemv::kBulkConsumerWarps == 0;
    unsigned int xp[kUpw][16];
#pragma unroll
    for (int i = 0; i < kUpw; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int u = warp + i * gemv::kBulkConsumerWarps;
        uint4 piece = make_uint4(0u, 0u, 0u, 0u);
        if (u < units)
          piece = *reinterpret_cast<const uint4 *>(smem + xOffset(u, g, c, 4 * q));
        xp[i][4 * q] = piece.x;
        xp[i][4 * q + 1] = piece.y;
        xp[i][4 * q + 2] = piece.z;
        xp[i][4 * q + 3] = piece.w;
      }
    constexpr int kRowScaleHalves = kRowScaleBytes / 2;
    int n = 0;
    for (int tile = tileBegin; tile < kTiles; tile += tileStep, ++n) {
      const int slot = n % kLayout.slots, buffer = n % gemv::kRowsBuffers;
      barrierWait(full(slot), (n / kLayout.slots) & 1);
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const unsigned char *stage = smem + kLayout.offSlots + slot * kLayout.slotBytes;
      const unsigned short *scales = reinterpret_cast<const unsigned short *>(
          stage + gemv::kBulkTileRows * kLayout.boxBytes);
#pragma unroll
      for (int i = 0; i < kUpw; ++i) {
        const int u = warp + i * gemv::kBulkConsumerWarps;
        if (!kWholeParts && u >= units)
          break;
        Codec run0, run1;
        run0.template load<true>(stage + g * kLayout.boxBytes + u * Packing::kUnitBytes, c);
        run1.template load<true>(stage + (g + 8) * kLayout.boxBytes + u * Packing::kUnitBytes, c);
        RunScales<GROUP> sc0, sc1;
        sc0.template load<true>(scales + g * kRowScaleHalves, unit0 + u, c);
        sc1.template load<true>(scales + (g + 8) * kRowScaleHalves, unit0 + u, c);
        rowsUnitMath(run0, run1, sc0, sc1, c, xp[i], acc, acc2);
      }
      __threadfence_block();
      barrierArrive(empty(slot));
      if (n >= gemv::kRowsBuffers)
        barrierWait(partialFree(buffer), (n / gemv::kRowsBuffers - 1) & 1);
      partial[(buffer * gemv::kBulkConsumerWarps + warp) * kWarpSize + lane] =
          make_float4(acc[0] + acc2[0], acc[1] + acc2[1], acc[2] + acc2[2], acc[3] + acc2[3]);
      __threadfence_block();
      barrierArrive(tileDone(buffer));
    }
  }

  // Where the part sums of the combiner's tile n + i go: kParts x 32 lanes' float4 per tile.
  __device__ __forceinline__ float4 *sumsOf(float4 *partials, int tileBegin, int tileStep, int n,
                                            int i) const {
    return partials + static_cast<long long>(tileBegin + (n + i) * tileStep) * kParts * kWarpSize +
           threadIdx.x % kWarpSize;
  }

  // The outputs of the batch's tiles that came last (bit i of lastTiles: tile n + i): their
  // bias and residual, and with several parts every part's sums (in part order), loaded
  // a round at a time before any value is used. A load whose value is used before the
  // next load issues costs a round trip of its own: the 8B down GEMV (7 parts, 8-row
  // steps) spent about 10 us of its 30 after its last tile's math that way. Tiles whose
  // bit is clear load the first last tile's addresses (valid) and store nothing.
  template <int BDT, bool HAS_BIAS>
  __device__ __forceinline__ void finish(int n, unsigned int lastTiles,
                                         float4 (&s)[gemv::kRowsCombineBatch], int rows,
                                         const void *bias, const float *residual, float *y,
                                         float4 *partials, int tileBegin, int tileStep) const {
    constexpr int kBatch = gemv::kRowsCombineBatch;
    const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
    const int first = __ffs(lastTiles) - 1;
    auto slotOf = [&](int i) { return (lastTiles >> i) & 1u ? i : first; };
    auto outputOf = [&](int i, int e) {
      const int t = min(2 * c + e % 2, rows - 1);
      return static_cast<long long>(t) * N +
             (tileBegin + (n + slotOf(i)) * tileStep) * kTileOutputs + g + 8 * (e / 2);
    };
    float out[kBatch][4], bv[HAS_BIAS ? kBatch : 1][4];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        out[i][e] = residual ? residual[outputOf(i, e)] : 0.0f;
        if constexpr (HAS_BIAS)
          bv[i][e] = loadAsFloat<BDT>(bias, static_cast<int>(outputOf(i, e) % N));
      }
    if constexpr (kParts > 1) {
      constexpr int kLoads = kParts * kBatch, kRound = 8;
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        s[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int j0 = 0; j0 < kLoads; j0 += kRound) {
        float4 v[kRound];
#pragma unroll
        for (int j = 0; j < kRound; ++j)
          if (j0 + j < kLoads)
            v[j] = __ldcg(sumsOf(partials, tileBegin, tileStep, n, slotOf((j0 + j) % kBatch)) +
                          (j0 + j) / kBatch * kWarpSize);
#pragma unroll
        for (int j = 0; j < kRound; ++j)
          if (j0 + j < kLoads) {
            float4 &a = s[(j0 + j) % kBatch];
            a = make_float4(a.x + v[j].x, a.y + v[j].y, a.z + v[j].z, a.w + v[j].w);
          }
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      if ((lastTiles >> i) & 1u) {
        const float v[4] = {s[i].x, s[i].y, s[i].z, s[i].w};
        if constexpr (SWIGLU) {
#pragma unroll
          for (int e = 0; e < 2; ++e) // gate row g (e), up row g + 8 (e + 2)
            if (2 * c + e < rows)
              y[outputOf(i, e)] = siluTimes(v[e], v[e + 2]);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (2 * c + e % 2 < rows)
              y[outputOf(i, e)] = (v[e] + (HAS_BIAS ? bv[HAS_BIAS ? i : 0][e] : 0.0f)) + out[i][e];
        }
      }
  }

  // The combiner warp, a batch of up to kRowsCombineBatch tiles at a time. Per tile the
  // warps' fragments in warp order (lane (g, c): rows g, g + 8 of tokens 2c, 2c + 1);
  // where K has several parts, the batch's part sums go to `partials` and lane i takes
  // tile i's ticket (release: the warp's stores first; acquire: the other parts' sums
  // after), and the tiles whose ticket came last add up every part in part order. Then
  // the outputs. A batch's global round trips overlap instead of following each other.
  template <int BDT, bool HAS_BIAS>
  __device__ __forceinline__ void combine(int rows, const void *bias, const float *residual,
                                          float *y, float4 *partials, unsigned int *tickets,
                                          int tileBegin, int tileStep) const {
    constexpr int kBatch = gemv::kRowsCombineBatch;
    const int lane = threadIdx.x % kWarpSize;
    const float4 *partial = reinterpret_cast<const float4 *>(smem + kLayout.offPartial);
    const int tiles = tileBegin < kTiles ? (kTiles - tileBegin + tileStep - 1) / tileStep : 0;
    auto add = [](float4 a, float4 v) {
      return make_float4(a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w);
    };
    for (int n = 0; n < tiles;) {
      float4 s[kBatch];
      const int count = min(kBatch, tiles - n);
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (i < count) {
          const int buffer = (n + i) % gemv::kRowsBuffers;
          barrierWait(tileDone(buffer), ((n + i) / gemv::kRowsBuffers) & 1);
          const float4 *p = partial + buffer * gemv::kBulkConsumerWarps * kWarpSize + lane;
          s[i] = p[0];
#pragma unroll
          for (int w = 1; w < gemv::kBulkConsumerWarps; ++w)
            s[i] = add(s[i], p[w * kWarpSize]);
          __threadfence_block();
          barrierArrive(partialFree(buffer));
        }
      unsigned int lastTiles = (1u << count) - 1u;
      if constexpr (kParts > 1) {
#pragma unroll
        for (int i = 0; i < kBatch; ++i)
          if (i < count)
            storeGlobal(sumsOf(partials, tileBegin, tileStep, n, i) + part * kWarpSize, s[i]);
        __syncwarp();
        unsigned int *ticket = tickets + tileBegin + (n + lane) * tileStep;
        const bool last =
            lane < count && ticketArrive(ticket) == static_cast<unsigned int>(kParts - 1);
        lastTiles = __ballot_sync(0xffffffffu, last);
        __syncwarp(); // orders the other lanes' loads after the tickets' acquire
        if (last)
          *ticket = 0u;
      }
      if (lastTiles)
        finish<BDT, HAS_BIAS>(n, lastTiles, s, rows, bias, residual, y, partials, tileBegin,
                              tileStep);
      n += count;
    }
  }
};
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// One block's share of a multi-row launch: its part of K for its group's tiles.
template <int BITS, int GROUP, int BDT, bool HAS_BIAS, int K, int N, bool SWIGLU>
__device__ __forceinline__ void runRowsGemv(const float *x, const void *w, const void *wUp,
                                            const void *bias, const float *residual, float *y,
                                            const StepState *state, BlockSlice blocks,
                                            float *partials, unsigned int *tickets,
                                            const void *codes, const void *upCodes) {
  extern __shared__ __align__(128) unsigned char bulkShared[];
  using Rows = RowsGemv<BITS, GROUP, K, N, SWIGLU>;
  const int rows = state->nTokens;
  const int groups = blocks.count / Rows::kParts, group = blocks.index / Rows::kParts;
  if (group >= groups) { // no part of a whole group
    gridDependencyWait();
    return;
  }
  const int part = blocks.index % Rows::kParts, unit0 = part * Rows::kLayout.partUnits;
  const Rows r{bulkShared, sharedAddress(bulkShared), part, unit0,
               min(Rows::kLayout.partUnits, Rows::kUnits - unit0)};
  if (threadIdx.x == 0)
    r.initBarriers();
  __syncthreads();
  const int warp = threadIdx.x / kWarpSize;
  if (warp == gemv::kBulkConsumerWarps) {
    r.produce(static_cast<const unsigned char *>(w), codes,
              static_cast<const unsigned char *>(wUp), upCodes, group, groups);
    return;
  }
  gridDependencyWait();
  // The SwiGLU launch lets its dependent (the down projection, whose blocks prefetch weights
  // ahead of their wait) start only when it ends: triggered here, the 8B q4 batch plan's
  // 8-row steps took 3.858 against 3.526 ms (H200). The plain launch's dependents there are
  // small kernels (the SwiGLU, RMSNorm) and gain from starting early.
  if constexpr (!SWIGLU)
    gridDependencyTrigger(true);
  if (warp < gemv::kBulkConsumerWarps)
    r.multiply(x, rows, group, groups);
  else
    r.template combine<BDT, HAS_BIAS>(rows, bias, residual, y, reinterpret_cast<float4 *>(partials),
                                      tickets, group, groups);
}
#endif

// The GEMV launch of a quantized linear for steps of 2..8 rows (ROWS kRowsGemv), for plans
// whose targets are all sm_90+ and shapes bulkRowsLayout(...) takes (the emitter checks
// both). partials: rowsParts(BITS, K) x 128 floats per tile (unused with one part); tickets: a
// zeroed counter per tile.
template <int BITS, int GROUP, int BDT, bool HAS_BIAS, int K, int N, int ROWS>
__device__ __forceinline__ void linearQuantRows(const float *x, const void *w, const void *bias,
                                                const float *residual, float *y,
                                                const StepState *state, BlockSlice blocks,
                                                float *partials, unsigned int *tickets,
                                                const void *codes) {
  static_assert(ROWS == kRowsGemv, "every row of a step of at most 8");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  runRowsGemv<BITS, GROUP, BDT, HAS_BIAS, K, N, false>(x, w, nullptr, bias, residual, y, state,
                                                       blocks, partials, tickets, codes, nullptr);
#endif
}

// The same for a gate/up pair with its SwiGLU fused (the emitter's swiGluRowsCall): y gets
// silu(x gate^T) * (x up^T), N wide; tiles of 8 gate and 8 up rows (gateCodes / upCodes:
// the code planes' tensor maps, boxes of 8 rows).
template <int BITS, int GROUP, int K, int N>
__device__ __forceinline__ void linearQuantRowsSwiGlu(const float *x, const void *gate,
                                                      const void *up, float *y,
                                                      const StepState *state, float *partials,
                                                      unsigned int *tickets, const void *gateCodes,
                                                      const void *upCodes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  runRowsGemv<BITS, GROUP, 0, false, K, N, true>(x, gate, up, nullptr, nullptr, y, state,
                                                 wholeGrid(), partials, tickets, gateCodes,
                                                 upCodes);
#endif
}

} // namespace dev
} // namespace ninfer
