// Prefill + decode loop over an Executor, with timing for the summary line.
#include "ninfer/Generator.h"

#include "ninfer/Plan.h"
#include "plan_generated.h"

#include <algorithm>
#include <chrono>

namespace ninfer {
namespace {

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

GenerationConfig GenerationConfig::fromPlan(const PlanFile& file) {
  const plan::Plan& p = file.plan();
  GenerationConfig config;
  config.context = p.context();
  config.maxStepTokens = p.max_step_tokens();
  config.vocabSize = p.model()->vocab_size();
  if (p.tokenizer() && p.tokenizer()->eos_ids())
    config.eosIds.assign(p.tokenizer()->eos_ids()->begin(), p.tokenizer()->eos_ids()->end());
  return config;
}

Generator::Generator(Executor& executor, GenerationConfig config)
    : executor_(executor), config_(std::move(config)) {}

Result<GenerationStats> Generator::generate(const std::vector<int32_t>& prompt, Sampler& sampler,
                                            const TokenCallback& onToken) {
  GenerationStats stats;
  const int promptSize = int(std::min<size_t>(prompt.size(), size_t(1) << 30));
  if (prompt.empty())
    return Status::error("the prompt is empty");
  if (promptSize > config_.context || prompt.size() != size_t(promptSize))
    return Status::error("prompt has " + std::to_string(prompt.size()) +
                         " tokens but the plan's context is " + std::to_string(config_.context));
  if (config_.maxStepTokens <= 0 || config_.vocabSize <= 0)
    return Status::error("generator: invalid step size or vocabulary size");
  stats.promptTokens = promptSize;
  logits_.assign(size_t(config_.vocabSize), 0.0f);

  auto start = std::chrono::steady_clock::now();
  for (int pos = 0; pos < promptSize; pos += config_.maxStepTokens) {
    const int n = std::min(config_.maxStepTokens, promptSize - pos);
    NINFER_RETURN_IF_ERROR(executor_.forward(prompt.data() + pos, n, pos, logits_.data()));
  }
  stats.prefillMs = millisecondsSince(start);
  promptLogits_ = logits_;

  start = std::chrono::steady_clock::now();
  // Decode steps let the executor pick the greedy token, draw with a temperature alone, or
  // pick top-k sampling's candidates or top-p's (with the row's mass), where it can (on the
  // GPU only the id or k pairs come back; top-p copies the logits only where its nucleus
  // reaches past the candidates); the first token comes from the prompt's logits either way.
  const bool executorPicks = sampler.greedy() && executor_.picksGreedyTokens();
  const bool executorSamples = sampler.temperatureOnly() && executor_.samplesTokens();
  const int candidatesK = sampler.candidatesK();
  const bool executorCandidates =
      candidatesK > 0 && executor_.maxTopKCandidates() >= candidatesK;
  const bool executorNucleus = sampler.topPOnly() && executor_.picksNucleus();
  enum { kFromLogits, kPicked, kFromCandidates, kFromNucleus } next = kFromLogits;
  int32_t picked = 0;
  TopKCandidates candidates;
  double mass = 0.0;
  int pos = promptSize; // position of the next sampled token
  while (stats.generatedTokens < config_.maxNewTokens) {
    if (pos >= config_.context) {
      stats.stoppedAtContext = true;
      break;
    }
    int32_t id = picked;
    if (next == kFromNucleus) {
      const double uniform = sampler.nextUniform();
      id = sampler.sampleTopP(candidates, mass, uniform);
      if (id < 0) { // the nucleus reaches past the candidates: the step's logits decide
        NINFER_RETURN_IF_ERROR(executor_.lastLogits(logits_.data()));
        id = sampler.sampleWith(logits_.data(), config_.vocabSize, uniform);
      }
    } else if (next == kFromCandidates) {
      id = sampler.sampleTopK(candidates);
    } else if (next == kFromLogits) {
      id = sampler.sample(logits_.data(), config_.vocabSize);
    }
    if (!config_.ignoreEos &&
        std::find(config_.eosIds.begin(), config_.eosIds.end(), id) != config_.eosIds.end()) {
      stats.stoppedAtEos = true;
      break;
    }
    ++stats.generatedTokens;
    if (onToken && !onToken(id))
      break;
    // The last token needs no forward step: nobody reads its logits.
    if (stats.generatedTokens == config_.maxNewTokens)
      break;
    if (pos + 1 >= config_.context) {
      stats.stoppedAtContext = true;
      break;
    }
    if (executorPicks) {
      NINFER_RETURN_IF_ERROR(executor_.forwardSequenceGreedy(0, &id, 1, pos, &picked));
      next = kPicked;
    } else if (executorSamples) {
      NINFER_RETURN_IF_ERROR(executor_.forwardSequenceSample(
          0, &id, 1, pos, sampler.temperature(), sampler.nextUniform(), &picked));
      next = kPicked;
    } else if (executorCandidates) {
      NINFER_RETURN_IF_ERROR(
          executor_.forwardSequenceTopK(0, &id, 1, pos, candidatesK, &candidates));
      next = kFromCandidates;
    } else if (executorNucleus) {
      NINFER_RETURN_IF_ERROR(executor_.forwardSequenceNucleus(
          0, &id, 1, pos, sampler.temperature(), &candidates, &mass));
      next = kFromNucleus;
    } else {
      NINFER_RETURN_IF_ERROR(executor_.forward(&id, 1, pos, logits_.data()));
    }
    ++stats.decodeSteps;
    ++pos;
  }
  stats.decodeMs = millisecondsSince(start);
  return stats;
}

} // namespace ninfer
