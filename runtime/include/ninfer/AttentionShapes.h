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
// splits (8K: 354.8 -> 297.5) and keeps one round of kDecodeMinKeys keys. So do batch steps:
// with the rule their kernel made batch-8 steps at 512-640 keys, whose splits it leaves as they
// were, 3.03 -> 3.09 ms (not understood; docs/performance.md, nineteenth session).
constexpr int kDecodeSplitBalance = 8;
constexpr int kDecodeMmaMaxSplits = 32;
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
