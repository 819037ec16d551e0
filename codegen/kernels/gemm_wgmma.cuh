// Tensor-core GEMM for prefill on sm_90a (Hopper's warpgroup MMA): the product of
// gemm_mma.cuh (y[m, n] = sum_k x[m, k] W[n, k] (+ bias) (+ residual), y f32) with its tiles
// (128 tokens x 128 outputs, K in steps of 64) and weight stagers, for kernels compiled for
// sm_90a (ninferc's h100/h200 targets); gemm_mma.cuh's mma.sync path everywhere else.
//
// x comes as a 16-bit copy that roundRows (below) or x's producer writes before the GEMM
// launch, already in the swizzled tiles the GEMM's stages hold (common.cuh's x16Index), so
// one bulk copy per 128 x 64 tile brings it. Measured on the H200 at 512 tokens (8B shapes):
// the mma.sync GEMM ran at 156-225 TFLOPS; wgmma with x read as f32 fragments into registers
// at 173-247 (the scattered 8-byte loads of x bound it: without them 359-564); with the
// 16-bit copy in row order by cp.async at 268-420 (docs/performance-log.md, tenth session); with
// the tiles by bulk copy (standalone, zero data) 355-505 against 299-417 by cp.async; with the
// f16 weights by TMA too, 413-626 in the 8B fp16 plan (twelfth session).
//  * 8 warps = 2 warpgroups; warpgroup g owns tokens 64 MT g .. of the tile (MT = 1, or 2 for
//    256-token tiles: the emitter's choice where they fill the SMs in one wave) and all 128
//    outputs: MT wgmma.m64n128k16 per 16 k, accumulators in 64 MT f32 registers/thread.
//  * Both tiles of a k-step are 128 rows of 128 bytes in wgmma's 128-byte swizzle
//    (SwizzledTile), read through shared memory descriptors. x: bulk copies completing on
//    a barrier per stage. Weights: f16/bf16 by TMA on the same barrier (TmaTileStager
//    below); quantized: gemm_mma.cuh's QuantTileStager (loaded raw two steps ahead, decoded
//    into the stage one step ahead, while the wgmma of the step before runs).
//  * gemm::wgmmaStages(MT) stages, copies 2 steps fewer ahead; one barrier per k-step; one
//    wgmma group in flight while the next stages are written.
//  * The epilogue writes through an OUT policy: a linear's f32 y (+ bias, + residual), or,
//    for a GEMM over a SwiGLU MLP's gate and up rows, silu(gate) * up in 16 bits (SwiGluOut).
// Launch: block 256 threads, grid any (tiles strided like gemm_mma.cuh),
// gemm::wgmmaSharedBytes(MT) of dynamic shared memory.
#pragma once

#include "bulk_copy.cuh"
#include "gemm_mma.cuh"

// NINFER_SM90A: device code compiled for sm_90a, the architecture-specific target that has
// wgmma (plain sm_90 code does not).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_HAS_FEATURE__)
#if __CUDA_ARCH_HAS_FEATURE__(SM90_ALL)
#define NINFER_SM90A 1
#endif
#endif

