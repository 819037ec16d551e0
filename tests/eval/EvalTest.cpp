// Tests for quality evaluation (runtime/src/Evaluation.cpp, runtime/tools/EvalCommand.cpp):
// the math against numpy goldens (make_math_goldens.py), chunk layout and the order of executor
// steps against a recording fake, perplexity on a tiny plan against the double-precision
// reference of the same model (tests/runtime/TestModel.h), KL of a plan against itself, the
// CLI's reports and errors, and perplexity of pycode-llama-3m against Hugging Face
// transformers (make_ppl_golden.py), when a compiled plan or ninferc is available.
#include "EvalCommand.h"
#include "TestModel.h"

#include "ninfer/Evaluation.h"
#include "ninfer/Executor.h"
#include "ninfer/Plan.h"
#include "ninfer/Tokenizer.h"
#include "plan_generated.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ninfer {
namespace {

using namespace ninfer::eval;
using test::buildTinyModel;
using test::Loaded;
using test::openWithCpu;
using test::TinyModel;
using test::TinyModelSpec;

std::string testDataPath(const std::string& name) {
  return std::string(NINFER_EVAL_TEST_DIR) + "/" + name;
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// ---- math against numpy ----

struct LogitsCase {
  int n = 0;
  int target = 0;
  std::vector<float> p, q;
  std::vector<double> logSoftmaxP;
  double nllQ = 0, klPQ = 0;
  int topP = 0, topQ = 0;
};

struct StatsCase {
  std::vector<double> values;
  double mean = 0, se = 0, p999 = 0, p99 = 0, p50 = 0, p10 = 0;
};

template <typename T> std::vector<T> readValues(std::istream& in, int n) {
  std::vector<T> values(static_cast<size_t>(n));
  for (T& v : values)
    in >> v;
  return values;
}

void readGoldens(std::vector<LogitsCase>& cases, std::vector<StatsCase>& stats) {
  std::ifstream in(testDataPath("math_goldens.txt"));
  ASSERT_TRUE(in) << "cannot read math_goldens.txt";
  std::string word;
  while (in >> word) {
    if (word[0] == '#') {
      std::getline(in, word);
    } else if (word == "case") {
      LogitsCase c;
      in >> c.n >> c.target >> word;
      ASSERT_EQ(word, "p");
      c.p = readValues<float>(in, c.n);
      in >> word;
      ASSERT_EQ(word, "q");
      c.q = readValues<float>(in, c.n);
      in >> word;
      ASSERT_EQ(word, "lsp");
      c.logSoftmaxP = readValues<double>(in, c.n);
      in >> word >> c.nllQ;
      ASSERT_EQ(word, "nll_q");
      in >> word >> c.klPQ;
      ASSERT_EQ(word, "kl_pq");
      in >> word >> c.topP >> c.topQ >> word;
      ASSERT_EQ(word, "end");
      cases.push_back(c);
    } else if (word == "stats") {
      StatsCase s;
      int n = 0;
      in >> n >> word;
      ASSERT_EQ(word, "v");
      s.values = readValues<double>(in, n);
      in >> s.mean >> s.se >> s.p999 >> s.p99 >> s.p50 >> s.p10 >> word;
      ASSERT_EQ(word, "end");
      stats.push_back(s);
    } else {
      FAIL() << "unexpected word in math_goldens.txt: " << word;
    }
  }
  ASSERT_TRUE(in.eof());
}

void expectClose(double actual, double expected, double relative, const std::string& what) {
  EXPECT_LE(std::fabs(actual - expected), relative * std::max(1.0, std::fabs(expected)))
      << what << ": " << actual << " vs " << expected;
}

TEST(EvalMath, MatchesNumpy) {
  std::vector<LogitsCase> cases;
  std::vector<StatsCase> stats;
  readGoldens(cases, stats);
  ASSERT_EQ(cases.size(), 6u);
  for (size_t k = 0; k < cases.size(); ++k) {
    const LogitsCase& c = cases[k];
    const std::string name = "case " + std::to_string(k);
    std::vector<double> lsp(size_t(c.n));
    logSoftmax(c.p.data(), c.n, lsp.data());
    for (int i = 0; i < c.n; ++i)
      expectClose(lsp[i], c.logSoftmaxP[i], 1e-12,
                  name + " log-softmax[" + std::to_string(i) + "]");
    expectClose(negativeLogLikelihood(c.q.data(), c.n, c.target), c.nllQ, 1e-12, name + " nll");
    EXPECT_NEAR(klDivergence(c.p.data(), c.q.data(), c.n), c.klPQ, 1e-12 * std::max(1.0, c.klPQ))
        << name;
    EXPECT_EQ(argmax(c.p.data(), c.n), c.topP) << name;
    EXPECT_EQ(argmax(c.q.data(), c.n), c.topQ) << name;

    // The accumulator agrees with the free functions.
    KldAccumulator acc;
    ASSERT_TRUE(acc.add(c.p.data(), c.q.data(), c.n, c.target).isOk());
    const KldStats s = acc.stats();
    EXPECT_NEAR(s.kld.value, c.klPQ, 1e-12 * std::max(1.0, c.klPQ)) << name;
    expectClose(s.logPplRatio.value, c.nllQ + c.logSoftmaxP[c.target], 1e-12, name + " ratio");
    if (c.nllQ < 700) // exp() of a larger NLL overflows
      expectClose(std::log(s.ppl.value), c.nllQ, 1e-12, name + " ppl");
    if (-c.logSoftmaxP[c.target] < 700)
      expectClose(std::log(s.refPpl.value), -c.logSoftmaxP[c.target], 1e-12, name + " ref ppl");
    EXPECT_EQ(s.sameTop.value, c.topP == c.topQ ? 1.0 : 0.0) << name;
  }
  ASSERT_EQ(stats.size(), 3u);
  for (const StatsCase& s : stats) {
    const Estimate e = meanWithError(s.values);
    expectClose(e.value, s.mean, 1e-12, "mean");
    expectClose(e.uncertainty, s.se, 1e-10, "standard error");
    std::vector<double> sorted = s.values;
    std::sort(sorted.begin(), sorted.end());
    expectClose(percentile(sorted, 0.999), s.p999, 1e-12, "99.9%");
    expectClose(percentile(sorted, 0.99), s.p99, 1e-12, "99%");
    expectClose(percentile(sorted, 0.5), s.p50, 1e-12, "median");
    expectClose(percentile(sorted, 0.1), s.p10, 1e-12, "10%");
  }
}

TEST(EvalMath, KlOfADistributionWithItselfIsZero) {
  std::vector<float> logits = {3.0f, -1.5f, 0.25f, 1000.0f, -7.0f, 999.0f};
  EXPECT_EQ(klDivergence(logits.data(), logits.data(), int(logits.size())), 0.0);
  KldAccumulator acc;
  for (int t = 0; t < 6; ++t)
    ASSERT_TRUE(acc.add(logits.data(), logits.data(), 6, t).isOk());
  const KldStats s = acc.stats();
  EXPECT_EQ(s.kld.value, 0.0);
  EXPECT_EQ(s.kldMax, 0.0);
  EXPECT_EQ(s.sameTop.value, 1.0);
  EXPECT_EQ(s.pplRatio.value, 1.0);
  EXPECT_EQ(s.rmsDeltaP.value, 0.0);
}

TEST(EvalMath, RejectsBadInput) {
  std::vector<float> logits = {1.0f, NAN, 0.0f};
  PerplexityAccumulator ppl;
  Status s = ppl.add(logits.data(), 3, 0);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("non-finite"), std::string::npos) << s.message();
  logits[1] = 2.0f;
  EXPECT_FALSE(ppl.add(logits.data(), 3, 3).isOk());
  EXPECT_FALSE(ppl.add(logits.data(), 3, -1).isOk());
  ASSERT_TRUE(ppl.add(logits.data(), 3, 1).isOk());
  EXPECT_EQ(ppl.count(), 1);
  KldAccumulator kld;
  std::vector<float> inf = {1.0f, INFINITY, 0.0f};
  EXPECT_FALSE(kld.add(logits.data(), inf.data(), 3, 0).isOk());
  EXPECT_FALSE(kld.add(inf.data(), logits.data(), 3, 0).isOk());
  EXPECT_EQ(kld.count(), 0);
}

// ---- chunking ----

TEST(EvalChunks, Layout) {
  Result<ChunkLayout> l = layoutChunks(1000, 128, 0);
  ASSERT_TRUE(l.isOk()) << l.status().message();
  EXPECT_EQ(l->chunks, 7); // 1000 / 128; the 104-token tail is dropped
  EXPECT_EQ(l->firstScored, 64);
  EXPECT_EQ(l->scoredPerChunk(), 63); // positions 64..126 predict 65..127
  EXPECT_EQ(l->scoredTokens(), 7 * 63);
  EXPECT_EQ(layoutChunks(1000, 128, 3)->chunks, 3);
  EXPECT_EQ(layoutChunks(1000, 128, 30)->chunks, 7);
  EXPECT_EQ(layoutChunks(128, 128, 0)->chunks, 1);
  Result<ChunkLayout> odd = layoutChunks(505, 101, 0);
  EXPECT_EQ(odd->chunks, 5);
  EXPECT_EQ(odd->firstScored, 50);
  EXPECT_EQ(odd->scoredPerChunk(), 50);
  EXPECT_EQ(layoutChunks(512, 512, 0)->scoredPerChunk(), 255); // llama.cpp's 255 per chunk

  Result<ChunkLayout> shortText = layoutChunks(127, 128, 0);
  ASSERT_FALSE(shortText.isOk());
  EXPECT_NE(shortText.status().message().find("127 tokens"), std::string::npos);
  EXPECT_FALSE(layoutChunks(100, 3, 0).isOk());
}

TEST(EvalChunks, TokensWithBos) {
  std::vector<int32_t> tokens(40);
  for (int i = 0; i < 40; ++i)
    tokens[i] = 100 + i;
  const ChunkLayout layout = layoutChunks(tokens.size(), 16, 0).value();
  ASSERT_EQ(layout.chunks, 2);
  const std::vector<int32_t> second = chunkTokens(tokens, layout, 1, 7);
  ASSERT_EQ(second.size(), 16u);
  EXPECT_EQ(second[0], 7);
  EXPECT_EQ(second[1], 117);
  EXPECT_EQ(second[15], 131);
  const std::vector<int32_t> noBos = chunkTokens(tokens, layout, 1, -1);
  EXPECT_EQ(noBos[0], 116);
}

// An executor that records its steps and returns logits that single out the
// token (pos * 3) % vocab, so the targets each position is scored against show.
class RecordingExecutor : public Executor {
public:
  explicit RecordingExecutor(int vocab) : vocab_(vocab) {}
  Status forwardSequence(int /*sequence: one*/, const int32_t* tokens, int n, int pos,
                         float* logits) override {
    steps.push_back({n, pos, std::vector<int32_t>(tokens, tokens + n)});
    const int last = pos + n - 1;
    for (int v = 0; v < vocab_; ++v)
      logits[v] = v == (last * 3) % vocab_ ? 2.0f : 0.0f;
    return Status::ok();
  }
  std::string name() const override { return "recording"; }
  struct Step {
    int n, pos;
    std::vector<int32_t> tokens;
  };
  std::vector<Step> steps;

private:
  int vocab_;
};

TEST(EvalRunner, StepsAndTargets) {
  const int vocab = 11, ctx = 20;
  std::vector<int32_t> tokens(45);
  // Odd positions hold the token the previous position's logits favour.
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t(i % 2 ? ((i - 1) % ctx) * 3 % vocab : (i * 5 + 2) % vocab);
  const ChunkLayout layout = layoutChunks(tokens.size(), ctx, 0).value();
  ASSERT_EQ(layout.chunks, 2);
  RecordingExecutor executor(vocab);
  ExecutorLimits limits{ctx, 4, vocab};
  int callbacks = 0;
  Result<PerplexityAccumulator> acc = evaluatePerplexity(
      executor, limits, tokens, layout, 5, [&](int done) { EXPECT_EQ(done, ++callbacks); });
  ASSERT_TRUE(acc.isOk()) << acc.status().message();
  EXPECT_EQ(callbacks, 2);
  EXPECT_EQ(acc->count(), 2 * 9);

  // Per chunk: prefill of positions 0..10 in steps of 4, 4, 3; then decode
  // steps at positions 11..18 (position 19's logits would predict past the chunk).
  ASSERT_EQ(executor.steps.size(), 2u * (3 + 8));
  for (int c = 0; c < 2; ++c) {
    const auto* s = &executor.steps[size_t(c) * 11];
    EXPECT_EQ(s[0].pos, 0);
    EXPECT_EQ(s[0].n, 4);
    EXPECT_EQ(s[0].tokens[0], 5) << "BOS replaces the chunk's first token";
    EXPECT_EQ(s[0].tokens[1], tokens[size_t(c) * ctx + 1]);
    EXPECT_EQ(s[1].pos, 4);
    EXPECT_EQ(s[1].n, 4);
    EXPECT_EQ(s[2].pos, 8);
    EXPECT_EQ(s[2].n, 3);
    for (int d = 0; d < 8; ++d) {
      EXPECT_EQ(s[3 + d].pos, 11 + d);
      EXPECT_EQ(s[3 + d].n, 1);
      EXPECT_EQ(s[3 + d].tokens[0], tokens[size_t(c) * ctx + 11 + d]);
    }
  }

  // Expected NLL: position p scores token p+1 of its chunk with logits that put
  // 2 on (p*3) % vocab and 0 elsewhere.
  const double lse = std::log(std::exp(2.0) + (vocab - 1));
  double sum = 0;
  for (int c = 0; c < 2; ++c)
    for (int p = 10; p <= 18; ++p)
      sum += lse - (tokens[size_t(c) * ctx + p + 1] == (p * 3) % vocab ? 2.0 : 0.0);
  EXPECT_NEAR(acc->meanNll().value, sum / 18, 1e-12);
}

// As RecordingExecutor, for an executor that returns the logits of every row:
// row t of a step favours ((pos + t) * 3) % vocab.
class AllRowsRecordingExecutor : public RecordingExecutor {
public:
  explicit AllRowsRecordingExecutor(int vocab) : RecordingExecutor(vocab), vocab_(vocab) {}
  bool hasAllRowsLogits() const override { return true; }
  Status forwardAllRows(const int32_t* tokens, int n, int pos, float* logits) override {
    steps.push_back({n, pos, std::vector<int32_t>(tokens, tokens + n)});
    for (int t = 0; t < n; ++t)
      for (int v = 0; v < vocab_; ++v)
        logits[size_t(t) * size_t(vocab_) + size_t(v)] =
            v == ((pos + t) * 3) % vocab_ ? 2.0f : 0.0f;
    return Status::ok();
  }

private:
  int vocab_;
};

TEST(EvalRunner, AllRowsStepsAndTargets) {
  const int vocab = 11, ctx = 20;
  std::vector<int32_t> tokens(45);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t(i % 2 ? ((i - 1) % ctx) * 3 % vocab : (i * 5 + 2) % vocab);
  const ChunkLayout layout = layoutChunks(tokens.size(), ctx, 0).value();
  AllRowsRecordingExecutor executor(vocab);
  RecordingExecutor plain(vocab);
  const ExecutorLimits limits{ctx, 4, vocab};
  Result<PerplexityAccumulator> acc =
      evaluatePerplexity(executor, limits, tokens, layout, 5, nullptr);
  Result<PerplexityAccumulator> expected =
      evaluatePerplexity(plain, limits, tokens, layout, 5, nullptr);
  ASSERT_TRUE(acc.isOk()) << acc.status().message();
  ASSERT_TRUE(expected.isOk()) << expected.status().message();
  EXPECT_EQ(acc->count(), 2 * 9);
  // Per chunk: positions 0..18 in steps of 4 (the last of 3), nothing after.
  ASSERT_EQ(executor.steps.size(), 2u * 5);
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 5; ++k) {
      const auto& step = executor.steps[size_t(c) * 5 + size_t(k)];
      EXPECT_EQ(step.pos, 4 * k);
      EXPECT_EQ(step.n, k < 4 ? 4 : 3);
      EXPECT_EQ(step.tokens[0], k == 0 ? 5 : tokens[size_t(c) * ctx + size_t(4 * k)]);
    }
  // The same positions scored against the same targets as one step per token.
  EXPECT_DOUBLE_EQ(acc->meanNll().value, expected->meanNll().value);
}

