// One single-sequence decode step and the pick of the token after it, as Sampler picks it
// from the step's logits, with the executor picking on its own where it can: the greedy
// token, a draw with a temperature alone, top-k sampling's candidates, or top-p's candidates
// and the row's mass. On the GPU only an id or k pairs then come back per step (where top-p's
// nucleus reaches past the candidates, the GPU draws over the whole row; plans compiled before
// that bring the logits). Generation and `ninfer bench` decode through it.
#pragma once

#include "ninfer/Executor.h"
#include "ninfer/Sampler.h"
#include "ninfer/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer {

class DecodeStep {
public:
  // vocab: the logits per step. The sampler's draws follow the ones it made before.
  DecodeStep(Executor& executor, Sampler& sampler, int vocab);
  // Runs token `id` at position `pos` of sequence 0, then picks the next token into `next`.
  Status run(int32_t id, int pos, int32_t& next);
  // Where the next token is picked, in words (reports).
  std::string describe() const;
  // Whether the executor takes part in the pick (else the logits come to the host).
  bool onDevice() const { return pick_ != Pick::kLogits; }
  // The steps run so far whose pick read the logits on the host: every step without the
  // executor's pick, and top-p's steps whose nucleus reached past the candidates.
  int logitsSteps() const { return logitsSteps_; }
  // Top-p's steps so far whose nucleus reached past the candidates and that the executor drew
  // over the whole row (Executor::drawLastNucleus).
  int rowDrawSteps() const { return rowDrawSteps_; }

private:
  enum class Pick { kLogits, kGreedy, kTemperature, kTopK, kNucleus };
  Executor& executor_;
  Sampler& sampler_;
  int vocab_;
  Pick pick_ = Pick::kLogits;
  std::vector<float> logits_;
  TopKCandidates candidates_;
  int logitsSteps_ = 0;
  int rowDrawSteps_ = 0;
};

} // namespace ninfer
