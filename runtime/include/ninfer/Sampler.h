// Picks the next token from logits: greedy, or temperature + top-k + top-p with a seed.
#pragma once

#include "ninfer/StepAbi.h"

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

// A row's top-k candidates (at most kMaxTopKCandidates, StepAbi.h, as an executor picks them:
// Executor::forwardSequenceTopK): its `count` (at most k) highest non-NaN logits, higher first and
// lower id first among equal ones, and how many of the row's logits are not NaN.
struct TopKCandidates {
  float values[kMaxTopKCandidates];
  int32_t ids[kMaxTopKCandidates];
  int count = 0;
  int64_t valid = 0;
};

// A logit, its id and its weight exp((logit - max) / temperature) (Sampler's top-p draw).
struct WeightedLogit {
  float value;
  int32_t id;
  float weight;
};

class Sampler {
public:
  explicit Sampler(const SamplingParams& params);
  int32_t sample(const float* logits, int vocab);
  // Whether sample() is argmaxToken(), so an executor may pick the token itself.
  bool greedy() const { return !(params_.temperature > 0.0f) || params_.topK == 1; }
  // The top-k that sample() keeps, where an executor may pick the candidates (1 to
  // kMaxTopKCandidates), else 0.
  int candidatesK() const {
    return !greedy() && params_.topK > 0 && params_.topK <= kMaxTopKCandidates ? params_.topK : 0;
  }
  // sample() of the logits whose top-k candidates (k = candidatesK()) these are: the same
  // token, and the same random draw.
  int32_t sampleTopK(const TopKCandidates& candidates);
  // Whether sample() draws from the whole row with a temperature alone (neither top-k nor
  // top-p), so an executor may draw itself (Executor::forwardSequenceSample) with
  // nextUniform() and temperature().
  bool temperatureOnly() const {
    return !greedy() && params_.topK == 0 && !(params_.topP < 1.0f);
  }
  // Whether sample() is top-p sampling without top-k, so an executor may hand back the row's
  // top candidates and its mass (Executor::forwardSequenceNucleus) for sampleTopP().
  bool topPOnly() const { return !greedy() && params_.topK == 0 && params_.topP < 1.0f; }
  // sampleWith() of the logits whose highest candidates (highest first, Executor::
  // forwardSequenceNucleus) and mass (the sum of the row's weights exp((l - max) / T)) these
  // are, with `uniform`; -1 where the nucleus reaches past the candidates, and only
  // sampleWith() of the whole row can draw. The mass comes from the executor's sums, so the
  // nucleus's cut can differ from sampleWith()'s where top_p * mass falls within rounding of
  // a running sum.
  int32_t sampleTopP(const TopKCandidates& candidates, double mass, double uniform);
  float temperature() const { return params_.temperature; }
  float topP() const { return params_.topP; }
  // The uniform in [0, 1) that the next non-greedy sample() would draw: every non-greedy
  // sample() and sampleTopK() takes one, so a draw made elsewhere with it keeps the seed's
  // sequence.
  double nextUniform();
  // sample() without greedy's shortcut, with `uniform` as its draw.
  int32_t sampleWith(const float* logits, int vocab, double uniform);

private:
  // The draw over scratch_ (descending when sorted, else in id order): softmax with the
  // temperature, top-p, then `uniform`. rowMass >= 0: scratch_ is the head of a row of that
  // mass (top-p's target), and -1 comes back where the nucleus reaches past it.
  int32_t draw(bool sorted, double uniform, double rowMass = -1.0);
  // draw() of top-p over scratch_ (the whole row, in id order) without sorting it: the
  // nucleus and the draw by selection (a 128,256-id row at temperature 0.8, top-p 0.9: 4.4
  // ms against 14.3 with the sort, on the 2-core development machine).
  int32_t drawNucleus(double uniform);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> scratch_;
  std::vector<WeightedLogit> weighted_;
};

} // namespace ninfer
