// Constants of the .nplan container shared by the plan writer (compiler) and
// the plan loader (runtime). The flatbuffer schema is runtime/schema/plan.fbs.
#pragma once

#include <cstdint>

namespace ninfer {

// Bump when a plan written by the new compiler would be misread by an old runtime.
// Version 2: batched decode (Plan.max_batch > 1, Launch.steps, 4-D KV caches);
// an older runtime would run batch-only launches in every step. A plan of one
// sequence does not use any of it and is written as version 1, so runtimes
// from before batching still read it.
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kOldestFormatVersion = 1;

// The version a plan of `maxBatch` sequences is written with: the oldest that
// describes it.
constexpr uint32_t formatVersionFor(int maxBatch) { return maxBatch > 1 ? 2u : 1u; }

// Weight segments (and the start of the weight area) are aligned to this.
constexpr uint64_t kWeightAlignment = 4096;

constexpr uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace ninfer
