// Decode GEMV for base-3 ternary weights (DType TQ1, layout in ninfer/Tq1Format.h)
// on tensor cores, sm_80+: y[t, o] = s * sum_k t[o, k] * x[t, k] for up to 8 token
// rows t, t[o, k] in {-1, 0, +1}, s the tensor's f32 scale.
//
// Same skeleton as gemv_quant_mma.cuh (read it first): mma.sync m16n8k16 with f16
// inputs and f32 accumulation, a warp per tile of 16 output rows over a slice of
// K, lane (g = lane / 4, c = lane % 4) owning rows g and g + 8, the tokens as the
// mma's n dimension (token g's x in lane (g, c)'s B fragment, zero for g >= rows).
// The A fragment is the exact level t in {-1, 0, +1} as f16: x is multiplied by
// +-1 or 0 on the tensor cores, there is no per-weight scale multiply, and s
// multiplies each output once at the end (in f32).
//
// k permutation. Inside one mma step only the lanes of the same c must agree on
// which k their k-slots (2c, 2c+1, 2c+8, 2c+9) stand for, so lane c takes them
// from its own 16-byte chunk: the quad of lanes reads 64 contiguous bytes of a
// row (chunk q + c, q = 4 split, 4 split + 4 kSplit, ...: the quads of a row are
// dealt to the warps of the tile in turn; one 16-byte load each, past L1, the
// warp's next three quads in flight while this one is used), and mma
// step (w, i) of a chunk (word w = 0..3, digit i = 0..4; 20 steps per chunk)
// takes from word w of the lane's chunk at digit i bytes 0 and 2 (values
// 80 ch + 16 i + 4 w + 0, + 2)
// as the f16 pair of slots (2c, 2c+1), bytes 1 and 3 (+1, +3) as (2c+8, 2c+9),
// in both rows. The B fragment applies the same map: token g's float4 at
// 80 ch + 16 i + 4 w gives (x.x, x.z) and (x.y, x.w).
//
// Decode: bytes 0, 2 (1, 3) of a word sit in the 16-bit halves of one register
// (tq1::evenLanes / oddLanes). Per digit: p = 3 q; the two digits are bytes 1
// and 3 of p (each half < 768), so one PRMT with 0x64 bytes makes the f16 pair
// (1024 + d_lo, 1024 + d_hi), one HSUB2 of 1025 gives t = d - 1 exactly, and
// q = p & 0x00FF00FF feeds the next digit: 4 instructions per pair of weights.
//
// Padding (values past K in a row's last chunk) is whole digits (K is a multiple
// of 16): those steps get a zero B fragment and x past K is never read. A lane
// whose chunk lies past the row's end reloads the last chunk and also feeds
// zero B.
//
// Accuracy: t is exact; x is rounded to f16 (relative error 2^-11; values beyond
// 65504 overflow); products are exact in the f32 accumulator.
//
// Blocks: the row-tile loop of gemv_quant_mma.cuh (gemvMmaTiles): 8 warps,
// gemv::mmaRowTiles(N) = RT row tiles of 16 per block, the 8 / RT warps of a tile
// sharing the row's chunks; partial sums are combined through shared memory in
// a fixed order (deterministic). Grid: ceil(N / (16 RT)) blocks
// (KernelEmitter.cpp), grid-strided.
#pragma once

#include "Tq1Format.h"
#include "gemv_quant_mma.cuh"
#include "linear_ternary.cuh"

