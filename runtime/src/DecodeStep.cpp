// A decode step and its next token: which executor entry point picks it (Sampler.h says
// which sampling each one serves), and the host's share of the pick.
#include "ninfer/DecodeStep.h"

namespace ninfer {

DecodeStep::DecodeStep(Executor& executor, Sampler& sampler, int vocab)
    : executor_(executor), sampler_(sampler), vocab_(vocab), logits_(size_t(vocab), 0.0f) {
  const int k = sampler.candidatesK();
  if (sampler.greedy() && executor.picksGreedyTokens())
    pick_ = Pick::kGreedy;
  else if (sampler.temperatureOnly() && executor.samplesTokens())
    pick_ = Pick::kTemperature;
  else if (k > 0 && executor.maxTopKCandidates() >= k)
    pick_ = Pick::kTopK;
  else if (sampler.topPOnly() && executor.picksNucleus())
    pick_ = Pick::kNucleus;
}

Status DecodeStep::run(int32_t id, int pos, int32_t& next) {
  switch (pick_) {
  case Pick::kGreedy:
    return executor_.forwardSequenceGreedy(0, &id, 1, pos, &next);
  case Pick::kTemperature:
    return executor_.forwardSequenceSample(0, &id, 1, pos, sampler_.temperature(),
                                           sampler_.nextUniform(), &next);
  case Pick::kTopK:
    NINFER_RETURN_IF_ERROR(
        executor_.forwardSequenceTopK(0, &id, 1, pos, sampler_.candidatesK(), &candidates_));
    next = sampler_.sampleTopK(candidates_);
    return Status::ok();
  case Pick::kNucleus: {
    double mass = 0.0;
    NINFER_RETURN_IF_ERROR(executor_.forwardSequenceNucleus(0, &id, 1, pos, sampler_.temperature(),
                                                            &candidates_, &mass));
    const double uniform = sampler_.nextUniform();
    next = sampler_.sampleTopP(candidates_, mass, uniform);
    if (next >= 0)
      return Status::ok();
    // The nucleus reaches past the candidates: the executor draws over the whole row, or the
    // step's logits come to the host.
    if (executor_.drawsNucleus()) {
      Status drawn =
          executor_.drawLastNucleus(sampler_.temperature(), sampler_.topP(), uniform, &next);
      if (drawn.isOk() || executor_.drawsNucleus()) {
        rowDrawSteps_ += drawn.isOk() ? 1 : 0;
        return drawn;
      }
      // The executor gave its row draw up (the GPU cannot run it): the host draws.
    }
    ++logitsSteps_;
    NINFER_RETURN_IF_ERROR(executor_.lastLogits(logits_.data()));
    next = sampler_.sampleWith(logits_.data(), vocab_, uniform);
    return Status::ok();
  }
  case Pick::kLogits:
    break;
  }
  ++logitsSteps_;
  NINFER_RETURN_IF_ERROR(executor_.forward(&id, 1, pos, logits_.data()));
  next = sampler_.sample(logits_.data(), vocab_);
  return Status::ok();
}

std::string DecodeStep::describe() const {
  switch (pick_) {
  case Pick::kGreedy:
    return "picked on the device (greedy), one id to the host";
  case Pick::kTemperature:
    return "drawn on the device (temperature), one id to the host";
  case Pick::kTopK:
    return "top-k candidates picked on the device, drawn on the host";
  case Pick::kNucleus:
    return std::string("top-p candidates and mass picked on the device, drawn on the host (") +
           (executor_.drawsNucleus() ? "drawn over the whole row on the device"
                                     : "the logits to the host") +
           " where the nucleus reaches past them)";
  case Pick::kLogits:
    break;
  }
  return "the logits to the host, which picks";
}

} // namespace ninfer
