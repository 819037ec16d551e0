// Picks the next token from logits: greedy, or temperature + top-k + top-p with a seed.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ninfer {

struct SamplingParams {
  float temperature = 0.0f; // 0: greedy
  int topK = 0;             // 0: off
  float topP = 1.0f;        // 1: off
  uint64_t seed = 0;
};

// The greedy token: the argmax of logits, the lowest id among equal maxima; NaN never
// wins, and 0 when every logit is NaN. Device greedy sampling (codegen/kernels/argmax.cuh)
// follows the same rule.
int32_t argmaxToken(const float* logits, int vocab);

class Sampler {
public:
  explicit Sampler(const SamplingParams& params);
  int32_t sample(const float* logits, int vocab);
  // Whether sample() is argmaxToken(), so an executor may pick the token itself.
  bool greedy() const { return !(params_.temperature > 0.0f) || params_.topK == 1; }

private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> scratch_;
};

} // namespace ninfer
