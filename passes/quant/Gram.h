// X^T X (and A^T B) of calibration activations, the H of GPTQ and of the output-error
// measure (QuantCommon.h), accumulated step by step.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>

namespace ninfer {
namespace quant {

// h[i * cols + j] += sum_t x[t * cols + i] * x[t * cols + j] for j >= i (the
// upper triangle and the diagonal; entries below it are not touched), x f32
// [n, cols] row-major. Each entry's n products are summed in f32 in token
// order from 0, then added to the f64 h: one step of a few hundred tokens
// keeps f32 precision, the running total over steps is f64. The lanes of the
// SIMD kernel are entries j of a row (SimdLanes.h), so every vector width and
// thread count gives the same bits as that scalar loop. lanes: 0 = the widest
// this CPU runs; 4, 8, 16 for tests.
Status accumulateGram(const float* x, int n, int64_t cols, double* h, int threads,
                      int lanes = 0);

// out[i * cols + j] += sum_t a[t * cols + i] * b[t * cols + j] for every i, j
// (A^T B), a and b f32 [n, cols]; summed as accumulateGram sums (so with a = b
// its upper triangle gets accumulateGram's bits).
Status accumulateCrossGram(const float* a, const float* b, int n, int64_t cols, double* out,
                           int threads, int lanes = 0);

} // namespace quant
} // namespace ninfer
