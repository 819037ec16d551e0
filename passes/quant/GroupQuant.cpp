// Scale search and rounding of one group (see GroupQuant.h for the method).
#include "GroupQuant.h"

#include "ninfer/QuantFormats.h"

#include <algorithm>

namespace ninfer {
namespace quant {

namespace {

struct GroupScorer {
  const float* w;
  const float* h;
  int n;
  QuantRange range;

  // Weighted squared error at `scale`, accumulated in f32 with a vectorizable
  // loop: it only ranks candidates of one group (at most 128 terms).
  double error(float scale) const {
    const float inverse = scaleInverse(scale);
    const float lo = static_cast<float>(range.qmin), hi = static_cast<float>(range.qmax);
    float sum = 0.0f;
    if (h) {
#pragma omp simd reduction(+ : sum)
      for (int i = 0; i < n; ++i) {
        const float e = w[i] - scale * roundLevel(w[i] * inverse, lo, hi);
        sum += h[i] * e * e;
      }
    } else {
#pragma omp simd reduction(+ : sum)
      for (int i = 0; i < n; ++i) {
        const float e = w[i] - scale * roundLevel(w[i] * inverse, lo, hi);
        sum += e * e;
      }
    }
    return sum;
  }

  // True when some value would be rounded to a level beyond the range.
  bool clips(float scale) const {
    const float inverse = scaleInverse(scale);
    const float high = static_cast<float>(range.qmax) + 0.5f;
    const float low = static_cast<float>(range.qmin) - 0.5f;
    for (int i = 0; i < n; ++i) {
      const float t = w[i] * inverse;
      if (t > high || t < low)
        return true;
    }
    return false;
  }

  // Least-squares scale for the codes that `scale` gives.
  float refit(float scale) const {
    const float inverse = scaleInverse(scale);
    double num = 0.0, den = 0.0;
    for (int i = 0; i < n; ++i) {
      const double q = quantizeLevel(w[i], inverse, range);
      const double hi = h ? h[i] : 1.0;
      num += hi * w[i] * q;
      den += hi * q * q;
    }
    return den > 0.0 ? static_cast<float>(num / den) : scale;
  }
};

bool usableScale(float scale) { return scale != 0.0f && std::isfinite(scale); }

// The search of GroupQuant.h over the scales `snap` can represent: snap(x, add)
// calls add(bits, sub) for the representable scale(s) next to the ideal scale x
// (fp16: x rounded; K16: the two multiples of the unit scale around x).
template <class Snap>
uint16_t searchScale(const float* w, const float* importance, int n, int bits,
                     const ScaleSearchOptions& options, const Snap& snap, int* chosenSub) {
  const QuantRange range = quantRange(bits);
  float amax = 0.0f, extreme = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(w[i]) > amax) {
      amax = std::fabs(w[i]);
      extreme = w[i];
    }
  }
  if (amax == 0.0f)
    return 0;

  const GroupScorer scorer{w, importance, n, range};
  bool found = false;
  uint16_t best = 0;
  int bestSub = 0;
  double bestError = 0.0;
  // K16 sub-scales already scored (bit s + 32): the coarse grid maps many ideal
  // scales to the same one, and scoring it again cannot change the choice.
  uint64_t scoredSubs = 0;
  auto consider = [&](uint16_t candidate, int sub) {
    if (sub != 0) {
      const uint64_t bit = uint64_t(1) << (sub + 32);
      if (scoredSubs & bit)
        return;
      scoredSubs |= bit;
    }
    const float scale = halfBitsToFloat(candidate);
    if (!usableScale(scale) || (!options.clip && scorer.clips(scale)))
      return;
    const double e = scorer.error(scale);
    if (!found || e < bestError) {
      found = true;
      best = candidate;
      bestSub = sub;
      bestError = e;
    }
  };
  auto considerIdeal = [&](float x) { snap(x, consider); };

  // amax / qmax leaves every value within range up to the rounding of the
  // scale; where that rounding (or an underflow to a tiny subnormal) makes it
  // clip, step its magnitude up one value at a time until nothing clips, so
  // the no-clip search always has a candidate.
  snap.fullRange(amax / static_cast<float>(range.qmax), scorer, consider);
  considerIdeal(extreme / static_cast<float>(range.qmin));

