// Calibration runner (see Calibration.h): a temporary CPU plan of the module,
// an executor observer that accumulates X^T X per linear input, and the KL
// divergence measure for per-tensor sensitivity: scored chunks run through
// Executor::forwardAllRows, so the executor's own lm_head (the CPU linear,
// with the observer's weights) computes the logits of every position.
#include "Calibration.h"

#include "CompileDriver.h"

#include "Gram.h"
#include "QuantCommon.h"

#include "ninfer/Executor.h"
#include "ninfer/Plan.h"
#include "ninfer/Progress.h"
#include "ninfer/Tokenizer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace ninfer {
namespace {

llvm::Error calibrationError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "calibration: " + message.str());
}

// Accumulators of one linear input.
struct GroupStats {
  int64_t cols = 0;
  std::vector<double> h;      // upper triangle accumulated; mirrored at the end
  std::vector<double> absSum; // sum |x| per channel
  int64_t tokens = 0;
};

// H += X^T X for X [n, cols] (quant::accumulateGram: the upper triangle,
// each entry's products summed in f32 over the step's tokens in order, added to
// the f64 H), and the per-channel sums of |x|.
void accumulateHessian(GroupStats& g, const float* x, int n, int threads) {
  const int64_t cols = g.cols;
  for (int t = 0; t < n; ++t)
    for (int64_t j = 0; j < cols; ++j)
      g.absSum[size_t(j)] += std::fabs(double(x[int64_t(t) * cols + j]));
  g.tokens += n;
  // Fails only for a lane count this CPU lacks; 0 picks one it has.
  (void)quant::accumulateGram(x, n, cols, g.h.data(), threads, /*lanes=*/0);
}

// The finished statistics: H mirrored into both triangles, mean |x|.
std::shared_ptr<InputStatistics> finishStatistics(GroupStats& g) {
  auto stats = std::make_shared<InputStatistics>();
  stats->cols = g.cols;
  stats->tokens = g.tokens;
  stats->h = std::move(g.h);
  for (int64_t i = 0; i < g.cols; ++i)
    for (int64_t j = 0; j < i; ++j)
      stats->h[size_t(i * g.cols + j)] = stats->h[size_t(j * g.cols + i)];
  stats->meanAbs.resize(size_t(g.cols));
  for (int64_t j = 0; j < g.cols; ++j)
    stats->meanAbs[size_t(j)] = g.tokens ? float(g.absSum[size_t(j)] / double(g.tokens)) : 0.0f;
  return stats;
}

GroupStats emptyStats(int64_t cols) {
  GroupStats g;
  g.cols = cols;
  g.h.assign(size_t(cols) * size_t(cols), 0.0);
  g.absSum.assign(size_t(cols), 0.0);
  return g;
}

