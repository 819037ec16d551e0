// See StepCheck.h.
#include "StepCheck.h"

#include "plan_generated.h"

#include <string>

namespace ninfer {

Status checkStep(const plan::Plan& plan, const int32_t* tokens, int n, int pos,
                 const float* logits, int vocab) {
  if (!tokens || !logits)
    return Status::error("forward: tokens and logits must not be null");
  if (n < 1 || n > plan.max_step_tokens())
    return Status::error("a step takes 1 to " + std::to_string(plan.max_step_tokens()) +
                         " tokens, got " + std::to_string(n));
  if (pos < 0 || pos > plan.context() - n)
    return Status::error("positions " + std::to_string(pos) + ".." + std::to_string(pos + n - 1) +
                         " exceed the plan's context of " + std::to_string(plan.context()));
  for (int t = 0; t < n; ++t)
    if (tokens[t] < 0 || (vocab > 0 && tokens[t] >= vocab))
      return Status::error("token id " + std::to_string(tokens[t]) +
                           " is outside the vocabulary (" + std::to_string(vocab) + ")");
  return Status::ok();
}

} // namespace ninfer