  if (options.clip && options.clipSteps > 0) {
    const float step = (1.0f - options.minClipRatio) / static_cast<float>(options.clipSteps);
    for (int s = 1; s <= options.clipSteps; ++s) {
      const float ratio = 1.0f - step * static_cast<float>(s);
      considerIdeal(ratio * amax / static_cast<float>(range.qmax));
      considerIdeal(ratio * extreme / static_cast<float>(range.qmin));
    }
  }
  if (!found) // only when amax / qmax overflows: clip at the largest scale
    return snap.largest(chosenSub);
  for (int it = 0; it < options.refitIterations; ++it)
    considerIdeal(scorer.refit(halfBitsToFloat(best)));
  snap.neighbours(bestSub, consider);
  if (chosenSub)
    *chosenSub = bestSub;
  return best;
}

// Any fp16 scale.
struct HalfScales {
  template <class Add> void operator()(float x, const Add& add) const {
    add(floatToHalfBits(x), 0);
  }
  template <class Add> void fullRange(float x, const GroupScorer& scorer, const Add& add) const {
    uint16_t bits = floatToHalfBits(x);
    if ((bits & 0x7FFFu) == 0)
      bits = 1; // the smallest subnormal
    for (int step = 0;
         step < 64 && (bits & 0x7FFFu) < 0x7C00u && scorer.clips(halfBitsToFloat(bits)); ++step)
      ++bits;
    add(bits, 0);
  }
  template <class Add> void neighbours(int, const Add&) const {}
  uint16_t largest(int*) const { return 0x7BFFu; }
};

// K16: fp16(unit * s), s in [-32, 31] and not 0.
struct K16Scales {
  uint16_t unit;
  float unitValue;
  template <class Add> void addSub(int sub, const Add& add) const {
    if (sub != 0 && sub >= -32 && sub <= 31)
      add(k16Scale(unit, sub), sub);
  }
  template <class Add> void operator()(float x, const Add& add) const {
    // Beyond the sub-scales' range: the extreme of that sign (a scale the fp16
    // search would take there is within the reach of d, chooseK16UnitScale).
    const float t = x / unitValue;
    if (!(t > -32.0f))
      return addSub(-32, add);
    if (!(t < 31.0f))
      return addSub(31, add);
    const int below = static_cast<int>(std::floor(t));
    addSub(below, add);
    addSub(below + 1, add);
  }
  template <class Add> void fullRange(float x, const GroupScorer& scorer, const Add& add) const {
    const float t = x / unitValue;
    int sub = std::fabs(t) < 31.0f ? static_cast<int>(std::ceil(t)) : 31;
    while (sub < 31 && scorer.clips(halfBitsToFloat(k16Scale(unit, sub))))
      ++sub;
    addSub(sub == 0 ? 1 : sub, add);
  }
  template <class Add> void neighbours(int sub, const Add& add) const {
    addSub(sub - 1, add);
    addSub(sub + 1, add);
  }
  uint16_t largest(int* sub) const {
    if (sub)
      *sub = 31;
    return k16Scale(unit, 31);
  }
};

} // namespace

uint16_t searchGroupScale(const float* w, const float* importance, int n, int bits,
                          const ScaleSearchOptions& options) {
  return searchScale(w, importance, n, bits, options, HalfScales{}, nullptr);
}

int searchK16SubScale(const float* w, const float* importance, int n, int bits, uint16_t unitScale,
                      const ScaleSearchOptions& options) {
  const float unitValue = halfBitsToFloat(unitScale);
  if (!usableScale(unitValue))
    return 1; // an all-zero unit: every group scale is 0
  int sub = 1;
  searchScale(w, importance, n, bits, options, K16Scales{unitScale, unitValue}, &sub);
  return sub;
}

uint16_t chooseK16UnitScale(const float* w, const float* importance, int bits,
                            const ScaleSearchOptions& options) {
  float largest = 0.0f;
  for (int j = 0; j < kQuantUnitValues / kQuantK16Group; ++j) {
    const int first = j * kQuantK16Group;
    const float scale = halfBitsToFloat(searchGroupScale(
        w + first, importance ? importance + first : nullptr, kQuantK16Group, bits, options));
    largest = std::max(largest, std::fabs(scale));
  }
  // Rounded up to an fp16 value d with 31 d >= largest, so every group's searched
  // scale is within the sub-scales' reach (the no-clip bound holds for K16 too).
  uint16_t d = floatToHalfBits(largest / 31.0f);
  while ((d & 0x7FFFu) < 0x7BFFu && halfBitsToFloat(d) * 31.0f < largest)
    ++d;
  return d;
}

void quantizeGroup(const float* w, int n, int bits, uint16_t scaleBits, uint8_t* codes,
                   float* dequantized) {
  const QuantRange range = quantRange(bits);
  const float scale = halfBitsToFloat(scaleBits);
  const float inverse = scaleInverse(scale);
  for (int i = 0; i < n; ++i) {
    const int q = quantizeLevel(w[i], inverse, range);
    codes[i] = static_cast<uint8_t>(q + range.codeOffset);
    if (dequantized)
      dequantized[i] = scale * static_cast<float>(q);
  }
}

} // namespace quant
} // namespace ninfer
