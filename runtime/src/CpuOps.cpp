// CPU reference kernels. Plain loops in f32 (the semantics live in plan.fbs);
// dot products use eight partial sums so the compiler can vectorize them
// without -ffast-math, and each output element is computed by exactly one
// task, so results do not depend on the thread count.
#include "CpuOps.h"

#include "Half.h"

#include "ninfer/KvFormat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ninfer {
namespace cpu {
namespace {

float dot(const float* a, const float* b, int64_t count) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (int l = 0; l < 8; ++l)
      partial[l] += a[i + l] * b[i + l];
  for (int l = 0; i < count; ++i, ++l)
    partial[l] += a[i] * b[i];
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
         ((partial[4] + partial[5]) + (partial[6] + partial[7]));
}

// dot() of two rows of a with two rows of b at once: out[2 * r + c] =
// dot(a_r, b_c), bit for bit (each of the four sums runs the same eight lanes
// in the same order and is reduced the same way), with every loaded value used
// twice and eight independent accumulators instead of two.
typedef float V4 __attribute__((vector_size(16)));

inline V4 load4(const float* p) {
  V4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Adds the tail (elements from i on) to the eight lane sums of each of the four
// products and reduces them in dot()'s order.
void finishDot2x2(const float* a0, const float* a1, const float* b0, const float* b1,
                  int64_t count, int64_t i, float (&partials)[4][8], float* out) {
  const float* as[2] = {a0, a1};
  const float* bs[2] = {b0, b1};
  for (int k = 0; k < 4; ++k) {
    float* partial = partials[k];
    const float* a = as[k / 2];
    const float* b = bs[k % 2];
    int64_t j = i;
    for (int l = 0; j < count; ++j, ++l)
      partial[l] += a[j] * b[j];
    out[k] = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
             ((partial[4] + partial[5]) + (partial[6] + partial[7]));
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// The same with 8-lane AVX2 vectors: lane l of a vector is lane l of dot()'s
// partial sums, multiplies and adds stay separate (no FMA; this file is built
// with -ffp-contract=off, since AVX-512 has FMA), so the results are the same
// bits with half the instructions. Picked at run time.
typedef float V8 __attribute__((vector_size(32)));
typedef float V8Unaligned __attribute__((vector_size(32), aligned(4), may_alias));
typedef float V4f __attribute__((vector_size(16)));

// Four vectors of lane sums reduced in dot()'s order, ((p0 + p1) + (p2 + p3)) +
// ((p4 + p5) + (p6 + p7)), at once: the first horizontal add gives the pair
// sums, the second the quad sums of each 128-bit half, and the halves are
// added last.
__attribute__((target("avx2"), always_inline)) inline V4f reduceInDotOrder(V8 a, V8 b, V8 c,
                                                                          V8 d) {
  const V8 pairsAB = __builtin_ia32_haddps256(a, b);
  const V8 pairsCD = __builtin_ia32_haddps256(c, d);
  const V8 quads = __builtin_ia32_haddps256(pairsAB, pairsCD);
  const V4f lo = __builtin_shufflevector(quads, quads, 0, 1, 2, 3);
  const V4f hi = __builtin_shufflevector(quads, quads, 4, 5, 6, 7);
  return lo + hi;
}

__attribute__((target("avx2"))) void dot2x2Avx2(const float* a0, const float* a1,
                                                const float* b0, const float* b1, int64_t count,
                                                float* out) {
  V8 acc[4] = {}; // 00, 01, 10, 11
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const V8 x0 = *reinterpret_cast<const V8Unaligned*>(a0 + i);
    const V8 x1 = *reinterpret_cast<const V8Unaligned*>(a1 + i);
    const V8 y0 = *reinterpret_cast<const V8Unaligned*>(b0 + i);
    const V8 y1 = *reinterpret_cast<const V8Unaligned*>(b1 + i);
    acc[0] += x0 * y0;
    acc[1] += x0 * y1;
    acc[2] += x1 * y0;
    acc[3] += x1 * y1;
  }
  if (i == count) {
    const V4f sums = reduceInDotOrder(acc[0], acc[1], acc[2], acc[3]);
    __builtin_ia32_vzeroupper();
    std::memcpy(out, &sums, sizeof(sums));
    return;
  }
  float partials[4][8];
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 8; ++l)
      partials[k][l] = acc[k][l];
  // Clean upper halves before SSE code runs again (else every SSE instruction
  // after this pays for the mixed state: 4x slower prefill, measured).
  __builtin_ia32_vzeroupper();
  finishDot2x2(a0, a1, b0, b1, count, i, partials, out);
}

// dot() of four rows a_t with two rows b_o (count a multiple of 8), out[2 t +
// o], bit for bit: one 16-lane vector per a_t holds the eight lane sums of
// (a_t, b0) and of (a_t, b1), a_t's eight values broadcast to both halves
// against b0's and b1's side by side. Four independent accumulators, each
// load of the b pair used four times: ~1.5x the AVX2 pairs' multiply-adds per
// cycle on this machine's AVX-512 units.
typedef float V16 __attribute__((vector_size(64)));
typedef double V4d __attribute__((vector_size(32)));

// Eight floats at lo and eight at hi as one 16-lane vector.
__attribute__((target("avx512f"), always_inline)) inline V16 pair(const float* lo,
                                                                  const float* hi) {
  V4d l, h;
  std::memcpy(&l, lo, sizeof(l));
  std::memcpy(&h, hi, sizeof(h));
  return reinterpret_cast<V16>(__builtin_shufflevector(l, h, 0, 1, 2, 3, 4, 5, 6, 7));
}

__attribute__((target("avx512f"))) void dot4x2Avx512(const float* const a[4], const float* b0,
                                                    const float* b1, int64_t count,
                                                    float* out) {
  V16 acc[4] = {};
  for (int64_t i = 0; i < count; i += 8) {
    const V16 w = pair(b0 + i, b1 + i);
    for (int t = 0; t < 4; ++t)
      acc[t] += pair(a[t] + i, a[t] + i) * w;
  }
  for (int t = 0; t < 4; t += 2) {
    const V4f sums = reduceInDotOrder(
        __builtin_shufflevector(acc[t], acc[t], 0, 1, 2, 3, 4, 5, 6, 7),
        __builtin_shufflevector(acc[t], acc[t], 8, 9, 10, 11, 12, 13, 14, 15),
        __builtin_shufflevector(acc[t + 1], acc[t + 1], 0, 1, 2, 3, 4, 5, 6, 7),
        __builtin_shufflevector(acc[t + 1], acc[t + 1], 8, 9, 10, 11, 12, 13, 14, 15));
    std::memcpy(out + 2 * t, &sums, sizeof(sums));
  }
  __builtin_ia32_vzeroupper();
}

// dot() of a with four rows b[k] (count a multiple of 8), out[k], bit for bit:
// attention's query against four cached keys.
__attribute__((target("avx2"))) void dot1x4Avx2(const float* a, const float* const b[4],
                                                int64_t count, float* out) {
  V8 acc[4] = {};
  for (int64_t i = 0; i < count; i += 8) {
    const V8 x = *reinterpret_cast<const V8Unaligned*>(a + i);
    for (int k = 0; k < 4; ++k)
      acc[k] += x * *reinterpret_cast<const V8Unaligned*>(b[k] + i);
  }
  const V4f sums = reduceInDotOrder(acc[0], acc[1], acc[2], acc[3]);
  __builtin_ia32_vzeroupper();
  std::memcpy(out, &sums, sizeof(sums));
}

// out[d] = sum_j weights[j] * rows[j * stride + d] for d < 16 * Vectors, j in
// order from 0 (attention's weighted sum of cached values): the output row
// stays in registers instead of being loaded and stored for every j, each
// element is the same sequence of products and sums as the plain loop.
template <int Vectors>
__attribute__((target("avx512f"))) void weightedRowSumAvx512(const float* weights,
                                                            const float* rows, int64_t stride,
                                                            int count, float* out) {
  V16 acc[Vectors] = {};
  for (int j = 0; j < count; ++j) {
    float splat[16];
    for (int l = 0; l < 16; ++l)
      splat[l] = weights[j];
    V16 w;
    std::memcpy(&w, splat, sizeof(w));
    const float* row = rows + j * stride;
    for (int v = 0; v < Vectors; ++v) {
      V16 x;
      std::memcpy(&x, row + 16 * v, sizeof(x));
      acc[v] += w * x;
    }
  }
  std::memcpy(out, acc, sizeof(acc));
  __builtin_ia32_vzeroupper();
}

// Runs before main: the CPU model must be read first (GCC's rule for constructors).
const bool kHaveAvx2 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}();
const bool kHaveAvx512 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0;
}();
#endif

