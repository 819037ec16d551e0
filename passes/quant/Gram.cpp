// X^T X and A^T B (see Gram.h). A work item is a block of kRows rows i of H;
// for each chunk of kVectors x V entries j of those rows, the tokens t are
// walked in order with a broadcast a[t][i] times the vector b[t][j..]: kRows x
// kVectors independent f32 accumulators, nothing split into partial sums.
// X^T X is the case a = b = x with only the upper triangle stored.
#include "Gram.h"

#include "QuantCommon.h"
#include "SimdLanes.h"

#include <algorithm>

namespace ninfer {
namespace quant {

namespace {

template <int V> struct GramShape {
  // 8 vector accumulators, rows x vectors (16 rows of one AVX-512 vector
  // measured slower at 512 columns and no faster at 1536).
  static constexpr int kRows = V == 16 ? 8 : 4;
  static constexpr int kVectors = V == 16 ? 1 : 2;
  static constexpr int kColumns = kVectors * V;
};

// Rows [i0, i0 + Rows), entries [j0, j0 + kColumns), tokens in order; with
// Upper, entries left of the diagonal are computed but not stored.
template <int V, int Rows, bool Upper>
NINFER_INLINE void gramChunk(const float* a, const float* b, int n, int64_t cols, double* h,
                             int64_t i0, int64_t j0) {
  using L = Lanes<V>;
  constexpr int kVectors = GramShape<V>::kVectors;
  typename L::F acc[Rows][kVectors] = {};
  for (int t = 0; t < n; ++t) {
    const float* rowA = a + int64_t(t) * cols;
    const float* rowB = b + int64_t(t) * cols;
    typename L::F xj[kVectors];
    for (int v = 0; v < kVectors; ++v)
      xj[v] = L::load(rowB + j0 + v * V);
    for (int r = 0; r < Rows; ++r) {
      const typename L::F xi = L::splat(rowA[i0 + r]);
      for (int v = 0; v < kVectors; ++v)
        acc[r][v] += xi * xj[v];
    }
  }
  for (int r = 0; r < Rows; ++r) {
    double* hr = h + (i0 + r) * cols;
    for (int v = 0; v < kVectors; ++v)
      for (int l = 0; l < V; ++l) {
        const int64_t j = j0 + v * V + l;
        if (!Upper || j >= i0 + r)
          hr[j] += double(acc[r][v][l]);
      }
  }
}

// Rows [i0, i0 + rows) of H: whole chunks (aligned to kColumns, so a width
// that is a multiple of it has no tail) from the one holding the diagonal on
// (Upper) or from the first, then the tail entries one at a time (the same sums).
template <int V, bool Upper>
NINFER_INLINE void gramRows(const float* a, const float* b, int n, int64_t cols, double* h,
                            int64_t i0, int64_t rows) {
  constexpr int kRows = GramShape<V>::kRows;
  constexpr int64_t kColumns = GramShape<V>::kColumns;
  int64_t j0 = Upper ? i0 - i0 % kColumns : 0;
  for (; j0 + kColumns <= cols; j0 += kColumns) {
    if (rows == kRows)
      gramChunk<V, kRows, Upper>(a, b, n, cols, h, i0, j0);
    else
      for (int64_t r = 0; r < rows; ++r)
        gramChunk<V, 1, Upper>(a, b, n, cols, h, i0 + r, j0);
  }
  for (int64_t i = i0; i < i0 + rows; ++i)
    for (int64_t j = Upper ? std::max(j0, i) : j0; j < cols; ++j) {
      float s = 0.0f;
      for (int t = 0; t < n; ++t)
        s += a[int64_t(t) * cols + i] * b[int64_t(t) * cols + j];
      h[i * cols + j] += double(s);
    }
}

template <bool Upper>
void gramRowsGeneric(const float* a, const float* b, int n, int64_t cols, double* h, int64_t i0,
                     int64_t rows) {
  gramRows<4, Upper>(a, b, n, cols, h, i0, rows);
}
#if defined(__GNUC__) && defined(__x86_64__)
template <bool Upper>
__attribute__((target("avx2"))) void gramRowsAvx2(const float* a, const float* b, int n,
                                                  int64_t cols, double* h, int64_t i0,
                                                  int64_t rows) {
  gramRows<8, Upper>(a, b, n, cols, h, i0, rows);
}
template <bool Upper>
__attribute__((target("avx512f"))) void gramRowsAvx512(const float* a, const float* b, int n,
                                                       int64_t cols, double* h, int64_t i0,
                                                       int64_t rows) {
  gramRows<16, Upper>(a, b, n, cols, h, i0, rows);
}
#endif

template <bool Upper>
Status accumulate(const float* a, const float* b, int n, int64_t cols, double* h, int threads,
                  int lanes) {
  Result<int> resolved = resolveLanes(lanes);
  if (!resolved.isOk())
    return resolved.status();
  auto kernel = &gramRowsGeneric<Upper>;
  int rowsPerItem = GramShape<4>::kRows;
#if defined(__GNUC__) && defined(__x86_64__)
  if (*resolved == 16) {
    kernel = &gramRowsAvx512<Upper>;
    rowsPerItem = GramShape<16>::kRows;
  } else if (*resolved == 8) {
    kernel = &gramRowsAvx2<Upper>;
    rowsPerItem = GramShape<8>::kRows;
  }
#endif
  if (n <= 0 || cols <= 0)
    return Status::ok();
  // Items in row order: with Upper the longest rows first, which balances the threads.
  const int64_t items = (cols + rowsPerItem - 1) / rowsPerItem;
  parallelFor(items, threads, [&](int64_t item) {
    const int64_t i0 = item * rowsPerItem;
    kernel(a, b, n, cols, h, i0, std::min<int64_t>(rowsPerItem, cols - i0));
  });
  return Status::ok();
}

} // namespace

Status accumulateGram(const float* x, int n, int64_t cols, double* h, int threads, int lanes) {
  return accumulate<true>(x, x, n, cols, h, threads, lanes);
}

Status accumulateCrossGram(const float* a, const float* b, int n, int64_t cols, double* out,
                           int threads, int lanes) {
  return accumulate<false>(a, b, n, cols, out, threads, lanes);
}

} // namespace quant
} // namespace ninfer
