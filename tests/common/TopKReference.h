// The top-k candidates an executor must hand Sampler::sampleTopK, taken by a plain sort of
// the whole row: the k highest non-NaN logits, higher first and lower id first among equal
// ones, and the row's non-NaN count. The reference for the host (SamplerTest) and the GPU
// (SamplingTest) alike.
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

} // namespace test
} // namespace ninfer
