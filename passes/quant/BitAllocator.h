// Mixed precision: pick one format per tensor so the whole model fits a bit
// budget with the least total (weighted) error. Each tensor comes with its
// candidates, each with a measured error (e.g. relativeOutputError) and its
// exact size in bytes.
//
// Method: exact dynamic programming over a discretized byte axis (a
// multiple-choice knapsack). Costs are counted above each tensor's cheapest
// candidate, in units of u = ceil(sum of each tensor's cost range / resolution)
// bytes, each candidate's cost rounded up to whole units. So:
// * the budget always holds: true bytes <= units * u <= budget;
// * the answer is optimal for the rounded costs, and differs from the true
//   optimum only through rounding (at most one unit per tensor of slack, i.e.
//   tensors / resolution of the span; none once every best choice fits);
// * u does not depend on the budget, so a larger budget only adds feasible
//   choices: the error never grows with the budget.
// A greedy "best error drop per byte" walk gives none of these guarantees once
// candidates are not on a convex curve (e.g. Q3 barely better than Q2).
// Ties go to the cheaper candidate, then to the earlier one: deterministic.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer {
namespace quant {

struct AllocCandidate {
  int format = 0;     // caller's label, e.g. a QuantFormatId
  double error = 0.0; // >= 0
  uint64_t bytes = 0; // exact size of the tensor in this format
};

struct AllocTensor {
  std::string name;
  double weight = 1.0; // multiplies the candidate errors (e.g. per-layer sensitivity)
  std::vector<AllocCandidate> candidates;
};

struct AllocOptions {
  int64_t resolution = 1 << 16; // byte-axis steps spanning the whole choice range
};

struct Allocation {
  std::vector<int> choice; // per tensor, an index into its candidates
  uint64_t totalBytes = 0; // exact
  double totalError = 0.0; // sum of weight * error of the choices
};

// Fails when even the cheapest choice exceeds the budget, or on bad input.
Result<Allocation> allocateBits(const std::vector<AllocTensor>& tensors, uint64_t budgetBits,
                                const AllocOptions& options = {});

} // namespace quant
} // namespace ninfer
