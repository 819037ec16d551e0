// Quantization of one group of weights: choosing its fp16 scale and rounding
// the values to codes. Shared by RTN (every group from the original weights)
// and GPTQ (each group when its first column is reached, from the error-updated
// weights), so GPTQ with nothing to compensate reproduces RTN bit for bit.
//
// Scale search. A symmetric format stores q in [qmin, qmax] = [-2^(b-1),
// 2^(b-1) - 1] and a signed fp16 scale d; w' = d q. Candidates, each rounded to
// fp16 before it is scored (the stored scale is what counts):
//   d = r * amax / qmax      (the largest magnitude lands on +-qmax), and
//   d = r * m / qmin         (the signed extreme m lands on qmin: uses the extra
//                             negative level, best when one value dominates),
// for clip ratios r from 1 down to minClipRatio, then a least-squares refit of
// the best: d = sum(h w q) / sum(h q^2) for its codes. Score: sum h (w - d q)^2,
// h = per-column importance (diag of H, or 1). First minimum wins (deterministic).
// Without clipping only scales that leave every w / d within [qmin - 1/2,
// qmax + 1/2] are allowed, so |w - d q| <= |d| / 2 for every value.
#pragma once

#include <cmath>
#include <cstdint>

namespace ninfer {
namespace quant {

struct ScaleSearchOptions {
  bool clip = true;           // search clip ratios below 1 (else: no value is clipped)
  float minClipRatio = 0.75f; // smallest ratio tried
  int clipSteps = 10;         // ratios 1, 1 - step, ..., minClipRatio
  int refitIterations = 1;    // least-squares refits of the best scale
};

struct QuantRange {
  int qmin;
  int qmax;
  int codeOffset; // code = q + codeOffset
};

inline QuantRange quantRange(int bits) {
  const int offset = 1 << (bits - 1);
  return {-offset, offset - 1, offset};
}

// Nearest level to t within [lo, hi], ties to even: clamping first gives the
// same level as rounding first, and adding then subtracting 1.5 * 2^23 rounds a
// float of magnitude below 2^22 to an integer in the current (nearest-even)
// rounding mode. Unlike nearbyintf this inlines and vectorizes without SSE4.1.
// (Relies on IEEE float arithmetic as written: no -ffast-math.)
inline float roundLevel(float t, float lo, float hi) {
  t = t < lo ? lo : t;
  t = t > hi ? hi : t;
  return (t + 12582912.0f) - 12582912.0f;
}

// q for w at a scale with reciprocal `inverse` (0 for a zero scale).
inline int quantizeLevel(float w, float inverse, const QuantRange& range) {
  return static_cast<int>(
      roundLevel(w * inverse, static_cast<float>(range.qmin), static_cast<float>(range.qmax)));
}

inline float scaleInverse(float scale) { return scale == 0.0f ? 0.0f : 1.0f / scale; }

// fp16 bits of the chosen scale for w[0..n) with importance h (nullptr = all 1).
// Values must be finite. An all-zero group gets scale 0.
uint16_t searchGroupScale(const float* w, const float* importance, int n, int bits,
                          const ScaleSearchOptions& options);

// K16 (QuantFormats.h): the same search over the scales fp16(d * s) of a unit
// scale d (fp16 bits `unitScale`), s in [-32, 31] and not 0 (each candidate's
// two neighbouring multiples, and s +- 1 of the best at the end). Returns s.
int searchK16SubScale(const float* w, const float* importance, int n, int bits, uint16_t unitScale,
                      const ScaleSearchOptions& options);

// The unit scale d of a K16 unit w[0..128): the largest magnitude of its eight
// groups' searched fp16 scales over 31 (the largest positive sub-scale), rounded
// up to fp16.
uint16_t chooseK16UnitScale(const float* w, const float* importance, int bits,
                            const ScaleSearchOptions& options);

// Codes and dequantized values of w[0..n) at the fp16 scale `scaleBits`.
void quantizeGroup(const float* w, int n, int bits, uint16_t scaleBits, uint8_t* codes,
                   float* dequantized);

} // namespace quant
} // namespace ninfer
