// Constants of the .nplan container shared by the plan writer (compiler) and
// the plan loader (runtime). The flatbuffer schema is runtime/schema/plan.fbs.
#pragma once

#include <cstdint>

namespace ninfer {

// Bump when a plan written by the new compiler would be misread by an old runtime.
constexpr uint32_t kFormatVersion = 1;

// Weight segments (and the start of the weight area) are aligned to this.
constexpr uint64_t kWeightAlignment = 4096;

constexpr uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace ninfer
