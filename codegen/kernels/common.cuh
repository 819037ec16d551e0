// Helpers shared by every device source: f16/bf16 <-> f32 conversions done
// with PTX cvt and bit tricks (so NVRTC needs no CUDA headers and no -I), typed
// element loads, 16-byte vector unpacking and warp/block reductions. The
// conversions round to nearest even, bit for bit like runtime/src/Half.h.
#pragma once

#include "StepAbi.h"
#if NINFER_TRACE
#include "trace.cuh"
#endif

namespace ninfer {
namespace dev {

// Programmatic dependent launch (sm_90+). Every generated kernel waits: when the
// executor launches it with programmatic serialization it may be scheduled while the
// previous kernel runs, and must not touch that kernel's results before it has
// finished and its writes are visible. Wrappers wait first thing; the GEMVs
// (LaunchShape::waitsItself) wait after their first weight loads, which read constants
// only, and read x after it with loadProduced. Every block waits before it finishes
// (in the bulk GEMV its math warps; the producer warp only copies weights), which keeps
// the order transitive: no kernel can finish before its predecessor has. A no-op on
// older architectures and when the kernel was launched without the attribute.
__device__ __forceinline__ void gridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#if NINFER_TRACE
  traceWaitDone();
#endif
}

// Loads of data that kernels of the step wrote (activations, the KV cache): coherent
// ld.global, volatile, so they stay after the gridDependencyWait before them. Never
// read-only loads (__ldg, ld.global.nc) for such data: under programmatic dependent launch
// the writer may still be running when the kernel starts, and ptxas moves read-only loads
// above griddepcontrol.wait (it did with the f16 GEMV's x, which then read x before the
// previous kernel had written it). Weights and other constants may use __ldg.
__device__ __forceinline__ uint4 loadProduced(const uint4 *p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ float4 loadProduced(const float *p) {
  const uint4 v = loadProduced(reinterpret_cast<const uint4 *>(p));
  return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                     __uint_as_float(v.w));
}
__device__ __forceinline__ uint2 loadProduced(const uint2 *p) {
  uint2 v;
  asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ float loadProducedScalar(const float *p) {
  float v;
  asm volatile("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

// Lets the runtime schedule the next kernel's blocks while this one runs (sm_90+,
// programmatic launches; a no-op otherwise), in one-token steps (oneToken). They still wait
// for this kernel to finish before they touch its results (gridDependencyWait), so it only
// moves their launch and the work they do before their wait (the bulk GEMV's weight
// copies) earlier. Every kernel calls it right after its own wait: at most one kernel
// waits ahead of the running one, and its blocks are placed only once every block of this
// one has started. Callers read oneToken from the StepState before their wait (the host
// writes it before the step's first kernel and no kernel writes it); read after the wait,
// the load's latency delayed the trigger and the 8B q4 decode lost the gain (505.6 against
// 519.6 tok/s on the H200). Longer steps do not trigger: it took the 23M plan's 512-token
// prefill from 403k to 312k tok/s. Nor do batch steps: triggering there too, the 8B q4
// batch plan's 8-row step took 3.046-3.054 against 3.029-3.030 ms. One launch does: the
// batch steps' RoPE and KV append, so that the tensor-core decode attention after it copies
// its first cache tiles while the RoPE runs (KernelEmitter.cpp LaunchShape::triggersInBatch).
__device__ __forceinline__ void gridDependencyTrigger(bool oneToken) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (oneToken)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A non-NaN float's bits as a key whose unsigned order is the floats' order (-0 taken as +0,
// as the host compares them equal), and back (the sampling kernels' selections).
__device__ __forceinline__ unsigned int orderedKey(float v) {
  const unsigned int b = v == 0.0f ? 0u : __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float orderedValue(unsigned int key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

// Whether this block is the last of `count` blocks to arrive at `ticket`, in every thread
// of the block: the blocks publish partial results, and the last one combines them. The
// block's writes before the call are visible to the last block's loads after it (bypassing
// L1: __ldcg): a __syncthreads, then one acquire-release add at gpu scope by thread 0, then
// a __syncthreads that passes the acquire on to the block's threads. (A __threadfence
// before and after the add, fence.sc both, took longer: the decode attention's combine.)
__device__ __forceinline__ bool lastBlockOf(unsigned int *ticket, unsigned int count) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned int before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(before)
                 : "l"(ticket)
                 : "memory");
    last = before == count - 1;
  }
  __syncthreads();
  return last;
}

// Which rows a linear kernel handles (template argument ROWS of linear,
// linearQuant, linearTernary, linearTq1). The emitter gives decode-sized and
// prefill-sized steps separate kernels (launches limited by token count), so a
// GEMV kernel carries neither the registers nor the shared memory of the GEMM.
constexpr int kRowsGemv = 1; // steps of at most kLinearGemvMaxRows tokens: GEMV
constexpr int kRowsGemm = 2; // steps of more tokens: GEMM
constexpr int kRowsLast = 3; // the last token's row only (lm_head): GEMV of one row
// Steps of more tokens on sm_90a: gemm_wgmma.cuh's GEMM; the x argument then points at the
// step's 16-bit copy of x (written by roundRows or by x's producer), not at f32 rows.
constexpr int kRowsGemmX16 = 4;
constexpr int kRowsGemmX16Tall = 5; // the same with 256-token tiles (gemm_wgmma.cuh's MT = 2)
constexpr int kLinearGemvMaxRows = 8;

// The blocks a GEMV runs on: the whole grid, or its share of a grouped launch
// (several linear ops that read the same input in one grid, KernelEmitter.cpp):
// block `index` of `count`.
struct BlockSlice {
  int index;
  int count;
};
__device__ __forceinline__ BlockSlice wholeGrid() {
  return {static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x)};
}

// Linear epilogue: y[i] = v, plus residual[i] when the residual add that
// followed the linear was fused into it (residual may alias y: element i is
// read before it is written, by the same thread).
__device__ __forceinline__ void storeLinearOut(float *y, const float *residual, long long i,
                                               float v) {
  y[i] = residual ? v + residual[i] : v;
}

// Values of plan.fbs DType (never renumbered).
constexpr int kF32 = 0;
constexpr int kF16 = 1;
constexpr int kBF16 = 2;

constexpr int kWarpSize = 32;

template <int DT> __host__ __device__ constexpr int elemBytes() { return DT == kF32 ? 4 : 2; }

__device__ __forceinline__ float f16ToF32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ unsigned short f32ToF16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

__device__ __forceinline__ float bf16ToF32(unsigned short b) {
  return __uint_as_float(static_cast<unsigned int>(b) << 16);
}

// Bit trick instead of cvt.rn.bf16.f32, which needs sm_80 (sm_75 is a target).
__device__ __forceinline__ unsigned short f32ToBf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // nan stays a quiet nan
    return static_cast<unsigned short>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

// Element i of an array of dtype DT, as f32.
template <int DT> __device__ __forceinline__ float loadAsFloat(const void *base, long long i) {
  if constexpr (DT == kF32) {
    return static_cast<const float *>(base)[i];
  } else if constexpr (DT == kF16) {
    return f16ToF32(static_cast<const unsigned short *>(base)[i]);
  } else {
    return bf16ToF32(static_cast<const unsigned short *>(base)[i]);
  }
}

// Stores f32 as dtype DT with round-to-nearest-even.
template <int DT> __device__ __forceinline__ void storeFromFloat(void *base, long long i, float v) {
  if constexpr (DT == kF32) {
    static_cast<float *>(base)[i] = v;
  } else if constexpr (DT == kF16) {
    static_cast<unsigned short *>(base)[i] = f32ToF16(v);
  } else {
    static_cast<unsigned short *>(base)[i] = f32ToBf16(v);
  }
}

// Elements of dtype DT in 16 bytes.
template <int DT> __host__ __device__ constexpr int elemsPer16() { return 16 / elemBytes<DT>(); }

// Unpacks one 16-byte load into elemsPer16<DT>() floats.
template <int DT> __device__ __forceinline__ void unpack16(const uint4 &v, float *out) {
  if constexpr (DT == kF32) {
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  } else {
    const unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const unsigned short lo = static_cast<unsigned short>(words[i] & 0xffffu);
      const unsigned short hi = static_cast<unsigned short>(words[i] >> 16);
      if constexpr (DT == kF16) {
        out[2 * i] = f16ToF32(lo);
        out[2 * i + 1] = f16ToF32(hi);
      } else {
        out[2 * i] = bf16ToF32(lo);
        out[2 * i + 1] = bf16ToF32(hi);
      }
    }
  }
}

// 1 / sqrt(mean(x^2) + eps) of a row of `width` values whose squares sum to sumSq: the
// RMSNorm's scale (rmsnorm.cuh, and RowNorm below where a GEMV computes the norm).
__device__ __forceinline__ float rmsInverse(float sumSq, int width, float eps) {
  return 1.0f / sqrtf(sumSq / static_cast<float>(width) + eps);
}

// The RMSNorm of a GEMV's input, fused into it (the emitter's fusion for short steps,
// LaunchFusion.cpp findNormFusions): the GEMV reads the norm's input x and uses
// x * inverse(sum of x^2 over the row) * weight(k), as rmsnorm.cuh computes it. NoNorm:
// x as it is.
struct NoNorm {
  static constexpr bool kOn = false;
  template <int COUNT> __device__ __forceinline__ void weights(long long, float (&g)[COUNT]) const {
#pragma unroll
    for (int i = 0; i < COUNT; ++i)
      g[i] = 1.0f;
  }
  __device__ __forceinline__ float inverse(float, int) const { return 1.0f; }
};
template <int DT> struct RowNorm {
  static constexpr bool kOn = true;
  const void *w; // the norm's weight, dtype DT
  float eps;
  __device__ __forceinline__ float weight(long long k) const { return loadAsFloat<DT>(w, k); }
  // Weights k .. k + COUNT - 1 into g: 16-byte loads where COUNT values fill them (k a
  // multiple of COUNT, the weights 16-byte aligned: the emitter checks).
  template <int COUNT>
  __device__ __forceinline__ void weights(long long k, float (&g)[COUNT]) const {
    constexpr int kPer16 = elemsPer16<DT>();
    if constexpr (COUNT % kPer16 == 0) {
      const uint4 *p = reinterpret_cast<const uint4 *>(static_cast<const char *>(w) +
                                                       k * elemBytes<DT>());
#pragma unroll
      for (int i = 0; i < COUNT / kPer16; ++i)
        unpack16<DT>(__ldg(p + i), g + i * kPer16);
    } else {
#pragma unroll
      for (int i = 0; i < COUNT; ++i)
        g[i] = weight(k + i);
    }
  }
  __device__ __forceinline__ float inverse(float sumSq, int width) const {
    return rmsInverse(sumSq, width, eps);
  }
};

// Where element (m, k) of a wgmma GEMM's 16-bit x (rows of K values, K % 64 == 0) lives in
// the x16 and act16 workspaces (sm_90a plans): in tiles of 128 rows x 64 values, each 16 KB
// contiguous in the layout of wgmma's 128-byte swizzle (row r at 128 r bytes, its 16-byte
// chunk c at chunk c ^ (r % 8)), tile (m / 128, k / 64) at index (m / 128) (K / 64) + k / 64.
// The GEMM brings a tile to shared memory with one bulk copy (gemm_wgmma.cuh); its writers
// (roundRows, the RMSNorm, the prefill attention, the gate/up GEMM's SwiGLU) store there.
// 16-byte chunks (8 values from a multiple of 8) stay contiguous.
template <int K> __device__ __forceinline__ long long x16Index(int m, int k) {
  static_assert(K % 64 == 0, "whole 64-value tiles");
  return (static_cast<long long>(m / 128) * (K / 64) + k / 64) * (128 * 64) + (m % 128) * 64 +
         (((k % 64) / 8) ^ (m % 8)) * 8 + k % 8;
}

// SwiGLU's activation: silu(gate) * up, silu(g) = g / (1 + exp(-g)) (the SwiGLU op
// and the gate/up GEMVs that fuse it compute it alike).
__device__ __forceinline__ float siluTimes(float gate, float up) {
  return gate / (1.0f + expf(-gate)) * up;
}
// The same with the fast exponential and division (a few ulp of f32 off), for results that
// are rounded to 16 bits next (gemm_wgmma.cuh's SwiGluOut), where the difference vanishes
// but for rounding ties. siluTimes' exact expf and division made the 8B f16 gate/up GEMM's
// epilogue, which no other work overlaps, 8% of its time (H200, 319 against 296 us).
__device__ __forceinline__ float siluTimesFast(float gate, float up) {
  return __fdividef(gate, 1.0f + __expf(-gate)) * up;
}

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over a block of THREADS threads (a multiple of 32); every thread gets the
// result. `scratch` holds THREADS / 32 floats.
template <int THREADS> __device__ __forceinline__ float blockSum(float v, float *scratch) {
  constexpr int kWarps = THREADS / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  v = warpSum(v);
  __syncthreads(); // scratch may still be read from a previous call
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w)
    total += scratch[w];
  return total;
}

} // namespace dev
} // namespace ninfer
