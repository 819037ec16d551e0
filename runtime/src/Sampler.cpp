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

// `before`'s order of the logits.
bool weightedBefore(const WeightedLogit& a, const WeightedLogit& b) {
  return before({a.value, a.id}, {b.value, b.id});
}

// In v[lo, hi), whose entries come after every entry before lo (in `before` order) and in
// any order among themselves, with `above` the weight of the entries before lo: the position
// j (in `before` order) where the running sum of weights first passes `bound` (reaches it,
// when `inclusive`), or hi where it never does. Leaves the entries of the range up to j in
// [lo, j] (in any order) and the running sum through j (or through hi - 1) in `sum`. A
// selection (expected linear time; past 64 rounds it sorts what is left, so a row that
// defeats the pivots costs a sort at most), not a sort; its sums group the weights
// differently from a walk in order, so it can differ from one where `bound` lies within
// rounding of a running sum.
size_t crossing(std::vector<WeightedLogit>& v, size_t lo, size_t hi, double above, double bound,
                bool inclusive, double& sum) {
  const auto passes = [&](double x) { return inclusive ? x >= bound : x > bound; };
  for (int round = 0; round < 64 && hi - lo > 32; ++round) {
    // The median of three entries as pivot, moved to the end of those before it.
    WeightedLogit a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi - 1];
    if (weightedBefore(b, a))
      std::swap(a, b);
    if (weightedBefore(c, b))
      std::swap(b, c);
    if (weightedBefore(b, a))
      std::swap(a, b);
    const WeightedLogit pivot = b;
    const auto first = v.begin() + std::ptrdiff_t(lo), last = v.begin() + std::ptrdiff_t(hi);
    const auto middle = std::partition(
        first, last, [&](const WeightedLogit& e) { return weightedBefore(e, pivot); });
    std::iter_swap(middle, std::find_if(middle, last, [&](const WeightedLogit& e) {
                     return e.id == pivot.id;
                   }));
    const size_t m = size_t(middle - v.begin());
    double left = 0;
    for (size_t i = lo; i < m; ++i)
      left += v[i].weight;
    if (passes(above + left)) {
      hi = m;
      continue;
    }
    above += left + pivot.weight;
    if (passes(above)) {
      sum = above;
      return m;
    }
    lo = m + 1;
  }
  std::sort(v.begin() + std::ptrdiff_t(lo), v.begin() + std::ptrdiff_t(hi), weightedBefore);
  for (size_t i = lo; i < hi; ++i) {
    above += v[i].weight;
    if (passes(above)) {
      sum = above;
      return i;
    }
  }
  sum = above;
  return hi;
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
    return drawNucleus(uniform);
  }
  return draw(sorted, uniform);
}

int32_t Sampler::drawNucleus(double uniform) {
  if (scratch_.empty())
    return 0;
  const auto top = std::min_element(scratch_.begin(), scratch_.end(), before);
  // All -inf, or +inf present: the argmax, as draw() takes it.
  if (!std::isfinite(top->first))
    return top->second;
  weighted_.clear();
  double total = 0;
  for (const auto& [value, id] : scratch_) {
    const float weight = float(std::exp(double(value - top->first) / params_.temperature));
    weighted_.push_back({value, id, weight});
    total += weight;
  }
  // The nucleus: the entries up to the first whose running sum (in `before` order) reaches
  // top_p of the total; then the first of them whose running sum passes the draw's share
  // of the nucleus's, or its last where rounding leaves none.
  double nucleus = 0, unused = 0;
  const size_t cut =
      std::min(crossing(weighted_, 0, weighted_.size(), 0.0, double(params_.topP) * total, true,
                        nucleus),
               weighted_.size() - 1) +
      1;
  const size_t pick = crossing(weighted_, 0, cut, 0.0, uniform * nucleus, false, unused);
  if (pick < cut)
    return weighted_[pick].id;
  return std::max_element(weighted_.begin(), weighted_.begin() + std::ptrdiff_t(cut),
                          weightedBefore)
      ->id;
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