// log softmax of n logits, in f64 with the max subtracted.
void logSoftmax(const float* logits, int n, std::vector<double>& out) {
  out.resize(size_t(n));
  double top = logits[0];
  for (int i = 1; i < n; ++i)
    top = std::max(top, double(logits[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i)
    sum += std::exp(double(logits[i]) - top);
  const double lse = top + std::log(sum);
  for (int i = 0; i < n; ++i)
    out[size_t(i)] = double(logits[i]) - lse;
}

} // namespace

struct CalibrationRunner::Impl : CpuObserver {
  CalibrationOptions options;
  std::unique_ptr<PlanFile> file;
  std::unique_ptr<Executor> executor;
  std::vector<std::vector<int32_t>> chunks;
  int threads = 1;
  int vocab = 0;
  int hidden = 0;

  // Op index -> group index (-1: not a linear op, or not the first reader of its input).
  std::vector<int> groupOfOp;
  int lmHeadOp = -1;
  std::vector<GroupStats> groups;
  std::vector<int> firstOpOfGroup;
  std::map<std::string, int> groupOfWeight;     // weight name -> group
  std::map<std::string, std::vector<int>> opsOfWeight; // weight name -> ops reading it

  // Modes of the observer.
  bool collecting = false;
  bool recordReference = false;
  bool scoring = false;
  std::map<int, const float*> overrides;
  std::vector<float> logits;                 // [rows, vocab] of a scored step (forwardAllRows)
  std::vector<double> rowKld;                // per scored position
  std::vector<std::vector<float>> reference; // per sensitivity chunk: [rows, vocab] log-probs
  // Resuming a sensitivity run: the activation arena before the first linear op
  // of every input group (q/k/v, o, gate/up, down, lm_head), per sensitivity
  // chunk, saved by the reference run. A run with one tensor replaced restores
  // the last one before the first op reading it and skips the ops before: they
  // would compute what the reference run did.
  std::vector<std::map<int, std::vector<float>>> snapshots;
  int resumeOp = -1; // -1: run every op
  // Sequential calibration: every chunk runs the ops after sequentialStart (its
  // arena restored there from sequentialArenas) up to and including the linear
  // op sequentialEnd, whose input goes to sequentialGroup; the arena before
  // sequentialEnd is saved for the next step.
  // With the float target, every chunk first runs the same ops of the float
  // model (from floatArenas, no tensor replaced) and keeps the input of
  // sequentialEnd in floatInput, then accumulates X^T (X_float - X).
  bool sequential = false;
  bool floatPhase = false;
  int sequentialStart = -1; // -1: from the first op
  int sequentialEnd = -1;
  GroupStats sequentialGroup;
  std::vector<double> floatShift;
  std::vector<float> floatInput, inputShift;
  std::vector<std::vector<float>> sequentialArenas, floatArenas; // per chunk
  std::shared_ptr<const InputStatistics> sequentialLast; // of the input at sequentialStart
  std::map<std::string, std::vector<float>> replacedValues;
  std::map<int, const float*> replaced; // op -> values, for every sequential step
  size_t chunkIndex = 0;
  double kldSum = 0;
  int64_t kldCount = 0;

  void linearInput(int opIndex, const float* rows, int n, int width) override {
    if (opIndex < 0 || size_t(opIndex) >= groupOfOp.size() || groupOfOp[size_t(opIndex)] < 0)
      return;
    GroupStats* target = collecting ? &groups[size_t(groupOfOp[size_t(opIndex)])]
                         : sequential && opIndex == sequentialEnd ? &sequentialGroup
                                                                  : nullptr;
    if (!target || target->cols != width)
      return;
    const size_t values = size_t(n) * size_t(width);
    if (floatPhase) {
      floatInput.assign(rows, rows + values);
      return;
    }
    accumulateHessian(*target, rows, n, threads);
    if (floatShift.empty())
      return;
    inputShift.resize(values);
    for (size_t i = 0; i < values; ++i)
      inputShift[i] = floatInput[i] - rows[i];
    (void)quant::accumulateCrossGram(rows, inputShift.data(), n, width, floatShift.data(), threads);
  }

  bool beforeOp(int opIndex, float* arena, size_t floats) override {
    const bool groupStart = opIndex >= 0 && size_t(opIndex) < groupOfOp.size() &&
                            groupOfOp[size_t(opIndex)] >= 0;
    if (recordReference && groupStart)
      snapshots[chunkIndex][opIndex].assign(arena, arena + floats);
    if (sequential) {
      if (opIndex < sequentialStart || opIndex > sequentialEnd)
        return false;
      std::vector<float>& kept = (floatPhase ? floatArenas : sequentialArenas)[chunkIndex];
      if (opIndex == sequentialStart)
        std::copy(kept.begin(), kept.end(), arena);
      if (opIndex == sequentialEnd)
        kept.assign(arena, arena + floats);
      return true;
    }
    if (!scoring || resumeOp < 0)
      return true;
    if (opIndex < resumeOp)
      return false;
    if (opIndex == resumeOp) {
      const std::vector<float>& saved = snapshots[chunkIndex].at(opIndex);
      std::copy(saved.begin(), saved.end(), arena);
    }
    return true;
  }

  const float* weight(int opIndex, const float* values) override {
    auto it = overrides.find(opIndex);
    if (it != overrides.end())
      return it->second;
    auto swapped = floatPhase ? replaced.end() : replaced.find(opIndex);
    return swapped == replaced.end() ? values : swapped->second;
  }

  // The step's logits (every row, computed by the executor's own lm_head with
  // the observer's weights): either store the reference log-probs or add the
  // KL divergence against them. Rows in parallel, summed in row order.
  void scorePositions(int n) {
    if (recordReference) {
      std::vector<float>& ref = reference.emplace_back(size_t(n) * size_t(vocab));
      quant::parallelFor(n, threads, [&](int64_t t) {
        std::vector<double> logProbs;
        logSoftmax(logits.data() + t * vocab, vocab, logProbs);
        for (int v = 0; v < vocab; ++v)
          ref[size_t(t) * size_t(vocab) + size_t(v)] = float(logProbs[size_t(v)]);
      });
      return;
    }
    const std::vector<float>& ref = reference[chunkIndex];
    rowKld.assign(size_t(n), 0.0);
    quant::parallelFor(n, threads, [&](int64_t t) {
      std::vector<double> logProbs;
      logSoftmax(logits.data() + t * vocab, vocab, logProbs);
      double kld = 0;
      for (int v = 0; v < vocab; ++v) {
        const double p = ref[size_t(t) * size_t(vocab) + size_t(v)];
        kld += std::exp(p) * (p - logProbs[size_t(v)]);
      }
      rowKld[size_t(t)] = std::max(kld, 0.0);
    });
    for (double kld : rowKld)
      kldSum += kld;
    kldCount += n;
  }

  size_t sensitivityChunks() const {
    const int64_t per = int64_t(chunks.empty() ? 1 : chunks.front().size());
    const int64_t wanted = std::max<int64_t>(1, (options.sensitivityTokens + per - 1) / per);
    return std::min(chunks.size(), size_t(wanted));
  }

  // Tokens of sensitivity chunk c that are run and scored: the whole chunk,
  // the last one cut to what --sensitivity-tokens leaves (its first tokens).
  int scoredTokens(size_t c) const {
    const int64_t per = int64_t(chunks[c].size());
    return int(std::min<int64_t>(per, options.sensitivityTokens - int64_t(c) * per));
  }

  // The first n tokens of a chunk; a scored run (reference or sensitivity run)
  // computes the logits of every position.
  llvm::Error runChunk(const std::vector<int32_t>& tokens, int n, bool score) {
    Status status = Status::ok();
    if (score) {
      logits.resize(size_t(n) * size_t(vocab));
      status = executor->forwardAllRows(tokens.data(), n, 0, logits.data());
    } else {
      logits.resize(size_t(vocab));
      status = executor->forward(tokens.data(), n, 0, logits.data());
    }
    if (!status.isOk())
      return calibrationError(status.message());
    if (score)
      scorePositions(n);
    return llvm::Error::success();
  }
};

CalibrationRunner::CalibrationRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CalibrationRunner::~CalibrationRunner() = default;

int64_t CalibrationRunner::tokensUsed() const {
  int64_t total = 0;
  for (const auto& chunk : impl_->chunks)
    total += int64_t(chunk.size());
  return total;
}

int64_t CalibrationRunner::sensitivityTokensUsed() const {
  int64_t total = 0;
  for (size_t c = 0; c < impl_->sensitivityChunks(); ++c)
    total += impl_->scoredTokens(c);
  return total;
}

llvm::Expected<std::unique_ptr<CalibrationRunner>>
CalibrationRunner::create(mlir::ModuleOp module, const WeightStore& weights,
                          const ModelConfig& config, const CalibrationOptions& options) {
  if (weights.isDummy())
    return calibrationError("needs real weights (not --dummy-weights)");
  if (options.chunkTokens < 2 || options.maxTokens < options.chunkTokens)
    return calibrationError("needs at least one chunk of at least 2 tokens");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->threads = quant::resolveThreads(options.threads, 1 << 30);

  // The text first: a missing file should fail before any work.
  auto text = llvm::MemoryBuffer::getFile(options.textPath, /*IsText=*/true);
  if (!text)
    return calibrationError("cannot read '" + options.textPath + "': " + text.getError().message());

  // The module as the pipeline leaves it, with the chunk as context and step.
  mlir::OwningOpRef<mlir::ModuleOp> clone(module.clone());
  LowerOptions lower;
  lower.context = options.chunkTokens;
  lower.maxStepTokens = options.chunkTokens;
  lower.tokenizer = options.tokenizer;
  auto plan = lowerToPlan(*clone, config, weights, lower);
  if (!plan)
    return plan.takeError();

  llvm::SmallString<128> path;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("ninfer-calib", "nplan", path))
    return calibrationError("cannot create a temporary file: " + ec.message());
  Status written = writePlanWithWeights(path.str().str(), **plan, weights);
  if (!written.isOk()) {
    llvm::sys::fs::remove(path);
    return calibrationError(written.message());
  }
  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(path.str().str());
  llvm::sys::fs::remove(path); // the mapping keeps the bytes
  if (!file.isOk())
    return calibrationError(file.status().message());
  impl->file = std::move(*file);
  const plan::Plan& p = impl->file->plan();
  impl->vocab = p.model()->vocab_size();
  impl->hidden = p.model()->hidden_size();

  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::fromPlan(p.tokenizer());
  if (!tok.isOk())
    return calibrationError("needs the checkpoint's tokenizer: " + tok.status().message());
  Result<std::vector<int32_t>> ids = (*tok)->encode((*text)->getBuffer().str(), false);
  if (!ids.isOk())
    return calibrationError("cannot tokenize '" + options.textPath +
                            "': " + ids.status().message());
  const int chunk = options.chunkTokens;
  const int64_t count = std::min<int64_t>(int64_t(ids->size()) / chunk, options.maxTokens / chunk);
  if (count < 1)
    return calibrationError("'" + options.textPath + "' has " + llvm::Twine(ids->size()) +
                            " tokens, fewer than one chunk of " + llvm::Twine(chunk));
  for (int64_t c = 0; c < count; ++c) {
    std::vector<int32_t> tokens(ids->begin() + c * chunk, ids->begin() + (c + 1) * chunk);
    if (config.bosId >= 0)
      tokens[0] = config.bosId;
    impl->chunks.push_back(std::move(tokens));
  }

  // Groups: a linear op that reads the same input buffer as the linear op
  // right before it shares that op's statistics (q/k/v, gate/up).
  const auto& buffers = *p.buffers();
  const auto& ops = *p.ops();
  impl->groupOfOp.assign(ops.size(), -1);
  uint32_t previousInput = UINT32_MAX;
  int previousGroup = -1;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const plan::Op* op = ops.Get(i);
    const plan::LinearAttrs* linear = op->attrs_as_LinearAttrs();
    const plan::EmbeddingAttrs* embedding = op->attrs_as_EmbeddingAttrs();
    if (embedding && op->inputs()->size() > 1)
      impl->opsOfWeight[buffers.Get(op->inputs()->Get(1))->name()->str()].push_back(int(i));
    if (!linear) {
      previousInput = UINT32_MAX;
      continue;
    }
    const uint32_t input = op->inputs()->Get(0);
    const std::string weightName = buffers.Get(op->inputs()->Get(1))->name()->str();
    int group = previousGroup;
    if (input != previousInput) {
      group = int(impl->groups.size());
      impl->groups.push_back(emptyStats(linear->in_features()));
      impl->firstOpOfGroup.push_back(int(i));
      impl->groupOfOp[i] = group;
    }
    impl->groupOfWeight[weightName] = group;
    impl->opsOfWeight[weightName].push_back(int(i));
    if (linear->last_row_only())
      impl->lmHeadOp = int(i);
    previousInput = input;
    previousGroup = group;
  }
  if (impl->lmHeadOp < 0)
    return calibrationError("the plan has no lm_head");

  Result<std::unique_ptr<Executor>> executor =
      createCpuExecutor(*impl->file, options.threads, impl.get());
  if (!executor.isOk())
    return calibrationError(executor.status().message());
  if (!(*executor)->hasAllRowsLogits())
    return calibrationError("the calibration plan's lm_head cannot compute every row");
  impl->executor = std::move(*executor);
  return std::unique_ptr<CalibrationRunner>(new CalibrationRunner(std::move(impl)));
}

