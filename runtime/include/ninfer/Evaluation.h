// Quality evaluation of a plan on a text, by llama.cpp's perplexity method so
// the figures compare with its table: the whole text is tokenized once, cut
// into chunks of `ctx` tokens (the tail that does not fill a chunk is dropped),
// the first token of every chunk is replaced by BOS when the tokenizer adds
// BOS, the KV cache restarts at position 0 for each chunk, and only the second
// half is scored: the logits at positions ctx/2 .. ctx-2 predict the tokens at
// ctx/2+1 .. ctx-1 (ctx/2 - 1 scored tokens per chunk for even ctx).
//
// The plan's lm_head computes only the last row of a step, so a chunk runs as
// one prefill of positions 0..ctx/2 (split into steps of max_step_tokens) and
// then one decode step per scored position. KL divergence runs the reference
// and the evaluated executor side by side, so no logits are stored.
//
// All probability math is in double with a max-subtracted log-sum-exp.
#pragma once

#include "ninfer/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace ninfer {

class Executor;
class PlanFile;

namespace eval {

// ---- per-position math ----

// log(sum_i exp(logits[i])), n >= 1.
double logSumExp(const float* logits, int n);
// out[i] = log softmax(logits)[i].
void logSoftmax(const float* logits, int n, double* out);
// -log softmax(logits)[target].
double negativeLogLikelihood(const float* logits, int n, int32_t target);
// Index of the largest logit (the first one on ties).
int argmax(const float* logits, int n);
// KL(P || Q) = sum_i P_i (log P_i - log Q_i) with P = softmax(refLogits),
// Q = softmax(logits); terms with P_i == 0 contribute nothing. >= 0.
double klDivergence(const float* refLogits, const float* logits, int n);

// ---- statistics ----

struct Estimate {
  double value = 0;
  double uncertainty = 0; // one standard error
};

// Mean and standard error of the mean (sample standard deviation / sqrt(n),
// which is what llama.cpp prints); uncertainty 0 for fewer than 2 values.
Estimate meanWithError(const std::vector<double>& values);
// `sorted` ascending, non-empty; linear interpolation between the order
// statistics around fraction * (n - 1), as llama.cpp (and numpy) compute it.
double percentile(const std::vector<double>& sorted, double fraction);

// ---- chunking ----

struct ChunkLayout {
  int ctx = 0;         // tokens per chunk
  int chunks = 0;      // chunks evaluated
  int firstScored = 0; // ctx / 2: the first position whose logits are scored
  int scoredPerChunk() const { return ctx - 1 - firstScored; }
  int64_t scoredTokens() const { return int64_t(chunks) * scoredPerChunk(); }
};

// chunks = tokenCount / ctx, at most maxChunks when maxChunks > 0. Errors:
// ctx < 4 (nothing to score), or a text shorter than one chunk.
Result<ChunkLayout> layoutChunks(size_t tokenCount, int ctx, int maxChunks);
// The ctx tokens of chunk `index`; the first is replaced by bosId when bosId >= 0.
std::vector<int32_t> chunkTokens(const std::vector<int32_t>& tokens, const ChunkLayout& layout,
                                 int index, int32_t bosId);

// ---- accumulators (one call per scored position) ----

class PerplexityAccumulator {
public:
  // target: the token the logits should predict. Non-finite logits are an error.
  Status add(const float* logits, int vocab, int32_t target);
  int64_t count() const { return int64_t(nll_.size()); }
  Estimate meanNll() const { return meanWithError(nll_); }
  // exp(mean NLL); its uncertainty is exp(mean) * standard error (first order).
  Estimate perplexity() const;

private:
  std::vector<double> nll_;
};

struct KldStats {
  int64_t count = 0;
  Estimate ppl;              // of the evaluated plan
  Estimate refPpl;           // of the reference
  Estimate logPplRatio;      // mean of per-token NLL - refNLL (= ln(PPL / refPPL))
  Estimate pplRatio;         // exp(logPplRatio)
  double nllCorrelation = 0; // Pearson correlation of the per-token NLLs
  Estimate kld;              // mean KL(ref || plan)
  double kldMax = 0, kld999 = 0, kld99 = 0, kld95 = 0, kld90 = 0, kldMedian = 0, kld10 = 0,
         kldMin = 0;
  Estimate sameTop;   // fraction of positions where both argmaxes agree
  Estimate rmsDeltaP; // RMS of p(target) - refP(target)
};

class KldAccumulator {
public:
  Status add(const float* refLogits, const float* logits, int vocab, int32_t target);
  int64_t count() const { return int64_t(kld_.size()); }
  // Running values for progress lines.
  double meanKld() const;
  KldStats stats() const;

private:
  std::vector<double> kld_, nll_, refNll_, deltaP_;
  int64_t sameTop_ = 0;
  std::vector<double> logQ_, logP_; // scratch
};

// ---- running an executor over the chunks ----

struct ExecutorLimits {
  int context = 0;
  int maxStepTokens = 0;
  int vocabSize = 0;
  static ExecutorLimits fromPlan(const PlanFile& plan);
};

// Steps one executor through one chunk: start() prefills positions
// 0..firstScored and leaves the logits of position firstScored; advance()
// feeds the next token and leaves the logits of the next position.
// With an executor that returns the logits of every row (hasAllRowsLogits),
// start() instead runs positions 0..size-2 in steps of maxStepTokens and keeps
// the logits of positions firstScored..size-2; advance() only moves along them.
// Either way the chunk is one forward pass to RoPE scaled by the sequence's length
// (Executor::setSequenceLength: the chunk's length, until the next start()).
class ChunkRunner {
public:
  ChunkRunner(Executor& executor, const ExecutorLimits& limits);
  Status start(const std::vector<int32_t>& chunk, int firstScored);
  Status advance();
  int position() const { return position_; }
  const float* logits() const {
    return allRows_ ? kept_.data() + size_t(position_ - firstScored_) * size_t(limits_.vocabSize)
                    : logits_.data();
  }

private:
  Executor& executor_;
  ExecutorLimits limits_;
  const std::vector<int32_t>* chunk_ = nullptr;
  int position_ = -1;
  int firstScored_ = 0;
  bool allRows_ = false;
  std::vector<float> logits_;
  std::vector<float> kept_; // all-rows mode: logits of positions firstScored..
};

// Checks that a plan can evaluate chunks of `ctx` tokens (its context).
Status checkLimits(const ExecutorLimits& limits, int ctx, const char* what);

// Called after each chunk with the number of chunks done.
using ChunkCallback = std::function<void(int chunksDone)>;

Result<PerplexityAccumulator> evaluatePerplexity(Executor& executor, const ExecutorLimits& limits,
                                                 const std::vector<int32_t>& tokens,
                                                 const ChunkLayout& layout, int32_t bosId,
                                                 const ChunkCallback& onChunk);

// KL(ref || evaluated) and both perplexities over the same positions.
Result<KldAccumulator> evaluateKld(Executor& ref, const ExecutorLimits& refLimits,
                                   Executor& evaluated, const ExecutorLimits& limits,
                                   const std::vector<int32_t>& tokens, const ChunkLayout& layout,
                                   int32_t bosId, const ChunkCallback& onChunk);

} // namespace eval
} // namespace ninfer
