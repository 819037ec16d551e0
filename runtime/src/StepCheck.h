// The checks every executor makes before running a step, so that both refuse
// the same bad requests with the same words.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>

namespace ninfer {
namespace plan {
struct Plan;
}

// A step whose caller asked for logits: the place for them is not null (entry: the
// executor call the message names).
Status checkLogits(const float* logits, const char* entry = "forward");

// tokens non-null, 1 <= n <= max_step_tokens, positions inside the context,
// every id in [0, vocab) (vocab <= 0: not checked), the sequence one of the
// plan's max_batch slots.
Status checkStep(const plan::Plan& plan, const int32_t* tokens, int n, int pos, int vocab,
                 int sequence = 0);

// A batch step: pointers non-null, 1 <= batch <= max_batch, every position
// inside the context, every sequence a slot of the plan and no sequence twice,
// every id in [0, vocab).
Status checkBatchStep(const plan::Plan& plan, const int32_t* tokens, const int32_t* positions,
                      const int32_t* sequences, int batch, int vocab);

} // namespace ninfer
