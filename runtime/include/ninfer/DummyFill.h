// Deterministic pseudo-random weights for --dummy-weights plans. The CUDA fill
// kernel and the CPU executor both call dummyUniform(), so both executors see
// the same weights. Compiles as host C++ and as NVRTC device code.
#pragma once

#include "HostDevice.h"

namespace ninfer {

// splitmix64 finalizer of (seed, index): a stateless hash, so every element can
// be produced independently by any thread.
NINFER_HD inline unsigned long long dummyHash(unsigned int seed, unsigned long long index) {
  unsigned long long z =
      index + 0x9E3779B97F4A7C15ull * (static_cast<unsigned long long>(seed) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) with 24 bits of resolution.
NINFER_HD inline float dummyUniform(unsigned int seed, unsigned long long index) {
  return static_cast<float>(dummyHash(seed, index) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

} // namespace ninfer