namespace ninfer {
namespace dev {

#if NINFER_SM90A

constexpr int kWgmmaTileBytes = kMmaTN * kMmaTK * 2; // an x or weight tile: 128 rows of 128 bytes
static_assert(kMmaTM == kMmaTN, "x and weight tiles have the same shape");
static_assert(kMmaTK * 2 == 128, "a tile row is one 128-byte swizzle row");

// An x or weight tile in the layout of wgmma's 128-byte swizzle (base 1024-aligned): row r
// at 128 r, its 16-byte chunk c at chunk c ^ (r % 8).
struct SwizzledTile {
  unsigned char* base;
  __device__ __forceinline__ void* chunk(int r, int c) const {
    return base + r * 128 + ((c ^ (r & 7)) << 4);
  }
};

// wgmma's shared memory descriptor of a K-major, 128-byte-swizzled tile starting at `tile`:
// start address / 16, leading byte offset 16 (unused by this layout), stride byte offset
// 1024 (one 8-row swizzle atom to the next), layout type 1 (128-byte swizzle). The 16 k of
// step j start 32 j bytes further (+2 in the address field).
__device__ __forceinline__ unsigned long long swizzledDescriptor(const void* tile) {
  const unsigned int a = static_cast<unsigned int>(__cvta_generic_to_shared(tile));
  return static_cast<unsigned long long>((a & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N of this warpgroup's committed wgmma groups are still running.
template <int N> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Orders this thread's shared memory writes (st.shared, cp.async) before later reads by the
// async proxy (wgmma); a barrier after it publishes them to the other threads' wgmmas.
__device__ __forceinline__ void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving accumulator registers across wgmma issue / wait points.
__device__ __forceinline__ void pinAccumulators(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}

// d += A * B for one 64 x 128 x 16 step of this warpgroup, both operands in shared memory:
// A [64 m][16 k] through descA, B [128 n][16 k] through descB (T: "f16" or "bf16"; the
// operands after the descriptors: scale-d 1 (accumulate), A and B not negated, both K-major).
#define NINFER_WGMMA_64X128(T)                                                                     \
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." T "." T " "                          \
               "{%0, %1, %2, %3, %4, %5, %6, %7, "                                                 \
               "%8, %9, %10, %11, %12, %13, %14, %15, "                                            \
               "%16, %17, %18, %19, %20, %21, %22, %23, "                                          \
               "%24, %25, %26, %27, %28, %29, %30, %31, "                                          \
               "%32, %33, %34, %35, %36, %37, %38, %39, "                                          \
               "%40, %41, %42, %43, %44, %45, %46, %47, "                                          \
               "%48, %49, %50, %51, %52, %53, %54, %55, "                                          \
               "%56, %57, %58, %59, %60, %61, %62, %63}, "                                         \
               "%64, %65, 1, 1, 1, 0, 0;\n"                                                        \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),           \
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),         \
                 "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),     \
                 "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),     \
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),     \
                 "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),     \
                 "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),     \
                 "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),     \
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),     \
                 "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),     \
                 "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                \
               : "l"(descA), "l"(descB))

template <int DT>
__device__ __forceinline__ void wgmma64x128(float (&d)[64], unsigned long long descA,
                                            unsigned long long descB) {
  if constexpr (DT == kF16)
    NINFER_WGMMA_64X128("f16");
  else
    NINFER_WGMMA_64X128("bf16");
}
#undef NINFER_WGMMA_64X128

// Weight tiles of row-major f16/bf16 weights by TMA: a 2D tensor copy per tile through the
// weight's tensor map (KernelModule.tensor_maps: boxes of 64 values x 128 rows in the 128-byte
// swizzle; rows past the weight's come as zeros), issued by thread 0 on the stage's barrier.
// MATRICES 2: a SwiGLU's gate and up maps with boxes of 64 rows, the tile's two halves
// (GateUpRows' order). Standalone on the H200 (512 tokens, x by bulk copy too) the f16 GEMMs
// ran 1.7-2.0x faster than with cp.async (docs/performance-log.md, eleventh session); the 8B fp16
// prefill went 27,213 -> 36,494-36,957 tok/s (twelfth session).
template <int WDT, int MATRICES = 1> struct TmaTileStager {
  static_assert(MATRICES == 1 || MATRICES == 2, "one matrix, or gate and up");
  static constexpr int kMmaDType = WDT;
  static constexpr bool kCopiesAsync = true;
  static constexpr bool kBulk = true;
  static constexpr unsigned int kBytes = kWgmmaTileBytes;
  const void* maps[MATRICES];
  // Once per block, by the thread that issues the copies, before the first (tensorMapAcquire).
  __device__ __forceinline__ void acquireMaps() const {
    for (int i = 0; i < MATRICES; ++i)
      tensorMapAcquire(maps[i]);
  }
  __device__ __forceinline__ void fetchBulk(int n0, int k0, unsigned int dst,
                                            unsigned int bar) const {
    if constexpr (MATRICES == 1) {
      tensorCopy2d(dst, maps[0], k0, n0, bar);
    } else {
      tensorCopy2d(dst, maps[0], k0, n0 / 2, bar);
      tensorCopy2d(dst + kWgmmaTileBytes / 2, maps[1], k0, n0 / 2, bar);
    }
  }
};

