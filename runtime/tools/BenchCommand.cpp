// `ninfer bench`: runs a plan on synthetic token ids (speed does not depend on
// them), warm-up runs first, then measured runs, each a prefill of the prompt
// (in steps of at most max_step_tokens) followed by single-token decode steps.
// Reports prefill and decode tok/s (median, min, max over runs), decode latency
// percentiles, bytes read per decode token, achieved bandwidth and MBU per
// docs/PERFORMANCE.md, and device memory. A decode step includes picking its
// greedy token (on the GPU, so only the ids cross to the host), as generation
// does. With --batch B[,B...] each run instead prefills B sequences (each its
// own prompt, single-sequence steps into its own KV-cache slot) and then
// decodes all B together, one batch step per token of each: aggregate and
// per-sequence decode tok/s, the ratio to batch 1, step latency percentiles.
// --plot draws decode tok/s against the context length (or, with --batch,
// aggregate tok/s against batch size, a line per prompt length) into a PNG,
// written by a minimal encoder at the end of this file (stored deflate blocks,
// CRC-32, Adler-32; no compression library).
#include "BenchCommand.h"
#include "BenchProfile.h"
#include "BenchTimeline.h"
#include "SamplingOptions.h"

#include "ninfer/AtomicFile.h"
#include "ninfer/Cards.h"
#include "ninfer/DecodeStep.h"
#include "ninfer/Executor.h"
#include "ninfer/Json.h"
#include "ninfer/Plan.h"
#include "ninfer/Progress.h"
#include "ninfer/Sampler.h"
#include "ninfer/StepAbi.h"
#include "plan_generated.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace ninfer {
namespace {

const char* const kBenchHelp =
    R"(usage: ninfer bench PLAN [options]

  --prompt N[,N...]   prompt lengths (context before decode), default 512
  --gen N             decode steps per run (default 128)
  --batch B[,B...]    batched decode: for each batch size B, prefill B sequences (the
                      prompt each, in its own KV-cache slot), then decode the B together
                      (--gen batch steps of one token each; on the GPU a batch of 1 takes
                      single-sequence steps, as generation does); reports aggregate and
                      per-sequence tok/s, the ratio to batch 1 and the step latency. B up to
                      the plan's sequences (ninferc --batch, at most 8)
  --reps N            measured runs per prompt length (default 5)
  --warmup N          unmeasured runs first (default 3)
  --device D          cuda, cpu or auto (default auto)
  --threads N         CPU executor threads (default: all)
  --bandwidth B       memory bandwidth in bytes/s for MBU (default: the card's measured
                      copy bandwidth or its spec sheet's, by device name)
  --json              print the results as JSON on stdout
  --plot OUT.png      draw decode tok/s against context length (with --batch: against
                      batch size, a line per prompt length) into a PNG
  --profile           then time every kernel of one decode step (at the first prompt
                      length; with --batch: one step of the largest batch) and of one
                      prefill step, grouped by kernel (not with --json)
  --timeline OUT.json then run one decode step (at the first prompt length; with --batch:
                      one step of the largest batch) as generation runs it and print where
                      its time goes on the GPU, launch by launch as they overlap and wait;
                      writes a Chrome trace (chrome://tracing, Perfetto) of its launches and
                      blocks. Needs a plan compiled with `ninferc --trace` (not with --json)
  --temp T, --top-k K, --top-p P, --seed S
                      single-sequence decode steps pick their tokens with this sampling
                      (as `ninfer PLAN` takes it; default greedy); not with --batch

A decode step ends with its token(s) picked, as generation does: on the GPU by the plan's
sampling kernels where they can (greedy, a temperature alone, top-k up to 64, top-p), so
only ids or candidates cross to the host.
)";

struct BadUsage {
  std::string message;
};

struct BenchOptions {
  std::string plan;
  std::vector<int> prompts{512};
  std::vector<int> batches; // empty: single-sequence decode (no --batch)
  int gen = 128;
  int reps = 5;
  int warmup = 3;
  std::string device = "auto";
  int threads = 0;
  double bandwidth = 0.0;
  bool json = false;
  std::string plot;
  bool profile = false;
  std::string timeline;    // --timeline's JSON path
  SamplingParams sampling; // single-sequence decode's picks (default greedy)
};

long long parseInt(const std::string &option, const std::string &text, long long lo,
                   long long hi) {
  long long value = 0;
  const std::string error = cli::parseIntegerOption(option, text, lo, hi, value);
  if (!error.empty())
    throw BadUsage{error};
  return value;
}

// "N[,N...]", each in [1, hi].
std::vector<int> parseList(const std::string &option, const std::string &list, long long hi) {
  std::vector<int> values;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    values.push_back(static_cast<int>(parseInt(option, list.substr(start, comma - start), 1, hi)));
    start = comma + 1;
  }
  return values;
}

BenchOptions parseOptions(int argc, char **argv) {
  BenchOptions o;
  bool sawPlan = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw BadUsage{arg + " needs a value"};
      return argv[++i];
    };
    if (arg == "--prompt") {
      o.prompts = parseList(arg, value(), 1 << 24);
    } else if (arg == "--gen") {
      o.gen = static_cast<int>(parseInt(arg, value(), 1, 1 << 24));
    } else if (arg == "--batch") {
      o.batches = parseList(arg, value(), kMaxBatch);
    } else if (arg == "--reps") {
      o.reps = static_cast<int>(parseInt(arg, value(), 1, 100000));
    } else if (arg == "--warmup") {
      o.warmup = static_cast<int>(parseInt(arg, value(), 0, 100000));
    } else if (arg == "--device") {
      o.device = value();
      if (o.device != "cuda" && o.device != "cpu" && o.device != "auto")
        throw BadUsage{"--device expects cuda, cpu or auto, got '" + o.device + "'"};
    } else if (arg == "--threads") {
      o.threads = static_cast<int>(parseInt(arg, value(), 0, 4096));
    } else if (arg == "--bandwidth") {
      const std::string text = value();
      char *end = nullptr;
      o.bandwidth = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(o.bandwidth > 0.0) || !std::isfinite(o.bandwidth))
        throw BadUsage{"--bandwidth expects bytes per second (e.g. 4.29e12), got '" + text + "'"};
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--profile") {
      o.profile = true;
    } else if (arg == "--timeline") {
      o.timeline = value();
    } else if (arg == "--plot") {
      o.plot = value();
    } else if (cli::isSamplingOption(arg)) {
      const std::string error = cli::setSamplingOption(arg, value(), o.sampling);
      if (!error.empty())
        throw BadUsage{error};
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kBenchHelp, stdout);
      std::exit(0);
    } else if (!arg.empty() && arg[0] == '-') {
      throw BadUsage{"unknown option '" + arg + "' (see ninfer bench --help)"};
    } else if (!sawPlan) {
      o.plan = arg;
      sawPlan = true;
    } else {
      throw BadUsage{"unexpected argument '" + arg + "'"};
    }
  }
  if (!sawPlan)
    throw BadUsage{"no plan given (usage: ninfer bench PLAN [options])"};
  if (o.profile && o.json)
    throw BadUsage{"--profile prints a table; it cannot be combined with --json"};
  if (!o.timeline.empty() && o.json)
    throw BadUsage{"--timeline prints a table; it cannot be combined with --json"};
  if (!o.batches.empty() && !Sampler(o.sampling).greedy())
    throw BadUsage{"--batch steps pick greedy tokens: sampling (--temp above 0) is for "
                   "single-sequence decode"};
  return o;
}

