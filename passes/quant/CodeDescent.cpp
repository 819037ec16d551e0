// Coordinate descent on codes (see CodeDescent.h). Rows are independent and
// spread over threads; each row is unpacked, refined and packed again with its
// own scales, so the packed bytes and the error stay consistent.
#include "CodeDescent.h"

#include "GroupQuant.h"
#include "Packing.h"

#include <cmath>

namespace ninfer {
namespace quant {

Result<double> refineCodes(const float* w, const double* h, double damp, int sweeps, int threads,
                           QuantizedTensor& tensor) {
  const QuantSpec spec = tensor.spec;
  const int64_t rows = tensor.rows, cols = tensor.cols;
  NINFER_RETURN_IF_ERROR(validateSpec(spec, rows, cols));
  const uint64_t bytes = uint64_t(quantTensorBytes(spec.bits, spec.groupSize, rows, cols));
  if (uint64_t(tensor.packed.size()) != bytes)
    return Status::error("quant: code descent: the packed tensor has the wrong size");
  std::vector<double> hd(h, h + cols * cols);
  std::vector<bool> dead(size_t(cols), false);
  for (int64_t j = 0; j < cols; ++j) {
    double& d = hd[size_t(j * cols + j)];
    dead[size_t(j)] = !(d > 0);
    d = dead[size_t(j)] ? 1.0 : d + damp;
  }
  const QuantRange range = quantRange(spec.bits);
  const size_t rowBytes = size_t(quantTensorBytes(spec.bits, spec.groupSize, 1, cols));
  const size_t n = size_t(cols);
  std::vector<double> rowLoss(size_t(rows), 0.0);
  parallelFor(rows, threads, [&](int64_t row) {
    std::vector<uint8_t> codes(n), ones(n, uint8_t(range.codeOffset + 1));
    std::vector<uint16_t> scales(n / 16 + 8);
    unpackRow(spec, rows, cols, row, tensor.packed.data(), codes.data(), scales.data());
    // Each column's step (the value of level 1) and current value, decoded by the header.
    std::vector<uint8_t> one(rowBytes);
    std::vector<float> step(n), value(n);
    packRow(spec, 1, cols, 0, ones.data(), scales.data(), one.data());
    (void)dequantizePacked(spec, 1, cols, one.data(), one.size(), step.data());
    packRow(spec, 1, cols, 0, codes.data(), scales.data(), one.data());
    (void)dequantizePacked(spec, 1, cols, one.data(), one.size(), value.data());
    const float* wr = w + row * cols;
    std::vector<double> e(n), g(n, 0.0);
    for (int64_t j = 0; j < cols; ++j)
      e[size_t(j)] = double(value[size_t(j)]) - (dead[size_t(j)] ? 0.0 : double(wr[j]));
    for (int64_t i = 0; i < cols; ++i) {
      double s = 0;
      for (int64_t j = 0; j < cols; ++j)
        s += hd[size_t(i * cols + j)] * e[size_t(j)];
      g[size_t(i)] = s;
    }
    for (int sweep = 0; sweep < sweeps; ++sweep) {
      bool moved = false;
      for (int64_t j = 0; j < cols; ++j) {
        const double s = step[size_t(j)];
        if (s == 0)
          continue;
        const double hjj = hd[size_t(j * cols + j)];
        const int level = int(codes[size_t(j)]) - range.codeOffset;
        const double target = double(level) - g[size_t(j)] / (hjj * s);
        int best = int(std::lround(std::fmin(std::fmax(target, double(range.qmin)),
                                             double(range.qmax))));
        const int k = best - level;
        // Only moves that lower the error (rounding can land on an equal one).
        if (k == 0 || 2.0 * k * s * g[size_t(j)] + hjj * s * s * k * k >= 0)
          continue;
        moved = true;
        codes[size_t(j)] = uint8_t(best + range.codeOffset);
        const double change = s * k;
        e[size_t(j)] += change;
        const double* column = hd.data() + j * cols; // Hd is symmetric: row j
        for (int64_t i = 0; i < cols; ++i)
          g[size_t(i)] += column[i] * change;
      }
      if (!moved)
        break;
    }
    packRow(spec, rows, cols, row, codes.data(), scales.data(), tensor.packed.data());
    double loss = 0;
    for (int64_t j = 0; j < cols; ++j)
      loss += e[size_t(j)] * g[size_t(j)];
    rowLoss[size_t(row)] = loss;
  });
  if (!tensor.dequantized.empty())
    NINFER_RETURN_IF_ERROR(dequantizePacked(spec, rows, cols, tensor.packed.data(),
                                            tensor.packed.size(), tensor.dequantized.data()));
  double total = 0;
  for (double loss : rowLoss)
    total += loss;
  return total;
}

} // namespace quant
} // namespace ninfer
