// Perplexity and KL-divergence evaluation (see Evaluation.h for the method).
// The executors' KV caches are reused across chunks without clearing: a step
// at positions pos..pos+n-1 overwrites those cache rows before attention reads
// rows 0..pos+t, so restarting each chunk at position 0 never sees rows of the
// previous chunk.
#include "ninfer/Evaluation.h"

#include "ninfer/Executor.h"
#include "ninfer/Plan.h"
#include "plan_generated.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

namespace ninfer {
namespace eval {

// ---- per-position math ----

double logSumExp(const float* logits, int n) {
  float maxLogit = logits[0];
  for (int i = 1; i < n; ++i)
    maxLogit = std::max(maxLogit, logits[i]);
  const double shift = maxLogit;
  double sum = 0;
  for (int i = 0; i < n; ++i)
    sum += std::exp(double(logits[i]) - shift);
  return shift + std::log(sum);
}

void logSoftmax(const float* logits, int n, double* out) {
  const double lse = logSumExp(logits, n);
  for (int i = 0; i < n; ++i)
    out[i] = double(logits[i]) - lse;
}

double negativeLogLikelihood(const float* logits, int n, int32_t target) {
  return logSumExp(logits, n) - double(logits[target]);
}

int argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best])
      best = i;
  return best;
}

namespace {

double klFromLogProbs(const double* logP, const double* logQ, int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double p = std::exp(logP[i]);
    if (p > 0)
      sum += p * (logP[i] - logQ[i]);
  }
  // Rounding can leave a tiny negative value for identical distributions.
  return std::max(sum, 0.0);
}

bool allFinite(const float* values, int n) {
  for (int i = 0; i < n; ++i)
    if (!std::isfinite(values[i]))
      return false;
  return true;
}

} // namespace

double klDivergence(const float* refLogits, const float* logits, int n) {
  std::vector<double> logP(n), logQ(n);
  logSoftmax(refLogits, n, logP.data());
  logSoftmax(logits, n, logQ.data());
  return klFromLogProbs(logP.data(), logQ.data(), n);
}

// ---- statistics ----

Estimate meanWithError(const std::vector<double>& values) {
  Estimate e;
  if (values.empty())
    return e;
  double sum = 0;
  for (double v : values)
    sum += v;
  const double n = double(values.size());
  e.value = sum / n;
  if (values.size() < 2)
    return e;
  double squares = 0;
  for (double v : values)
    squares += (v - e.value) * (v - e.value);
  e.uncertainty = std::sqrt(squares / (n - 1) / n);
  return e;
}

double percentile(const std::vector<double>& sorted, double fraction) {
  if (sorted.empty())
    return 0;
  if (fraction <= 0)
    return sorted.front();
  if (fraction >= 1)
    return sorted.back();
  const double at = fraction * double(sorted.size() - 1);
  const size_t low = size_t(at);
  const size_t high = std::min(low + 1, sorted.size() - 1);
  const double t = at - double(low);
  return (1 - t) * sorted[low] + t * sorted[high];
}

namespace {

double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  if (n < 2)
    return 0;
  double meanA = 0, meanB = 0;
  for (size_t i = 0; i < n; ++i) {
    meanA += a[i];
    meanB += b[i];
  }
  meanA /= double(n);
  meanB /= double(n);
  double cov = 0, varA = 0, varB = 0;
  for (size_t i = 0; i < n; ++i) {
    cov += (a[i] - meanA) * (b[i] - meanB);
    varA += (a[i] - meanA) * (a[i] - meanA);
    varB += (b[i] - meanB) * (b[i] - meanB);
  }
  return varA > 0 && varB > 0 ? cov / std::sqrt(varA * varB) : 0;
}

Estimate expOf(const Estimate& log) {
  const double value = std::exp(log.value);
  return {value, value * log.uncertainty};
}

} // namespace

// ---- chunking ----