// Bytes a decode step reads besides the KV cache: every Linear weight (and bias),
// one row of every embedding table.
double weightBytesPerToken(const plan::Plan &p) {
  double bytes = 0.0;
  const auto &buffers = *p.buffers();
  for (const plan::Op *op : *p.ops()) {
    if (const plan::LinearAttrs *a = op->attrs_as_LinearAttrs()) {
      for (uint32_t i = 1; i < op->inputs()->size() && i <= (a->has_bias() ? 2u : 1u); ++i)
        bytes += double(buffers.Get(op->inputs()->Get(i))->size_bytes());
    } else if (const plan::EmbeddingAttrs *a = op->attrs_as_EmbeddingAttrs()) {
      if (op->inputs()->size() > 1 && a->vocab() > 0)
        bytes += double(buffers.Get(op->inputs()->Get(1))->size_bytes()) / a->vocab();
    }
  }
  return bytes;
}

// KV-cache bytes read per decode token per position of context (all layers, K and V):
// the caches' sizes over their positions (and sequence slots), so int8 caches count
// codes and scales.
double kvBytesPerPosition(const plan::Plan &p) {
  double bytes = 0.0;
  for (const plan::Op *op : *p.ops())
    if (const plan::AttentionAttrs *a = op->attrs_as_AttentionAttrs())
      for (uint32_t k = 3; k <= 4; ++k)
        bytes += double(p.buffers()->Get(op->inputs()->Get(k))->size_bytes()) / a->context() /
                 p.max_batch();
  return bytes;
}

struct Spread {
  double median = 0, min = 0, max = 0;
};

Spread spreadOf(std::vector<double> v) {
  Spread s;
  if (v.empty())
    return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  const size_t index = static_cast<size_t>(std::ceil(q * double(v.size()))) - 1;
  return v[std::min(index, v.size() - 1)];
}

struct PromptResult {
  int prompt = 0;
  Spread prefill, decode; // tok/s
  double p50Ms = 0, p95Ms = 0;
  double bytesPerToken = 0; // at the mean decode context
  double achievedBytesPerSecond = 0;
  double mbu = 0; // 0 when the bandwidth is unknown
};

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Synthetic prompt ids, different for every sequence.
std::vector<int32_t> promptIds(const plan::Plan &p, int prompt, int sequence) {
  const int vocab = std::max(2, p.model()->vocab_size());
  std::vector<int32_t> ids(static_cast<size_t>(prompt));
  for (int i = 0; i < prompt; ++i)
    ids[size_t(i)] =
        1 + static_cast<int32_t>((int64_t(i + 1009 * sequence) * 7919 + 13) % (vocab - 1));
  return ids;
}

// The synthetic id decoded at `pos`.
int32_t decodeId(const plan::Plan &p, int pos, int sequence) {
  const int vocab = std::max(2, p.model()->vocab_size());
  return 1 + static_cast<int32_t>((int64_t(pos + 1009 * sequence) * 31 + 7) % (vocab - 1));
}

// Prefills `ids` into `sequence`'s KV cache from position 0, in steps of at
// most max_step_tokens.
Status prefill(Executor &executor, const plan::Plan &p, const std::vector<int32_t> &ids,
               int sequence, std::vector<float> &logits) {
  const int prompt = static_cast<int>(ids.size());
  const int maxStep = std::max(1, p.max_step_tokens());
  for (int pos = 0; pos < prompt; pos += maxStep) {
    const int n = std::min(maxStep, prompt - pos);
    NINFER_RETURN_IF_ERROR(
        executor.forwardSequence(sequence, ids.data() + pos, n, pos, logits.data()));
  }
  return Status::ok();
}

