// The mapping between the plan's quantized weight dtypes (plan.fbs DType
// Q8_G32..Q2_G128, Q6_G32..Q5_G128, Q2_K16..Q4_K16) and ninfer::quant::QuantFormatId, in one place,
// so the plan builder, the loader, the executors, the kernel emitter and the dummy fill kernel (an
// NVRTC header too) agree. Written as an explicit table rather than "4 + id" so formats appended
// later (other bit widths) can take plan values that are not contiguous with these.
#pragma once

#include "QuantFormats.h" // same directory: also resolves as an NVRTC header

namespace ninfer {
namespace quant {

// Plan DType value of a format (plan::DType is a ubyte enum; the values are
// fixed by plan.fbs and never renumbered).
NINFER_HD constexpr int planDTypeOfFormat(QuantFormatId id) {
  switch (id) {
  case QuantFormatId::Q8G32:
    return 4;
  case QuantFormatId::Q8G64:
    return 5;
  case QuantFormatId::Q8G128:
    return 6;
  case QuantFormatId::Q4G32:
    return 7;
  case QuantFormatId::Q4G64:
    return 8;
  case QuantFormatId::Q4G128:
    return 9;
  case QuantFormatId::Q3G32:
    return 10;
  case QuantFormatId::Q3G64:
    return 11;
  case QuantFormatId::Q3G128:
    return 12;
  case QuantFormatId::Q2G32:
    return 13;
  case QuantFormatId::Q2G64:
    return 14;
  case QuantFormatId::Q2G128:
    return 15;
  case QuantFormatId::Q6G32: // 16 is TQ2, 17 TQ1, 18 Q8_KV
    return 19;
  case QuantFormatId::Q6G64:
    return 20;
  case QuantFormatId::Q6G128:
    return 21;
  case QuantFormatId::Q5G32:
    return 22;
  case QuantFormatId::Q5G64:
    return 23;
  case QuantFormatId::Q5G128:
    return 24;
  case QuantFormatId::Q2K16:
    return 25;
  case QuantFormatId::Q3K16:
    return 26;
  case QuantFormatId::Q4K16:
    return 27;
  }
  return -1;
}

// The format stored as plan DType value `dtype`, or -1 when it is not a
// group-quantized dtype.
NINFER_HD constexpr int formatOfPlanDType(int dtype) {
  for (int id = 0; id < kQuantFormatCount; ++id)
    if (planDTypeOfFormat(static_cast<QuantFormatId>(id)) == dtype)
      return id;
  return -1;
}

#if !defined(__CUDACC_RTC__) // host only (NVRTC refuses unannotated functions)
// The format called `name` ("q4_g64"), or -1.
inline int formatOfName(const char* name) {
  for (int id = 0; id < kQuantFormatCount; ++id) {
    const char* a = quantFormatTraits(static_cast<QuantFormatId>(id)).name;
    const char* b = name;
    while (*a && *a == *b) {
      ++a;
      ++b;
    }
    if (*a == 0 && *b == 0)
      return id;
  }
  return -1;
}
#endif

static_assert(formatOfPlanDType(9) == static_cast<int>(QuantFormatId::Q4G128), "Q4_G128 = 9");
static_assert(formatOfPlanDType(16) == -1, "TQ2 is not a group format");
static_assert(formatOfPlanDType(17) == -1, "TQ1 is not a group format");
static_assert(formatOfPlanDType(18) == -1, "Q8_KV is not a weight format");
static_assert(formatOfPlanDType(23) == static_cast<int>(QuantFormatId::Q5G64), "Q5_G64 = 23");
static_assert(formatOfPlanDType(26) == static_cast<int>(QuantFormatId::Q3K16), "Q3_K16 = 26");

} // namespace quant
} // namespace ninfer
