// See StepCheck.h.
#include "StepCheck.h"

#include "plan_generated.h"

#include <string>

namespace ninfer {
namespace {

Status checkIds(const int32_t* tokens, int n, int vocab) {
  for (int t = 0; t < n; ++t)
    if (tokens[t] < 0 || (vocab > 0 && tokens[t] >= vocab))
      return Status::error("token id " + std::to_string(tokens[t]) +
                           " is outside the vocabulary (" + std::to_string(vocab) + ")");
  return Status::ok();
}

Status checkSequence(const plan::Plan& plan, int sequence) {
  if (sequence < 0 || sequence >= plan.max_batch())
    return Status::error("sequence " + std::to_string(sequence) +
                         " does not exist: the plan holds " + std::to_string(plan.max_batch()) +
                         " sequence" + (plan.max_batch() == 1 ? "" : "s") +
                         " (compile it with ninferc --batch N for more)");
  return Status::ok();
}

} // namespace

Status checkLogits(const float* logits, const char* entry) {
  if (!logits)
    return Status::error(std::string(entry) + ": logits must not be null");
  return Status::ok();
}

Status checkStep(const plan::Plan& plan, const int32_t* tokens, int n, int pos, int vocab,
                 int sequence) {
  if (!tokens)
    return Status::error("forward: tokens must not be null");
  if (n < 1 || n > plan.max_step_tokens())
    return Status::error("a step takes 1 to " + std::to_string(plan.max_step_tokens()) +
                         " tokens, got " + std::to_string(n));
  if (pos < 0 || pos > plan.context() - n)
    return Status::error("positions " + std::to_string(pos) + ".." + std::to_string(pos + n - 1) +
                         " exceed the plan's context of " + std::to_string(plan.context()));
  NINFER_RETURN_IF_ERROR(checkSequence(plan, sequence));
  return checkIds(tokens, n, vocab);
}

Status checkBatchStep(const plan::Plan& plan, const int32_t* tokens, const int32_t* positions,
                      const int32_t* sequences, int batch, int vocab) {
  if (!tokens || !positions || !sequences)
    return Status::error("forwardBatch: tokens, positions and sequences must not be null");
  if (batch < 1 || batch > plan.max_batch())
    return Status::error("a batch step takes 1 to " + std::to_string(plan.max_batch()) +
                         " sequences (the plan's max batch), got " + std::to_string(batch) +
                         (batch > plan.max_batch()
                              ? ": compile the plan with ninferc --batch " + std::to_string(batch)
                              : std::string()));
  for (int t = 0; t < batch; ++t) {
    NINFER_RETURN_IF_ERROR(checkSequence(plan, sequences[t]));
    if (positions[t] < 0 || positions[t] >= plan.context())
      return Status::error("position " + std::to_string(positions[t]) + " of sequence " +
                           std::to_string(sequences[t]) + " exceeds the plan's context of " +
                           std::to_string(plan.context()));
    for (int u = 0; u < t; ++u)
      if (sequences[u] == sequences[t])
        return Status::error("sequence " + std::to_string(sequences[t]) +
                             " appears twice in one batch step (rows " + std::to_string(u) +
                             " and " + std::to_string(t) + ")");
  }
  return checkIds(tokens, batch, vocab);
}

} // namespace ninfer
