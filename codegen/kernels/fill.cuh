// Dummy-weight fill for --dummy-weights plans: dst[i] = u(seed, i) * scale + offset
// rounded to the buffer dtype, u from ninfer/DummyFill.h, so the CPU executor's
// fill gives the same bits. The multiply and add are explicitly rounded
// (__fmul_rn/__fadd_rn) so the compiler cannot contract them into an FMA the
// host does not do.
// TQ2 and TQ1 (ternary) buffers are filled in 16-bit units (count = size_bytes /
// 2) by ninfer::ternary::dummyUnitOf, which the CPU executor calls too. Group-quantized
// buffers (Q8_G32..Q2_G128) likewise, by ninfer::quant::dummyUnit (QuantFormats.h).
// Launch: block 256, any grid (grid-stride loop over count elements).
// Not a plan op: every generated module carries it and the executor looks it up
// by name with its own parameters.
#pragma once

#include "DummyFill.h"
#include "QuantDType.h"
#include "TernaryDType.h"
#include "common.cuh"

extern "C" __global__ void ninfer_fill_dummy(void *dst, unsigned long long count, int dtype,
                                             unsigned int seed, float scale, float offset) {
  using namespace ninfer::dev;
  const int quantFormat = ninfer::quant::formatOfPlanDType(dtype);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    if (ninfer::ternary::isTernaryPlanDType(dtype)) {
      static_cast<unsigned short *>(dst)[i] =
          ninfer::ternary::dummyUnitOf(dtype, seed, i, count, scale);
      continue;
    }
    if (quantFormat >= 0) {
      static_cast<unsigned short *>(dst)[i] =
          ninfer::quant::dummyUnit(quantFormat, seed, i, count, scale);
      continue;
    }
    const float v = __fadd_rn(__fmul_rn(ninfer::dummyUniform(seed, i), scale), offset);
    if (dtype == kF32)
      storeFromFloat<kF32>(dst, static_cast<long long>(i), v);
    else if (dtype == kF16)
      storeFromFloat<kF16>(dst, static_cast<long long>(i), v);
    else
      storeFromFloat<kBF16>(dst, static_cast<long long>(i), v);
  }
}
