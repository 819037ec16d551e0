// Multiple-choice knapsack by dynamic programming (see BitAllocator.h).
// best[c] = least error of the tensors so far using at most c units; one table
// row of choices per tensor (a byte each) is kept to walk the answer back.
#include "BitAllocator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ninfer {
namespace quant {

Result<Allocation> allocateBits(const std::vector<AllocTensor>& tensors, uint64_t budgetBits,
                                const AllocOptions& options) {
  if (options.resolution < 1 || options.resolution > (int64_t(1) << 26))
    return Status::error("quant: allocator resolution must be in [1, 2^26]");
  const size_t count = tensors.size();
  std::vector<uint64_t> minBytes(count), maxBytes(count);
  uint64_t floorBytes = 0, span = 0;
  for (size_t t = 0; t < count; ++t) {
    const AllocTensor& tensor = tensors[t];
    if (tensor.candidates.empty() || tensor.candidates.size() > 255)
      return Status::error("quant: tensor '" + tensor.name + "' needs 1 to 255 candidates");
    if (!(tensor.weight >= 0.0) || !std::isfinite(tensor.weight))
      return Status::error("quant: tensor '" + tensor.name + "' has a bad weight");
    minBytes[t] = maxBytes[t] = tensor.candidates[0].bytes;
    for (const AllocCandidate& c : tensor.candidates) {
      if (!(c.error >= 0.0) || !std::isfinite(c.error))
        return Status::error("quant: tensor '" + tensor.name +
                             "' has a candidate with a bad error");
      minBytes[t] = std::min(minBytes[t], c.bytes);
      maxBytes[t] = std::max(maxBytes[t], c.bytes);
    }
    floorBytes += minBytes[t];
    span += maxBytes[t] - minBytes[t];
  }
  const uint64_t budgetBytes = budgetBits / 8;
  if (floorBytes > budgetBytes)
    return Status::error("quant: the budget of " + std::to_string(budgetBytes) +
                         " bytes is below the smallest choice, " + std::to_string(floorBytes) +
                         " bytes");

  const uint64_t resolution = static_cast<uint64_t>(options.resolution);
  const uint64_t unit = std::max<uint64_t>(1, (span + resolution - 1) / resolution);
  // Costs in whole units (rounded up), and the capacity the budget allows.
  std::vector<std::vector<uint64_t>> cost(count);
  uint64_t maxUnits = 0;
  for (size_t t = 0; t < count; ++t) {
    uint64_t most = 0;
    for (const AllocCandidate& c : tensors[t].candidates) {
      cost[t].push_back((c.bytes - minBytes[t] + unit - 1) / unit);
      most = std::max(most, cost[t].back());
    }
    maxUnits += most;
  }
  // When everything fits in true bytes, allow every choice: the rounded costs
  // alone could exceed the capacity (still monotone: capacity only grows with
  // the budget).
  const uint64_t capacity = budgetBytes - floorBytes >= span
                                ? maxUnits
                                : std::min((budgetBytes - floorBytes) / unit, maxUnits);

  // Candidate order per tensor: cheaper first, then earlier, so a strict '<'
  // keeps the cheaper of two equal errors.
  std::vector<std::vector<int>> order(count);
  for (size_t t = 0; t < count; ++t) {
    order[t].resize(tensors[t].candidates.size());
    std::iota(order[t].begin(), order[t].end(), 0);
    std::stable_sort(order[t].begin(), order[t].end(),
                     [&](int a, int b) { return cost[t][a] < cost[t][b]; });
  }

  const uint64_t width = capacity + 1;
  std::vector<double> best(width, 0.0), next(width);
  std::vector<uint8_t> picks(count * width);
  for (size_t t = 0; t < count; ++t) {
    const AllocTensor& tensor = tensors[t];
    for (uint64_t c = 0; c < width; ++c) {
      double least = std::numeric_limits<double>::infinity();
      int pick = -1;
      for (int i : order[t]) {
        if (cost[t][i] > c)
          break;
        const double e = best[c - cost[t][i]] + tensor.weight * tensor.candidates[i].error;
        if (e < least) {
          least = e;
          pick = i;
        }
      }
      next[c] = least; // finite: the cheapest candidate costs 0 units
      picks[t * width + c] = static_cast<uint8_t>(pick);
    }
    best.swap(next);
  }

  Allocation out;
  out.choice.assign(count, 0);
  uint64_t c = capacity;
  for (size_t t = count; t-- > 0;) {
    const int pick = picks[t * width + c];
    out.choice[t] = pick;
    c -= cost[t][pick];
  }
  for (size_t t = 0; t < count; ++t) {
    const AllocCandidate& chosen = tensors[t].candidates[out.choice[t]];
    out.totalBytes += chosen.bytes;
    out.totalError += tensors[t].weight * chosen.error;
  }
  return out;
}

} // namespace quant
} // namespace ninfer
