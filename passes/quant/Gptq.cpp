// GPTQ (see Gptq.h for the method). Work is split over tiles of 32 output
// rows; every tile runs the whole column sweep with the shared factor M.
//
// Inside a tile the rows are the SIMD lanes: the tile's weights, compensations
// and errors are stored column by column ([column][32 rows]), so every step is
// the same operation on 32 independent rows, a scalar of M broadcast against a
// vector of rows, and no sum is ever split into partial sums. The compensation
// of column q, C_q = sum_{t<q} e_t M_qt, is one running sum per row, with terms
// added in increasing t whenever C_q is brought up to date ("through[q]": the
// terms added so far): at a group's start for the group's columns (its current
// values), at column q itself, and at the end of every block for all later
// columns (the lazy batch update, one pass over the block's errors per column
// while they are in L1). Since a running sum only ever grows in t order, the
// result is the same bits for every block size, and, the lanes being
// independent, for every vector width: SSE, AVX2 and AVX-512 code (picked at
// run time) give the same bytes, like one scalar row at a time would.
// Multiplies and adds stay separate (no FMA) for the same reason.
#include "Gptq.h"

#include "HessianFactor.h"
#include "Packing.h"
#include "SimdLanes.h"

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

// What a tile reads and where it writes.
struct GptqJob {
  const float* w;
  int64_t rows;
  const GptqFactor* factor;
  QuantSpec spec;
  const GptqOptions* options;
  QuantizedTensor* out;
};

// Lanes<V> plus the tile geometry.
template <int V> struct TileLanes : Lanes<V> {
  static constexpr int kVectors = int(kTileRows) / V; // vectors per tile column
  // Columns brought up to date together: 8 vector accumulators.
  static constexpr int kColumns = 8 / kVectors > 0 ? 8 / kVectors : 1;
};

// C[q] += sum_{t in [t0, t1)} M[q][t] E[t] for `count` (<= kColumns)
// consecutive columns q, terms in increasing t.
template <int V, int Count>
NINFER_INLINE void accumulateColumns(float* c, const float* m, int64_t k, const float* e,
                                     int64_t t0, int64_t t1) {
  using L = TileLanes<V>;
  typename L::F acc[Count][L::kVectors];
  for (int j = 0; j < Count; ++j)
    for (int v = 0; v < L::kVectors; ++v)
      acc[j][v] = L::load(c + j * kTileRows + v * V);
  for (int64_t t = t0; t < t1; ++t) {
    typename L::F ev[L::kVectors];
    for (int v = 0; v < L::kVectors; ++v)
      ev[v] = L::load(e + t * kTileRows + v * V);
    for (int j = 0; j < Count; ++j) {
      const typename L::F mj = L::splat(m[j * k + t]);
      for (int v = 0; v < L::kVectors; ++v)
        acc[j][v] += mj * ev[v];
    }
  }
  for (int j = 0; j < Count; ++j)
    for (int v = 0; v < L::kVectors; ++v)
      L::store(c + j * kTileRows + v * V, acc[j][v]);
}

// Brings columns [q0, q1) up to date through column tEnd (exclusive).
template <int V>
NINFER_INLINE void bringUp(float* comp, int64_t* through, const float* m, int64_t k,
                           const float* err, int64_t q0, int64_t q1, int64_t tEnd) {
  constexpr int kColumns = TileLanes<V>::kColumns;
  int64_t q = q0;
  while (q < q1) {
    const int64_t t0 = through[q];
    int64_t run = 1;
    while (run < kColumns && q + run < q1 && through[q + run] == t0)
      ++run;
    if (t0 < tEnd) {
      if (run == kColumns)
        accumulateColumns<V, kColumns>(comp + q * kTileRows, m + q * k, k, err, t0, tEnd);
      else
        for (int64_t j = 0; j < run; ++j)
          accumulateColumns<V, 1>(comp + (q + j) * kTileRows, m + (q + j) * k, k, err, t0,
                                  tEnd);
      for (int64_t j = 0; j < run; ++j)
        through[q + j] = tEnd;
    }
    q += run;
  }
}

