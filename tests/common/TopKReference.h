// The top-k candidates an executor must hand Sampler::sampleTopK, taken by a plain sort of
// the whole row: the k highest non-NaN logits, higher first and lower id first among equal
// ones, and the row's non-NaN count; and top-p's mass. The reference for the host
// (SamplerTest, GeneratorTest) and the GPU (SamplingTest) alike.
#pragma once

#include "ninfer/Sampler.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace ninfer {
namespace test {

inline TopKCandidates topKReference(const float* logits, int vocab, int k) {
  std::vector<std::pair<float, int32_t>> all;
  for (int i = 0; i < vocab; ++i)
    if (!std::isnan(logits[i]))
      all.emplace_back(logits[i], int32_t(i));
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  TopKCandidates c;
  c.valid = int64_t(all.size());
  c.count = std::min(k, int(all.size()));
  for (int i = 0; i < c.count; ++i) {
    c.values[i] = all[size_t(i)].first;
    c.ids[i] = all[size_t(i)].second;
  }
  return c;
}

// The mass an executor hands Sampler::sampleTopP with a row's candidates: the sum of the row's
// weights float(exp(double(l - max) / temperature)) over its non-NaN logits l, in id order
// (0 where the row's max is not finite).
inline double nucleusMass(const float* logits, int vocab, float temperature) {
  float maxLogit = -INFINITY;
  for (int i = 0; i < vocab; ++i)
    if (!std::isnan(logits[i]))
      maxLogit = std::max(maxLogit, logits[i]);
  if (!std::isfinite(maxLogit))
    return 0.0;
  double mass = 0.0;
  for (int i = 0; i < vocab; ++i)
    if (!std::isnan(logits[i]))
      mass += float(std::exp(double(logits[i] - maxLogit) / double(temperature)));
  return mass;
}

} // namespace test
} // namespace ninfer