namespace ninfer {
namespace dev {

// The f16 pair (1024 + byte 1, 1024 + byte 3) of p.
__device__ __forceinline__ unsigned int tq1DigitPairToHalf2(unsigned int p) {
  unsigned int d;
  asm("prmt.b32 %0, %1, %2, 0x4341;" : "=r"(d) : "r"(p), "r"(0x64646464u));
  return d;
}

// The five mma steps of u32 word `word` of a lane's chunk in rows g (code word w0) and g + 8
// (w1): per digit the exact levels t = d - 1 of bytes 0, 2 (1, 3) as the A fragment, and B
// from bOf(digit) (b0, b1), into acc (even steps of the chunk) and acc2 (odd ones).
template <class B>
__device__ __forceinline__ void tq1WordMma(unsigned int w0, unsigned int w1, int word,
                                           const B &bOf, float (&acc)[4], float (&acc2)[4]) {
  constexpr unsigned int kOne = 0x64016401u; // 1025 in both halves: 1024 + d - kOne = t
  unsigned int e0 = tq1::evenLanes(w0), o0 = tq1::oddLanes(w0);
  unsigned int e1 = tq1::evenLanes(w1), o1 = tq1::oddLanes(w1);
#pragma unroll
  for (int digit = 0; digit < tq1::kDigits; ++digit) {
    e0 *= 3u; // halves stay below 768
    o0 *= 3u;
    e1 *= 3u;
    o1 *= 3u;
    const unsigned int a[4] = {
        hsub2(tq1DigitPairToHalf2(e0), kOne), hsub2(tq1DigitPairToHalf2(e1), kOne),
        hsub2(tq1DigitPairToHalf2(o0), kOne), hsub2(tq1DigitPairToHalf2(o1), kOne)};
    const uint2 b = bOf(digit);
    mma16816<kF16>((tq1::kDigits * word + digit) % 2 ? acc2 : acc, a, b.x, b.y);
    e0 &= tq1::kLaneMask;
    o0 &= tq1::kLaneMask;
    e1 &= tq1::kLaneMask;
    o1 &= tq1::kLaneMask;
  }
}

// SWIGLU: w is a SwiGLU's gate and wUp its up matrix (upScale its scale), and y gets
// silu(x gate^T) * (x up^T) (gemvMmaTiles' SWIGLU tiles: gate row o in D rows g, up row o
// in rows g + 8, each warp's sums scaled by their matrix's scale); no bias or residual.
template <int BDT, bool HAS_BIAS, int K, int N, bool SWIGLU = false>
__device__ __forceinline__ void gemvTq1Mma(const float *x, int rows, const unsigned int *w,
                                           float scale, const void *bias, const float *residual,
                                           float *y, BlockSlice blocks,
                                           const unsigned int *wUp = nullptr,
                                           float upScale = 0.0f) {
  constexpr int kChunks = static_cast<int>(tq1::chunks(K));
  constexpr int kRowWords = kChunks * tq1::kWordsPerChunk;
  // Digits of the last chunk that hold values (the rest is padding).
  constexpr int kLastDigits = (K - (kChunks - 1) * tq1::kChunkValues) / 16;
  constexpr int kRowTiles = gemv::mmaRowTiles(SWIGLU ? 2 * N : N);
  constexpr int kSplit = kGemvMmaWarps / kRowTiles; // warps per row tile, splitting K
  static_assert(K % 16 == 0 && kLastDigits >= 1 && kLastDigits <= tq1::kDigits,
                "TQ1 rows are whole digits");

  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, c = lane % 4;
  const int split = threadIdx.x / kWarpSize % kSplit;
  // The warp's chunks: quads of 4, interleaved with the other warps of the tile
  // (quad q of the row goes to warp q % kSplit), so the tile's warps read
  // neighbouring bytes at the same time (+4% over contiguous slices at 8B shapes).
  const int chunkBegin = 4 * split;
  const int chunkEnd = kChunks;
  constexpr int kQuadStep = 4 * kSplit;
  constexpr int kQuads = gemv::tq1MmaQuads(K, SWIGLU ? 2 * N : N); // split 0's, the most
  constexpr int kAhead = kQuads < 3 ? kQuads : 3; // 3 blocks per SM where kQuads <= 2
  static_assert(kGemvMmaWarps == gemv::kBlockWarps && tq1::kChunkValues == 80 &&
                    kQuads == (kChunks + kQuadStep - 1) / kQuadStep,
                "GemvShapes.h's tq1MmaQuads");
  const bool hasToken = g < rows;
  const float *xRow = x + static_cast<long long>(hasToken ? g : 0) * K;

  gemvMmaTiles<BDT, HAS_BIAS, N, SWIGLU>(
      rows, SWIGLU ? 1.0f : scale, bias, residual, y, blocks,
      [&](long long r0, long long r1, float(&acc)[4], float(&acc2)[4]) {
        const unsigned int *w0 = w + r0 * kRowWords;
        const unsigned int *w1 = (SWIGLU ? wUp : w) + r1 * kRowWords;
        // The warp's quads (at most kQuads), their codes loaded kAhead quads ahead of their
        // math: a warp takes 2-6 quads of a tile (8B shapes), and with one quad in flight
        // the 8B TQ1 down GEMV took 17.0 us against 14.5 (H200; KernelEmitter.cpp has the
        // step's figures).
        TernaryCodes<4> code0[kQuads], code1[kQuads];
        auto load = [&](int i) {
          if (chunkBegin + i * kQuadStep < chunkEnd) {
            const int ch = min(chunkBegin + i * kQuadStep + c, chunkEnd - 1);
            code0[i] = ternaryLoadCodes<4>(w0, ch * tq1::kWordsPerChunk);
            code1[i] = ternaryLoadCodes<4>(w1, ch * tq1::kWordsPerChunk);
          }
        };
#pragma unroll
        for (int i = 0; i < kAhead; ++i)
          load(i);
#pragma unroll
        for (int i = 0; i < kQuads; ++i) {
          if (i + kAhead < kQuads)
            load(i + kAhead);
          const int quad = chunkBegin + i * kQuadStep;
          if (quad >= chunkEnd)
            break;
          const int ch = quad + c;
          // Digits of this lane's chunk whose x it reads; the others get zero B.
          const int digits = !hasToken || ch >= chunkEnd                       ? 0
                             : K % tq1::kChunkValues != 0 && ch == kChunks - 1 ? kLastDigits
                                                                               : tq1::kDigits;
          const float *xc = xRow + static_cast<long long>(min(ch, kChunks - 1)) * tq1::kChunkValues;
#pragma unroll
          for (int word = 0; word < tq1::kWordsPerChunk; ++word)
            tq1WordMma(
                code0[i].w[word], code1[i].w[word], word,
                [&](int digit) {
                  if (digit >= digits)
                    return make_uint2(0u, 0u);
                  const float4 v = loadProduced(xc + 16 * digit + 4 * word);
                  return make_uint2(packPair<kF16>(v.x, v.z), packPair<kF16>(v.y, v.w));
                },
                acc, acc2);
        }
        if constexpr (SWIGLU) { // D elements 0, 1: the gate row; 2, 3: the up row
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc[e] *= e < 2 ? scale : upScale;
            acc2[e] *= e < 2 ? scale : upScale;
          }
        }
      });
}

} // namespace dev
} // namespace ninfer