template <int V> NINFER_INLINE double gptqTileImpl(const GptqJob& job, int64_t tile) {
  using L = TileLanes<V>;
  using F = typename L::F;
  using D = typename L::D;
  constexpr int64_t R = kTileRows;
  const GptqFactor& f = *job.factor;
  const GptqOptions& options = *job.options;
  const QuantSpec& spec = job.spec;
  const int64_t k = f.cols;
  const int group = spec.groupSize;
  const int64_t groups = k / group;
  const float* m = f.m.data();
  const QuantRange range = quantRange(spec.bits);
  const int64_t r0 = tile * R;
  const int64_t nr = std::min(R, job.rows - r0);

  // [column in processing order][row]: original weights (0 in padding rows),
  // compensations, errors; per [group][row] the scale and its reciprocal.
  std::vector<float> w0(k * R, 0.0f), comp(k * R, 0.0f), err(k * R, 0.0f);
  std::vector<int64_t> through(k, 0);
  std::vector<float> scale(groups * R, 0.0f), inverse(groups * R, 0.0f);
  std::vector<uint16_t> scaleBits(nr * groups, 0);
  std::vector<uint8_t> codes(nr * k);
  // K16: a unit's scale d is chosen from the whole unit's values, so the span
  // whose current values are needed at once is the unit, not the group.
  const bool k16 = spec.isK16();
  const int64_t units = k / kQuantUnitValues;
  const int span = k16 ? kQuantUnitValues : group;
  std::vector<uint16_t> unitScale(k16 ? nr * units : 0);
  std::vector<int> subScale(k16 ? nr * groups : 0);
  std::vector<float> shift(size_t(span) * R), values(span);
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t p = 0; p < k; ++p)
      w0[p * R + r] = f.dead[f.perm[p]] ? 0.0f : job.w[(r0 + r) * k + f.perm[p]];
  auto setScale = [&](int64_t r, int64_t g, uint16_t bits) {
    scaleBits[r * groups + g] = bits;
    scale[g * R + r] = halfBitsToFloat(bits);
    inverse[g * R + r] = scaleInverse(scale[g * R + r]);
  };
  // The scale of group g of row r from its values (K16: a unit's first group
  // also chooses the unit scale from `unitValues`, the unit's values).
  auto chooseScale = [&](int64_t r, int64_t g, const float* groupValues, const float* unitValues) {
    const float* importance = &f.importance[g * group];
    if (!k16)
      return setScale(r, g,
                      searchGroupScale(groupValues, importance, group, spec.bits, options.search));
    const int64_t u = g * group / kQuantUnitValues;
    if (unitValues)
      unitScale[r * units + u] = chooseK16UnitScale(unitValues, &f.importance[u * kQuantUnitValues],
                                                    spec.bits, options.search);
    const uint16_t d = unitScale[r * units + u];
    const int sub = searchK16SubScale(groupValues, importance, group, spec.bits, d, options.search);
    subScale[r * groups + g] = sub;
    setScale(r, g, k16Scale(d, sub));
  };
  if (options.actOrder) // static groups: scales from the original weights
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t first = k16 ? g * group / kQuantUnitValues * kQuantUnitValues : g * group;
        for (int j = 0; j < span; ++j)
          values[j] = w0[f.pos[first + j] * R + r];
        const bool unitStart = k16 && g * group % kQuantUnitValues == 0;
        chooseScale(r, g, values.data() + (g * group - first), unitStart ? values.data() : nullptr);
      }

  const F lo = L::splat(float(range.qmin)), hi = L::splat(float(range.qmax));
  const F magic = L::splat(12582912.0f); // roundLevel's 1.5 * 2^23
  D loss[L::kVectors] = {};
  float levels[R], dequantized[R];
  const int64_t block = options.blockSize;
  for (int64_t i1 = 0; i1 < k; i1 += block) {
    const int64_t i2 = std::min(k, i1 + block);
    for (int64_t p = i1; p < i2; ++p) {
      const int64_t c = f.perm[p];
      const int64_t g = c / group;
      if (!options.actOrder && c % group == 0) {
        // The group's (K16 at a unit's start: the unit's) current values:
        // w + M_FF^-1 M_FA e_A (Gptq.h), by forward substitution over those
        // rows of M, on the compensations through p.
        const bool unitStart = k16 && c % kQuantUnitValues == 0;
        const int n = unitStart ? span : group;
        bringUp<V>(comp.data(), through.data(), m, k, err.data(), p, p + n, p);
        for (int j = 0; j < n; ++j) {
          const float* mq = m + (p + j) * k + p;
          for (int v = 0; v < L::kVectors; ++v) {
            F sum = L::splat(0.0f);
            for (int i = 0; i < j; ++i)
              sum += L::splat(mq[i]) * L::load(&shift[i * R + v * V]);
            const F y = L::load(&comp[(p + j) * R + v * V]) - sum;
            L::store(&shift[j * R + v * V], y / L::splat(mq[j]));
          }
        }
        for (int64_t r = 0; r < nr; ++r) {
          for (int j = 0; j < n; ++j)
            values[j] = w0[(p + j) * R + r] + shift[j * R + r];
          chooseScale(r, g, values.data(), unitStart ? values.data() : nullptr);
        }
      }
      bringUp<V>(comp.data(), through.data(), m, k, err.data(), p, p + 1, p);
      const float diagM = m[p * k + p];
      const F diag = L::splat(diagM);
      const D diagD = __builtin_convertvector(diag, D);
      for (int v = 0; v < L::kVectors; ++v) {
        const F wv = L::load(&w0[p * R + v * V]);
        const F x = wv + L::load(&comp[p * R + v * V]) / diag;
        F t = x * L::load(&inverse[g * R + v * V]);
        t = t < lo ? lo : t;
        t = t > hi ? hi : t;
        const F level = (t + magic) - magic;
        const F dq = L::load(&scale[g * R + v * V]) * level;
        L::store(&err[p * R + v * V], wv - dq);
        const D d = __builtin_convertvector(x - dq, D) * diagD;
        loss[v] += d * d;
        L::store(&levels[v * V], level);
        L::store(&dequantized[v * V], dq);
      }
      for (int64_t r = 0; r < nr; ++r)
        codes[r * k + c] = static_cast<uint8_t>(int(levels[r]) + range.codeOffset);
      if (options.keepDequantized)
        for (int64_t r = 0; r < nr; ++r)
          job.out->dequantized[(r0 + r) * k + c] = dequantized[r];
    }
    // The lazy batch update: this block's errors into every later column.
    bringUp<V>(comp.data(), through.data(), m, k, err.data(), i2, k, i2);
  }
  std::vector<uint16_t> records(k16 ? units * 4 : 0);
  for (int64_t r = 0; r < nr; ++r) {
    if (k16)
      for (int64_t u = 0; u < units; ++u)
        setK16Record(&records[u * 4], unitScale[r * units + u],
                     &subScale[r * groups + u * (kQuantUnitValues / group)]);
    packRow(spec, job.rows, k, r0 + r, &codes[r * k], k16 ? records.data() : &scaleBits[r * groups],
            job.out->packed.data());
  }
  double total = 0.0;
  for (int64_t r = 0; r < nr; ++r)
    total += loss[r / V][r % V];
  return total;
}

