// The generation loop: prefill the prompt in chunks of max_step_tokens (one forward pass:
// Executor::setSequenceLength), then decode one token per step until EOS, the token budget
// or the context ends. Works on any Executor; the limits come from the plan (or a test).
// LongRoPE plans: when the sequence grows past the original length, the whole sequence is
// computed again (its keys then rotate with the long factors), as transformers' Phi-3
// generation does.
#pragma once

#include "ninfer/Executor.h"
#include "ninfer/Sampler.h"
#include "ninfer/Status.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace ninfer {

class PlanFile;

struct GenerationConfig {
  int context = 0;       // positions the executor's KV cache holds
  int maxStepTokens = 0; // largest step the executor takes
  int vocabSize = 0;     // logits per step
  int maxNewTokens = 128;
  std::vector<int32_t> eosIds; // generation stops at these (they are not emitted)
  bool ignoreEos = false;
  // LongRoPE: the original length, past which the sequence is computed again; 0: none.
  int longRopeLength = 0;

  // context, maxStepTokens, vocabSize, eosIds and longRopeLength from the plan.
  static GenerationConfig fromPlan(const PlanFile& plan);
};

struct GenerationStats {
  int promptTokens = 0;
  int generatedTokens = 0;
  int decodeSteps = 0; // forward calls after the prefill
  double prefillMs = 0;
  double decodeMs = 0;
  bool stoppedAtEos = false;
  bool stoppedAtContext = false;
};

class Generator {
public:
  Generator(Executor& executor, GenerationConfig config);

  // Called with each generated id as soon as it is sampled; return false to stop.
  using TokenCallback = std::function<bool(int32_t id)>;

  // Runs from position 0 (the executor's cache is overwritten). A prompt longer
  // than the context is an error; an empty prompt too.
  Result<GenerationStats> generate(const std::vector<int32_t>& prompt, Sampler& sampler,
                                   const TokenCallback& onToken);

  // Logits of the last prompt position, valid after generate() (vocabSize floats).
  const std::vector<float>& promptLogits() const { return promptLogits_; }

private:
  // One forward pass over `tokens` from position 0; logits: its last position's.
  Status forwardFromStart(const std::vector<int32_t>& tokens, float* logits);

  Executor& executor_;
  GenerationConfig config_;
  std::vector<float> promptLogits_;
};

} // namespace ninfer
