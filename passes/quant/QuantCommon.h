// Types shared by the weight quantizers of passes/quant (RTN, GPTQ, AWQ search,
// error measurement, bit allocation): the format spec, a quantized tensor in the
// layout of ninfer/QuantFormats.h, input validation and a small parallel-for.
// This is a plain C++ library (no MLIR): the quantization pass calls it with
// weights from the weight store and calibration statistics.
//
// Conventions: weights W are f32 row-major [rows = out_features, cols =
// in_features], as stored in checkpoints; H is the f64 [cols, cols] second-moment
// matrix of the layer input from calibration (H = X^T X over calibration tokens,
// any positive scale). Errors are returned as Status, never by aborting.
#pragma once

#include "ninfer/QuantFormats.h"
#include "ninfer/Status.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace ninfer {
namespace quant {

struct QuantSpec {
  int bits = 4;        // 8, 6, 5, 4, 3 or 2
  int groupSize = 128; // 32, 64 or 128 values per fp16 scale; 16: K16 (bits 2..4)

  bool isK16() const { return groupSize == kQuantK16Group; }
  // Exact storage cost, scales included.
  double bitsPerWeight() const { return bits + (isK16() ? 0.5 : 16.0 / groupSize); }
  QuantFormatId formatId() const {
    return static_cast<QuantFormatId>(quantFormatIndex(bits, groupSize));
  }
  bool operator==(const QuantSpec& other) const {
    return bits == other.bits && groupSize == other.groupSize;
  }
};

// A weight tensor quantized into the QuantFormats layout.
struct QuantizedTensor {
  QuantSpec spec;
  int64_t rows = 0;
  int64_t cols = 0;
  // Weight plane then scale plane, quantTensorBytes(bits, group, rows, cols) bytes.
  std::vector<uint8_t> packed;
  // What the packed bytes decode to, f32 [rows, cols]; empty when not asked for.
  std::vector<float> dequantized;
};

// Checks the spec and the shape: supported bits/group, cols a multiple of 128.
Status validateSpec(const QuantSpec& spec, int64_t rows, int64_t cols);

// Checks that `count` values are finite; `what` names them in the message.
Status checkFinite(const float* values, int64_t count, const char* what);
Status checkFinite(const double* values, int64_t count, const char* what);

// Threads to use: `requested` (0 = all hardware threads), at most `items`, at least 1.
int resolveThreads(int requested, int64_t items);

// Calls body(i) for i in [0, count) on up to `threads` threads (resolved as
// above), items handed out in order from a shared counter. Runs inline with one
// thread, or when threads cannot be started. Results must not depend on which
// thread ran an item (every caller writes per-item outputs), so they do not
// depend on the thread count.
void parallelFor(int64_t count, int threads, const std::function<void(int64_t)>& body);

} // namespace quant
} // namespace ninfer
