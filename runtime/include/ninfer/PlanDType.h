// Element sizes of the plan's unpacked dtypes, shared by the plan loader and
// the kernel emitter. Packed formats (Q*, TQ2, TQ1) have no element size: their
// tensor sizes come from QuantFormats.h and TernaryDType.h.
#pragma once

#include "plan_generated.h"

#include <cstdint>

namespace ninfer {

// 4 for F32/I32, 2 for F16/BF16, 0 for packed formats.
inline uint64_t plainDTypeBytes(plan::DType dtype) {
  switch (dtype) {
  case plan::DType::F32:
  case plan::DType::I32:
    return 4;
  case plan::DType::F16:
  case plan::DType::BF16:
    return 2;
  default:
    return 0;
  }
}

} // namespace ninfer
