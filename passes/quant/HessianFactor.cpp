// Blocked Cholesky and the GPTQ factor (see HessianFactor.h).
//
// Right-looking, row-oriented: a panel of kPanel rows of R is factored, then
// every row below it gets the panel's rank-kPanel update in one pass, 8 columns
// at a time held in registers (explicit 2-wide vectors: only SSE2 is assumed,
// and no FMA, so results are the same on every x86-64). The panel (kPanel rows
// of at most n doubles) stays in L2 during the update.
#include "HessianFactor.h"

#include "QuantCommon.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ninfer {
namespace quant {

namespace {

constexpr int64_t kPanel = 32;
constexpr int64_t kRowsPerItem = 8;

typedef double V2d __attribute__((vector_size(16)));

inline V2d load2(const double* p) {
  V2d v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
inline void store2(double* p, V2d v) { __builtin_memcpy(p, &v, sizeof(v)); }

// row[j] -= sum_k coef[k] * panel[k * n + j] for j in [begin, n), k < depth.
void rankUpdate(double* row, const double* coef, const double* panel, int64_t depth, int64_t n,
                int64_t begin) {
  int64_t j = begin;
  for (; j + 8 <= n; j += 8) {
    V2d a0 = load2(row + j), a1 = load2(row + j + 2), a2 = load2(row + j + 4),
        a3 = load2(row + j + 6);
    for (int64_t k = 0; k < depth; ++k) {
      const double* p = panel + k * n + j;
      const V2d c = {coef[k], coef[k]};
      a0 -= c * load2(p);
      a1 -= c * load2(p + 2);
      a2 -= c * load2(p + 4);
      a3 -= c * load2(p + 6);
    }
    store2(row + j, a0);
    store2(row + j + 2, a1);
    store2(row + j + 4, a2);
    store2(row + j + 6, a3);
  }
  for (; j < n; ++j) {
    double s = row[j];
    for (int64_t k = 0; k < depth; ++k)
      s -= coef[k] * panel[k * n + j];
    row[j] = s;
  }
}

} // namespace

Status choleskyUpper(double* a, int64_t n, int threads) {
  for (int64_t k0 = 0; k0 < n; k0 += kPanel) {
    const int64_t k1 = std::min(n, k0 + kPanel);
    // Panel rows, one after the other; each updates the panel rows below it.
    for (int64_t k = k0; k < k1; ++k) {
      double* rk = a + k * n;
      const double pivot = rk[k];
      if (!(pivot > 0.0) || !std::isfinite(pivot))
        return Status::error("quant: matrix is not positive definite (pivot " +
                             std::to_string(pivot) + " at column " + std::to_string(k) + ")");
      const double diag = std::sqrt(pivot);
      const double inverse = 1.0 / diag;
      rk[k] = diag;
      for (int64_t j = k + 1; j < n; ++j)
        rk[j] *= inverse;
      for (int64_t i = k + 1; i < k1; ++i)
        rankUpdate(a + i * n, rk + i, rk, 1, n, i);
    }
    if (k1 == n)
      break;
    // Trailing rows: row i, columns i.., minus sum over the panel of R[k][i] R[k][..].
    const double* panel = a + k0 * n;
    const int64_t depth = k1 - k0;
    const int64_t items = (n - k1 + kRowsPerItem - 1) / kRowsPerItem;
    parallelFor(items, threads, [&](int64_t item) {
      double coef[kPanel];
      const int64_t end = std::min(n, k1 + (item + 1) * kRowsPerItem);
      for (int64_t i = k1 + item * kRowsPerItem; i < end; ++i) {
        for (int64_t k = 0; k < depth; ++k)
          coef[k] = panel[k * n + i];
        rankUpdate(a + i * n, coef, panel, depth, n, i);
      }
    });
  }
  return Status::ok();
}

Status gptqFactor(std::vector<double>& h, int64_t n, int threads, std::vector<float>& m) {
  if (static_cast<int64_t>(h.size()) != n * n)
    return Status::error("quant: Hessian buffer has the wrong size");
  // Reversing the flat array maps element (r, c) to (n-1-r, n-1-c): h becomes J h J.
  std::reverse(h.begin(), h.end());
  NINFER_RETURN_IF_ERROR(choleskyUpper(h.data(), n, threads));
  // M = J R J: M[r][c] = R[n-1-r][n-1-c], lower triangular.
  m.assign(n * n, 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    const double* rr = h.data() + (n - 1 - r) * n + (n - 1);
    float* mr = m.data() + r * n;
    for (int64_t c = 0; c <= r; ++c)
      mr[c] = static_cast<float>(rr[-c]);
  }
  return Status::ok();
}

} // namespace quant
} // namespace ninfer
