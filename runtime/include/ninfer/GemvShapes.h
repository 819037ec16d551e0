// How the linear kernels split their work, shared by the kernels
// (codegen/kernels/linear.cuh, gemv_quant_mma.cuh, gemv_tq1_mma.cuh,
// linear_ternary.cuh, gemm_mma.cuh) and the kernel emitter, which sizes each
// launch's grid and shared memory with the same functions.
// Compiles as host C++ and as NVRTC device code: no standard header.
#pragma once

#include "HostDevice.h"

namespace ninfer {
namespace gemv {

constexpr int kBlockThreads = 256; // every linear kernel: 8 warps
constexpr int kBlockWarps = kBlockThreads / 32;
// Warps the GPU should have in flight for a GEMV to cover the memory latency
// (an H200 holds 132 SMs x 64 warps; about half of that, measured on the fp16
// GEMV's short layers, docs/performance.md).
constexpr int kTargetWarps = 4096;

// ---- f16/bf16/f32 weights (linear.cuh) ----

// Output rows per warp: 2 for wide layers (x reuse), 1 for narrow ones.
NINFER_HD constexpr int linearRowsPerWarp(int n) { return n >= 4096 ? 2 : 1; }

// Warps that share a row group, each taking a slice of K (1, 2, 4 or 8), until
// about kTargetWarps warps are busy; every lane keeps at least one 16-byte chunk
// of each row. elems: weights per 16 bytes.
NINFER_HD constexpr int linearKSplit(int n, int k, int elems) {
  int split = 1;
  const int groups = (n + linearRowsPerWarp(n) - 1) / linearRowsPerWarp(n);
  while (split < kBlockWarps && groups * split < kTargetWarps && k / elems >= 2 * 32 * split)
    split *= 2;
  return split;
}

NINFER_HD constexpr int linearRowsPerBlock(int n, int k, int elems) {
  return kBlockWarps / linearKSplit(n, k, elems) * linearRowsPerWarp(n);
}

// A SwiGLU's gate/up GEMV with the activation fused (linearSwiGlu): a warp per
// output (its gate and up rows), split as the pair's grouped GEMV of 2n rows.
NINFER_HD constexpr int linearSwiGluOutputsPerBlock(int n, int k, int elems) {
  return kBlockWarps / linearKSplit(2 * n, k, elems);
}

// ---- tensor-core GEMVs (gemv_quant_mma.cuh, gemv_tq1_mma.cuh) ----

// Row tiles of 16 per block: enough blocks to cover the SMs for short N, fewer
// K splits (less reduction) for long N.
NINFER_HD constexpr int mmaRowTiles(int n) { return n >= 32768 ? 4 : n >= 8192 ? 2 : 1; }
NINFER_HD constexpr int mmaRowsPerBlock(int n) { return 16 * mmaRowTiles(n); }
// With a SwiGLU fused (gemvQuantMmaSwiGlu): a tile is 8 outputs (their gate rows
// and up rows), tiles per block as for the pair's 2n rows.
NINFER_HD constexpr int mmaSwiGluOutputsPerBlock(int n) { return 8 * mmaRowTiles(2 * n); }
// The TQ1 GEMV (gemv_tq1_mma.cuh) of an n-row kernel (a SwiGLU's: its 2n rows): the quads
// of 4 chunks (80 values each) of a row that the first warp of a tile takes, the most any
// warp takes; and the blocks per SM its launch asks for: 3 where the codes of at most 2
// quads are in flight (they fit 85 registers), else 2 (the codes of 3 quads ahead). On the
// H200 (8B TQ1 decode, plain launches): at 2 blocks q/k/v (2 quads) took 12.2 us against
// 9.8 at 3, the down projection (6 quads) 14.5 us against 17.0 with one quad ahead at 3.
NINFER_HD constexpr int tq1MmaQuads(int k, int n) {
  const int chunks = (k + 79) / 80, step = 4 * (kBlockWarps / mmaRowTiles(n));
  return (chunks + step - 1) / step;
}
NINFER_HD constexpr int tq1MmaBlocksPerSm(int k, int n) { return tq1MmaQuads(k, n) <= 2 ? 3 : 2; }

// ---- ternary weights on CUDA cores (linear_ternary.cuh: TQ2, and TQ1 on sm_75) ----

// Output rows per warp: more rows share each x load, fewer give more warps for small N.
NINFER_HD constexpr int ternaryRowsPerWarp(int n) { return n >= 8192 ? 4 : n >= 2048 ? 2 : 1; }
NINFER_HD constexpr int ternaryRowsPerBlock(int n) { return kBlockWarps * ternaryRowsPerWarp(n); }


// ---- one-token quantized GEMV fed by bulk copies (gemv_quant_bulk.cuh, sm_90+) ----
// A block is kBulkConsumerWarps warps of math and one producer warp. A tile is 16
// weight rows (SwiGLU: 8 gate and 8 up rows); K is cut into chunks of
// bulkChunkUnits 128-value units, and a ring of `slots` chunk buffers of a tile's
// 16 rows ("stages") is filled by the producer and drained by the math warps. The
// tile's scale rows come as one more copy into one of two scale buffers. Each math
// warp takes the same units of every chunk, so it stages its x once per launch.
constexpr int kBulkConsumerWarps = 8;
constexpr int kBulkThreads = (kBulkConsumerWarps + 1) * 32;
constexpr int kBulkTileRows = 16;
constexpr int kBulkMaxSlots = 4;
constexpr int kBulkMaxScaleBuffers = 3;
// The deep ring's (bulkLayout with deepRing): more slots of bulkChunkUnits and a scale
// buffer more.
constexpr int kBulkDeepMaxSlots = 6;
constexpr int kBulkDeepScaleBuffers = 4;
// The barriers (full and empty per ring slot and per scale buffer) fill the first 128 bytes,
// or 256 in the deep ring's layout (BulkLayout::offScales).
static_assert(8 * 2 * (kBulkMaxSlots + kBulkMaxScaleBuffers) <= 128, "the barriers' bytes");
static_assert(8 * 2 * (kBulkDeepMaxSlots + kBulkDeepScaleBuffers) <= 256, "the barriers' bytes");
constexpr int kBulkBlocksPerSm = 2;
constexpr int kBulkSharedLimit = 113 * 1024; // two blocks in an sm_90 SM's 227 KB
// Launch grid: two blocks on each of an H100/H200's 132 SMs (the kernel strides over
// tiles, so any grid is correct).
constexpr int kBulkGridBlocks = 132 * kBulkBlocksPerSm;
// Bytes of one staged unit of x (gemv_quant_mma.cuh's OneTokenUnitStage: 4 runs of 5 x
// 16 bytes and 8 f32 corrections) and of a warp's zero fragments.
constexpr int kBulkUnitStageBytes = 4 * 5 * 16 + 8 * 4;
constexpr int kBulkZeroBytes = 4 * 16;

NINFER_HD constexpr int bulkUnitBytes(int bits) { return 16 * bits; }
NINFER_HD constexpr int bulkChunkUnits(int bits) { return bits <= 4 ? 16 : 8; }
// Tiles of an n-output launch: 16 rows, or a SwiGLU's 8 gate and 8 up rows.
NINFER_HD constexpr int bulkTiles(int n, bool swiGlu) {
  return swiGlu ? n / 8 : n / kBulkTileRows;
}
NINFER_HD constexpr int bulkRowScaleBytes(int group, int k) {
  return group == 16 ? k / 128 * 8 : k / group * 2; // QuantFormats.h's quantRowScaleBytes
}

struct BulkLayout {
  int chunkUnits = 0, chunks = 0;     // units per chunk, chunks per tile
  int unitsPerWarp = 0;               // of each chunk, per math warp
  int slotRowBytes = 0, slotBytes = 0, slots = 0;
  int scaleBytes = 0;                 // one tile's scale rows
  int scaleBuffers = 0;               // of a tile's scale rows each (2 to 4)
  int xWarpBytes = 0;                 // a math warp's zero fragments and staged units
  // The barrier block: room for the barriers of this many slots and scale buffers.
  int barrierSlots = kBulkMaxSlots, barrierScaleBuffers = kBulkMaxScaleBuffers;
  int offSlots = 0, offScales = 0, offX = 0, offPartial = 0; // offScales: the barriers' bytes
  int sharedBytes = 0;
  bool fits = false;
};

// Wide launches (at least kBulkWideTiles tiles: four or more per block) of formats of 4
// bits or fewer take chunks of twice bulkChunkUnits where K has whole chunks of that size and
// two slots of them fit: half the stages' barrier waits and copies per byte, and each math
// warp works on four units of a stage at once. Two 33 KB slots hold as many bytes in flight
// as four of 16 KB. Measured on the H200, 8B q4_g64 decode (the gate/up pair and the lm_head
// take it): 602.4 / 604.1 / 603.5 -> 611.4 / 612.1 / 615.6 tok/s in alternating rounds, the
// traced lm_head 77.8 -> 70.4 us and gate/up 20.9 -> 20.6 us after its wait. q/k/v (1.5
// tiles per block) and o (1) lost with it (6.8 -> 7.8 us and 3.4 -> 3.5 us after the wait).
constexpr int kBulkWideTiles = 4 * kBulkGridBlocks;
// Cards whose memory streams this many bytes per second or more (spec sheet) take the deep
// ring in wide launches (bulkLayout's deepRing): the H200 (4.8e12), not the H100 (3.35e12).
constexpr double kDeepRingBandwidth = 4.0e12;

// The shared-memory layout of the one-token bulk GEMV of an n x k weight (n outputs,
// or a SwiGLU's n outputs from its gate and up rows) in chunks of chunkUnits units, and
// whether the kernel takes the shape: whole tiles, and at least two ring slots within
// kBulkSharedLimit. deep: up to kBulkDeepMaxSlots slots (else kBulkMaxSlots).
NINFER_HD constexpr BulkLayout bulkLayoutOf(int bits, int group, int k, int n, bool swiGlu,
                                            int chunkUnits, int scaleBuffers = 2,
                                            bool deep = false) {
  BulkLayout l;
  l.scaleBuffers = scaleBuffers;
  if (deep) {
    l.barrierSlots = kBulkDeepMaxSlots;
    l.barrierScaleBuffers = kBulkDeepScaleBuffers;
  }
  const int units = k / 128;
  l.chunkUnits = chunkUnits;
  l.chunks = (units + l.chunkUnits - 1) / l.chunkUnits;
  l.unitsPerWarp = l.chunkUnits / kBulkConsumerWarps;
  // Row stride: a quad of lanes reads a span of 4 runs of a row, and rows g and g + 1
  // of an 8-lane phase land in different banks.
  const int span = 4 * (bits == 8 ? 32 : bits == 2 || bits == 3 ? 8 : 16);
  l.slotRowBytes = l.chunkUnits * bulkUnitBytes(bits) + (span % 128 == 0 ? 16 : span);
  l.slotBytes = kBulkTileRows * l.slotRowBytes;
  l.scaleBytes = kBulkTileRows * bulkRowScaleBytes(group, k);
  l.xWarpBytes = kBulkZeroBytes + l.chunks * l.unitsPerWarp * kBulkUnitStageBytes;
  l.offScales = (8 * 2 * (l.barrierSlots + l.barrierScaleBuffers) + 127) / 128 * 128;
  l.offX = l.offScales + l.scaleBuffers * l.scaleBytes;
  l.offPartial = l.offX + kBulkConsumerWarps * l.xWarpBytes;
  l.offSlots = (l.offPartial + 2 * kBulkConsumerWarps * kBulkTileRows * 4 + 127) / 128 * 128;
  const int room = (kBulkSharedLimit - l.offSlots) / l.slotBytes;
  l.slots = room < l.barrierSlots ? room : l.barrierSlots;
  l.sharedBytes = l.offSlots + l.slots * l.slotBytes;
  l.fits = units >= 1 && k % 128 == 0 && n % (swiGlu ? 8 : kBulkTileRows) == 0 && l.slots >= 2 &&
           scaleBuffers <= l.barrierScaleBuffers;
  return l;
}

// The layout the kernel runs: bulkLayoutOf with bulkChunkUnits, or twice that for wide
// launches (kBulkWideTiles), which also take a third scale buffer where it costs no ring
// slot. A tile's scale rows stay in their buffer until the math warps have done the tile,
// and the producer copies a tile's scales before its codes: with two buffers it could start
// tile n only after tile n - 2's math, so launches of many tiles per block streamed two
// tiles ahead however deep the ring (a third 33 KB slot for the 8B gate/up pair did not
// pay). Measured on the H200, 8B q4_g64 decode (the gate/up pair and the lm_head take it):
// 617.7 / 618.5 / 617.8 -> 621.5 / 621.4 / 622.3 tok/s in alternating rounds; with three
// buffers in every launch 620.0 / 620.1 / 619.9, gate/up 20.3 -> 19.1 us after its wait
// (traced) but down 10.7 -> 11.2 (one tile per block: nothing to gain, 7 KB of room lost).
//
// deepRing (plans whose every target card streams at least kDeepRingBandwidth): the wide
// launches take bulkChunkUnits chunks in up to kBulkDeepMaxSlots slots and
// kBulkDeepScaleBuffers scale buffers instead, where that holds at least a quarter more
// bytes in flight per block than the double chunks: the 8B q4_g64 gate/up pair and lm_head
// in five slots of 16 units (85 KB, against two slots of 32 units: 66 KB). The H200 needs
// the bytes: 8B q4_g64 decode 631.4 / 632.1 / 631.3 -> 638.5 / 641.2 / 641.0 tok/s in
// alternating rounds; on an H100 the same plans lost (532.8 / 535.0 / 535.4 -> 530.8 /
// 530.3 / 531.5): four units per math warp and stage pay more there than the depth, as
// they did on the H200 at equal bytes in flight (thirty-fifth session).
NINFER_HD constexpr BulkLayout bulkLayout(int bits, int group, int k, int n, bool swiGlu,
                                          bool deepRing = false) {
  const int chunk = bulkChunkUnits(bits);
  if (bits <= 4 && bulkTiles(n, swiGlu) >= kBulkWideTiles && (k / 128) % (2 * chunk) == 0) {
    const BulkLayout wide = bulkLayoutOf(bits, group, k, n, swiGlu, 2 * chunk);
    const BulkLayout deep =
        bulkLayoutOf(bits, group, k, n, swiGlu, chunk, kBulkDeepScaleBuffers, true);
    if (deepRing && deep.fits &&
        (!wide.fits || 4 * deep.slots * deep.slotBytes >= 5 * wide.slots * wide.slotBytes))
      return deep;
    if (wide.fits) {
      const BulkLayout deeper = bulkLayoutOf(bits, group, k, n, swiGlu, 2 * chunk, 3);
      return deeper.slots == wide.slots ? deeper : wide;
    }
  }
  return bulkLayoutOf(bits, group, k, n, swiGlu, chunk);
}

// ---- one-token steps of TQ1 weights on bulk copies (gemv_tq1_bulk.cuh, sm_90+) ----
// The one-token bulk GEMV's ring, producer and block shape for base-3 ternary rows
// (ninfer/Tq1Format.h: chunks of 16 bytes, 80 values): a tile is 16 rows (SwiGLU: 8 gate and
// 8 up rows), a stage is a run of the tile's chunks (at most kTq1StageRowBytes of each row;
// whole quads of 4 chunks but in the last stage), math warp w takes quads w, w + 8, ... of
// every stage and stages its x for them once (kTq1ChunkXBytes per chunk: the f16 B fragments
// of the chunk's 20 mma steps).
constexpr int kTq1StageRowBytes = 1024;
constexpr int kTq1ChunkXBytes = 20 * 8;
struct Tq1BulkLayout {
  int stageChunks = 0, stages = 0; // chunks per stage, stages per tile
  int quadsPerWarp = 0;            // of a stage, per math warp (at most)
  int slotRowBytes = 0, slotBytes = 0, slots = 0;
  int xWarpBytes = 0;              // a math warp's staged x
  int offX = 0, offPartial = 0, offSlots = 0; // from the 128 bytes of barriers
  int sharedBytes = 0;
  bool fits = false;
};
NINFER_HD constexpr Tq1BulkLayout tq1BulkLayout(int k, int n, bool swiGlu) {
  Tq1BulkLayout l;
  const int chunks = (k + 79) / 80;
  const int stages = (chunks * 16 + kTq1StageRowBytes - 1) / kTq1StageRowBytes;
  l.stageChunks = (chunks + stages - 1) / stages;
  if (stages > 1)
    l.stageChunks = (l.stageChunks + 3) / 4 * 4;
  l.stages = (chunks + l.stageChunks - 1) / l.stageChunks;
  l.quadsPerWarp = ((l.stageChunks + 3) / 4 + kBulkConsumerWarps - 1) / kBulkConsumerWarps;
  // Rows 64 bytes apart modulo 128: the 8 lanes of a shared-memory phase read 64 bytes of
  // row g and 64 of row g + 1 in different banks.
  const int rowBytes = l.stageChunks * 16;
  l.slotRowBytes = rowBytes + (64 - rowBytes % 128 + 128) % 128;
  l.slotBytes = kBulkTileRows * l.slotRowBytes;
  l.xWarpBytes = l.stages * l.quadsPerWarp * 4 * kTq1ChunkXBytes;
  l.offX = 128;
  l.offPartial = l.offX + kBulkConsumerWarps * l.xWarpBytes;
  l.offSlots = (l.offPartial + 2 * kBulkConsumerWarps * kBulkTileRows * 4 + 127) / 128 * 128;
  const int room = (kBulkSharedLimit - l.offSlots) / l.slotBytes;
  l.slots = room < kBulkMaxSlots ? room : kBulkMaxSlots;
  l.sharedBytes = l.offSlots + l.slots * l.slotBytes;
  l.fits = k > 0 && k % 16 == 0 && n % (swiGlu ? 8 : kBulkTileRows) == 0 && l.slots >= 2;
  return l;
}

// Blocks per SM of a TQ1 one-token launch (not a SwiGLU pair's, which keeps two): three where
// their shared memory fits (about 64 registers a thread, so three blocks' registers do), else
// two. Measured on the H200, 8B TQ1 without fused norms (q/k/v and o take three, down two):
// 459.0 / 461.6 / 461.9 -> 464.5 / 463.6 / 464.6 tok/s.
NINFER_HD constexpr int tq1BulkBlocksPerSm(const Tq1BulkLayout &l) {
  return 3 * (l.sharedBytes + 1024) <= 228 * 1024 ? 3 : kBulkBlocksPerSm;
}

// ---- steps of 2..8 token rows on TMA copies (gemv_quant_rows.cuh, sm_90+) ----
// A block takes one part of K (rowsPartUnits: all of K, or kRowsPartUnits units, 2,048
// values, the last part maybe shorter), and the tiles of its block group: each block
// stages its part of x for all rows once (f16, in the mma's B-fragment order:
// kRowsUnitXBytes per unit), a producer warp brings each tile's part (one TMA box of 16
// code rows, and the tile's scale rows) into a ring of stages, math warp w multiplies
// units w, w + 8, ... of the part in every tile, a combiner warp sums the warps'
// fragments and, where K has several parts, the
// parts' partial sums in global memory (the last block of a tile adds them up in order).
// Parts of 16 units: with parts of 8 or 4 the 8B q4 gate/up took 33.1 / 75.2 us against
// 28.3 (H200, 8-row steps): more tiles per block, and per tile the same overheads.
constexpr int kRowsPartUnits = 16;
constexpr int kRowsTokens = 8;
constexpr int kRowsUnitXBytes = kRowsTokens * 4 * 64; // 8 tokens x 4 runs x 16 f16 pairs
constexpr int kRowsThreads = (kBulkConsumerWarps + 2) * 32; // math, producer, combiner
constexpr int kRowsTileFloats = kBulkTileRows * kRowsTokens; // a tile's partial sums
constexpr int kRowsMaxSlots = 6;
// Buffers of the math warps' fragments (a tile each), and the most tiles the combiner
// takes at once (their parts' sums, tickets and loads in flight together). With 2 buffers
// the ring gets 4 slots at K = 4,096 and 3 at 14,336 (now 3 and 2): the 8B q4 8-row step
// took 2.737 / 2.736 ms against 2.651 (H200).
constexpr int kRowsBuffers = 4;
constexpr int kRowsCombineBatch = 8;
// The barriers: full / empty per ring slot, tileDone / partialFree per buffer.
constexpr int kRowsBarrierBytes = 8 * (2 * kRowsMaxSlots + 2 * kRowsBuffers);
// K of at most kRowsWholeUnits units whose code rows fit one TMA box (2,048 bytes: 256
// elements of 8 bytes) is one part, so no sums pass between blocks: its x of 8 rows takes
// up to 64 KB, and the block has an SM to itself for the room. Longer K is cut in parts
// of kRowsPartUnits, two blocks per SM. Measured (H200, 8B q4 batch plan, 8-row steps):
// K 4,096 in one part took gate/up 29.84 -> 28.04 us and the lm_head 85.7 -> 78.2, the
// batch-8 step 2.636 -> 2.564 ms; the down projection's K in 4 parts of 32 units at a
// block per SM (7 of 16 at two) took 19.7 -> 22.2 us.
constexpr int kRowsWholeUnits = 32;
constexpr int kRowsBoxLimit = 2048;
constexpr int kRowsWholeSharedLimit = 227 * 1024; // an sm_90 block's most
NINFER_HD constexpr int rowsPartUnits(int bits, int k) {
  return k / 128 <= kRowsPartUnits ||
                 (k / 128 <= kRowsWholeUnits && k / 128 * bulkUnitBytes(bits) <= kRowsBoxLimit)
             ? k / 128
             : kRowsPartUnits;
}
NINFER_HD constexpr int rowsBlocksPerSm(int bits, int k) {
  return rowsPartUnits(bits, k) > kRowsPartUnits ? 1 : kBulkBlocksPerSm;
}
NINFER_HD constexpr int rowsGridBlocks(int bits, int k) {
  return kBulkGridBlocks / kBulkBlocksPerSm * rowsBlocksPerSm(bits, k);
}
NINFER_HD constexpr int rowsParts(int bits, int k) {
  return (k / 128 + rowsPartUnits(bits, k) - 1) / rowsPartUnits(bits, k);
}
// Whether a launch of `tiles` 16-row tiles with K = k takes the kernel: its block groups
// get kRowsMinTilesPerGroup tiles each at least. Its fixed costs (x staged per block,
// the parts' sums through global memory) pay off only over several tiles. Measured on
// the H200 (8B q4, 8-row steps, plain launches, against gemv_quant_mma.cuh): gate/up,
// 13.6 tiles per group, 28.6 against 45.4 us; down 6.9 tiles, 20.5 against 24.5; q/k/v
// 2.9 tiles, 21.6 against 13.1; o 1.9 tiles, 14.5 against 11.2. In the graph, where the
// producer's copies start before the dependency wait, the same: with q/k/v and o on this
// kernel too (a minimum of 1) the 8B q4 8-row step took 2.983 / 2.975 ms against 2.651;
// with K whole per block (one part, one block per SM) 2.963 against 2.554, and with q/k/v
// alone on it (a minimum of 2) 2.911. Not for want of cheaper x: with no x staged anywhere (a
// timing variant), q/k/v and o on this kernel still took 2.550 against 2.484 on the other.
constexpr int kRowsMinTilesPerGroup = 6;
NINFER_HD constexpr bool rowsPays(int bits, int k, int tiles) {
  const int groups = rowsGridBlocks(bits, k) / rowsParts(bits, k);
  return tiles >= kRowsMinTilesPerGroup * (groups < tiles ? groups : tiles);
}

struct RowsLayout {
  int partUnits = 0;    // units of a whole part
  int boxBytes = 0;     // a code row's part: the TMA box's width
  int scaleBytes = 0;   // the tile's scale rows (all of K)
  int slotBytes = 0, slots = 0; // a stage: the box (16 rows), then the scale rows
  int offX = 0, offPartial = 0, offSlots = 0;
  int sharedBytes = 0;
  bool fits = false;
};

// The shared-memory layout of the multi-row kernel of an n x k weight, and whether it
// takes the shape: whole tiles, two ring slots at least within the SM's share
// (kBulkSharedLimit at two blocks per SM, kRowsWholeSharedLimit at one; grids of
// rowsGridBlocks).
NINFER_HD constexpr RowsLayout bulkRowsLayout(int bits, int group, int k, int n) {
  RowsLayout l;
  const int units = k / 128;
  l.partUnits = rowsPartUnits(bits, k);
  l.boxBytes = l.partUnits * bulkUnitBytes(bits);
  l.scaleBytes = kBulkTileRows * bulkRowScaleBytes(group, k);
  l.slotBytes = (kBulkTileRows * l.boxBytes + l.scaleBytes + 127) / 128 * 128;
  l.offX = (kRowsBarrierBytes + 127) / 128 * 128;
  l.offPartial = l.offX + l.partUnits * kRowsUnitXBytes;
  l.offSlots = (l.offPartial + kRowsBuffers * kBulkConsumerWarps * 32 * 16 + 127) / 128 * 128;
  const int limit = rowsBlocksPerSm(bits, k) == 1 ? kRowsWholeSharedLimit : kBulkSharedLimit;
  const int room = (limit - l.offSlots) / l.slotBytes;
  l.slots = room < kRowsMaxSlots ? room : kRowsMaxSlots;
  l.sharedBytes = l.offSlots + l.slots * l.slotBytes;
  l.fits = units >= 1 && k % 128 == 0 && n % kBulkTileRows == 0 && l.boxBytes <= kRowsBoxLimit &&
           l.slots >= 2;
  return l;
}

} // namespace gemv

// ---- tensor-core prefill GEMM (gemm_mma.cuh) ----
namespace gemm {

constexpr int kTileM = 128; // tokens per tile
constexpr int kTileN = 128; // outputs per tile
constexpr int kTileK = 64;  // K per step
constexpr int kLd = kTileK + 8; // 16-bit values per shared row (bank padding)
constexpr int kStageHalves = (kTileM + kTileN) * kLd;
constexpr int kSharedBytes = 2 * kStageHalves * 2; // two stages of 16-bit values
// gemm_wgmma.cuh (sm_90a): tiles of kTileM * mt tokens (mt = 1 or 2); wgmmaStages(mt)
// stages of a swizzled x tile and weight tile (kTileK 16-bit values per row), 1 KB to align
// them to 1024 bytes, and the stages' barriers (8 bytes each).
NINFER_HD constexpr int wgmmaStages(int mt) { return mt == 1 ? 6 : 4; }
NINFER_HD constexpr int wgmmaSharedBytes(int mt) {
  return wgmmaStages(mt) * (kTileM * mt + kTileN) * kTileK * 2 + 1024 + 8 * wgmmaStages(mt);
}
constexpr int kWgmmaSharedBytes = wgmmaSharedBytes(1);
// SMs of the sm_90a cards ninferc knows (h100, h200): the emitter takes 256-token tiles where
// 128-token ones need more than one wave of blocks and 256-token ones fit in one.
constexpr int kSm90aSms = 132;

// Blocks that give every tile of an n-output layer at `rows` tokens its own block.
NINFER_HD constexpr int tiles(int n, int rows, int mt = 1) {
  return ((n + kTileN - 1) / kTileN) * ((rows + kTileM * mt - 1) / (kTileM * mt));
}

} // namespace gemm
} // namespace ninfer