// Where the tile loop's outputs go: a linear's y (+ bias) (+ residual) in f32 (`columns(n)`:
// what columns n, n + 1 add, once per column pair; `store`: outputs (m, n), (m, n + 1), n
// even) ...
template <int BDT, bool HAS_BIAS, int N> struct LinearOut {
  static constexpr bool kGateUp = false;
  const void* bias;
  const float* residual;
  float* y;
  __device__ __forceinline__ float2 columns(int n) const {
    return biasPair<BDT, HAS_BIAS, N>(bias, n);
  }
  __device__ __forceinline__ void store(float2 add, int rows, int m, int n, float v0,
                                        float v1) const {
    storePair<N>(y, residual, rows, m, n, v0 + add.x, v1 + add.y);
  }
};
// ... or, for a GEMM over gate and up rows (GateUpRows; N = 2 I, I a multiple of 64),
// silu(gate) * up rounded to the 16-bit type DT into rows of I: the down projection's x16,
// the same values its rounding of the SwiGLU op's f32 output would give. `store`: outputs
// (m, o), (m, o + 1), o even, from their gate (g0, g1) and up (u0, u1) values.
template <int DT, int N> struct SwiGluOut {
  static constexpr bool kGateUp = true;
  static_assert(N % 128 == 0, "whole tiles of 64 gate and 64 up rows");
  unsigned short* y16;
  __device__ __forceinline__ void store(int rows, int m, int o, float g0, float g1, float u0,
                                        float u1) const {
    if (m < rows)
      *reinterpret_cast<unsigned int*>(y16 + x16Index<N / 2>(m, o)) =
          packPair<DT>(siluTimesFast(g0, u0), siluTimesFast(g1, u1));
  }
};

