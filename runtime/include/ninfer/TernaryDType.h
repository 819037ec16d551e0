// The plan's ternary weight dtypes (plan.fbs DType TQ2 = 16, TQ1 = 17) in one
// place: which dtype is ternary, the column rule and tensor size of each, the
// reference row decode and the dummy fill unit, so the loader, the executors,
// the kernel emitter and the dummy fill kernel (an NVRTC header too) agree.
#pragma once

#include "TernaryFormat.h" // TQ2
#include "Tq1Format.h"     // TQ1

namespace ninfer {
namespace ternary {

constexpr int kPlanDTypeTq2 = 16;
constexpr int kPlanDTypeTq1 = 17;

NINFER_HD constexpr bool isTernaryPlanDType(int dtype) {
  return dtype == kPlanDTypeTq2 || dtype == kPlanDTypeTq1;
}

// Columns must be a positive multiple of this.
NINFER_HD constexpr int colsMultipleOf(int dtype) {
  return dtype == kPlanDTypeTq1 ? tq1::kColsMultiple : kColsMultiple;
}

NINFER_HD constexpr bool isPackableColsOf(int dtype, long long cols) {
  return dtype == kPlanDTypeTq1 ? tq1::isPackableCols(cols) : isPackableCols(cols);
}

NINFER_HD constexpr long long tensorBytesOf(int dtype, long long rows, long long cols) {
  return dtype == kPlanDTypeTq1 ? tq1::tensorBytes(rows, cols) : tensorBytes(rows, cols);
}

NINFER_HD inline void dequantizeRowOf(int dtype, const unsigned char* tensor, long long rows,
                                      long long cols, long long r, float* out) {
  if (dtype == kPlanDTypeTq1)
    tq1::dequantizeRow(tensor, rows, cols, r, out);
  else
    dequantizeRow(tensor, rows, cols, r, out);
}

NINFER_HD inline unsigned short dummyUnitOf(int dtype, unsigned int seed, unsigned long long unit,
                                            unsigned long long units, float scale) {
  return dtype == kPlanDTypeTq1 ? tq1::dummyUnit(seed, unit, units, scale)
                                : dummyUnit(seed, unit, units, scale);
}

} // namespace ternary
} // namespace ninfer