double gptqTileGeneric(const GptqJob& job, int64_t tile) { return gptqTileImpl<4>(job, tile); }

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2"))) double gptqTileAvx2(const GptqJob& job, int64_t tile) {
  return gptqTileImpl<8>(job, tile);
}
__attribute__((target("avx512f"))) double gptqTileAvx512(const GptqJob& job, int64_t tile) {
  return gptqTileImpl<16>(job, tile);
}
#endif

// The tile kernel for `lanes` (0: the widest this CPU runs).
Result<double (*)(const GptqJob&, int64_t)> tileKernel(int lanes) {
  Result<int> resolved = resolveLanes(lanes);
  if (!resolved.isOk())
    return Status::error(resolved.status().message() + " (GPTQ)");
#if defined(__GNUC__) && defined(__x86_64__)
  if (*resolved == 16)
    return &gptqTileAvx512;
  if (*resolved == 8)
    return &gptqTileAvx2;
#endif
  return &gptqTileGeneric;
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
  Result<double (*)(const GptqJob&, int64_t)> kernel = tileKernel(options.lanes);
  if (!kernel.isOk())
    return kernel.status();
  NINFER_RETURN_IF_ERROR(checkFinite(w, rows * cols, "weight"));

  GptqResult result;
  result.damp = factor.damp;
  result.deadColumns = factor.deadColumns;
  QuantizedTensor& out = result.tensor;
  out.spec = spec;
  out.rows = rows;
  out.cols = cols;
  out.packed.assign(quantTensorBytes(spec.bits, spec.groupSize, rows, cols), 0);
  if (options.keepDequantized)
    out.dequantized.resize(rows * cols);

  const GptqJob job{w, rows, &factor, spec, &options, &out};
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  std::vector<double> tileLoss(tiles, 0.0);
  parallelFor(tiles, options.threads,
              [&](int64_t tile) { tileLoss[tile] = (*kernel)(job, tile); });

  for (double loss : tileLoss)
    result.lossEstimate += loss;
  if (!std::isfinite(result.lossEstimate))
    return Status::error("quant: GPTQ diverged (non-finite error); the Hessian is too badly "
                         "conditioned for damping " +
                         std::to_string(factor.damp));
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