Result<ChunkLayout> layoutChunks(size_t tokenCount, int ctx, int maxChunks) {
  if (ctx < 4)
    return Status::error("--ctx must be at least 4 (the second half of a chunk is scored), got " +
                         std::to_string(ctx));
  const size_t whole = tokenCount / size_t(ctx);
  if (whole == 0)
    return Status::error("the text is " + std::to_string(tokenCount) +
                         " tokens, fewer than one chunk of " + std::to_string(ctx) +
                         " (use a longer text or a smaller --ctx)");
  ChunkLayout layout;
  layout.ctx = ctx;
  layout.chunks = int(std::min<size_t>(whole, size_t(INT32_MAX)));
  if (maxChunks > 0)
    layout.chunks = std::min(layout.chunks, maxChunks);
  layout.firstScored = ctx / 2;
  return layout;
}

std::vector<int32_t> chunkTokens(const std::vector<int32_t>& tokens, const ChunkLayout& layout,
                                 int index, int32_t bosId) {
  const size_t start = size_t(index) * size_t(layout.ctx);
  std::vector<int32_t> chunk(tokens.begin() + start, tokens.begin() + start + layout.ctx);
  if (bosId >= 0)
    chunk[0] = bosId;
  return chunk;
}

// ---- accumulators ----

Status PerplexityAccumulator::add(const float* logits, int vocab, int32_t target) {
  if (target < 0 || target >= vocab)
    return Status::error("token id " + std::to_string(target) + " is outside the vocabulary (" +
                         std::to_string(vocab) + ")");
  if (!allFinite(logits, vocab))
    return Status::error("the plan produced non-finite logits");
  nll_.push_back(negativeLogLikelihood(logits, vocab, target));
  return Status::ok();
}

Estimate PerplexityAccumulator::perplexity() const { return expOf(meanNll()); }

Status KldAccumulator::add(const float* refLogits, const float* logits, int vocab, int32_t target) {
  if (target < 0 || target >= vocab)
    return Status::error("token id " + std::to_string(target) + " is outside the vocabulary (" +
                         std::to_string(vocab) + ")");
  if (!allFinite(refLogits, vocab))
    return Status::error("the reference plan produced non-finite logits");
  if (!allFinite(logits, vocab))
    return Status::error("the evaluated plan produced non-finite logits");
  logP_.resize(size_t(vocab));
  logQ_.resize(size_t(vocab));
  logSoftmax(refLogits, vocab, logP_.data());
  logSoftmax(logits, vocab, logQ_.data());
  kld_.push_back(klFromLogProbs(logP_.data(), logQ_.data(), vocab));
  nll_.push_back(-logQ_[size_t(target)]);
  refNll_.push_back(-logP_[size_t(target)]);
  deltaP_.push_back(std::exp(logQ_[size_t(target)]) - std::exp(logP_[size_t(target)]));
  if (argmax(refLogits, vocab) == argmax(logits, vocab))
    ++sameTop_;
  return Status::ok();
}

double KldAccumulator::meanKld() const { return meanWithError(kld_).value; }

KldStats KldAccumulator::stats() const {
  KldStats s;
  s.count = count();
  if (s.count == 0)
    return s;
  s.ppl = expOf(meanWithError(nll_));
  s.refPpl = expOf(meanWithError(refNll_));
  std::vector<double> diff(nll_.size());
  for (size_t i = 0; i < diff.size(); ++i)
    diff[i] = nll_[i] - refNll_[i];
  // The standard error of the per-token differences equals llama.cpp's
  // sqrt(se^2 + se_ref^2 - 2 cov) for the difference of the two means.
  s.logPplRatio = meanWithError(diff);
  s.pplRatio = expOf(s.logPplRatio);
  s.nllCorrelation = correlation(nll_, refNll_);
  s.kld = meanWithError(kld_);
  std::vector<double> sorted = kld_;
  std::sort(sorted.begin(), sorted.end());
  s.kldMin = sorted.front();
  s.kldMax = sorted.back();
  s.kld999 = percentile(sorted, 0.999);
  s.kld99 = percentile(sorted, 0.99);
  s.kld95 = percentile(sorted, 0.95);
  s.kld90 = percentile(sorted, 0.90);
  s.kldMedian = percentile(sorted, 0.5);
  s.kld10 = percentile(sorted, 0.10);
  const double n = double(s.count);
  const double top = double(sameTop_) / n;
  s.sameTop = {top, s.count > 1 ? std::sqrt(top * (1 - top) / (n - 1)) : 0.0};
  std::vector<double> squares(deltaP_.size());
  for (size_t i = 0; i < squares.size(); ++i)
    squares[i] = deltaP_[i] * deltaP_[i];
  const Estimate meanSquare = meanWithError(squares);
  const double rms = std::sqrt(meanSquare.value);
  s.rmsDeltaP = {rms, rms > 0 ? 0.5 / rms * meanSquare.uncertainty : 0.0};
  return s;
}

