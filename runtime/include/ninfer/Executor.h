// An executor runs the plan's op list for one step: n tokens at positions
// pos..pos+n-1, appending to its KV cache, and returns the last token's logits.
// Both executors run the same plan; the CPU one is the reference.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace ninfer {

class PlanFile;

class Executor {
public:
  virtual ~Executor() = default;
  // tokens: n ids, 1 <= n <= max_step_tokens, pos + n <= context.
  // logits: vocab_size floats for the step's last token.
  virtual Status forward(const int32_t* tokens, int n, int pos, float* logits) = 0;
  virtual std::string name() const = 0;
};

// threads <= 0: use all hardware threads.
Result<std::unique_ptr<Executor>> createCpuExecutor(const PlanFile& plan, int threads);
// Loads libcuda.so.1 with dlopen; fails cleanly on machines without a GPU.
Result<std::unique_ptr<Executor>> createCudaExecutor(const PlanFile& plan, int deviceOrdinal);

} // namespace ninfer
