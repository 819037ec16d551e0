// Bulk copies to shared memory (cp.async.bulk: the TMA's 1D copies, and its 2D tensor copies,
// sm_90+) and the mbarriers they complete on. Users: the one-token quantized GEMV
// (gemv_quant_bulk.cuh, its weights) and the wgmma GEMM (gemm_wgmma.cuh, its x and f16/bf16
// weight tiles).
#pragma once

#include "common.cuh"

namespace ninfer {
namespace dev {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned int sharedAddress(const void *p) {
  unsigned long long a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return static_cast<unsigned int>(a);
}
__device__ __forceinline__ void barrierInit(unsigned int bar, unsigned int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Makes the barriers' initialization visible to the other threads and the async proxy (the
// block synchronizes after it).
__device__ __forceinline__ void barrierInitFence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void barrierArrive(unsigned int bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Arrives and adds `bytes` to the transactions the phase waits for.
__device__ __forceinline__ void barrierExpectBytes(unsigned int bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Until the phase of parity `parity` has completed.
__device__ __forceinline__ void barrierWait(unsigned int bar, unsigned int parity) {
  unsigned int done;
  do {
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}
// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) to shared memory,
// completing on `bar`.
__device__ __forceinline__ void bulkCopy(unsigned int dst, const void *src, unsigned int bytes,
                                         unsigned int bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
               "%2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// The same, evict-first in L2: for data read once per step (the GEMV's weights), so that L2
// keeps x, the KV cache and the partials (H200, 8B q4 decode: 508.2 against 496.8 tok/s
// without the hint).
__device__ __forceinline__ void bulkCopyEvictFirst(unsigned int dst, const void *src,
                                                   unsigned int bytes, unsigned int bar) {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
               "[%0], [%1], %2, [%3], %4;" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar), "l"(policy)
               : "memory");
}
// Makes a tensor map that was written to global memory by the host (the executor's copy at
// load) safe to use by this thread's tensor copies: the TMA reads maps through the tensormap
// proxy, whose view of memory written by the generic proxy needs this fence once per block
// before the first use (CUDA programming guide, "Using TMA to transfer multi-dimensional
// arrays"; system scope, as the host wrote the map). Without it a block may copy through a
// stale map, e.g. one an earlier plan left at the same address.
__device__ __forceinline__ void tensorMapAcquire(const void *map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"(map) : "memory");
}
// The box at (c0 values, c1 rows) of a 2D tensor map (a TMA descriptor in global memory,
// 64-byte aligned) to shared memory, completing on `bar`; the map's swizzle lays it out.
__device__ __forceinline__ void tensorCopy2d(unsigned int dst, const void *map, int c0, int c1,
                                             unsigned int bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
               "l"(map), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}
#endif

} // namespace dev
} // namespace ninfer