// Whether dot4x2 runs (AVX-512 and count a multiple of 8); else pairs of rows.
bool haveDot4x2(int64_t count) {
#if defined(__GNUC__) && defined(__x86_64__)
  return kHaveAvx512 && count % 8 == 0;
#else
  (void)count;
  return false;
#endif
}

void dot4x2(const float* const a[4], const float* b0, const float* b1, int64_t count,
            float* out) {
#if defined(__GNUC__) && defined(__x86_64__)
  dot4x2Avx512(a, b0, b1, count, out);
#else
  (void)a, (void)b0, (void)b1, (void)count, (void)out;
#endif
}

void dot2x2(const float* a0, const float* a1, const float* b0, const float* b1, int64_t count,
            float* out) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (kHaveAvx2)
    return dot2x2Avx2(a0, a1, b0, b1, count, out);
#endif
  V4 lo[4] = {}, hi[4] = {}; // 00, 01, 10, 11: lanes 0-3 and 4-7
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const V4 x0 = load4(a0 + i), x1 = load4(a1 + i), y0 = load4(b0 + i), y1 = load4(b1 + i);
    lo[0] += x0 * y0;
    lo[1] += x0 * y1;
    lo[2] += x1 * y0;
    lo[3] += x1 * y1;
    const V4 u0 = load4(a0 + i + 4), u1 = load4(a1 + i + 4), v0 = load4(b0 + i + 4),
             v1 = load4(b1 + i + 4);
    hi[0] += u0 * v0;
    hi[1] += u0 * v1;
    hi[2] += u1 * v0;
    hi[3] += u1 * v1;
  }
  float partials[4][8];
  for (int k = 0; k < 4; ++k) {
    std::memcpy(partials[k], &lo[k], sizeof(lo[k]));
    std::memcpy(partials[k] + 4, &hi[k], sizeof(hi[k]));
  }
  finishDot2x2(a0, a1, b0, b1, count, i, partials, out);
}