TEST(EvalRunner, ContextTooSmall) {
  RecordingExecutor executor(5);
  std::vector<int32_t> tokens(64, 1);
  const ChunkLayout layout = layoutChunks(tokens.size(), 32, 0).value();
  Result<PerplexityAccumulator> acc =
      evaluatePerplexity(executor, ExecutorLimits{16, 8, 5}, tokens, layout, -1, nullptr);
  ASSERT_FALSE(acc.isOk());
  EXPECT_NE(acc.status().message().find("context is 16 tokens, less than --ctx 32"),
            std::string::npos)
      << acc.status().message();
  EXPECT_TRUE(executor.steps.empty());
}

// ---- the tiny plan, on the CPU executor ----

// A written plan opened with a CPU executor (Loaded: TestModel.h).
Loaded load(const std::string& path, int threads = 2) {
  return openWithCpu(path, threads);
}

TinyModelSpec tinySpec(uint32_t seed = 1) {
  TinyModelSpec spec;
  spec.vocab = 38;
  spec.context = 64;
  spec.maxStepTokens = 8;
  spec.seed = seed;
  return spec;
}

TEST(EvalTinyPlan, PerplexityMatchesTheReferenceModel) {
  TinyModel model = buildTinyModel(tinySpec());
  Loaded l = load(model.maker.write("eval_tiny.nplan"));
  ASSERT_TRUE(l.executor);
  std::vector<int32_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t((i * i * 5 + 3 * i + 1) % 37);
  const int ctx = 30;
  const ChunkLayout layout = layoutChunks(tokens.size(), ctx, 0).value();
  ASSERT_EQ(layout.chunks, 3);
  Result<PerplexityAccumulator> acc = evaluatePerplexity(
      *l.executor, ExecutorLimits::fromPlan(*l.file), tokens, layout, 37, nullptr);
  ASSERT_TRUE(acc.isOk()) << acc.status().message();

  // The reference runs each chunk from position 0 with steps ending at every
  // scored position (prefill of 0..15, then single tokens).
  double sum = 0;
  int count = 0;
  for (int c = 0; c < layout.chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    chunk[0] = 37;
    std::vector<int> steps = {layout.firstScored + 1};
    for (int p = layout.firstScored + 1; p <= ctx - 2; ++p)
      steps.push_back(1);
    const auto logits = test::referenceStepLogits(model, chunk, steps);
    for (size_t s = 0; s < steps.size(); ++s) {
      const int pos = layout.firstScored + int(s);
      double maxLogit = -INFINITY;
      for (double v : logits[s])
        maxLogit = std::max(maxLogit, v);
      double e = 0;
      for (double v : logits[s])
        e += std::exp(v - maxLogit);
      sum += maxLogit + std::log(e) - logits[s][size_t(chunk[size_t(pos) + 1])];
      ++count;
    }
  }
  ASSERT_EQ(count, acc->count());
  EXPECT_NEAR(acc->meanNll().value, sum / count, 1e-4 * sum / count);
}

