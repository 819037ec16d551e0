// Deterministic data for the quantization tests: a splitmix64 generator (the
// same numbers on every platform, unlike std::normal_distribution), Gaussian
// matrices, and calibration-like inputs X = Z B + noise whose covariance is low
// rank plus a small isotropic part, as activations of real layers tend to be.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace ninfer {
namespace quant {
namespace test {

class Rng {
public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Standard normal (Box-Muller; the second value is dropped for simplicity).
  double normal() {
    const double u1 = 1.0 - uniform(); // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }

private:
  uint64_t state_;
};

inline std::vector<float> gaussian(Rng& rng, int64_t count, double sigma = 1.0) {
  std::vector<float> v(count);
  for (float& x : v)
    x = static_cast<float>(sigma * rng.normal());
  return v;
}

// X [n, k] = Z [n, rank] B [rank, k] + noise * N(0, 1); channel j of B is
// multiplied by channelScale[j] when given (outlier channels).
inline std::vector<double> lowRankInputs(Rng& rng, int64_t n, int64_t k, int64_t rank, double noise,
                                         const std::vector<double>& channelScale = {}) {
  std::vector<double> b(rank * k), x(n * k);
  for (double& v : b)
    v = rng.normal() / std::sqrt(static_cast<double>(rank));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> z(rank);
    for (double& v : z)
      v = rng.normal();
    for (int64_t j = 0; j < k; ++j) {
      double s = 0.0;
      for (int64_t r = 0; r < rank; ++r)
        s += z[r] * b[r * k + j];
      s += noise * rng.normal();
      x[i * k + j] = channelScale.empty() ? s : s * channelScale[j];
    }
  }
  return x;
}

// H = X^T X (f64 [k, k]).
inline std::vector<double> gram(const std::vector<double>& x, int64_t n, int64_t k) {
  std::vector<double> h(k * k, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const double* row = &x[i * k];
    for (int64_t a = 0; a < k; ++a) {
      const double ra = row[a];
      double* ha = &h[a * k];
      for (int64_t b = a; b < k; ++b)
        ha[b] += ra * row[b];
    }
  }
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < a; ++b)
      h[a * k + b] = h[b * k + a];
  return h;
}

// Mean |x_j| per column.
inline std::vector<float> meanAbs(const std::vector<double>& x, int64_t n, int64_t k) {
  std::vector<double> s(k, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      s[j] += std::fabs(x[i * k + j]);
  std::vector<float> out(k);
  for (int64_t j = 0; j < k; ++j)
    out[j] = static_cast<float>(s[j] / static_cast<double>(n));
  return out;
}

inline std::vector<float> diagonal(const std::vector<double>& h, int64_t k) {
  std::vector<float> d(k);
  for (int64_t j = 0; j < k; ++j)
    d[j] = static_cast<float>(h[j * k + j]);
  return d;
}

} // namespace test
} // namespace quant
} // namespace ninfer