const std::vector<float>& halfTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i)
      t[i] = halfBitsToFloat(uint16_t(i));
    return t;
  }();
  return table;
}

float dotHalf(const float* a, const uint16_t* b, const float* table, int count) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= count; i += 8)
    for (int l = 0; l < 8; ++l)
      partial[l] += a[i + l] * table[b[i + l]];
  for (int l = 0; i < count; ++i, ++l)
    partial[l] += a[i] * table[b[i]];
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
         ((partial[4] + partial[5]) + (partial[6] + partial[7]));
}

float dotCodes(const float* a, const int8_t* codes, float scale, int count) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= count; i += 8)
    for (int l = 0; l < 8; ++l)
      partial[l] += a[i + l] * (float(codes[i + l]) * scale);
  for (int l = 0; i < count; ++i, ++l)
    partial[l] += a[i] * (float(codes[i]) * scale);
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
         ((partial[4] + partial[5]) + (partial[6] + partial[7]));
}

// Row r (= position * kvHeads + kv head) of an int8 cache.
const int8_t* q8Codes(const KvCache& cache, int64_t row, int headDim) {
  return static_cast<const int8_t*>(cache.data) + row * headDim;
}
float* q8Scales(const KvCache& cache, int kvHeads, int headDim) {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(cache.data) +
                                  kv::q8ScaleOffset(cache.context, kvHeads, headDim));
}

void quantizeRow(const float* x, int headDim, int8_t* codes, float* scale) {
  float absMax = 0.0f;
  for (int d = 0; d < headDim; ++d)
    absMax = std::max(absMax, std::fabs(x[d]));
  *scale = kv::q8Scale(absMax);
  for (int d = 0; d < headDim; ++d)
    codes[d] = kv::q8Code(x[d], *scale);
}

} // namespace

void dot1x4(const float* a, const float* const b[4], int64_t count, float* out) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (kHaveAvx2 && count % 8 == 0)
    return dot1x4Avx2(a, b, count, out);
#endif
  for (int k = 0; k < 4; ++k)
    out[k] = dot(a, b[k], count);
}

void weightedRowSum(const float* weights, const float* rows, int64_t stride, int count,
                    int width, float* out) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (kHaveAvx512) {
    switch (width) {
    case 64:
      return weightedRowSumAvx512<4>(weights, rows, stride, count, out);
    case 128:
      return weightedRowSumAvx512<8>(weights, rows, stride, count, out);
    default:
      break;
    }
  }
#endif
  std::fill(out, out + width, 0.0f);
  for (int j = 0; j < count; ++j) {
    const float* row = rows + j * stride;
    for (int d = 0; d < width; ++d)
      out[d] += weights[j] * row[d];
  }
}