TEST(EvalTinyPlan, KldOfAPlanAgainstItself) {
  TinyModel model = buildTinyModel(tinySpec());
  const std::string path = model.maker.write("eval_self.nplan");
  Loaded a = load(path), b = load(path);
  ASSERT_TRUE(a.executor && b.executor);
  std::vector<int32_t> tokens(130);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t((i * 13 + 5) % 37);
  const ChunkLayout layout = layoutChunks(tokens.size(), 64, 0).value();
  Result<KldAccumulator> acc =
      evaluateKld(*a.executor, ExecutorLimits::fromPlan(*a.file), *b.executor,
                  ExecutorLimits::fromPlan(*b.file), tokens, layout, 37, nullptr);
  ASSERT_TRUE(acc.isOk()) << acc.status().message();
  const KldStats s = acc->stats();
  EXPECT_EQ(s.count, 2 * 31);
  EXPECT_EQ(s.kld.value, 0.0);
  EXPECT_EQ(s.kldMax, 0.0);
  EXPECT_EQ(s.sameTop.value, 1.0);
  EXPECT_EQ(s.ppl.value, s.refPpl.value);
  EXPECT_EQ(s.pplRatio.value, 1.0);
}

// Hides forwardAllRows(): evaluation runs one step per scored token.
class LastRowOnly : public Executor {
public:
  explicit LastRowOnly(Executor& inner) : inner_(inner) {}
  Status forwardSequence(int sequence, const int32_t* tokens, int n, int pos,
                         float* logits) override {
    return inner_.forwardSequence(sequence, tokens, n, pos, logits);
  }
  void setSequenceLength(int sequence, int length) override {
    inner_.setSequenceLength(sequence, length);
  }
  std::string name() const override { return inner_.name(); }

private:
  Executor& inner_;
};

