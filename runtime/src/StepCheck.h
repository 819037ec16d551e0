// The checks every executor makes before running a step, so that both refuse
// the same bad requests with the same words.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>

namespace ninfer {
namespace plan {
struct Plan;
}

// tokens/logits non-null, 1 <= n <= max_step_tokens, positions inside the
// context, every id in [0, vocab) (vocab <= 0: not checked).
Status checkStep(const plan::Plan& plan, const int32_t* tokens, int n, int pos,
                 const float* logits, int vocab);

} // namespace ninfer
