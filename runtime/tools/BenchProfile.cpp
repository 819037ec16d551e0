#include "BenchProfile.h"

#include "plan_generated.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ninfer {
namespace {

constexpr int kDecodeRepeats = 21;
constexpr int kPrefillRepeats = 5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Weight bytes the launch of kernel `function` for op `opIndex` reads per step:
// every weight among its buffers, whole (a grouped GEMV launch carries the
// weights of all the ops it computes).
double launchWeightBytes(const plan::Plan &p, uint32_t opIndex, uint32_t function) {
  const plan::Op *op = p.ops()->Get(opIndex);
  if (op->attrs_type() == plan::OpAttrs::EmbeddingAttrs || !op->launches())
    return 0.0; // one row per token: negligible, and not the whole table
  for (const plan::Launch *launch : *op->launches()) {
    if (launch->function() != function || !launch->args())
      continue;
    double bytes = 0.0;
    for (uint32_t b : *launch->args()) {
      const plan::Buffer *buffer = p.buffers()->Get(b);
      if (buffer->kind() == plan::BufferKind::Weight)
        bytes += double(buffer->size_bytes());
    }
    return bytes;
  }
  return 0.0;
}

struct Row {
  std::string kernel, what;
  int calls = 0;
  double microseconds = 0, weightBytes = 0;
};

// One timed step, as profileStep() or profileBatchStep() gives it.
using TimedStep = std::function<Result<std::vector<LaunchTiming>>()>;

Status printTable(const plan::Plan &p, const TimedStep &step, int repeats,
                  const std::string &title, const std::string &what, double measuredMs) {
  std::vector<std::vector<double>> perLaunch;
  std::vector<LaunchTiming> layout;
  for (int r = 0; r < repeats; ++r) {
    Result<std::vector<LaunchTiming>> timed = step();
    if (!timed.isOk())
      return timed.status();
    layout = timed.value();
    perLaunch.resize(layout.size());
    for (size_t i = 0; i < layout.size(); ++i)
      perLaunch[i].push_back(layout[i].microseconds);
  }
  std::map<uint32_t, Row> rows; // by kernel function
  std::map<std::pair<uint32_t, uint32_t>, bool> launchCounted; // (op, function)
  double total = 0.0;
  const auto *functions = p.kernels() ? p.kernels()->functions() : nullptr;
  for (size_t i = 0; i < layout.size(); ++i) {
    Row &row = rows[layout[i].function];
    if (row.kernel.empty()) {
      row.kernel = functions && layout[i].function < functions->size()
                       ? functions->Get(layout[i].function)->str()
                       : "?";
      row.what = describeOp(p, layout[i].op);
    }
    const double us = median(perLaunch[i]);
    row.calls += 1;
    row.microseconds += us;
    if (!launchCounted[{layout[i].op, layout[i].function}]) {
      launchCounted[{layout[i].op, layout[i].function}] = true;
      row.weightBytes += launchWeightBytes(p, layout[i].op, layout[i].function);
    }
    total += us;
  }
  std::vector<Row> sorted;
  for (auto &entry : rows)
    sorted.push_back(entry.second);
  std::sort(sorted.begin(), sorted.end(),
            [](const Row &a, const Row &b) { return a.microseconds > b.microseconds; });
  std::printf("\n%s (%s; kernel by kernel, median of %d)\n", title.c_str(), what.c_str(),
              repeats);
  std::printf("%-22s  %-34s  %5s  %9s  %9s  %6s  %8s\n", "kernel", "op", "calls", "us/call",
              "us/step", "share", "GB/s");
  for (const Row &row : sorted) {
    char gbs[16] = "-";
    if (row.weightBytes > 0 && row.microseconds > 0)
      std::snprintf(gbs, sizeof(gbs), "%.0f", row.weightBytes / (row.microseconds * 1e3));
    std::printf("%-22s  %-34s  %5d  %9.2f  %9.1f  %5.1f%%  %8s\n", row.kernel.c_str(),
                row.what.c_str(), row.calls, row.microseconds / row.calls, row.microseconds,
                total > 0 ? 100.0 * row.microseconds / total : 0.0, gbs);
  }
  std::printf("sum of kernel times: %.1f us", total);
  if (measuredMs > 0 && 1e3 * measuredMs >= total)
    std::printf("; measured step (p50) %.1f us: %.1f us outside kernels (launch gaps, host)",
                1e3 * measuredMs, 1e3 * measuredMs - total);
  else if (measuredMs > 0) // in the step launches overlap; timed here each one starts alone
    std::printf("; measured step (p50) %.1f us: %.1f us less (its launches overlap)",
                1e3 * measuredMs, total - 1e3 * measuredMs);
  std::printf("\n");
  return Status::ok();
}

} // namespace

std::string describeOp(const plan::Plan& p, uint32_t opIndex) {
  const plan::Op* op = p.ops()->Get(opIndex);
  std::string text = plan::EnumNameOpAttrs(op->attrs_type());
  if (text.size() > 5 && text.compare(text.size() - 5, 5, "Attrs") == 0)
    text.resize(text.size() - 5);
  if (const plan::LinearAttrs* a = op->attrs_as_LinearAttrs()) {
    const plan::Buffer* w = p.buffers()->Get(op->inputs()->Get(1));
    text += " " + std::to_string(a->in_features()) + "->" + std::to_string(a->out_features()) +
            " " + plan::EnumNameDType(w->dtype());
    if (a->last_row_only())
      text += " last row";
  }
  return text;
}

SyntheticStep syntheticDecodeStep(const plan::Plan& p, int context, int batch) {
  const int vocab = std::max(2, p.model()->vocab_size());
  const int rows = std::max(1, batch);
  SyntheticStep step;
  step.tokens.assign(size_t(rows), 1 + context % (vocab - 1));
  step.positions.assign(size_t(rows), context);
  for (int t = 0; t < rows; ++t)
    step.sequences.push_back(t);
  return step;
}

Status printKernelProfile(Executor& executor, const plan::Plan& p, int context, int prefillTokens,
                          double decodeStepMs, int batch) {
  const SyntheticStep rows = syntheticDecodeStep(p, context, batch);
  const TimedStep decode = [&] {
    return batch > 1 ? executor.profileBatchStep(rows.tokens.data(), rows.positions.data(),
                                                 rows.sequences.data(), batch)
                     : executor.profileStep(rows.tokens.data(), 1, context);
  };
  const std::string where = " at position " + std::to_string(context);
  NINFER_RETURN_IF_ERROR(
      printTable(p, decode, kDecodeRepeats, batch > 1 ? "batch step" : "decode step",
                 batch > 1 ? std::to_string(batch) + " sequences, one token each" + where
                           : "1 token" + where,
                 decodeStepMs));
  if (prefillTokens <= 1)
    return Status::ok();
  const int vocab = std::max(2, p.model()->vocab_size());
  std::vector<int32_t> ids(static_cast<size_t>(prefillTokens));
  for (int i = 0; i < prefillTokens; ++i)
    ids[size_t(i)] = 1 + static_cast<int32_t>((int64_t(i) * 7919 + 13) % (vocab - 1));
  const TimedStep prefill = [&] {
    return executor.profileStep(ids.data(), prefillTokens, 0);
  };
  return printTable(p, prefill, kPrefillRepeats, "prefill step",
                    std::to_string(prefillTokens) + " tokens at position 0", 0.0);
}

} // namespace ninfer