TEST(EvalTinyPlan, AllRowsLogitsMatchTheReferenceModel) {
  TinyModel model = buildTinyModel(tinySpec());
  Loaded l = load(model.maker.write("eval_rows.nplan"));
  ASSERT_TRUE(l.executor);
  ASSERT_TRUE(l.executor->hasAllRowsLogits());
  const int vocab = 38, n = 7;
  std::vector<int32_t> chunk(2 * n);
  for (size_t i = 0; i < chunk.size(); ++i)
    chunk[i] = int32_t((i * 7 + 2) % 37);
  // Two steps of n rows; the reference computes each position's logits on its own.
  std::vector<float> rows(size_t(2 * n) * vocab);
  ASSERT_TRUE(l.executor->forwardAllRows(chunk.data(), n, 0, rows.data()).isOk());
  ASSERT_TRUE(
      l.executor->forwardAllRows(chunk.data() + n, n, n, rows.data() + size_t(n) * vocab).isOk());
  const auto reference = test::referenceStepLogits(model, chunk, std::vector<int>(2 * n, 1));
  ASSERT_EQ(reference.size(), size_t(2 * n));
  double worst = 0;
  for (int t = 0; t < 2 * n; ++t)
    for (int v = 0; v < vocab; ++v)
      worst = std::max(worst, std::fabs(rows[size_t(t) * vocab + size_t(v)] -
                                        reference[size_t(t)][size_t(v)]));
  EXPECT_LT(worst, 1e-4);
  // forward() after it still returns the last row only, and the same values.
  std::vector<float> last(vocab);
  ASSERT_TRUE(l.executor->forward(chunk.data() + n, n, n, last.data()).isOk());
  for (int v = 0; v < vocab; ++v)
    EXPECT_EQ(last[size_t(v)], rows[size_t(2 * n - 1) * vocab + size_t(v)]);
}

