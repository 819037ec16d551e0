// Prefill + decode loop over an Executor, with timing for the summary line.
#include "ninfer/Generator.h"

#include "ninfer/DecodeStep.h"
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
  for (const plan::Op* op : *p.ops())
    if (const plan::RopeAttrs* rope = op->attrs_as_RopeAttrs(); rope && rope->long_factors())
      config.longRopeLength = rope->original_max_positions();
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
  promptLogits_.assign(size_t(config_.vocabSize), 0.0f);

  auto start = std::chrono::steady_clock::now();
  NINFER_RETURN_IF_ERROR(forwardFromStart(prompt, promptLogits_.data()));
  stats.prefillMs = millisecondsSince(start);

  start = std::chrono::steady_clock::now();
  // The first token comes from the prompt's logits; each decode step picks the next one
  // (DecodeStep: on the GPU by the executor where it can).
  DecodeStep step(executor_, sampler, config_.vocabSize);
  bool picked = false; // id is the last decode step's pick (else `logits` give it)
  const float* logits = promptLogits_.data();
  std::vector<float> recomputed; // LongRoPE's second pass
  int32_t id = 0;
  int pos = promptSize; // position of the next sampled token
  std::vector<int32_t> tokens;
  if (config_.longRopeLength >= promptSize)
    tokens = prompt; // the sequence so far, for its second pass
  while (stats.generatedTokens < config_.maxNewTokens) {
    if (pos >= config_.context) {
      stats.stoppedAtContext = true;
      break;
    }
    if (!picked)
      id = sampler.sample(logits, config_.vocabSize);
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
    if (config_.longRopeLength > 0 && pos == config_.longRopeLength) {
      // The token at `pos` takes the sequence past LongRoPE's original length: the whole
      // sequence again, with the long factors (Phi3ForCausalLM.prepare_inputs_for_generation
      // drops the cache there).
      tokens.push_back(id);
      recomputed.assign(size_t(config_.vocabSize), 0.0f);
      NINFER_RETURN_IF_ERROR(forwardFromStart(tokens, recomputed.data()));
      logits = recomputed.data();
      tokens.clear();
      picked = false;
    } else {
      if (!tokens.empty())
        tokens.push_back(id);
      NINFER_RETURN_IF_ERROR(step.run(id, pos, id));
      picked = true;
    }
    ++stats.decodeSteps;
    ++pos;
  }
  stats.decodeMs = millisecondsSince(start);
  return stats;
}

Status Generator::forwardFromStart(const std::vector<int32_t>& tokens, float* logits) {
  const int size = int(tokens.size());
  // The chunks are one forward pass: RoPE scaled by the sequence's length takes all of it.
  executor_.setSequenceLength(0, size);
  Status status = Status::ok();
  for (int pos = 0; pos < size && status.isOk(); pos += config_.maxStepTokens)
    status = executor_.forward(tokens.data() + pos, std::min(config_.maxStepTokens, size - pos),
                               pos, logits);
  executor_.setSequenceLength(0, 0);
  return status;
}

} // namespace ninfer
