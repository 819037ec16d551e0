// Fixed-width float vectors for kernels whose lanes are independent outputs
// (GPTQ's rows, the entries of X^T X): every lane is computed as one scalar
// would be, so results are the same bits for every vector width, and a kernel
// is written once as a template over the width and compiled for SSE, AVX2 and
// AVX-512 (picked at run time with widestLanes()). Files using it are built
// with -ffp-contract=off: an AVX-512 function may use FMA, which would round
// a multiply-add once instead of twice.
#pragma once

#include "ninfer/Status.h"

#include <cstring>

namespace ninfer {
namespace quant {

#define NINFER_INLINE inline __attribute__((always_inline))

// The helpers are always inlined into kernels compiled for their width, so
// the ABI of a wide vector passed by value never comes into play (the warning
// about it is off for the kernel files that include this header).
#pragma GCC diagnostic ignored "-Wpsabi"
template <int V> struct Lanes {
  typedef float F __attribute__((vector_size(4 * V)));
  typedef double D __attribute__((vector_size(8 * V)));
  static NINFER_INLINE F load(const float* p) {
    F v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static NINFER_INLINE void store(float* p, F v) { std::memcpy(p, &v, sizeof(v)); }
  // x in every lane (exactly x, -0 included). Written through an array: the
  // compiler folds it into a broadcast load ({1to16} operands on AVX-512),
  // where F{} + x cost a scalar add and a shuffle per splat.
  static NINFER_INLINE F splat(float x) {
    float lanes[V];
    for (int i = 0; i < V; ++i)
      lanes[i] = x;
    return load(lanes);
  }
};

// The widest float lanes this CPU runs: 16 (AVX-512F), 8 (AVX2) or 4 (SSE).
int widestLanes();

// Checks a requested lane count (0 = widest) and resolves it.
Result<int> resolveLanes(int lanes);

} // namespace quant
} // namespace ninfer