// Also with RoPE scaled by the sequence's length past 12 positions (dynamic NTK, LongRoPE):
// the one-token steps then take the chunk's length, as the all-rows steps do.
class EvalScaledRope : public ::testing::TestWithParam<int> {};

TEST_P(EvalScaledRope, AllRowsEvaluationMatchesOneStepPerToken) {
  auto spec = [](uint32_t seed) {
    TinyModelSpec s = tinySpec(seed);
    s.originalMaxPositions = GetParam() ? 12 : 0;
    s.dynamicFactor = GetParam() == 1 ? 4.0f : 0.0f;
    s.longFactors = GetParam() == 2;
    return s;
  };
  TinyModel a = buildTinyModel(spec(1)), b = buildTinyModel(spec(2));
  const std::string name = "eval_rows_" + std::to_string(GetParam());
  Loaded ref = load(a.maker.write(name + "_a.nplan"));
  Loaded plan = load(b.maker.write(name + "_b.nplan"));
  ASSERT_TRUE(ref.executor && plan.executor);
  std::vector<int32_t> tokens(130);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t((i * 11 + 3) % 37);
  const ChunkLayout layout = layoutChunks(tokens.size(), 64, 0).value();
  const ExecutorLimits refLimits = ExecutorLimits::fromPlan(*ref.file);
  const ExecutorLimits limits = ExecutorLimits::fromPlan(*plan.file);
  Result<KldAccumulator> fast = evaluateKld(*ref.executor, refLimits, *plan.executor, limits,
                                            tokens, layout, 37, nullptr);
  LastRowOnly slowRef(*ref.executor), slowPlan(*plan.executor);
  Result<KldAccumulator> slow =
      evaluateKld(slowRef, refLimits, slowPlan, limits, tokens, layout, 37, nullptr);
  ASSERT_TRUE(fast.isOk()) << fast.status().message();
  ASSERT_TRUE(slow.isOk()) << slow.status().message();
  const KldStats f = fast->stats(), s = slow->stats();
  ASSERT_EQ(f.count, s.count);
  EXPECT_GT(s.kld.value, 1e-3) << "two different models";
  EXPECT_NEAR(f.kld.value, s.kld.value, 1e-5 * s.kld.value);
  EXPECT_NEAR(f.ppl.value, s.ppl.value, 1e-5 * s.ppl.value);
  EXPECT_NEAR(f.refPpl.value, s.refPpl.value, 1e-5 * s.refPpl.value);
  EXPECT_EQ(f.sameTop.value, s.sameTop.value);
}

