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