llvm::Error CalibrationRunner::collect(CalibrationData& data) {
  Impl& s = *impl_;
  Progress progress("calibrating", s.chunks.size(), s.options.progress);
  s.collecting = true;
  s.reference.clear();
  const size_t scored = s.sensitivityChunks();
  s.snapshots.assign(scored, {});
  for (size_t c = 0; c < s.chunks.size(); ++c) {
    const int n = int(s.chunks[c].size());
    // A sensitivity chunk cut short gets its own reference run over the
    // scored tokens, after the whole chunk ran for the statistics.
    const bool cut = c < scored && s.scoredTokens(c) < n;
    s.recordReference = c < scored && !cut;
    s.chunkIndex = c;
    llvm::Error error = s.runChunk(s.chunks[c], n, s.recordReference);
    if (!error && cut) {
      s.collecting = false;
      s.recordReference = true;
      error = s.runChunk(s.chunks[c], s.scoredTokens(c), true);
      s.collecting = true;
    }
    if (error) {
      s.collecting = s.recordReference = false;
      return error;
    }
    progress.update(c + 1);
  }
  s.collecting = s.recordReference = false;
  progress.finish();

  std::vector<std::shared_ptr<InputStatistics>> finished;
  for (GroupStats& g : s.groups)
    finished.push_back(finishStatistics(g));
  for (const auto& [name, group] : s.groupOfWeight)
    data.inputs[name] = finished[size_t(group)];
  data.tokens = tokensUsed();
  return llvm::Error::success();
}