INSTANTIATE_TEST_SUITE_P(Scalings, EvalScaledRope, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == 0   ? "plain"
                                              : info.param == 1 ? "dynamic_ntk"
                                                                : "long_factors");
                         });

// ---- the CLI, on tiny plans with a character tokenizer ----

// Ids 0..36 are 'a'..'z', '0'..'9' and a space; 37 is BOS.
std::string writeTinyPlanWithTokenizer(const std::string& name, uint32_t seed, int vocab = 38) {
  TinyModelSpec spec = tinySpec(seed);
  spec.vocab = vocab;
  TinyModel model = buildTinyModel(spec);
  plan::TokenizerT& tok = *model.maker.plan.tokenizer;
  tok.kind = plan::TokenizerKind::ByteLevelBpe;
  for (char c : std::string("abcdefghijklmnopqrstuvwxyz0123456789"))
    tok.tokens.push_back(std::string(1, c));
  tok.tokens.push_back("\xC4\xA0"); // GPT-2's byte-level spelling of a space
  tok.tokens.push_back("<s>");
  for (int i = 38; i < vocab; ++i)
    tok.tokens.push_back("<extra" + std::to_string(i) + ">");
  tok.special_ids.push_back(37);
  tok.bos_id = 37;
  tok.add_bos = true;
  tok.pretokenizer = "gpt2";
  return model.maker.write(name);
}

std::string writeText(const std::string& name, int words) {
  std::string text;
  for (int i = 0; i < words; ++i) {
    text += "w" + std::to_string((i * 7919) % 1000) + "x";
    text += i % 5 == 4 ? "\n" : " ";
  }
  const std::string path = test::tempPath(name);
  test::writeFile(path, std::vector<uint8_t>(text.begin(), text.end()));
  return path;
}

struct CliResult {
  int exitCode = -1;
  std::string out, err;
};

CliResult runCommand(bool kld, std::vector<std::string> args) {
  args.insert(args.begin(), {"ninfer", kld ? "kld" : "perplexity"});
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(&a[0]);
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  CliResult r;
  r.exitCode = kld ? runKldCommand(int(argv.size()), argv.data(), out, err)
                   : runPerplexityCommand(int(argv.size()), argv.data(), out, err);
  for (auto [file, text] : {std::make_pair(out, &r.out), std::make_pair(err, &r.err)}) {
    std::fflush(file);
    std::rewind(file);
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
      text->append(buffer, n);
    std::fclose(file);
  }
  return r;
}

double jsonValue(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos)
    return NAN;
  return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

