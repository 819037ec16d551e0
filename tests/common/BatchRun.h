// Batched decode against single-sequence decode, shared by the CPU tests and
// the GPU tests: a schedule of sequences (KV-cache slots, in a batch step's row
// order, not slot order) with prompts of different lengths, so every row of a
// batch step sits at its own position; runBatched() prefills each sequence and
// then decodes all of them in batch steps, runAlone() runs each sequence by
// itself in single-sequence one-token steps over the same ids. Both return the
// logits of every decoded token, [step][row * vocab + i], so a batch step's row
// can be compared with the step that sequence would have taken alone.
#pragma once

#include "ninfer/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ninfer {
namespace test {

struct BatchSchedule {
  std::vector<int> sequences;                // row -> KV-cache slot (distinct)
  std::vector<std::vector<int32_t>> prompts; // row -> prompt ids (from position 0)
  std::vector<std::vector<int32_t>> decoded; // step -> row -> id fed at that step
};

// `batch` rows over a plan of `slots` sequences: rows take the slots in a
// rotated, reversed order; prompt lengths differ by row (shortest to context - steps),
// ids are spread over [1, vocab).
inline BatchSchedule makeBatchSchedule(int batch, int slots, int vocab, int context, int steps,
                                       int seed, int shortest = 1) {
  BatchSchedule s;
  const int longest = std::max(shortest, context - steps);
  for (int r = 0; r < batch; ++r) {
    s.sequences.push_back((slots - 1 - r + seed) % slots);
    const int length = shortest + (r * 7 + seed * 5) % (longest - shortest + 1);
    std::vector<int32_t> prompt(static_cast<size_t>(length));
    for (int i = 0; i < length; ++i)
      prompt[size_t(i)] = 1 + int32_t((int64_t(i) * 7919 + r * 131 + seed) % (vocab - 1));
    s.prompts.push_back(prompt);
  }
  for (int step = 0; step < steps; ++step) {
    std::vector<int32_t> ids;
    for (int r = 0; r < batch; ++r)
      ids.push_back(1 + int32_t((int64_t(step) * 31 + r * 977 + seed * 7) % (vocab - 1)));
    s.decoded.push_back(ids);
  }
  return s;
}

// Prefills row r's prompt into `slot` in steps of at most maxStep tokens.
inline Status prefillRow(Executor &e, const BatchSchedule &s, size_t r, int slot, int maxStep,
                         std::vector<float> &logits) {
  const std::vector<int32_t> &prompt = s.prompts[r];
  for (int pos = 0; pos < int(prompt.size()); pos += maxStep) {
    const int n = std::min(maxStep, int(prompt.size()) - pos);
    NINFER_RETURN_IF_ERROR(e.forwardSequence(slot, prompt.data() + pos, n, pos, logits.data()));
  }
  return Status::ok();
}

// Every sequence prefilled, then one batch step per decoded token.
inline Status runBatched(Executor &e, const BatchSchedule &s, int vocab, int maxStep,
                         std::vector<std::vector<float>> &out) {
  const size_t rows = s.sequences.size();
  std::vector<float> logits(rows * size_t(vocab));
  for (size_t r = 0; r < rows; ++r)
    NINFER_RETURN_IF_ERROR(prefillRow(e, s, r, s.sequences[r], maxStep, logits));
  std::vector<int32_t> positions(rows);
  out.clear();
  for (size_t step = 0; step < s.decoded.size(); ++step) {
    for (size_t r = 0; r < rows; ++r)
      positions[r] = int32_t(s.prompts[r].size() + step);
    NINFER_RETURN_IF_ERROR(e.forwardBatch(s.decoded[step].data(), positions.data(),
                                          s.sequences.data(), int(rows), logits.data()));
    out.push_back(logits);
  }
  return Status::ok();
}

// Each sequence by itself: its prompt, then its decoded ids one single-sequence
// step at a time, in its own slot (or slot 0 when slotZero: a plan of one
// sequence, reused sequence after sequence).
inline Status runAlone(Executor &e, const BatchSchedule &s, int vocab, int maxStep, bool slotZero,
                       std::vector<std::vector<float>> &out) {
  const size_t rows = s.sequences.size();
  std::vector<float> logits(static_cast<size_t>(vocab), 0.0f);
  out.assign(s.decoded.size(), std::vector<float>(rows * size_t(vocab)));
  for (size_t r = 0; r < rows; ++r) {
    const int slot = slotZero ? 0 : s.sequences[r];
    NINFER_RETURN_IF_ERROR(prefillRow(e, s, r, slot, maxStep, logits));
    for (size_t step = 0; step < s.decoded.size(); ++step) {
      NINFER_RETURN_IF_ERROR(e.forwardSequence(slot, &s.decoded[step][r], 1,
                                               int(s.prompts[r].size() + step), logits.data()));
      std::copy(logits.begin(), logits.end(), out[step].begin() + r * size_t(vocab));
    }
  }
  return Status::ok();
}

// How far two runs' logits lie apart: the largest |a - b| and the normalized
// MSE sum((a - b)^2) / sum(b^2); non-finite values make both infinite.
struct LogitsGap {
  double maxAbs = 0.0;
  double nmse = 0.0;
  size_t differing = 0; // values that are not bit-identical
};

inline LogitsGap logitsGap(const std::vector<std::vector<float>> &a,
                           const std::vector<std::vector<float>> &b) {
  LogitsGap gap;
  double err = 0.0, ref = 0.0;
  if (a.size() != b.size())
    return {INFINITY, INFINITY, 1};
  for (size_t step = 0; step < a.size(); ++step) {
    if (a[step].size() != b[step].size())
      return {INFINITY, INFINITY, 1};
    for (size_t i = 0; i < a[step].size(); ++i) {
      const double x = a[step][i], y = b[step][i];
      if (!std::isfinite(x) || !std::isfinite(y))
        return {INFINITY, INFINITY, 1};
      gap.differing += a[step][i] != b[step][i];
      gap.maxAbs = std::max(gap.maxAbs, std::fabs(x - y));
      err += (x - y) * (x - y);
      ref += y * y;
    }
  }
  gap.nmse = err / std::max(ref, 1e-30);
  return gap;
}

} // namespace test
} // namespace ninfer