float halfLookup(uint16_t h) { return halfTable()[h]; }

void embedding(const int32_t* tokens, int n, const float* table, int dim, float* out) {
  for (int t = 0; t < n; ++t)
    std::memcpy(out + int64_t(t) * dim, table + int64_t(tokens[t]) * dim, sizeof(float) * dim);
}

void rmsNorm(CpuThreadPool& pool, const float* x, const float* weight, float* y, int rows,
             int64_t width, int dim, float eps) {
  const int64_t groups = int64_t(rows) * (width / dim);
  pool.parallelFor(groups, 64, [&](int64_t begin, int64_t end, int) {
    for (int64_t g = begin; g < end; ++g) {
      const float* xg = x + g * dim;
      float* yg = y + g * dim;
      // The mean in double, then f32 as transformers does: x * rsqrt(var + eps) * w.
      double sumSquares = 0;
      for (int i = 0; i < dim; ++i)
        sumSquares += double(xg[i]) * xg[i];
      const float variance = float(sumSquares / dim);
      const float inverse = 1.0f / std::sqrt(variance + eps);
      for (int i = 0; i < dim; ++i)
        yg[i] = weight[i] * (xg[i] * inverse);
    }
  });
}

int linearTokenBlock(int in) {
  // About 256 KB of token rows: they stay in L2 while every weight row pair of
  // the task streams past them.
  const int block = std::max(2, (65536 / std::max(in, 1)) & ~1);
  return block;
}

void linear(CpuThreadPool& pool, const float* x, int rows, const float* w, const float* bias,
            int in, int out, float* y, const float* residual) {
  // Split over output features: each task streams its weight rows and reuses
  // them for a block of token rows that stays in L2 (without the blocks every
  // pair of weight rows streamed all token rows from L3: 2 multiply-adds per
  // float loaded). Pairs of outputs times quads of rows go through dot4x2
  // where the CPU has AVX-512, pairs of rows through dot2x2 (same sums, fewer
  // loads), the odd ones through dot. Each output is one dot() whatever the
  // blocking and kernel: the same bits.
  const int64_t minChunk = std::max<int64_t>(1, 16384 / std::max(in, 1));
  const int tokenBlock = linearTokenBlock(in);
  const int64_t outBlock = std::max<int64_t>(2, (65536 / std::max(in, 1)) & ~1); // ~256 KB
  const bool quads = haveDot4x2(in);
  auto store = [&](int t, int64_t o, float value) {
    const int64_t i = int64_t(t) * out + o;
    y[i] = residual ? residual[i] + value : value;
  };
  pool.parallelFor(out, minChunk, [&](int64_t begin, int64_t end, int) {
    const int64_t pairEnd = begin + ((end - begin) & ~int64_t(1));
    for (int t0 = 0; t0 < rows; t0 += tokenBlock) {
      const int t1 = std::min(rows, t0 + tokenBlock);
      for (int64_t ob = begin; ob < pairEnd; ob += outBlock) {
        const int64_t oe = std::min(pairEnd, ob + outBlock);
        int t = t0;
        // Quads of token rows (in L1) against every weight row pair of the
        // sub-block (in L2).
        if (quads)
          for (; t + 4 <= t1; t += 4) {
            const float* x0 = x + int64_t(t) * in;
            const float* const quad[4] = {x0, x0 + in, x0 + 2 * in, x0 + 3 * in};
            for (int64_t o = ob; o < oe; o += 2) {
              float sums[8];
              dot4x2(quad, w + o * int64_t(in), w + (o + 1) * int64_t(in), in, sums);
              for (int r = 0; r < 4; ++r) {
                store(t + r, o, sums[2 * r] + (bias ? bias[o] : 0.0f));
                store(t + r, o + 1, sums[2 * r + 1] + (bias ? bias[o + 1] : 0.0f));
              }
            }
          }
        for (int64_t o = ob; o < oe; o += 2) {
          const float* w0 = w + o * int64_t(in);
          const float* w1 = w0 + in;
          const float b0 = bias ? bias[o] : 0.0f, b1 = bias ? bias[o + 1] : 0.0f;
          int u = t;
          for (; u + 2 <= t1; u += 2) {
            float sums[4];
            const float* x0 = x + int64_t(u) * in;
            dot2x2(x0, x0 + in, w0, w1, in, sums);
            store(u, o, sums[0] + b0);
            store(u, o + 1, sums[1] + b1);
            store(u + 1, o, sums[2] + b0);
            store(u + 1, o + 1, sums[3] + b1);
          }
          for (; u < t1; ++u) {
            store(u, o, dot(x + int64_t(u) * in, w0, in) + b0);
            store(u, o + 1, dot(x + int64_t(u) * in, w1, in) + b1);
          }
        }
      }
      for (int64_t o = pairEnd; o < end; ++o) {
        const float* wRow = w + o * int64_t(in);
        const float b = bias ? bias[o] : 0.0f;
        for (int t = t0; t < t1; ++t)
          store(t, o, dot(x + int64_t(t) * in, wRow, in) + b);
      }
    }
  });
}

