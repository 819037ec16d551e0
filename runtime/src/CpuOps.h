// The CPU reference kernels, one function per plan op, on f32 activations with
// the exact semantics written in runtime/schema/plan.fbs. The CPU executor wires
// them to plan buffers; the unit tests call them directly.
#pragma once

#include "CpuThreadPool.h"

#include <cstdint>

namespace ninfer {
namespace cpu {

// out[t, :] = table[tokens[t], :]; ids must already be checked against the vocab.
void embedding(const int32_t* tokens, int n, const float* table, int dim, float* out);

// y = x / sqrt(mean(x^2) + eps) * weight over consecutive groups of `dim` values
// of every row (rows of `width` values). y may equal x.
void rmsNorm(CpuThreadPool& pool, const float* x, const float* weight, float* y, int rows,
             int64_t width, int dim, float eps);

// y[t, o] = sum_i x[t, i] * w[o, i] (+ bias[o]); w is [out, in]. bias may be null.
// y = x W^T (+ bias) (+ residual: the fused residual add, which may alias y).
// Token rows are processed in blocks of linearTokenBlock(in) (an even number);
// the results do not depend on it.
void linear(CpuThreadPool& pool, const float* x, int rows, const float* w, const float* bias,
            int in, int out, float* y, const float* residual = nullptr);
int linearTokenBlock(int in);

// Attention's inner loops (public for tests). Four dot products of a with
// b[0..3] (count values each), the same bits as linear() gives for one row.
void dot1x4(const float* a, const float* const b[4], int64_t count, float* out);
// out[d] = sum_j weights[j] * rows[j * stride + d] for d < width, each sum in
// order of j from 0, as the plain loop computes it.
void weightedRowSum(const float* weights, const float* rows, int64_t stride, int count,
                    int width, float* out);

// Dynamic NTK inverse frequencies for a step ending at seqLen, computed in f32
// step by step as transformers' _compute_dynamic_ntk_parameters does.
void dynamicNtkInvFreq(float theta, float factor, int originalMaxPositions, int headDim, int seqLen,
                       float* invFreq);

// Rotate-half RoPE on [n, heads, headDim] at positions pos..pos+n-1. cosSin is
// scratch of n * headDim floats. y may equal x.
void rope(const float* x, float* y, int n, int pos, int heads, int headDim, const float* invFreq,
          float attentionFactor, float* cosSin);

struct AttentionShape {
  int heads;
  int kvHeads;
  int headDim;
  int window; // 0: no sliding window
  float scale;
};

// A KV cache [context, kvHeads, headDim]: f16 values, or (q8) int8 codes with
// an f32 scale per (position, kv head) laid out as ninfer/KvFormat.h says.
struct KvCache {
  void* data = nullptr;
  bool q8 = false;
  int context = 0;
};

// Writes n rows of k and v (f32 [n, kvHeads * headDim]) into the caches at rows
// pos..pos+n-1: rounded to f16, or quantized per (row, kv head) (KvFormat.h).
void appendKv(const float* k, const float* v, int n, int pos, int kvHeads, int headDim,
              const KvCache& kCache, const KvCache& vCache);

// Causal (optionally sliding-window) GQA attention of q [n, heads * headDim] at
// positions pos..pos+n-1 over the caches (int8 codes read back as code * scale).
// scratch: pool.size() blocks of scratchStride >= pos + n floats, one per worker.
// decoded (optional, f16 caches only): 2 * (pos + n) * kvHeads * headDim floats;
// the cache rows the step reads are converted to f32 there once instead of in
// every (token, head) task. The result is the same bit for bit.
void attention(CpuThreadPool& pool, const float* q, int n, int pos, const KvCache& kCache,
               const KvCache& vCache, const AttentionShape& shape, float* scratch,
               int64_t scratchStride, float* out, float* decoded = nullptr);

// y = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
void swiGlu(const float* gate, const float* up, float* y, int64_t count);

// y = a + b.
void add(const float* a, const float* b, float* y, int64_t count);

// f16 -> f32 through a table (the attention inner loops read the cache a lot).
float halfLookup(uint16_t h);

} // namespace cpu
} // namespace ninfer
