// Detection of ternary (BitNet b1.58) weights: a tensor whose values are all in
// {-s, 0, +s} for one s > 0. Checkpoints trained that way are stored as plain
// bf16 (or f16/f32), so the only evidence is the values themselves; the test is
// exact (bit patterns, -0 counts as 0), never a tolerance, because packing must
// be lossless. Also recognizes "ternary per row" (one s per output row), which
// TQ2 (one scale per tensor) cannot hold, so callers can say why they keep it.
#pragma once

#include "WeightStore.h"

#include <cstdint>

namespace ninfer {

enum class TernaryKind {
  NotTernary, // more than three values, non-finite values, or all zero
  PerTensor,  // {-s, 0, +s}, one s for the tensor: packable as TQ2
  PerRow,     // {-s_r, 0, +s_r} per row r, the s_r not all equal
};

struct TernaryInfo {
  TernaryKind kind = TernaryKind::NotTernary;
  float scale = 0.0f;          // s (PerTensor), exact in f32
  uint64_t distinctValues = 0; // distinct values of the tensor (capped, see below)
  bool distinctCapped = false; // counting stopped at kDistinctCap (f32 tensors)
  double zeroFraction = 0.0;   // share of exact zeros (ternary kinds only)
};

// f32 tensors stop counting distinct values here (bf16/f16 count exactly).
constexpr uint64_t kDistinctCap = 100000;

// Inspects a 2-D F32/F16/BF16 tensor with bytes. Anything else (dummy tensors,
// I32, TQ2, other ranks) is NotTernary with distinctValues 0.
TernaryInfo detectTernary(const TensorRef& tensor);

const char* ternaryKindName(TernaryKind kind);

} // namespace ninfer