// A decode step's greedy tokens as generation gets them: picked by the executor where it
// can (the CUDA executor on the GPU: only the ids cross to the host), else argmaxToken of
// each row's logits. batch 0: a single-sequence step of sequence 0 at positions[0].
Status greedyStep(Executor &executor, const plan::Plan &p, const int32_t *ids,
                  const int32_t *positions, const int32_t *sequences, int batch,
                  std::vector<float> &logits, int32_t *picked) {
  const int rows = std::max(1, batch);
  if (executor.picksGreedyTokens())
    return batch ? executor.forwardBatchGreedy(ids, positions, sequences, batch, picked)
                 : executor.forwardSequenceGreedy(0, ids, 1, positions[0], picked);
  NINFER_RETURN_IF_ERROR(batch ? executor.forwardBatch(ids, positions, sequences, batch,
                                                       logits.data())
                               : executor.forward(ids, 1, positions[0], logits.data()));
  const int vocab = p.model()->vocab_size();
  for (int r = 0; r < rows; ++r)
    picked[r] = argmaxToken(logits.data() + size_t(r) * size_t(vocab), vocab);
  return Status::ok();
}

// Where greedyStep() picks the tokens, for the report: "device" or "host".
const char *tokenPick(const Executor &executor) {
  return executor.picksGreedyTokens() ? "device" : "host";
}

// The report's line on it.
void printTokenPick(const Executor &executor) {
  std::printf("tokens:   %s\n", executor.picksGreedyTokens()
                                    ? "picked on the device (greedy), one id per row to the host"
                                    : "the logits to the host, which takes their argmax");
}

// The report's lines on the device: the memory the plan takes there (none for an executor
// that runs on the host) and the bandwidth MBU is measured against.
void printDeviceLines(uint64_t deviceBytes, double bandwidth, const char *bandwidthSource) {
  if (deviceBytes > 0)
    std::printf("memory:   %.2f GiB on the device\n", double(deviceBytes) / double(1ull << 30));
  else
    std::printf("memory:   none on a device (the executor runs on the host)\n");
  if (bandwidth > 0)
    std::printf("bandwidth: %.3g GB/s (%s)\n", bandwidth / 1e9, bandwidthSource);
  else
    std::printf("bandwidth: unknown (give --bandwidth for MBU)\n");
}

// Decode steps whose pick brought the logits to the host (DecodeStep::logitsSteps), and
// top-p's steps that the executor drew over the whole row (DecodeStep::rowDrawSteps).
struct PickCounts {
  int logits = 0, rowDraws = 0;
};

// One run: prefill `prompt` ids from position 0, then `gen` decode steps, each picking its
// next token with `sampling` as generation does (DecodeStep); adds to `picks` the steps whose
// pick read the logits on the host and those whose top-p draw the executor made over the row.
Status runOnce(Executor &executor, const plan::Plan &p, int prompt, int gen,
               const SamplingParams &sampling, std::vector<float> &logits,
               double &prefillSeconds, std::vector<double> &latencies, PickCounts &picks) {
  const Clock::time_point start = Clock::now();
  NINFER_RETURN_IF_ERROR(prefill(executor, p, promptIds(p, prompt, 0), 0, logits));
  prefillSeconds = secondsSince(start);
  Sampler sampler(sampling);
  DecodeStep step(executor, sampler, p.model()->vocab_size());
  for (int i = 0; i < gen; ++i) {
    const int pos = prompt + i;
    int32_t picked = 0;
    const Clock::time_point t = Clock::now();
    NINFER_RETURN_IF_ERROR(step.run(decodeId(p, pos, 0), pos, picked));
    latencies.push_back(secondsSince(t));
  }
  picks.logits += step.logitsSteps();
  picks.rowDraws += step.rowDrawSteps();
  return Status::ok();
}

// One batched run: prefill `batch` sequences of `prompt` ids each into slots
// 0..batch-1 (single-sequence steps), then `gen` batch steps that decode one
// token of every sequence. latencies: one per batch step.
Status runBatchOnce(Executor &executor, const plan::Plan &p, int prompt, int gen, int batch,
                    std::vector<float> &logits, double &prefillSeconds,
                    std::vector<double> &latencies) {
  const Clock::time_point start = Clock::now();
  for (int s = 0; s < batch; ++s)
    NINFER_RETURN_IF_ERROR(prefill(executor, p, promptIds(p, prompt, s), s, logits));
  prefillSeconds = secondsSince(start);
  std::vector<int32_t> ids(size_t(batch), 0), positions(size_t(batch), 0),
      sequences(size_t(batch), 0), picked(size_t(batch), 0);
  for (int s = 0; s < batch; ++s)
    sequences[size_t(s)] = s;
  for (int i = 0; i < gen; ++i) {
    for (int s = 0; s < batch; ++s) {
      positions[size_t(s)] = prompt + i;
      ids[size_t(s)] = decodeId(p, prompt + i, s);
    }
    const Clock::time_point t = Clock::now();
    NINFER_RETURN_IF_ERROR(greedyStep(executor, p, ids.data(), positions.data(),
                                      sequences.data(), batch, logits, picked.data()));
    latencies.push_back(secondsSince(t));
  }
  return Status::ok();
}

// The measured runs' prefill and decode rates (tok/s) and decode step latencies.
struct Measured {
  std::vector<double> prefillRates, decodeRates, latencies;
};

// Calls run(prefillSeconds, stepLatencies) o.warmup + o.reps times and keeps the
// measured ones: a run prefills `prefillTokens` and decodes `stepTokens` per step.
template <class Run>
Status measure(const BenchOptions &o, const std::string &label, double prefillTokens,
               double stepTokens, const Run &run, Measured &m) {
  Progress progress(label, uint64_t(o.warmup + o.reps));
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    double prefillSeconds = 0;
    std::vector<double> latencies;
    Status s = run(prefillSeconds, latencies);
    if (!s.isOk()) {
      progress.finish();
      return s;
    }
    progress.update(uint64_t(i + 1));
    if (i < o.warmup)
      continue;
    double decodeSeconds = 0;
    for (double l : latencies)
      decodeSeconds += l;
    m.prefillRates.push_back(prefillTokens / std::max(prefillSeconds, 1e-12));
    m.decodeRates.push_back(stepTokens * double(latencies.size()) / std::max(decodeSeconds, 1e-12));
    m.latencies.insert(m.latencies.end(), latencies.begin(), latencies.end());
  }
  progress.finish();
  return Status::ok();
}

