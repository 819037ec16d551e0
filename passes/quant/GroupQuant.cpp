// Scale search and rounding of one group (see GroupQuant.h for the method).
#include "GroupQuant.h"

#include "ninfer/QuantFormats.h"

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

} // namespace

uint16_t searchGroupScale(const float* w, const float* importance, int n, int bits,
                          const ScaleSearchOptions& options) {
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
  double bestError = 0.0;
  auto consider = [&](uint16_t candidate) {
    const float scale = halfBitsToFloat(candidate);
    if (!usableScale(scale) || (!options.clip && scorer.clips(scale)))
      return;
    const double e = scorer.error(scale);
    if (!found || e < bestError) {
      found = true;
      best = candidate;
      bestError = e;
    }
  };

  // amax / qmax leaves every value within range up to the fp16 rounding of the
  // scale; where that rounding (or an underflow to a tiny subnormal) makes it
  // clip, step its magnitude up one fp16 value at a time until nothing clips, so
  // the no-clip search always has a candidate.
  uint16_t fullRange = floatToHalfBits(amax / static_cast<float>(range.qmax));
  if ((fullRange & 0x7FFFu) == 0)
    fullRange = 1; // the smallest subnormal
  for (int step = 0;
       step < 64 && (fullRange & 0x7FFFu) < 0x7C00u && scorer.clips(halfBitsToFloat(fullRange));
       ++step)
    ++fullRange;
  consider(fullRange);
  consider(floatToHalfBits(extreme / static_cast<float>(range.qmin)));

  if (options.clip && options.clipSteps > 0) {
    const float step = (1.0f - options.minClipRatio) / static_cast<float>(options.clipSteps);
    for (int s = 1; s <= options.clipSteps; ++s) {
      const float ratio = 1.0f - step * static_cast<float>(s);
      consider(floatToHalfBits(ratio * amax / static_cast<float>(range.qmax)));
      consider(floatToHalfBits(ratio * extreme / static_cast<float>(range.qmin)));
    }
  }
  if (!found) // only when amax / qmax overflows fp16: clip at the largest half
    return 0x7BFFu;
  for (int it = 0; it < options.refitIterations; ++it)
    consider(floatToHalfBits(scorer.refit(halfBitsToFloat(best))));
  return best;
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