// The tile loop (STAGER as in gemm_mma.cuh, OUT above). x16: the step's rows of x in the
// weights' 16-bit type, in x16Index's tiles (KernelEmitter.cpp's rounding launch or x's
// producer writes them).
template <class STAGER, class OUT, int K, int N, int MT = 1>
__device__ __forceinline__ void gemmWgmma(const unsigned short* x16, int rows, STAGER& stager,
                                          const OUT& out, BlockSlice blocks) {
  static_assert(K % kMmaTK == 0, "whole k-steps");
  static_assert(MT == 1 || MT == 2, "64 or 128 tokens per warpgroup");
  constexpr int DT = STAGER::kMmaDType;
  constexpr int S = gemm::wgmmaStages(MT);
  constexpr int kRowsM = kMmaTM * MT; // tokens per tile: MT slices of 64 per warpgroup
  // Copies run D steps ahead; a stage is refilled two steps after the wgmma that read it was
  // issued (one wgmma group stays in flight). Stagers whose fetch loads registers (quantized
  // weights) fetch two steps ahead and decode into the stage one step ahead.
  constexpr int D = S - 2;
  static_assert(D >= 2, "stage reuse (see the loop)");
  constexpr bool kAsyncW = STAGER::kCopiesAsync;
  constexpr bool kBulkW = STAGER::kBulk; // the weights come with x, on the stage's barrier
  extern __shared__ __align__(16) unsigned char wgmmaShared[];
  // Swizzled tiles need 1024-byte alignment (the launch asks for 1 KB more).
  unsigned char* const tiles = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(wgmmaShared) + 1023) & ~1023ull);
  // Stage s: the x tile (kRowsM rows), then the weight tile (128 rows).
  constexpr int kStageBytes = (MT + 1) * kWgmmaTileBytes;
  const auto xStage = [&](int ks) { return SwizzledTile{tiles + (ks % S) * kStageBytes}; };
  const auto wStage = [&](int ks) {
    return SwizzledTile{tiles + (ks % S) * kStageBytes + MT * kWgmmaTileBytes};
  };
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int group = warp / 4; // warpgroup: rows 64 MT group .. of the tile
  constexpr int tilesN = (N + kMmaTN - 1) / kMmaTN;
  constexpr int kSteps = K / kMmaTK;
  const int tilesM = (rows + kRowsM - 1) / kRowsM;
  // A barrier per stage for its x tiles, which one bulk copy per 128 rows brings (thread 0),
  // and for its weight tile where the stager's copies are TMA copies too; bit s of
  // `phases`: the parity of stage s's next phase.
  unsigned long long* const stageFull =
      reinterpret_cast<unsigned long long*>(tiles + S * kStageBytes);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s)
      barrierInit(sharedAddress(&stageFull[s]), 1);
    barrierInitFence();
    if constexpr (kBulkW)
      stager.acquireMaps();
  }
  __syncthreads();
  unsigned int phases = 0;

  for (int tile = blocks.index; tile < tilesN * tilesM; tile += blocks.count) {
    const int m0 = (tile % tilesM) * kRowsM;
    const int n0 = (tile / tilesM) * kMmaTN;
    float acc[MT][64];
#pragma unroll
    for (int s = 0; s < MT; ++s)
#pragma unroll
      for (int i = 0; i < 64; ++i)
        acc[s][i] = 0.0f;
    // (Written out, not as a loop over the slices: with the loop ptxas spilled the q4 GEMMs,
    // 255 registers and up to 10 KB of spill stores, even at MT = 1.)
    const auto pin = [&] {
      pinAccumulators(acc[0]);
      if constexpr (MT == 2)
        pinAccumulators(acc[1]);
    };

    // The copies of step ks: the x tiles that hold rows (a bulk copy of 16 KB each; rows past
    // `rows` in them give outputs that are not stored) and the weights where they are copies
    // (one cp.async group per step, empty past the last).
    const auto copy = [&](int ks) {
      if (ks < kSteps) {
        if (threadIdx.x == 0) {
          const int count = min(MT, (rows - m0 + kMmaTM - 1) / kMmaTM);
          const unsigned int bar = sharedAddress(&stageFull[ks % S]);
          barrierExpectBytes(bar, count * kWgmmaTileBytes + (kBulkW ? kWgmmaTileBytes : 0));
          for (int i = 0; i < count; ++i)
            bulkCopy(sharedAddress(xStage(ks).base + i * kWgmmaTileBytes),
                     x16 + x16Index<K>(m0 + i * kMmaTM, ks * kMmaTK), kWgmmaTileBytes, bar);
          if constexpr (kBulkW)
            stager.fetchBulk(n0, ks * kMmaTK, sharedAddress(wStage(ks).base), bar);
        }
        if constexpr (kAsyncW && !kBulkW)
          stager.fetch(n0, ks * kMmaTK, wStage(ks));
      }
      cpAsyncCommit();
    };
    // Prologue: steps 0 .. D - 1 on their way; decoded weights of step 0 in their stage, of
    // step 1 in registers. (Every thread passed the previous tile's final barrier, so no
    // wgmma reads a stage any more.)
    if constexpr (!kAsyncW) {
      stager.fetch(n0, 0, wStage(0));
      stager.store(wStage(0));
      if (kSteps > 1)
        stager.fetch(n0, kMmaTK, wStage(1));
    }
#pragma unroll
    for (int p = 0; p < D; ++p)
      copy(p);

    for (int ks = 0; ks < kSteps; ++ks) {
      // Step ks's tiles are complete (this thread's copies: the wait; everyone's: the barrier,
      // after each thread's proxy fence). The barrier also means every warpgroup's wgmma of
      // step ks - 2 is done (each waited down to one group in flight after issuing ks - 1).
      cpAsyncWait<D - 1>();
      barrierWait(sharedAddress(&stageFull[ks % S]), (phases >> (ks % S)) & 1u);
      phases ^= 1u << (ks % S);
      fenceProxyAsync();
      __syncthreads();
      wgmmaFence();
      pin();
      const unsigned long long descB = swizzledDescriptor(wStage(ks).base);
#pragma unroll
      for (int s = 0; s < MT; ++s) {
        const unsigned long long descA =
            swizzledDescriptor(xStage(ks).base + (group * MT + s) * 64 * kMmaTK * 2);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          wgmma64x128<DT>(acc[s], descA + 2 * j, descB + 2 * j);
      }
      wgmmaCommit();
      pin();
      // Stage ks + 1's last reader was step ks + 1 - S's wgmma; stage ks + D's was step
      // ks + D - S = ks - 2's.
      if constexpr (!kAsyncW) {
        if (ks + 1 < kSteps)
          stager.store(wStage(ks + 1));
        if (ks + 2 < kSteps)
          stager.fetch(n0, (ks + 2) * kMmaTK, wStage(ks + 2));
      }
      copy(ks + D);
      wgmmaWait<1>();
      pin();
    }
    wgmmaWait<0>();
    pin();
    __syncthreads(); // every wgmma read its stages: the next tile's prologue may refill them

    // Epilogue: acc[s][4 j + e] at row g + 8 (e / 2), column 8 j + 2 t + e % 2 of the warp's
    // 16 rows of slice s.
    const int m = m0 + group * 64 * MT + 16 * (warp % 4) + g;
    if constexpr (OUT::kGateUp) { // columns 8 j + 2 t (+1): gate at j < 8, its up at j + 8
#pragma unroll
      for (int j = 0; j < kMmaTN / 16; ++j)
#pragma unroll
        for (int s = 0; s < MT; ++s)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            out.store(rows, m + 64 * s + 8 * h, n0 / 2 + 8 * j + 2 * t, acc[s][4 * j + 2 * h],
                      acc[s][4 * j + 2 * h + 1], acc[s][4 * (j + 8) + 2 * h],
                      acc[s][4 * (j + 8) + 2 * h + 1]);
    } else {
#pragma unroll
      for (int j = 0; j < kMmaTN / 8; ++j) {
        const int n = n0 + 8 * j + 2 * t;
        const float2 add = out.columns(n);
#pragma unroll
        for (int s = 0; s < MT; ++s)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            out.store(add, rows, m + 64 * s + 8 * h, n, acc[s][4 * j + 2 * h],
                      acc[s][4 * j + 2 * h + 1]);
      }
    }
  }
}

#endif // sm_90a

// The step's rows of x rounded to the 16-bit type DT, in x16Index's tiles: the operand of the
// GEMM above, which reads it with bulk copies (the emitter launches this before the GEMM, on
// the same steps).
// Launch: block THREADS, grid (any, max_step_tokens); 8 values per thread and pass.
template <int DT, int K, int THREADS>
__device__ __forceinline__ void roundRows(const float* x, unsigned short* x16,
                                          const StepState* state) {
  static_assert(K % 8 == 0, "rows of whole 16-byte chunks");
  const int t = blockIdx.y;
  if (t >= state->nTokens)
    return;
  for (int i = 8 * (blockIdx.x * THREADS + threadIdx.x); i < K; i += 8 * gridDim.x * THREADS) {
    const long long at = static_cast<long long>(t) * K + i;
    const float4 a = loadProduced(x + at), b = loadProduced(x + at + 4);
    *reinterpret_cast<uint4*>(x16 + x16Index<K>(t, i)) =
        make_uint4(packPair<DT>(a.x, a.y), packPair<DT>(a.z, a.w), packPair<DT>(b.x, b.y),
                   packPair<DT>(b.z, b.w));
  }
}

} // namespace dev
} // namespace ninfer
