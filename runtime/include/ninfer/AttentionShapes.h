// How the attention kernels split their work, shared by the kernels
// (codegen/kernels/attention.cuh) and the kernel emitter, which sizes each
// launch's grid and shared memory with the same functions.
// Compiles as host C++ and as NVRTC device code: no standard header.
#pragma once

#include "HostDevice.h"

namespace ninfer {
namespace attn {

constexpr int kDecodeThreads = 128;   // decode block (4 warps)
constexpr int kDecodeMinKeys = 32;    // keys per decode split at least (CUDA cores)
constexpr int kDecodeMmaMinKeys = 64; // the same on tensor cores: 4 warps x one tile
constexpr int kDecodeTileKeys = 16;   // keys per tile of the tensor-core decode kernel
constexpr int kMaxDecodeSplits = 64;
// The tensor-core decode kernel's splits: whole rounds of kDecodeMmaMinKeys keys (a tile per
// warp), about sqrt(len / (kDecodeMmaMinKeys * kDecodeSplitBalance)) rounds each (to the
// nearest), and at most kDecodeMmaMaxSplits splits. A block's time grows with its rounds, the
// combine's (the last block of a kv head reads every split's partials) with the splits.
// Measured on the H200, 8B q4 decode tok/s: at 512 keys 8 splits beat 4, 2 and 1 (535.8
// against 531.5, 521.8, 512.0); at 8K 32 beat 64 and 16 (466.5 against 428.3, 461.2); at 32K
// 32 beat 64 (331.2 against 311.5). The CUDA-core kernel (int8 caches) loses with fewer
// splits (8K: 354.8 -> 297.5) and keeps one round of kDecodeMinKeys keys. Batch steps have a
// rule of their own (below).
constexpr int kDecodeSplitBalance = 8;
constexpr int kDecodeMmaMaxSplits = 32;
// Batch steps on the tensor-core kernel: splits of at least kBatchDecodeMinKeys keys, about
// kBatchDecodeBlocks blocks over the step's rows and kv heads (two per H200 SM; the blocks'
// shared memory lets three in), and at most kBatchDecodeSplits splits (the launch's grid z;
// the split is the grid's slowest axis, so the blocks of empty splits come last). Measured on
// the H200, 8B q4 --batch 8 plan, batch-8 step at 512 / 3,968 keys: one round of 64 keys per
// split and 64 splits' grid 3.015 / 5.102 ms; at most 4 splits of 128 keys or more 2.638 /
// 3.536; at most 8 of 256 or more 2.659 / 3.634 (batch 2: 2.352 / 2.574 against 2.338 / 2.665
// with at most 4). The blocks are a chain of round trips (the cache rows, the partials, the
// combine), so a block does best with many keys behind one chain.
constexpr int kBatchDecodeMinKeys = 128;
constexpr int kBatchDecodeBlocks = 256;
constexpr int kBatchDecodeSplits = 8;
// Which rule a decode launch splits its keys by (decodeSlice in attention.cuh).
enum DecodeSplitRule {
  kSplitRounds = 0,   // one round of the kernel's minimum keys per split, up to SPLITS
  kSplitBalanced = 1, // single-sequence tensor-core steps: kDecodeSplitBalance above
  kSplitBatch = 2,    // batch steps on the tensor-core kernel: kBatchDecode* above
};
constexpr int kPrefillThreads = 256;
constexpr int kPrefillKeys = 32; // keys per prefill tile
// Tensor-core prefill (attentionPrefillMma): 4 warps of 16 queries, tiles of 64 keys.
constexpr int kPrefillMmaThreads = 128;
constexpr int kPrefillMmaQueries = 64;
constexpr int kPrefillMmaKeys = 64;

// Query heads per decode block and blocks per kv head, for GQA group size `group`.
NINFER_HD constexpr int decodeHeadsPerBlock(int group) { return group < 8 ? group : 8; }
NINFER_HD constexpr int decodeHeadChunks(int group) {
  return (group + decodeHeadsPerBlock(group) - 1) / decodeHeadsPerBlock(group);
}

// Halves per shared K/V row of the tensor-core decode kernel (8 of padding: ldmatrix's 8
// rows fall in distinct banks), and its dynamic shared memory: per warp two stages of a K
// and a V tile, reused for the warps' merge (max, sum, scratch and HD outputs per head).
NINFER_HD constexpr int decodeMmaRowHalves(int headDim) { return headDim + 8; }
NINFER_HD constexpr int decodeMmaSharedBytes(int headDim, int group) {
  constexpr int kWarps = kDecodeThreads / 32;
  const int rings = kWarps * 4 * kDecodeTileKeys * decodeMmaRowHalves(headDim) * 2;
  const int merge = kWarps * decodeHeadsPerBlock(group) * (3 + headDim) * 4;
  return rings > merge ? rings : merge;
}

// Halves per shared K/V row of the tensor-core prefill kernel (padded like the decode
// kernel's) and its dynamic shared memory: two stages of a K and a V tile.
NINFER_HD constexpr int prefillMmaRowHalves(int headDim) { return headDim + 8; }
NINFER_HD constexpr int prefillMmaSharedBytes(int headDim) {
  return 2 * 2 * kPrefillMmaKeys * prefillMmaRowHalves(headDim) * 2;
}

} // namespace attn
} // namespace ninfer