struct BatchResult {
  int prompt = 0;
  int batch = 0;
  Spread prefill, decode;  // tok/s over all sequences of the step
  double perSequence = 0;  // median decode tok/s / batch
  double ratio = 0;        // median decode tok/s over batch 1's at this prompt; 0: not measured
  double p50Ms = 0, p95Ms = 0; // batch step latency
  double bytesPerStep = 0;     // at the mean decode context
  double achievedBytesPerSecond = 0;
  double mbu = 0;
};

std::unique_ptr<Executor> makeExecutor(const PlanFile &file, const BenchOptions &o,
                                       std::string &error) {
  auto take = [&](Result<std::unique_ptr<Executor>> r) -> std::unique_ptr<Executor> {
    if (!r.isOk()) {
      error = r.status().message();
      return nullptr;
    }
    return std::move(r.value());
  };
  if (o.device == "cpu")
    return take(createCpuExecutor(file, o.threads));
  if (o.device == "cuda")
    return take(createCudaExecutor(file, 0));
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(file, 0);
  if (cuda.isOk())
    return std::move(cuda.value());
  std::fprintf(stderr, "ninfer: bench: cuda unavailable (%s); using the CPU executor\n",
               cuda.status().message().c_str());
  return take(createCpuExecutor(file, o.threads));
}

// A line of the chart: its (x, y) points.
struct ChartSeries {
  std::string name; // legend entry (none when empty)
  std::vector<std::pair<double, double>> points;
};

struct ChartLabels {
  std::string title, x, y;
};

Status writeChartPng(const std::string &path, const ChartLabels &labels,
                     const std::vector<ChartSeries> &series);