void dynamicNtkInvFreq(float theta, float factor, int originalMaxPositions, int headDim, int seqLen,
                       float* invFreq) {
  // transformers computes this with f32 tensors and Python scalars:
  //   base = theta * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
  //   inv_freq = 1 / base ** (arange(0, dim, 2) / dim)
  // so every step rounds to f32 here too, except where a Python float stays double.
  const int len = std::max(seqLen, originalMaxPositions);
  float scaled = factor * float(len);
  scaled = scaled / float(originalMaxPositions);
  scaled = scaled - float(double(factor) - 1.0);
  // The Python-float exponent stays double inside torch's pow.
  const float power = float(std::pow(double(scaled), double(headDim) / double(headDim - 2)));
  const float base = float(double(theta) * double(power));
  for (int i = 0; i < headDim / 2; ++i) {
    const float e = float(2 * i) / float(headDim);
    invFreq[i] = 1.0f / float(std::pow(double(base), double(e)));
  }
}

void rope(const float* x, float* y, int n, int pos, int heads, int headDim, const float* invFreq,
          float attentionFactor, float* cosSin) {
  const int half = headDim / 2;
  // The angle is an f32 product as in transformers (inv_freq @ position_ids in
  // f32); cos/sin are then evaluated accurately and scaled.
  for (int t = 0; t < n; ++t) {
    float* c = cosSin + int64_t(t) * headDim;
    for (int i = 0; i < half; ++i) {
      const float angle = float(pos + t) * invFreq[i];
      c[i] = float(std::cos(double(angle))) * attentionFactor;
      c[half + i] = float(std::sin(double(angle))) * attentionFactor;
    }
  }
  for (int t = 0; t < n; ++t) {
    const float* c = cosSin + int64_t(t) * headDim;
    for (int h = 0; h < heads; ++h) {
      const int64_t base = (int64_t(t) * heads + h) * headDim;
      for (int i = 0; i < half; ++i) {
        const float x1 = x[base + i];
        const float x2 = x[base + half + i];
        y[base + i] = x1 * c[i] - x2 * c[half + i];
        y[base + half + i] = x2 * c[i] + x1 * c[half + i];
      }
    }
  }
}

void appendKv(const float* k, const float* v, int n, int pos, int kvHeads, int headDim,
              const KvCache& kCache, const KvCache& vCache) {
  const int64_t kvWidth = int64_t(kvHeads) * headDim;
  const int64_t start = int64_t(pos) * kvWidth;
  if (!kCache.q8) {
    uint16_t* kc = static_cast<uint16_t*>(kCache.data);
    uint16_t* vc = static_cast<uint16_t*>(vCache.data);
    for (int64_t i = 0; i < int64_t(n) * kvWidth; ++i) {
      kc[start + i] = floatToHalfBits(k[i]);
      vc[start + i] = floatToHalfBits(v[i]);
    }
    return;
  }
  float* kScales = q8Scales(kCache, kvHeads, headDim);
  float* vScales = q8Scales(vCache, kvHeads, headDim);
  for (int64_t r = 0; r < int64_t(n) * kvHeads; ++r) {
    const int64_t row = int64_t(pos) * kvHeads + r;
    quantizeRow(k + r * headDim, headDim, static_cast<int8_t*>(kCache.data) + row * headDim,
                kScales + row);
    quantizeRow(v + r * headDim, headDim, static_cast<int8_t*>(vCache.data) + row * headDim,
                vScales + row);
  }
}

