// Token sampling. Greedy is a plain argmax. Otherwise: top-k, softmax with
// temperature, top-p nucleus, then one draw. The draw uses our own uniform from
// raw mt19937_64 bits (whose sequence the standard fixes) rather than
// std::*_distribution (whose algorithms differ between standard libraries), so
// a seed gives the same tokens on every machine.
#include "ninfer/Sampler.h"

#include <algorithm>
#include <cmath>

namespace ninfer {
namespace {

// Higher logit first; equal logits by lower id, so the order is total.
bool before(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

} // namespace

int32_t argmaxToken(const float* logits, int vocab) {
  int32_t best = 0;
  float bestValue = -INFINITY;
  bool found = false;
  for (int i = 0; i < vocab; ++i) {
    // Strict comparison keeps the lowest index on ties; NaN never wins.
    if (!found ? !std::isnan(logits[i]) : logits[i] > bestValue) {
      best = i;
      bestValue = logits[i];
      found = true;
    }
  }
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

int32_t Sampler::sample(const float* logits, int vocab) {
  if (vocab <= 0)
    return 0;
  if (greedy())
    return argmaxToken(logits, vocab);
  return sampleWith(logits, vocab, nextUniform());
}

double Sampler::nextUniform() {
  // 53 random bits -> uniform double in [0, 1).
  return double(rng_() >> 11) * (1.0 / 9007199254740992.0);
}

int32_t Sampler::sampleWith(const float* logits, int vocab, double uniform) {
  scratch_.clear();
  for (int i = 0; i < vocab; ++i)
    if (!std::isnan(logits[i]))
      scratch_.emplace_back(logits[i], i);
  bool sorted = false; // descending, so the first entry is the max
  if (params_.topK > 0 && size_t(params_.topK) < scratch_.size()) {
    const size_t keep = size_t(params_.topK);
    std::partial_sort(scratch_.begin(), scratch_.begin() + keep, scratch_.end(), before);
    scratch_.resize(keep);
    sorted = true;
  } else if (params_.topP < 1.0f) {
    std::sort(scratch_.begin(), scratch_.end(), before);
    sorted = true;
  }
  return draw(sorted, uniform);
}

int32_t Sampler::sampleTopK(const TopKCandidates& candidates) {
  scratch_.clear();
  for (int i = 0; i < candidates.count; ++i)
    scratch_.emplace_back(candidates.values[i], candidates.ids[i]);
  // sample() sorts only when top-k leaves some out or top-p needs the order; otherwise it
  // draws in id order, and so does this.
  const bool sorted = params_.topK > 0 && params_.topK < candidates.valid;
  if (!sorted && !(params_.topP < 1.0f))
    std::sort(scratch_.begin(), scratch_.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
  return draw(sorted || params_.topP < 1.0f, nextUniform());
}

int32_t Sampler::sampleTopP(const TopKCandidates& candidates, double mass, double uniform) {
  scratch_.clear();
  for (int i = 0; i < candidates.count; ++i)
    scratch_.emplace_back(candidates.values[i], candidates.ids[i]);
  // Every non-NaN logit a candidate: the row itself.
  return draw(true, uniform, candidates.count < candidates.valid ? mass : -1.0);
}

int32_t Sampler::draw(bool sorted, double uniform, double rowMass) {
  if (scratch_.empty())
    return 0;
  float maxLogit = scratch_[0].first;
  if (!sorted)
    for (const auto& entry : scratch_)
      maxLogit = std::max(maxLogit, entry.first);
  // All -inf, or +inf present: no distribution to draw from, so the argmax (argmaxToken's
  // pick: the first in `before` order).
  if (!std::isfinite(maxLogit))
    return (sorted ? scratch_.front() : *std::min_element(scratch_.begin(), scratch_.end(), before))
        .second;

  // Probabilities (unnormalized) replace the logits in place.
  double total = 0;
  for (auto& entry : scratch_) {
    entry.first = float(std::exp(double(entry.first - maxLogit) / params_.temperature));
    total += entry.first;
  }
  if (params_.topP < 1.0f) {
    // The smallest prefix whose mass reaches top_p (always at least one token).
    const double target = double(params_.topP) * (rowMass >= 0 ? rowMass : total);
    double cumulative = 0;
    size_t cut = 0;
    while (cut < scratch_.size()) {
      cumulative += scratch_[cut].first;
      ++cut;
      if (cumulative >= target)
        break;
    }
    if (rowMass >= 0 && cumulative < target)
      return -1;
    scratch_.resize(cut);
    total = cumulative;
  }

  const double threshold = uniform * total;
  double cumulative = 0;
  for (const auto& entry : scratch_) {
    cumulative += entry.first;
    if (threshold < cumulative)
      return entry.second;
  }
  return scratch_.back().second;
}

} // namespace ninfer
