// Device side of `ninferc --trace` (ninfer/TraceAbi.h): timeline events of every block.
// Included by common.cuh only where the emitter defines NINFER_TRACE.
//
// Nothing here waits on the critical path of the kernel it records. Lane 0 of every warp
// reserves its event slots with one atomic add when the wrapper starts, and the result is
// first read when the warp writes its events at its end (by then it has long arrived).
// Thread 0's wait for the previous kernel leaves its time in a mailbox of the warp's hardware
// slot (%smid, %warpid: unique among the warps resident at once) with a plain store, read back
// at its end. A first version took a slot per event when it happened: the 8B q4 decode step
// ran 1.80 ms instead of 1.66 (each block waited for an atomic's round trip after its wait).
#pragma once

#include "TraceAbi.h"

extern "C" {
__device__ unsigned int ninfer_trace_count[ninfer::trace::kMaxSms];
__device__ ninfer::trace::Event
    ninfer_trace_events[ninfer::trace::kMaxSms * ninfer::trace::kEventsPerSm];
}
// Thread 0's wait time per hardware warp slot (0: it has not waited).
__device__ unsigned long long ninfer_trace_waits[ninfer::trace::kMaxSms * 64];

namespace ninfer {
namespace dev {

__device__ __forceinline__ unsigned long long traceNow() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}
__device__ __forceinline__ unsigned int traceSm() {
  unsigned int sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
}
__device__ __forceinline__ unsigned int traceWaitSlot() {
  unsigned int warp;
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
  return traceSm() * 64 + warp % 64;
}
__device__ __forceinline__ unsigned int traceThread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

struct TraceBlock {
  unsigned int sm = trace::kMaxSms, first = 0; // the warp's SM and first reserved slot
  unsigned long long start = 0;                // thread 0: the block's start
};

// The wrapper's first statement.
__device__ __forceinline__ TraceBlock traceBegin() {
  TraceBlock t;
  const unsigned int thread = traceThread();
  if (thread % 32 != 0)
    return t;
  t.sm = traceSm();
  if (thread == 0) {
    t.start = traceNow();
    ninfer_trace_waits[traceWaitSlot()] = 0;
  }
  if (t.sm < trace::kMaxSms)
    t.first = atomicAdd(&ninfer_trace_count[t.sm], thread == 0 ? 3u : 1u);
  return t;
}

// After griddepcontrol.wait returns (common.cuh's gridDependencyWait).
__device__ __forceinline__ void traceWaitDone() {
  if (traceThread() == 0)
    ninfer_trace_waits[traceWaitSlot()] = traceNow();
}

// The wrapper's last statement: the warp's end, and thread 0's start and wait.
__device__ __forceinline__ void traceEnd(const TraceBlock& t) {
  const unsigned int thread = traceThread();
  if (thread % 32 != 0 || t.sm >= trace::kMaxSms)
    return;
  const unsigned long long end = traceNow();
  unsigned long long grid;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  const unsigned int events = thread == 0 ? 3 : 1;
  if (t.first + events > trace::kEventsPerSm)
    return; // counted, not kept: the host reports the loss
  const unsigned long long wait = thread == 0 ? ninfer_trace_waits[traceWaitSlot()] : 0;
  const unsigned int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  trace::Event* e = ninfer_trace_events + t.sm * trace::kEventsPerSm + t.first;
  const unsigned long long times[3] = {end, t.start, wait};
  const unsigned short kinds[3] = {trace::kWarpEnd, trace::kBlockStart, trace::kWaitDone};
  for (unsigned int i = 0; i < events; ++i) {
    e[i].grid = grid;
    e[i].ns = times[i];
    e[i].block = block;
    e[i].sm = static_cast<unsigned short>(t.sm);
    e[i].kind = kinds[i] == trace::kWaitDone && wait == 0 ? trace::kUnused : kinds[i];
  }
}

} // namespace dev
} // namespace ninfer