// ---- running executors ----

ExecutorLimits ExecutorLimits::fromPlan(const PlanFile& file) {
  const plan::Plan& p = file.plan();
  ExecutorLimits limits;
  limits.context = p.context();
  limits.maxStepTokens = p.max_step_tokens();
  limits.vocabSize = p.model() ? p.model()->vocab_size() : 0;
  return limits;
}

Status checkLimits(const ExecutorLimits& limits, int ctx, const char* what) {
  if (limits.vocabSize < 1 || limits.maxStepTokens < 1)
    return Status::error(std::string("the ") + what + " has no vocabulary or step size");
  if (limits.context < ctx)
    return Status::error(std::string("the ") + what + "'s context is " +
                         std::to_string(limits.context) + " tokens, less than --ctx " +
                         std::to_string(ctx) + " (recompile it with ninferc --ctx " +
                         std::to_string(ctx) + " or more, or lower --ctx)");
  return Status::ok();
}

ChunkRunner::ChunkRunner(Executor& executor, const ExecutorLimits& limits)
    : executor_(executor), limits_(limits), allRows_(executor.hasAllRowsLogits()) {
  logits_.resize(size_t(std::max(limits.vocabSize, 1)) *
                 size_t(allRows_ ? std::max(limits.maxStepTokens, 1) : 1));
}

Status ChunkRunner::start(const std::vector<int32_t>& chunk, int firstScored) {
  if (firstScored < 0 || size_t(firstScored) >= chunk.size())
    return Status::error("chunk position " + std::to_string(firstScored) + " is outside the chunk");
  chunk_ = &chunk;
  firstScored_ = firstScored;
  // Every step of the chunk, the one-token steps of advance() too, is part of one forward
  // pass over all of it, as a reference scores a chunk: RoPE scaled by the sequence's length
  // (dynamic NTK, LongRoPE) takes the chunk's for every position.
  executor_.setSequenceLength(0, int(chunk.size()));
  if (allRows_) {
    // Positions 0..size-2: the last token's logits would predict past the chunk.
    const int end = std::max(int(chunk.size()) - 1, firstScored + 1);
    const size_t vocab = size_t(limits_.vocabSize);
    kept_.resize(size_t(end - firstScored) * vocab);
    for (int pos = 0; pos < end; pos += limits_.maxStepTokens) {
      const int n = std::min(limits_.maxStepTokens, end - pos);
      NINFER_RETURN_IF_ERROR(executor_.forwardAllRows(chunk.data() + pos, n, pos, logits_.data()));
      for (int t = std::max(pos, firstScored); t < pos + n; ++t)
        std::copy(logits_.begin() + ptrdiff_t(size_t(t - pos) * vocab),
                  logits_.begin() + ptrdiff_t(size_t(t - pos + 1) * vocab),
                  kept_.begin() + ptrdiff_t(size_t(t - firstScored) * vocab));
    }
    position_ = firstScored;
    return Status::ok();
  }
  const int prefill = firstScored + 1;
  for (int pos = 0; pos < prefill; pos += limits_.maxStepTokens) {
    const int n = std::min(limits_.maxStepTokens, prefill - pos);
    NINFER_RETURN_IF_ERROR(executor_.forward(chunk.data() + pos, n, pos, logits_.data()));
  }
  position_ = firstScored;
  return Status::ok();
}