llvm::Expected<double> CalibrationRunner::klDivergenceWith(const std::string& weightName,
                                                           const std::vector<float>& values) {
  Impl& s = *impl_;
  auto it = s.opsOfWeight.find(weightName);
  if (it == s.opsOfWeight.end())
    return calibrationError("no op of the calibration plan reads '" + weightName + "'");
  if (s.reference.empty())
    return calibrationError("run collect() before measuring sensitivity");
  if (!s.replaced.empty())
    return calibrationError("sensitivity runs must come before sequential calibration");
  s.overrides.clear();
  int firstOp = std::numeric_limits<int>::max();
  for (int op : it->second) {
    s.overrides[op] = values.data();
    firstOp = std::min(firstOp, op);
  }
  // The last saved arena at or before the first op that reads the tensor.
  s.resumeOp = -1;
  if (!s.snapshots.empty())
    for (const auto& [op, arena] : s.snapshots.front())
      if (op <= firstOp)
        s.resumeOp = std::max(s.resumeOp, op);
  s.scoring = true;
  s.kldSum = 0;
  s.kldCount = 0;
  for (s.chunkIndex = 0; s.chunkIndex < s.reference.size(); ++s.chunkIndex) {
    llvm::Error error = s.runChunk(s.chunks[s.chunkIndex], s.scoredTokens(s.chunkIndex), true);
    if (error) {
      s.scoring = false;
      s.overrides.clear();
      s.resumeOp = -1;
      return error;
    }
  }
  s.scoring = false;
  s.overrides.clear();
  s.resumeOp = -1;
  return s.kldCount ? s.kldSum / double(s.kldCount) : 0.0;
}

