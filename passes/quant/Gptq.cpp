// GPTQ (see Gptq.h for the method). Work is split over tiles of output rows:
// every tile runs the whole column sweep with the shared factor M, so each
// block of M is read once per tile rather than once per row, and the tile's
// errors for one block (32 rows x 128 columns) stay in L1 while it is.
#include "Gptq.h"

#include "HessianFactor.h"
#include "Packing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace ninfer {
namespace quant {

namespace {

constexpr int64_t kTileRows = 32;

// H restricted to the column order `perm`, dead columns replaced by unit
// diagonal entries, plus damp on the diagonal.
std::vector<double> permutedDampedHessian(const double* h, int64_t k,
                                          const std::vector<int64_t>& perm,
                                          const std::vector<char>& dead, double damp) {
  std::vector<double> hp(k * k);
  for (int64_t p = 0; p < k; ++p) {
    const int64_t i = perm[p];
    for (int64_t q = 0; q < k; ++q) {
      const int64_t j = perm[q];
      hp[p * k + q] = (dead[i] || dead[j]) ? (i == j ? 1.0 : 0.0) : h[i * k + j];
    }
    hp[p * k + p] += damp;
  }
  return hp;
}

typedef float V4f __attribute__((vector_size(16)));

inline V4f load4(const float* p) {
  V4f v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
inline float sum4(V4f v) { return (v[0] + v[1]) + (v[2] + v[3]); }

float dot1(const float* a, const float* b, int64_t n) {
  V4f acc = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    acc += load4(a + i) * load4(b + i);
  float s = sum4(acc);
  for (; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

// Dot products of R rows a, a + stride, ... with one vector b, added to out[]:
// each load of b serves R rows (R = 8 uses 8 of the 16 SSE registers for sums).
template <int R>
void dotRows(const float* a, int64_t stride, const float* b, int64_t n, float* out) {
  V4f acc[R];
  for (int r = 0; r < R; ++r)
    acc[r] = V4f{0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const V4f bv = load4(b + i);
    for (int r = 0; r < R; ++r)
      acc[r] += load4(a + r * stride + i) * bv;
  }
  for (int r = 0; r < R; ++r) {
    float s = sum4(acc[r]);
    for (int64_t j = i; j < n; ++j)
      s += a[r * stride + j] * b[j];
    out[r] += s;
  }
}

} // namespace

Result<GptqFactor> factorGptq(const double* h, int64_t cols, const GptqOptions& options) {
  if (cols <= 0)
    return Status::error("quant: GPTQ needs at least one column");
  if (!(options.percDamp >= 0.0) || !std::isfinite(options.percDamp))
    return Status::error("quant: GPTQ damping must be finite and >= 0");
  NINFER_RETURN_IF_ERROR(checkFinite(h, cols * cols, "Hessian"));
  const int64_t k = cols;
  GptqFactor f;
  f.cols = k;
  f.actOrder = options.actOrder;
  std::vector<double> diag(k);
  f.dead.assign(k, 0);
  double diagSum = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    diag[j] = h[j * k + j];
    if (diag[j] < 0.0)
      return Status::error("quant: Hessian has a negative diagonal entry at column " +
                           std::to_string(j));
    f.dead[j] = diag[j] == 0.0;
    f.deadColumns += f.dead[j];
    diagSum += f.dead[j] ? 1.0 : diag[j];
  }

  f.perm.resize(k);
  std::iota(f.perm.begin(), f.perm.end(), 0);
  if (options.actOrder)
    std::stable_sort(f.perm.begin(), f.perm.end(),
                     [&](int64_t a, int64_t b) { return diag[a] > diag[b]; });
  f.pos.resize(k);
  for (int64_t p = 0; p < k; ++p)
    f.pos[f.perm[p]] = p;

  // Factor M of the damped, permuted H; more damping if it is not positive definite.
  double damp = options.percDamp * diagSum / static_cast<double>(k);
  for (int attempt = 0;; ++attempt) {
    std::vector<double> hp = permutedDampedHessian(h, k, f.perm, f.dead, damp);
    Status st = gptqFactor(hp, k, options.threads, f.m);
    if (st.isOk())
      break;
    if (attempt >= options.dampRetries)
      return Status::error(st.message() + " after damping by " + std::to_string(damp) +
                           "; raise the GPTQ damping");
    damp = damp > 0.0 ? damp * 10.0 : 1e-6 * diagSum / static_cast<double>(k);
  }
  f.damp = damp;
  f.importance.resize(k);
  for (int64_t j = 0; j < k; ++j)
    f.importance[j] = f.dead[j] ? 0.0f : static_cast<float>(diag[j]);
  return f;
}

Result<GptqResult> quantizeGptq(const float* w, int64_t rows, int64_t cols, const double* h,
                                const QuantSpec& spec, const GptqOptions& options) {
  NINFER_RETURN_IF_ERROR(validateSpec(spec, rows, cols));
  Result<GptqFactor> factor = factorGptq(h, cols, options);
  if (!factor.isOk())
    return factor.status();
  return quantizeGptq(w, rows, *factor, spec, options);
}

Result<GptqResult> quantizeGptq(const float* w, int64_t rows, const GptqFactor& factor,
                                const QuantSpec& spec, const GptqOptions& options) {
  const int64_t cols = factor.cols;
  NINFER_RETURN_IF_ERROR(validateSpec(spec, rows, cols));
  if (options.blockSize < 1)
    return Status::error("quant: GPTQ block size must be >= 1");
  if (options.actOrder != factor.actOrder)
    return Status::error("quant: the GPTQ factor was made for another column order");
  NINFER_RETURN_IF_ERROR(checkFinite(w, rows * cols, "weight"));
  const int64_t k = cols;
  const std::vector<int64_t>& perm = factor.perm;
  const std::vector<int64_t>& pos = factor.pos;
  const std::vector<char>& dead = factor.dead;
  const std::vector<float>& importance = factor.importance;
  const double damp = factor.damp;

  const int group = spec.groupSize;
  const int64_t groups = k / group;

  GptqResult result;
  result.damp = damp;
  result.deadColumns = factor.deadColumns;
  QuantizedTensor& out = result.tensor;
  out.spec = spec;
  out.rows = rows;
  out.cols = cols;
  out.packed.assign(quantTensorBytes(spec.bits, group, rows, cols), 0);
  if (options.keepDequantized)
    out.dequantized.resize(rows * cols);

  const QuantRange range = quantRange(spec.bits);
  const int64_t block = options.blockSize;
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  std::vector<double> tileLoss(tiles, 0.0);
  const float* mData = factor.m.data();

  parallelFor(tiles, options.threads, [&](int64_t tile) {
    const int64_t r0 = tile * kTileRows;
    const int64_t nr = std::min(kTileRows, rows - r0);
    // Original weights in processing order; per column, the rounding error
    // w - q once quantized, and the compensation sum over finished blocks.
    std::vector<float> w0(nr * k), err(nr * k, 0.0f), acc(nr * k, 0.0f);
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t p = 0; p < k; ++p)
        w0[r * k + p] = dead[perm[p]] ? 0.0f : w[(r0 + r) * k + perm[p]];
    std::vector<uint8_t> codes(nr * k);
    std::vector<uint16_t> scales(nr * groups);
    std::vector<float> values(group), shift(group);
    double loss = 0.0;

    if (options.actOrder) { // static groups: scales from the original weights
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t g = 0; g < groups; ++g) {
          for (int j = 0; j < group; ++j)
            values[j] = w0[r * k + pos[g * group + j]];
          scales[r * groups + g] = searchGroupScale(values.data(), &importance[g * group], group,
                                                    spec.bits, options.search);
        }
    }

    // sum_{t<p} err_t M_qt for column q of row r, while column p of the block
    // starting at i1 is next.
    auto compensation = [&](int64_t r, int64_t q, int64_t i1, int64_t p) {
      return acc[r * k + q] + dot1(&err[r * k + i1], mData + q * k + i1, p - i1);
    };

    for (int64_t i1 = 0; i1 < k; i1 += block) {
      const int64_t i2 = std::min(k, i1 + block);
      for (int64_t p = i1; p < i2; ++p) {
        const int64_t c = perm[p];
        const int64_t g = c / group;
        if (!options.actOrder && c % group == 0) {
          // The group's current values: the optimal compensation of columns
          // p..p+group-1 for the errors so far, w + M_FF^-1 M_FA e_A (Gptq.h),
          // by forward substitution over the group's rows of M.
          for (int64_t r = 0; r < nr; ++r) {
            for (int j = 0; j < group; ++j) {
              const float* mq = mData + (p + j) * k;
              const float y = compensation(r, p + j, i1, p) - dot1(mq + p, shift.data(), j);
              shift[j] = y / mq[p + j];
              values[j] = w0[r * k + p + j] + shift[j];
            }
            scales[r * groups + g] =
                searchGroupScale(values.data(), &importance[c], group, spec.bits, options.search);
          }
        }
        const float diagM = mData[p * k + p];
        for (int64_t r = 0; r < nr; ++r) {
          const float scale = halfBitsToFloat(scales[r * groups + g]);
          const float x = w0[r * k + p] + compensation(r, p, i1, p) / diagM;
          const int level = quantizeLevel(x, scaleInverse(scale), range);
          const float dq = scale * static_cast<float>(level);
          codes[r * k + c] = static_cast<uint8_t>(level + range.codeOffset);
          if (options.keepDequantized)
            out.dequantized[(r0 + r) * k + c] = dq;
          err[r * k + p] = w0[r * k + p] - dq;
          const double scaled = static_cast<double>(x - dq) * diagM;
          loss += scaled * scaled;
        }
      }
      // This block's errors, for every later column: acc[r][q] += err[r][i1:i2] . M[q][i1:i2].
      for (int64_t q = i2; q < k; ++q) {
        const float* mq = mData + q * k + i1;
        int64_t r = 0;
        float sums[8];
        for (; r + 8 <= nr; r += 8) {
          std::fill(sums, sums + 8, 0.0f);
          dotRows<8>(&err[r * k + i1], k, mq, i2 - i1, sums);
          for (int t = 0; t < 8; ++t)
            acc[(r + t) * k + q] += sums[t];
        }
        for (; r < nr; ++r)
          acc[r * k + q] += dot1(&err[r * k + i1], mq, i2 - i1);
      }
    }
    for (int64_t r = 0; r < nr; ++r)
      packRow(spec, rows, cols, r0 + r, &codes[r * k], &scales[r * groups], out.packed.data());
    tileLoss[tile] = loss;
  });

  for (double loss : tileLoss)
    result.lossEstimate += loss;
  if (!std::isfinite(result.lossEstimate))
    return Status::error("quant: GPTQ diverged (non-finite error); the Hessian is too badly "
                         "conditioned for damping " +
                         std::to_string(damp));
  return result;
}

std::vector<double> shrinkHessian(const double* h, int64_t cols, double lambda) {
  std::vector<double> out(h, h + cols * cols);
  const double keep = 1.0 - lambda;
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (i != j)
        out[size_t(i * cols + j)] *= keep;
  return out;
}

} // namespace quant
} // namespace ninfer