// The --batch sweep: every prompt length times every batch size, printed as a
// table or JSON; --plot draws aggregate tok/s against batch size.
int benchBatches(const BenchOptions &o, Executor &executor, const plan::Plan &p,
                 double bandwidth, const char *bandwidthSource) {
  const double weightBytes = weightBytesPerToken(p);
  const double kvPerPos = kvBytesPerPosition(p);
  std::vector<float> logits(size_t(std::max(1, p.max_batch())) *
                            size_t(std::max(1, p.model()->vocab_size())));
  std::vector<BatchResult> results;
  for (int prompt : o.prompts) {
    double batchOneRate = 0;
    for (int batch : o.batches) {
      Measured m;
      Status s = measure(o, "bench prompt " + std::to_string(prompt) + " batch " +
                                std::to_string(batch),
                         double(batch) * prompt, batch,
                         [&](double &prefillSeconds, std::vector<double> &latencies) {
                           return runBatchOnce(executor, p, prompt, o.gen, batch, logits,
                                               prefillSeconds, latencies);
                         },
                         m);
      if (!s.isOk()) {
        std::fprintf(stderr, "ninfer: error: %s\n", s.message().c_str());
        return 1;
      }
      BatchResult r;
      r.prompt = prompt;
      r.batch = batch;
      r.prefill = spreadOf(m.prefillRates);
      r.decode = spreadOf(m.decodeRates);
      const std::vector<double> &latencies = m.latencies;
      r.perSequence = r.decode.median / batch;
      if (batch == 1)
        batchOneRate = r.decode.median;
      r.p50Ms = 1e3 * percentile(latencies, 0.50);
      r.p95Ms = 1e3 * percentile(latencies, 0.95);
      // A step reads the weights once and every sequence's cache up to its position.
      r.bytesPerStep = weightBytes + batch * kvPerPos * (prompt + 0.5 * (o.gen + 1));
      r.achievedBytesPerSecond = r.decode.median / batch * r.bytesPerStep;
      r.mbu = bandwidth > 0 ? r.achievedBytesPerSecond / bandwidth : 0.0;
      results.push_back(r);
    }
    for (BatchResult &r : results)
      if (r.prompt == prompt && batchOneRate > 0)
        r.ratio = r.decode.median / batchOneRate;
  }

  const std::string name = executor.name();
  const uint64_t deviceBytes = executor.deviceMemoryBytes();
  if (o.json) {
    std::printf("{\n  \"plan\": %s,\n  \"executor\": %s,\n", json::quoted(o.plan).c_str(),
                json::quoted(name).c_str());
    std::printf("  \"gen\": %d,\n  \"reps\": %d,\n  \"warmup\": %d,\n  \"max_batch\": %d,\n",
                o.gen, o.reps, o.warmup, p.max_batch());
    std::printf("  \"token_pick\": \"%s\",\n", tokenPick(executor));
    std::printf("  \"device_memory_bytes\": %llu,\n", static_cast<unsigned long long>(deviceBytes));
    std::printf("  \"bandwidth_bytes_per_s\": %.6g,\n  \"bandwidth_source\": \"%s\",\n", bandwidth,
                bandwidthSource);
    std::printf("  \"weight_bytes_per_token\": %.6g,\n  \"kv_bytes_per_position\": %.6g,\n",
                weightBytes, kvPerPos);
    std::printf("  \"batch_runs\": [\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const BatchResult &r = results[i];
      char ratio[32];
      if (r.ratio > 0)
        std::snprintf(ratio, sizeof(ratio), "%.6g", r.ratio);
      else
        std::snprintf(ratio, sizeof(ratio), "null");
      std::printf("    {\"prompt\": %d, \"batch\": %d, \"prefill_tok_s\": {\"median\": %.6g, "
                  "\"min\": %.6g, \"max\": %.6g}, \"decode_tok_s\": {\"median\": %.6g, \"min\": "
                  "%.6g, \"max\": %.6g}, \"decode_tok_s_per_sequence\": %.6g, "
                  "\"ratio_to_batch_1\": %s, \"step_latency_ms\": {\"p50\": %.6g, \"p95\": %.6g}, "
                  "\"bytes_per_step\": %.6g, \"achieved_bytes_per_s\": %.6g, \"mbu\": %.6g}%s\n",
                  r.prompt, r.batch, r.prefill.median, r.prefill.min, r.prefill.max,
                  r.decode.median, r.decode.min, r.decode.max, r.perSequence, ratio, r.p50Ms,
                  r.p95Ms, r.bytesPerStep, r.achievedBytesPerSecond, r.mbu,
                  i + 1 < results.size() ? "," : "");
    }
    std::printf("  ]\n}\n");
  } else {
    std::printf("plan:     %s (%d sequences)\nexecutor: %s\n", o.plan.c_str(), p.max_batch(),
                name.c_str());
    printTokenPick(executor);
    printDeviceLines(deviceBytes, bandwidth, bandwidthSource);
    std::printf("runs:     %d measured after %d warm-up, %d batch steps each; median [min, max]; "
                "tok/s counts every sequence\n\n",
                o.reps, o.warmup, o.gen);
    std::printf("%8s  %5s  %24s  %28s  %12s  %8s  %9s  %9s  %9s  %6s\n", "prompt", "batch",
                "prefill tok/s", "decode tok/s", "per sequence", "x batch1", "step p50",
                "step p95", "GB/s", "MBU");
    for (const BatchResult &r : results) {
      char prefill[64], decode[64], ratio[16], mbu[16];
      std::snprintf(prefill, sizeof(prefill), "%.0f [%.0f, %.0f]", r.prefill.median, r.prefill.min,
                    r.prefill.max);
      std::snprintf(decode, sizeof(decode), "%.1f [%.1f, %.1f]", r.decode.median, r.decode.min,
                    r.decode.max);
      if (r.ratio > 0)
        std::snprintf(ratio, sizeof(ratio), "%.2f", r.ratio);
      else
        std::snprintf(ratio, sizeof(ratio), "-");
      if (bandwidth > 0)
        std::snprintf(mbu, sizeof(mbu), "%.1f%%", 100.0 * r.mbu);
      else
        std::snprintf(mbu, sizeof(mbu), "-");
      std::printf("%8d  %5d  %24s  %28s  %12.1f  %8s  %9.3f  %9.3f  %9.1f  %6s\n", r.prompt,
                  r.batch, prefill, decode, r.perSequence, ratio, r.p50Ms, r.p95Ms,
                  r.achievedBytesPerSecond / 1e9, mbu);
    }
  }
  if (o.profile) {
    // The largest batch at the first prompt length: its step, kernel by kernel.
    const BatchResult *largest = nullptr;
    for (const BatchResult &r : results)
      if (r.prompt == o.prompts.front() && (!largest || r.batch > largest->batch))
        largest = &r;
    const int prefill = std::min(o.prompts.front(), std::max(1, p.max_step_tokens()));
    Status s = printKernelProfile(executor, p, o.prompts.front(), prefill, largest->p50Ms,
                                  largest->batch);
    if (!s.isOk()) {
      std::fprintf(stderr, "ninfer: error: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (!o.timeline.empty()) {
    const int largest = *std::max_element(o.batches.begin(), o.batches.end());
    Status s = traceAndReport(executor, p, o.prompts.front(), largest, o.timeline);
    if (!s.isOk()) {
      std::fprintf(stderr, "ninfer: error: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (!o.plot.empty()) {
    std::vector<ChartSeries> series;
    for (int prompt : o.prompts) {
      ChartSeries line;
      line.name = "prompt " + std::to_string(prompt);
      for (const BatchResult &r : results)
        if (r.prompt == prompt)
          line.points.push_back({double(r.batch), r.decode.median});
      series.push_back(line);
    }
    Status s = writeChartPng(o.plot, {"decode tok/s (all sequences) by batch size", "batch size",
                                      "tok/s"},
                             series);
    if (!s.isOk()) {
      std::fprintf(stderr, "ninfer: error: %s\n", s.message().c_str());
      return 1;
    }
    std::fprintf(stderr, "ninfer: bench: wrote %s\n", o.plot.c_str());
  }
  return 0;
}

int bench(const BenchOptions &o) {
  for (const std::string *output : {&o.plot, &o.timeline}) {
    const Status writable = output->empty() ? Status::ok() : AtomicFile::probe(*output);
    if (!writable.isOk()) {
      std::fprintf(stderr, "ninfer: error: %s\n", writable.message().c_str());
      return 1;
    }
  }
  Result<std::unique_ptr<PlanFile>> opened = PlanFile::open(o.plan);
  if (!opened.isOk()) {
    std::fprintf(stderr, "ninfer: error: %s\n", opened.status().message().c_str());
    return 1;
  }
  const PlanFile &file = **opened;
  const plan::Plan &p = file.plan();
  for (int batch : o.batches)
    if (batch > p.max_batch()) {
      std::fprintf(stderr,
                   "ninfer: error: --batch %d exceeds the %d sequence%s the plan holds: compile "
                   "it with ninferc --batch %d\n",
                   batch, p.max_batch(), p.max_batch() == 1 ? "" : "s", batch);
      return 2;
    }
  for (int prompt : o.prompts)
    if (prompt + o.gen > p.context()) {
      std::fprintf(stderr,
                   "ninfer: error: --prompt %d plus --gen %d exceeds the plan's context of %d\n",
                   prompt, o.gen, p.context());
      return 2;
    }
  std::string error;
  std::unique_ptr<Executor> executor = makeExecutor(file, o, error);
  if (!executor) {
    std::fprintf(stderr, "ninfer: error: %s\n", error.c_str());
    return 1;
  }
  const std::string name = executor->name();
  if ((o.profile || !o.timeline.empty()) && !executor->timesKernels()) {
    std::fprintf(stderr,
                 "ninfer: error: %s kernels on the GPU, and this run uses %s "
                 "(give --device cuda on a machine with a GPU)\n",
                 o.profile ? "--profile times" : "--timeline traces", name.c_str());
    return 1;
  }
  const char* bandwidthSource = "--bandwidth";
  const double bandwidth = o.bandwidth > 0 ? o.bandwidth : benchBandwidth(name, &bandwidthSource);
  if (!o.batches.empty())
    return benchBatches(o, *executor, p, bandwidth, bandwidthSource);
  const double weightBytes = weightBytesPerToken(p);
  const double kvPerPos = kvBytesPerPosition(p);
  std::vector<float> logits(static_cast<size_t>(std::max(1, p.model()->vocab_size())));
  std::vector<PromptResult> results;
  PickCounts picks; // over every run, warm-ups included
  const int decodeSteps = int(o.prompts.size()) * (o.warmup + o.reps) * o.gen;

  for (int prompt : o.prompts) {
    Measured m;
    Status s = measure(o, "bench prompt " + std::to_string(prompt), prompt, 1,
                       [&](double &prefillSeconds, std::vector<double> &latencies) {
                         return runOnce(*executor, p, prompt, o.gen, o.sampling, logits,
                                        prefillSeconds, latencies, picks);
                       },
                       m);
    if (!s.isOk()) {
      std::fprintf(stderr, "ninfer: error: %s\n", s.message().c_str());
      return 1;
    }
    PromptResult r;
    r.prompt = prompt;
    r.prefill = spreadOf(m.prefillRates);
    r.decode = spreadOf(m.decodeRates);
    const std::vector<double> &latencies = m.latencies;
    r.p50Ms = 1e3 * percentile(latencies, 0.50);
    r.p95Ms = 1e3 * percentile(latencies, 0.95);
    // The mean context of a decode step is prompt + (gen - 1) / 2 earlier positions, + itself.
    r.bytesPerToken = weightBytes + kvPerPos * (prompt + 0.5 * (o.gen + 1));
    r.achievedBytesPerSecond = r.decode.median * r.bytesPerToken;
    r.mbu = bandwidth > 0 ? r.achievedBytesPerSecond / bandwidth : 0.0;
    results.push_back(r);
  }

  const uint64_t deviceBytes = executor->deviceMemoryBytes();
  Sampler reported(o.sampling);
  const DecodeStep pick(*executor, reported, p.model()->vocab_size());
  if (o.json) {
    std::printf("{\n  \"plan\": %s,\n  \"executor\": %s,\n", json::quoted(o.plan).c_str(),
                json::quoted(name).c_str());
    std::printf("  \"gen\": %d,\n  \"reps\": %d,\n  \"warmup\": %d,\n", o.gen, o.reps, o.warmup);
    std::printf("  \"sampling\": {\"temperature\": %.6g, \"top_k\": %d, \"top_p\": %.6g, "
                "\"seed\": %llu},\n",
                o.sampling.temperature, o.sampling.topK, o.sampling.topP,
                static_cast<unsigned long long>(o.sampling.seed));
    std::printf("  \"token_pick\": \"%s\",\n", pick.onDevice() ? "device" : "host");
    std::printf("  \"decode_steps\": %d,\n  \"logits_to_host_steps\": %d,\n"
                "  \"row_draw_steps\": %d,\n",
                decodeSteps, picks.logits, picks.rowDraws);
    std::printf("  \"device_memory_bytes\": %llu,\n", static_cast<unsigned long long>(deviceBytes));
    std::printf("  \"bandwidth_bytes_per_s\": %.6g,\n  \"bandwidth_source\": \"%s\",\n", bandwidth,
                bandwidthSource);
    std::printf("  \"weight_bytes_per_token\": %.6g,\n  \"kv_bytes_per_position\": %.6g,\n",
                weightBytes, kvPerPos);
    std::printf("  \"runs\": [\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const PromptResult &r = results[i];
      std::printf("    {\"prompt\": %d, \"prefill_tok_s\": {\"median\": %.6g, \"min\": %.6g, "
                  "\"max\": %.6g}, \"decode_tok_s\": {\"median\": %.6g, \"min\": %.6g, \"max\": "
                  "%.6g}, \"decode_latency_ms\": {\"p50\": %.6g, \"p95\": %.6g}, "
                  "\"bytes_per_token\": %.6g, \"achieved_bytes_per_s\": %.6g, \"mbu\": %.6g}%s\n",
                  r.prompt, r.prefill.median, r.prefill.min, r.prefill.max, r.decode.median,
                  r.decode.min, r.decode.max, r.p50Ms, r.p95Ms, r.bytesPerToken,
                  r.achievedBytesPerSecond, r.mbu, i + 1 < results.size() ? "," : "");
    }
    std::printf("  ]\n}\n");
  } else {
    std::printf("plan:     %s\nexecutor: %s\n", o.plan.c_str(), name.c_str());
    if (reported.greedy())
      std::printf("sampling: greedy\n");
    else
      std::printf("sampling: temperature %g, top-k %d, top-p %g, seed %llu\n",
                  double(o.sampling.temperature), o.sampling.topK, double(o.sampling.topP),
                  static_cast<unsigned long long>(o.sampling.seed));
    std::printf("tokens:   %s\n", pick.describe().c_str());
    if (pick.onDevice() && picks.logits > 0)
      std::printf("logits:   to the host in %d of %d decode steps (warm-ups included)\n",
                  picks.logits, decodeSteps);
    if (picks.rowDraws > 0)
      std::printf("top-p:    drawn over the whole row on the device in %d of %d decode steps "
                  "(warm-ups included)\n",
                  picks.rowDraws, decodeSteps);
    printDeviceLines(deviceBytes, bandwidth, bandwidthSource);
    std::printf("runs:     %d measured after %d warm-up, %d decode steps each; "
                "median [min, max]\n\n",
                o.reps, o.warmup, o.gen);
    std::printf("%8s  %28s  %28s  %9s  %9s  %9s  %6s\n", "prompt", "prefill tok/s",
                "decode tok/s", "p50 ms", "p95 ms", "GB/s", "MBU");
    for (const PromptResult &r : results) {
      char prefill[64], decode[64], mbu[16];
      std::snprintf(prefill, sizeof(prefill), "%.0f [%.0f, %.0f]", r.prefill.median, r.prefill.min,
                    r.prefill.max);
      std::snprintf(decode, sizeof(decode), "%.1f [%.1f, %.1f]", r.decode.median, r.decode.min,
                    r.decode.max);
      if (bandwidth > 0)
        std::snprintf(mbu, sizeof(mbu), "%.1f%%", 100.0 * r.mbu);
      else
        std::snprintf(mbu, sizeof(mbu), "-");
      std::printf("%8d  %28s  %28s  %9.3f  %9.3f  %9.1f  %6s\n", r.prompt, prefill, decode, r.p50Ms,
                  r.p95Ms, r.achievedBytesPerSecond / 1e9, mbu);
    }
  }
  if (o.profile) {
    const int prefill = std::min(o.prompts.front(), std::max(1, p.max_step_tokens()));
    Status s = printKernelProfile(*executor, p, o.prompts.front(), prefill, results.front().p50Ms);
    if (!s.isOk()) {
      std::fprintf(stderr, "ninfer: error: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (!o.timeline.empty()) {
    Status s = traceAndReport(*executor, p, o.prompts.front(), 1, o.timeline);
    if (!s.isOk()) {
      std::fprintf(stderr, "ninfer: error: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (!o.plot.empty()) {
    ChartSeries line;
    for (const PromptResult &r : results)
      line.points.push_back({double(r.prompt), r.decode.median});
    Status s = writeChartPng(o.plot, {"decode tok/s by context length", "prompt tokens", "tok/s"},
                             {line});
    if (!s.isOk()) {
      std::fprintf(stderr, "ninfer: error: %s\n", s.message().c_str());
      return 1;
    }
    std::fprintf(stderr, "ninfer: bench: wrote %s\n", o.plot.c_str());
  }
  return 0;
}

// ---- PNG chart: decode tok/s against context length. ----

struct Image {
  int width, height;
  std::vector<uint8_t> rgb;
  Image(int w, int h) : width(w), height(h), rgb(size_t(w) * h * 3, 255) {}
  void set(int x, int y, uint32_t color) {
    if (x < 0 || y < 0 || x >= width || y >= height)
      return;
    uint8_t *p = &rgb[(size_t(y) * width + x) * 3];
    p[0] = uint8_t(color >> 16);
    p[1] = uint8_t(color >> 8);
    p[2] = uint8_t(color);
  }
  void line(int x0, int y0, int x1, int y1, uint32_t color) { // Bresenham
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      set(x0, y0, color);
      if (x0 == x1 && y0 == y1)
        break;
      const int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  // Text in a 3x5 font (digits, letters as capitals, space and ( ) , - . /), 2x scaled:
  // 8 pixels per character. Bit 14 - (3 row + column) of a glyph is set where it is inked.
  static uint16_t glyph(char c) {
    static const uint16_t digits[10] = {0x7B6F, 0x2C97, 0x73E7, 0x73CF, 0x5BC9,
                                        0x79CF, 0x79EF, 0x7249, 0x7BEF, 0x7BCF};
    static const uint16_t letters[26] = {
        0x2BED, 0x6BAE, 0x3923, 0x6B6E, 0x79A7, 0x79A4, 0x396B, 0x5BED, 0x7497,
        0x126A, 0x5BAD, 0x4927, 0x5FED, 0x6B6D, 0x2B6A, 0x6BA4, 0x2B73, 0x6BAD,
        0x388E, 0x7492, 0x5B6F, 0x5B6A, 0x5BFD, 0x5AAD, 0x5A92, 0x72A7};
    if (c >= '0' && c <= '9')
      return digits[c - '0'];
    if (c >= 'a' && c <= 'z')
      c = char(c - 'a' + 'A');
    if (c >= 'A' && c <= 'Z')
      return letters[c - 'A'];
    switch (c) {
    case '(': return 0x2922;
    case ')': return 0x224A;
    case ',': return 0x0014;
    case '-': return 0x01C0;
    case '.': return 0x0002;
    case '/': return 0x12A4;
    default: return 0; // space and anything else: blank
    }
  }
  static int textWidth(const std::string &text) { return int(text.size()) * 8; }
  void text(const std::string &text, int xLeft, int yTop, uint32_t color) {
    int x = xLeft;
    for (char c : text) {
      const uint16_t g = glyph(c);
      for (int row = 0; row < 5; ++row)
        for (int col = 0; col < 3; ++col)
          if (g & (1u << (14 - (row * 3 + col))))
            for (int s = 0; s < 4; ++s)
              set(x + col * 2 + s % 2, yTop + row * 2 + s / 2, color);
      x += 8;
    }
  }
  // Non-negative integer, right-aligned at x.
  void number(long long value, int xRight, int yTop, uint32_t color) {
    const std::string digits = std::to_string(std::max(0LL, value));
    text(digits, xRight - textWidth(digits), yTop, color);
  }
};

uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc = 0) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[n] = c;
    }
    ready = true;
  }
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

void putBe32(std::vector<uint8_t> &out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(uint8_t(v >> shift));
}

void pngChunk(std::vector<uint8_t> &out, const char *type, const std::vector<uint8_t> &data) {
  putBe32(out, uint32_t(data.size()));
  std::vector<uint8_t> body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  out.insert(out.end(), body.begin(), body.end());
  putBe32(out, crc32(body.data(), body.size()));
}

std::vector<uint8_t> encodePng(const Image &image) {
  // Scanlines, each with filter byte 0 (none).
  std::vector<uint8_t> raw;
  const size_t stride = size_t(image.width) * 3;
  for (int y = 0; y < image.height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), image.rgb.begin() + y * stride, image.rgb.begin() + (y + 1) * stride);
  }
  // zlib stream of stored (uncompressed) deflate blocks of at most 65535 bytes.
  std::vector<uint8_t> z = {0x78, 0x01};
  for (size_t off = 0; off < raw.size() || off == 0; off += 65535) {
    const size_t len = std::min<size_t>(65535, raw.size() - off);
    const bool last = off + len >= raw.size();
    z.push_back(last ? 1 : 0);
    z.push_back(uint8_t(len));
    z.push_back(uint8_t(len >> 8));
    z.push_back(uint8_t(~len));
    z.push_back(uint8_t(~len >> 8));
    z.insert(z.end(), raw.begin() + off, raw.begin() + off + len);
    if (last)
      break;
  }
  uint32_t a = 1, b = 0; // Adler-32
  for (uint8_t byte : raw) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  putBe32(z, (b << 16) | a);
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> header;
  putBe32(header, uint32_t(image.width));
  putBe32(header, uint32_t(image.height));
  header.insert(header.end(), {8, 2, 0, 0, 0}); // 8-bit RGB, deflate, no filter, no interlace
  pngChunk(png, "IHDR", header);
  pngChunk(png, "IDAT", z);
  pngChunk(png, "IEND", {});
  return png;
}

// A line chart: title on top, the y axis' name above it, the x axis' name under its
// numbers, a legend (series with names) in the plot's top-left corner.
Status writeChartPng(const std::string &path, const ChartLabels &labels,
                     const std::vector<ChartSeries> &series) {
  constexpr int kW = 640, kH = 400, kLeft = 70, kRight = 20, kTop = 44, kBottom = 52;
  constexpr uint32_t kAxis = 0x000000, kGrid = 0xdddddd;
  constexpr uint32_t kLines[] = {0x1f5fbf, 0xd0641e, 0x2a9d3c, 0x9b2fae, 0x8c6d1f, 0x17a2b8};
  Image image(kW, kH);
  double maxX = 1, maxY = 1;
  for (const ChartSeries &line : series)
    for (const auto &[x, y] : line.points) {
      maxX = std::max(maxX, x);
      maxY = std::max(maxY, y);
    }
  maxY *= 1.1;
  const int plotW = kW - kLeft - kRight, plotH = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + int(std::lround(x / maxX * plotW)); };
  auto py = [&](double y) { return kTop + plotH - int(std::lround(y / maxY * plotH)); };
  // Grid, ticks and labels: 0, 1/5, ..., max; small integer x ranges (batch
  // sizes) get a tick at every integer instead.
  const int xTicks = maxX <= 10 && maxX == std::floor(maxX) ? int(maxX) : 5;
  for (int i = 0; i <= 5; ++i) {
    const double fy = maxY * i / 5;
    image.line(kLeft, py(fy), kLeft + plotW, py(fy), kGrid);
    image.line(kLeft - 5, py(fy), kLeft, py(fy), kAxis);
    image.number(std::llround(fy), kLeft - 8, py(fy) - 5, kAxis);
  }
  for (int i = 0; i <= xTicks; ++i) {
    const double fx = maxX * i / xTicks;
    image.line(px(fx), kTop, px(fx), kTop + plotH, kGrid);
    image.line(px(fx), kTop + plotH, px(fx), kTop + plotH + 5, kAxis);
    image.number(std::llround(fx), px(fx) + 12, kTop + plotH + 10, kAxis);
  }
  image.line(kLeft, kTop, kLeft, kTop + plotH, kAxis);
  image.line(kLeft, kTop + plotH, kLeft + plotW, kTop + plotH, kAxis);
  image.text(labels.title, (kW - Image::textWidth(labels.title)) / 2, 8, kAxis);
  image.text(labels.y, 8, kTop - 18, kAxis);
  image.text(labels.x, kLeft + (plotW - Image::textWidth(labels.x)) / 2, kH - 18, kAxis);
  for (size_t l = 0; l < series.size(); ++l) {
    const uint32_t color = kLines[l % (sizeof(kLines) / sizeof(kLines[0]))];
    image.text(series[l].name, kLeft + 10, kTop + 8 + 14 * int(l), color);
    const auto &points = series[l].points;
    for (size_t i = 0; i < points.size(); ++i) {
      const int x = px(points[i].first), y = py(points[i].second);
      if (i > 0)
        image.line(px(points[i - 1].first), py(points[i - 1].second), x, y, color);
      for (int dy = -2; dy <= 2; ++dy)
        for (int dx = -2; dx <= 2; ++dx)
          image.set(x + dx, y + dy, color);
    }
  }
  const std::vector<uint8_t> png = encodePng(image);
  return AtomicFile::writeWhole(path, png.data(), png.size());
}

} // namespace

int runBenchCommand(int argc, char **argv) {
  try {
    return bench(parseOptions(argc, argv));
  } catch (const BadUsage &e) {
    std::fprintf(stderr, "ninfer: error: %s\n", e.message.c_str());
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "ninfer: error: %s\n", e.what());
    return 1;
  }
}

} // namespace ninfer