void expectError(const CliResult& r, int exitCode, const std::string& fragment) {
  EXPECT_EQ(r.exitCode, exitCode) << r.err;
  EXPECT_EQ(r.err.rfind("ninfer: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(EvalCli, PerplexityReportsAndAgreesWithTheLibrary) {
  const std::string plan = writeTinyPlanWithTokenizer("eval_cli.nplan", 1);
  const std::string text = writeText("eval_cli.txt", 40);
  CliResult json = runCommand(
      false, {plan, "--file", text, "--ctx", "32", "--device", "cpu", "--threads", "1", "--json"});
  ASSERT_EQ(json.exitCode, 0) << json.err;
  EXPECT_EQ(json.out.front(), '{');
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '\n'), 1) << json.out;
  EXPECT_EQ(jsonValue(json.out, "ctx"), 32);
  EXPECT_EQ(json.out.find("\"bos_per_chunk\": true") != std::string::npos, true) << json.out;

  // The same through the library.
  auto file = PlanFile::open(plan);
  ASSERT_TRUE(file.isOk());
  auto tokenizer = Tokenizer::fromPlan((*file)->plan().tokenizer());
  ASSERT_TRUE(tokenizer.isOk());
  const std::vector<int32_t> ids = (*tokenizer)->encode(readAll(text), true).value();
  ASSERT_EQ(ids[0], 37);
  const ChunkLayout layout = layoutChunks(ids.size(), 32, 0).value();
  EXPECT_EQ(jsonValue(json.out, "text_tokens"), double(ids.size()));
  EXPECT_EQ(jsonValue(json.out, "chunks"), layout.chunks);
  EXPECT_EQ(jsonValue(json.out, "scored_tokens"), double(layout.scoredTokens()));
  auto executor = createCpuExecutor(**file, 1);
  ASSERT_TRUE(executor.isOk());
  auto acc =
      evaluatePerplexity(**executor, ExecutorLimits::fromPlan(**file), ids, layout, 37, nullptr);
  ASSERT_TRUE(acc.isOk());
  EXPECT_NEAR(jsonValue(json.out, "ppl"), acc->perplexity().value, 1e-8 * acc->perplexity().value);
  EXPECT_GT(jsonValue(json.out, "ppl_uncertainty"), 0);

  CliResult two =
      runCommand(false, {plan, "--file", text, "--ctx=32", "--device", "cpu", "--max-chunks", "2"});
  ASSERT_EQ(two.exitCode, 0) << two.err;
  EXPECT_NE(two.out.find("2 chunks of 32, 30 scored positions"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("Final estimate: PPL = "), std::string::npos) << two.out;
}

TEST(EvalCli, KldOfAPlanAgainstItselfAndAnother) {
  const std::string plan = writeTinyPlanWithTokenizer("eval_kld_a.nplan", 1);
  const std::string other = writeTinyPlanWithTokenizer("eval_kld_b.nplan", 2);
  const std::string text = writeText("eval_kld.txt", 40);
  CliResult self = runCommand(
      true, {plan, "--ref", plan, "--file", text, "--ctx", "32", "--device", "cpu", "--json"});
  ASSERT_EQ(self.exitCode, 0) << self.err;
  EXPECT_EQ(jsonValue(self.out, "kld"), 0.0) << self.out;
  EXPECT_EQ(jsonValue(self.out, "kld_p99_9"), 0.0) << self.out;
  EXPECT_EQ(jsonValue(self.out, "same_top"), 1.0) << self.out;
  EXPECT_EQ(jsonValue(self.out, "ppl_ratio"), 1.0) << self.out;

  CliResult diff = runCommand(
      true, {plan, "--ref", other, "--file", text, "--ctx", "32", "--device", "cpu", "--json"});
  ASSERT_EQ(diff.exitCode, 0) << diff.err;
  EXPECT_GT(jsonValue(diff.out, "kld"), 0.0) << diff.out;
  EXPECT_LT(jsonValue(diff.out, "same_top"), 1.0) << diff.out;
  EXPECT_GE(jsonValue(diff.out, "kld_max"), jsonValue(diff.out, "kld_p99_9")) << diff.out;
  EXPECT_GE(jsonValue(diff.out, "kld_p99_9"), jsonValue(diff.out, "kld_median")) << diff.out;

  CliResult text_ =
      runCommand(true, {plan, "--ref", other, "--file", text, "--ctx", "32", "--device", "cpu"});
  ASSERT_EQ(text_.exitCode, 0) << text_.err;
  for (const char* line : {"Mean PPL(Q)", "Mean PPL(base)", "Mean PPL(Q)/PPL(base)", "Mean    KLD:",
                           "99.9%   KLD:", "99.0%   KLD:", "Median  KLD:", "Same top p :"})
    EXPECT_NE(text_.out.find(line), std::string::npos) << line << "\n" << text_.out;
}

TEST(EvalCli, Errors) {
  const std::string plan = writeTinyPlanWithTokenizer("eval_err.nplan", 1);
  const std::string bigVocab = writeTinyPlanWithTokenizer("eval_err_vocab.nplan", 1, 40);
  const std::string text = writeText("eval_err.txt", 40);
  const std::string tiny = writeText("eval_err_short.txt", 2);

  expectError(runCommand(false, {plan}), 2, "--file TEXT");
  expectError(runCommand(false, {"--file", text}), 2, "needs a plan");
  expectError(runCommand(false, {plan, "--file", text, "--ctx", "2"}), 2, "--ctx expects");
  expectError(runCommand(false, {plan, "--file", text, "--bogus"}), 2, "unknown option");
  expectError(runCommand(false, {plan, "--file", text, "--device", "tpu"}), 2, "--device");
  expectError(runCommand(true, {plan, "--file", text}), 2, "--ref");
  expectError(runCommand(false, {plan, "--file", text, "--ctx", "128", "--device", "cpu"}), 1,
              "less than --ctx 128");
  expectError(runCommand(false, {plan, "--file", tiny, "--ctx", "32", "--device", "cpu"}), 1,
              "fewer than one chunk");
  expectError(runCommand(false, {plan, "--file", test::tempPath("missing.txt"), "--ctx", "32"}), 1,
              "cannot read");
  expectError(runCommand(false, {test::tempPath("missing.nplan"), "--file", text}), 1, "");
  expectError(
      runCommand(true, {plan, "--ref", bigVocab, "--file", text, "--ctx", "32", "--device", "cpu"}),
      1, "different vocabularies");

  // A plan without a tokenizer cannot read text.
  TinyModel bare = buildTinyModel(tinySpec());
  const std::string barePath = bare.maker.write("eval_bare.nplan");
  expectError(runCommand(false, {barePath, "--file", text, "--ctx", "32"}), 1, "no tokenizer");

  CliResult help = runCommand(true, {"--help"});
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_NE(help.out.find("usage: ninfer kld"), std::string::npos);
}

// ---- pycode-llama-3m against transformers ----

std::string sharedDir() {
  const char* env = std::getenv("NINFER_SHARED_DIR");
  return env && *env ? env : NINFER_SHARED_DIR;
}

// A plan of pycode-llama-3m with a context of at least 128: $NINFER_EVAL_PLAN_3M,
// else compiled here by ninferc ($NINFERC, else the one built with the tests).
std::string pycodePlan(std::string& why) {
  if (const char* plan = std::getenv("NINFER_EVAL_PLAN_3M"); plan && *plan)
    return plan;
  std::string ninferc;
  if (const char* env = std::getenv("NINFERC"); env && *env)
    ninferc = env;
#ifdef NINFER_NINFERC_PATH
  if (ninferc.empty())
    ninferc = NINFER_NINFERC_PATH;
#endif
  if (ninferc.empty()) {
    why = "no ninferc (set NINFERC or NINFER_EVAL_PLAN_3M)";
    return "";
  }
  const std::string model = sharedDir() + "/models/pycode-llama-3m";
  if (!std::ifstream(model + "/config.json")) {
    why = "no " + model;
    return "";
  }
  // A small step size so that the prefill of a chunk takes several steps.
  const std::string out = test::tempPath("eval_pycode3m.nplan");
  const std::string command = "'" + ninferc + "' '" + model +
                              "' --target sm_90 --ctx 128 --max-step-tokens 48 -q -o '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return out;
}

TEST(EvalPycode, PerplexityMatchesTransformers) {
  std::string why;
  const std::string planPath = pycodePlan(why);
  if (planPath.empty())
    GTEST_SKIP() << why;
  const std::string data = readAll(sharedDir() + "/data/heldout_python.txt");
  if (data.empty())
    GTEST_SKIP() << "no heldout_python.txt under " << sharedDir();

  std::ifstream golden(testDataPath("ppl_golden.txt"));
  ASSERT_TRUE(golden);
  std::string line, key;
  int lines = 0;
  size_t tokenCount = 0;
  std::vector<int32_t> firstIds, lastIds;
  struct Config {
    int ctx, chunks, scored;
    double meanNll, ppl;
  };
  std::vector<Config> configs;
  while (std::getline(golden, line)) {
    std::istringstream in(line);
    in >> key;
    if (key == "lines") {
      in >> lines;
    } else if (key == "tokens") {
      in >> tokenCount;
    } else if (key == "first_ids" || key == "last_ids") {
      int32_t id;
      while (in >> id)
        (key == "first_ids" ? firstIds : lastIds).push_back(id);
    } else if (key == "config") {
      Config c;
      in >> c.ctx >> c.chunks >> c.scored >> c.meanNll >> c.ppl;
      configs.push_back(c);
    }
  }
  ASSERT_GT(lines, 0);
  ASSERT_EQ(configs.size(), 2u);

  size_t end = 0;
  for (int i = 0; i < lines; ++i) {
    end = data.find('\n', end);
    ASSERT_NE(end, std::string::npos);
    ++end;
  }
  Loaded l = load(planPath);
  ASSERT_TRUE(l.executor);
  auto tokenizer = Tokenizer::fromPlan(l.file->plan().tokenizer());
  ASSERT_TRUE(tokenizer.isOk()) << tokenizer.status().message();
  const std::vector<int32_t> ids = (*tokenizer)->encode(data.substr(0, end), true).value();
  ASSERT_EQ(ids.size(), tokenCount);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + firstIds.size()), firstIds);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - lastIds.size(), ids.end()), lastIds);
  const int32_t bos = l.file->plan().tokenizer()->bos_id();
  ASSERT_EQ(bos, 0);

  for (const Config& c : configs) {
    const ChunkLayout layout = layoutChunks(ids.size(), c.ctx, 0).value();
    ASSERT_EQ(layout.chunks, c.chunks);
    ASSERT_EQ(layout.scoredTokens(), c.scored);
    auto acc = evaluatePerplexity(*l.executor, ExecutorLimits::fromPlan(*l.file), ids, layout, bos,
                                  nullptr);
    ASSERT_TRUE(acc.isOk()) << acc.status().message();
    const double nll = acc->meanNll().value;
    std::printf("ctx %d: mean NLL %.6f (transformers %.6f), PPL %.4f (transformers %.4f)\n", c.ctx,
                nll, c.meanNll, acc->perplexity().value, c.ppl);
    EXPECT_NEAR(nll, c.meanNll, 1e-3 * c.meanNll) << "ctx " << c.ctx;
    EXPECT_NEAR(acc->perplexity().value, c.ppl, 1e-3 * c.ppl) << "ctx " << c.ctx;
  }
}

} // namespace
} // namespace ninfer