Status ChunkRunner::advance() {
  if (!chunk_ || position_ < 0 || size_t(position_ + 1) >= chunk_->size())
    return Status::error("advance past the end of the chunk");
  ++position_;
  if (allRows_)
    return size_t(position_ - firstScored_) * size_t(limits_.vocabSize) < kept_.size()
               ? Status::ok()
               : Status::error("advance past the positions start() kept");
  return executor_.forward(chunk_->data() + position_, 1, position_, logits_.data());
}

namespace {

Status atChunk(const Status& status, int chunk, int position) {
  if (status.isOk())
    return status;
  return Status::error("chunk " + std::to_string(chunk + 1) + ", position " +
                       std::to_string(position) + ": " + status.message());
}

} // namespace

Result<PerplexityAccumulator> evaluatePerplexity(Executor& executor, const ExecutorLimits& limits,
                                                 const std::vector<int32_t>& tokens,
                                                 const ChunkLayout& layout, int32_t bosId,
                                                 const ChunkCallback& onChunk) {
  NINFER_RETURN_IF_ERROR(checkLimits(limits, layout.ctx, "plan"));
  if (tokens.size() < size_t(layout.chunks) * size_t(layout.ctx))
    return Status::error("the chunk layout needs more tokens than the text has");
  PerplexityAccumulator acc;
  ChunkRunner runner(executor, limits);
  for (int c = 0; c < layout.chunks; ++c) {
    const std::vector<int32_t> chunk = chunkTokens(tokens, layout, c, bosId);
    NINFER_RETURN_IF_ERROR(atChunk(runner.start(chunk, layout.firstScored), c, 0));
    while (true) {
      const int pos = runner.position();
      NINFER_RETURN_IF_ERROR(
          atChunk(acc.add(runner.logits(), limits.vocabSize, chunk[pos + 1]), c, pos));
      if (pos + 2 >= layout.ctx)
        break;
      NINFER_RETURN_IF_ERROR(atChunk(runner.advance(), c, pos + 1));
    }
    if (onChunk)
      onChunk(c + 1);
  }
  return acc;
}

Result<KldAccumulator> evaluateKld(Executor& ref, const ExecutorLimits& refLimits,
                                   Executor& evaluated, const ExecutorLimits& limits,
                                   const std::vector<int32_t>& tokens, const ChunkLayout& layout,
                                   int32_t bosId, const ChunkCallback& onChunk) {
  NINFER_RETURN_IF_ERROR(checkLimits(refLimits, layout.ctx, "reference plan"));
  NINFER_RETURN_IF_ERROR(checkLimits(limits, layout.ctx, "plan"));
  if (refLimits.vocabSize != limits.vocabSize)
    return Status::error("the plans' vocabularies differ (" + std::to_string(refLimits.vocabSize) +
                         " vs " + std::to_string(limits.vocabSize) + " tokens)");
  if (tokens.size() < size_t(layout.chunks) * size_t(layout.ctx))
    return Status::error("the chunk layout needs more tokens than the text has");
  KldAccumulator acc;
  ChunkRunner refRunner(ref, refLimits);
  ChunkRunner runner(evaluated, limits);
  for (int c = 0; c < layout.chunks; ++c) {
    const std::vector<int32_t> chunk = chunkTokens(tokens, layout, c, bosId);
    NINFER_RETURN_IF_ERROR(atChunk(refRunner.start(chunk, layout.firstScored), c, 0));
    NINFER_RETURN_IF_ERROR(atChunk(runner.start(chunk, layout.firstScored), c, 0));
    while (true) {
      const int pos = runner.position();
      NINFER_RETURN_IF_ERROR(atChunk(
          acc.add(refRunner.logits(), runner.logits(), limits.vocabSize, chunk[pos + 1]), c, pos));
      if (pos + 2 >= layout.ctx)
        break;
      NINFER_RETURN_IF_ERROR(atChunk(refRunner.advance(), c, pos + 1));
      NINFER_RETURN_IF_ERROR(atChunk(runner.advance(), c, pos + 1));
    }
    if (onChunk)
      onChunk(c + 1);
  }
  return acc;
}

} // namespace eval
} // namespace ninfer