llvm::Expected<std::shared_ptr<const InputStatistics>>
CalibrationRunner::sequentialStatistics(const std::string& weightName, bool floatTarget) {
  Impl& s = *impl_;
  auto it = s.groupOfWeight.find(weightName);
  if (it == s.groupOfWeight.end())
    return calibrationError("no linear op of the calibration plan reads '" + weightName + "'");
  const int group = it->second;
  const int op = s.firstOpOfGroup[size_t(group)];
  if (op == s.sequentialStart && s.sequentialLast)
    return s.sequentialLast;
  if (op < s.sequentialStart)
    return calibrationError("sequential statistics of '" + weightName +
                            "' asked for after a later input's");
  if (s.sequentialStart >= 0 && floatTarget != !s.floatArenas.empty())
    return calibrationError("sequential statistics with and without the float target mixed");
  const int64_t cols = s.groups[size_t(group)].cols;
  s.sequentialArenas.resize(s.chunks.size());
  s.floatArenas.resize(floatTarget ? s.chunks.size() : 0);
  s.sequentialGroup = emptyStats(cols);
  s.floatShift.assign(floatTarget ? size_t(cols * cols) : 0, 0.0);
  s.sequentialEnd = op;
  s.sequential = true;
  for (s.chunkIndex = 0; s.chunkIndex < s.chunks.size(); ++s.chunkIndex) {
    const std::vector<int32_t>& chunk = s.chunks[s.chunkIndex];
    for (bool phase : {true, false}) {
      if (phase && !floatTarget)
        continue;
      s.floatPhase = phase;
      if (llvm::Error error = s.runChunk(chunk, int(chunk.size()), false)) {
        s.sequential = s.floatPhase = false;
        return error;
      }
    }
  }
  s.sequential = s.floatPhase = false;
  s.sequentialStart = op;
  std::shared_ptr<InputStatistics> stats = finishStatistics(s.sequentialGroup);
  stats->floatShift = std::move(s.floatShift);
  s.floatShift.clear();
  s.sequentialLast = std::move(stats);
  return s.sequentialLast;
}

llvm::Error CalibrationRunner::replaceWeight(const std::string& weightName,
                                             std::vector<float> values) {
  Impl& s = *impl_;
  auto it = s.opsOfWeight.find(weightName);
  if (it == s.opsOfWeight.end())
    return calibrationError("no op of the calibration plan reads '" + weightName + "'");
  for (int op : it->second)
    if (op < s.sequentialStart)
      return calibrationError("'" + weightName +
                              "' replaced after the sequential runs passed an op reading it");
  std::vector<float>& kept = s.replacedValues[weightName];
  kept = std::move(values);
  for (int op : it->second)
    s.replaced[op] = kept.data();
  return llvm::Error::success();
}

} // namespace ninfer
