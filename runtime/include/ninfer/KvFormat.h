// Layout of DType Q8_KV: an int8 KV cache with one f32 scale per (position,
// kv head). Shared by the plan builder (sizes), the device kernels
// (codegen/kernels/attention.cuh) and the CPU executor, so they agree on every
// byte. Compiles as host C++ and as NVRTC device code: no standard header.
//
// A cache [context, kvHeads, headDim] is
//
//   [codes: context x kvHeads x headDim int8][pad to 16 bytes][scales: context x kvHeads f32]
//
// Row (p, h) holds codes at byte (p * kvHeads + h) * headDim and its scale at
// float index p * kvHeads + h of the scale plane. A row x of headDim values is
// stored as scale = max|x| / 127, code[d] = rint(x[d] / scale) (nearest even,
// in [-127, 127]; an all-zero row has scale 0 and codes 0) and reads back as
// code[d] * scale, so |x[d] - code[d] * scale| <= scale / 2. Both divisions are
// IEEE f32, so the host and the device produce the same bits from the same row.
#pragma once

#include "HostDevice.h"

namespace ninfer {
namespace kv {

constexpr int kCodeMax = 127;

NINFER_HD constexpr long long q8ScaleOffset(long long context, long long kvHeads,
                                            long long headDim) {
  return (context * kvHeads * headDim + 15) / 16 * 16;
}

NINFER_HD constexpr long long q8CacheBytes(long long context, long long kvHeads,
                                           long long headDim) {
  return q8ScaleOffset(context, kvHeads, headDim) + context * kvHeads * 4;
}

// The scale of a row whose largest magnitude is `absMax`.
NINFER_HD inline float q8Scale(float absMax) { return absMax / float(kCodeMax); }

NINFER_HD inline signed char q8Code(float x, float scale) {
  if (!(scale > 0.0f))
    return 0;
#if defined(__CUDA_ARCH__)
  float r = rintf(x / scale);
#else
  float r = __builtin_rintf(x / scale);
#endif
  r = r > float(kCodeMax) ? float(kCodeMax) : r;
  r = r < -float(kCodeMax) ? -float(kCodeMax) : r;
  return static_cast<signed char>(r);
}

} // namespace kv
} // namespace ninfer
