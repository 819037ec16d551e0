// What the CPU executor allocates for a plan, against what the host has, so that a plan too
// large for the machine is refused with one line before any allocation: Linux grants the
// allocations and kills the process once their pages are touched.
#pragma once

#include "ninfer/Plan.h"
#include "ninfer/Status.h"

#include <cstdint>

namespace ninfer {

struct CpuMemoryNeed {
  uint64_t weightBytes = 0; // the weights as f32 (those the plan file holds as aligned f32: none)
  uint64_t totalBytes = 0;  // with the activation and KV arenas, logits and decoded K/V rows
};

CpuMemoryNeed cpuExecutorMemory(const PlanFile& plan);

// The host's available memory (Linux: MemAvailable of /proc/meminfo), bytes; 0 where unknown.
uint64_t availableHostMemory();

// An error where `need` exceeds `availableBytes` (0: unknown, never an error).
Status checkCpuMemory(const CpuMemoryNeed& need, uint64_t availableBytes);

} // namespace ninfer
