// Questions about a plan that the kernel emitter (KernelEmitter.cpp) and its fusion search
// (LaunchFusion.cpp) both ask: buffers, their overlaps and alignment, the step shape, and
// which linears take the 16-byte GEMV.
#pragma once

#include "plan_generated.h"

#include <cstdint>

namespace ninfer {

constexpr int kLinearGemvRows = 8; // kLinearGemvMaxRows of codegen/kernels/common.cuh

int dtypeBytes(plan::DType dtype);
bool isFloatWeightType(plan::DType dtype);
// Bytes of a KV cache of one sequence.
uint64_t kvSlotBytes(plan::DType kvType, const plan::AttentionAttrsT &a);

class PlanQueries {
public:
  explicit PlanQueries(const plan::PlanT &plan) : queried_(plan) {}

  const plan::BufferT &buf(uint32_t index) const { return *queried_.buffers[index]; }
  // Buffer base is 16-byte aligned on the device: separate allocations are
  // 256-aligned, arena and weight buffers sit at base + offset.
  bool aligned16(uint32_t index) const;
  // Whether two buffers share bytes (buffers of different arenas never do).
  bool overlaps(uint32_t a, uint32_t b) const;
  // Every buffer the op names exists.
  bool validBuffers(const plan::OpT &op) const;
  // The 16-byte GEMV of linear.cuh (f16/bf16/f32 weights) with x in buffer `input`.
  bool vecGemv(const plan::OpT &op, uint32_t input) const;
  int64_t maxRows() const { return queried_.max_step_tokens; }
  // Sequences of the plan: the rows of a batch step at most.
  int maxBatch() const { return queried_.max_batch; }

private:
  const plan::PlanT &queried_;
};

} // namespace ninfer