void attention(CpuThreadPool& pool, const float* q, int n, int pos, const KvCache& kCache,
               const KvCache& vCache, const AttentionShape& shape, float* scratch,
               int64_t scratchStride, float* out, float* decoded) {
  const float* table = halfTable().data();
  const int headDim = shape.headDim;
  const int group = shape.heads / shape.kvHeads;
  const int64_t qWidth = int64_t(shape.heads) * headDim;
  const uint16_t* kHalf = static_cast<const uint16_t*>(kCache.data);
  const uint16_t* vHalf = static_cast<const uint16_t*>(vCache.data);
  const float* kScales = kCache.q8 ? q8Scales(kCache, shape.kvHeads, headDim) : nullptr;
  const float* vScales = vCache.q8 ? q8Scales(vCache, shape.kvHeads, headDim) : nullptr;
  // f16 caches: rows firstRow..pos+n-1 (every kv head) to f32 once.
  const float* kFloat = nullptr;
  const float* vFloat = nullptr;
  if (decoded && !kCache.q8 && !vCache.q8) {
    const int firstRow = shape.window > 0 ? std::max(0, pos - shape.window + 1) : 0;
    const int64_t width = int64_t(shape.kvHeads) * headDim;
    const int64_t count = int64_t(pos + n) * width;
    float* k = decoded;
    float* v = decoded + count;
    pool.parallelFor(pos + n - firstRow, 16, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = (firstRow + begin) * width; i < (firstRow + end) * width; ++i) {
        k[i] = table[kHalf[i]];
        v[i] = table[vHalf[i]];
      }
    });
    kFloat = k;
    vFloat = v;
  }
  // One task per (token, head) pair.
  pool.parallelFor(int64_t(n) * shape.heads, 1, [&](int64_t begin, int64_t end, int worker) {
    float* scores = scratch + worker * scratchStride;
    for (int64_t task = begin; task < end; ++task) {
      const int t = int(task / shape.heads);
      const int h = int(task % shape.heads);
      const int p = pos + t;
      const int first = shape.window > 0 ? std::max(0, p - shape.window + 1) : 0;
      const float* qh = q + t * qWidth + int64_t(h) * headDim;
      const int kvh = h / group;
      float maxScore = -INFINITY;
      int j = first;
      if (kFloat) // four keys at a time, the same dot()s
        for (; j + 4 <= p + 1; j += 4) {
          const float* keys[4];
          for (int k = 0; k < 4; ++k)
            keys[k] = kFloat + (int64_t(j + k) * shape.kvHeads + kvh) * headDim;
          float dots[4];
          dot1x4(qh, keys, headDim, dots);
          for (int k = 0; k < 4; ++k) {
            const float s = shape.scale * dots[k];
            scores[j + k - first] = s;
            maxScore = std::max(maxScore, s);
          }
        }
      for (; j <= p; ++j) {
        const int64_t row = int64_t(j) * shape.kvHeads + kvh;
        const float dot = kFloat    ? cpu::dot(qh, kFloat + row * headDim, headDim)
                          : kCache.q8 ? dotCodes(qh, q8Codes(kCache, row, headDim), kScales[row],
                                                 headDim)
                                      : dotHalf(qh, kHalf + row * headDim, table, headDim);
        const float s = shape.scale * dot;
        scores[j - first] = s;
        maxScore = std::max(maxScore, s);
      }
      float sum = 0;
      for (int j = first; j <= p; ++j) {
        const float e = std::exp(scores[j - first] - maxScore);
        scores[j - first] = e;
        sum += e;
      }
      float* oh = out + t * qWidth + int64_t(h) * headDim;
      if (vFloat) {
        for (int j = first; j <= p; ++j)
          scores[j - first] = scores[j - first] / sum;
        weightedRowSum(scores, vFloat + (int64_t(first) * shape.kvHeads + kvh) * headDim,
                       int64_t(shape.kvHeads) * headDim, p - first + 1, headDim, oh);
        continue;
      }
      std::fill(oh, oh + headDim, 0.0f);
      for (int j = first; j <= p; ++j) {
        const float weight = scores[j - first] / sum;
        const int64_t row = int64_t(j) * shape.kvHeads + kvh;
        if (vFloat) {
          const float* vj = vFloat + row * headDim;
          for (int d = 0; d < headDim; ++d)
            oh[d] += weight * vj[d];
        } else if (vCache.q8) {
          const int8_t* codes = q8Codes(vCache, row, headDim);
          for (int d = 0; d < headDim; ++d)
            oh[d] += weight * (float(codes[d]) * vScales[row]);
        } else {
          const uint16_t* vj = vHalf + row * headDim;
          for (int d = 0; d < headDim; ++d)
            oh[d] += weight * table[vj[d]];
        }
      }
    }
  });
}

void swiGlu(const float* gate, const float* up, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    y[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add(const float* a, const float* b, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    y[i] = a[i] + b[i];
}

} // namespace cpu
} // namespace ninfer
