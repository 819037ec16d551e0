// The device memory a plan needs (the figures of ninferc's memory report) and whether it fits
// a card, with an error that says what would make it fit.
#pragma once

#include "Targets.h"
#include "plan_generated.h"

#include <cstdint>
#include <string>

namespace ninfer {

// The CUDA context and the loaded kernel module: a reserve beside the plan's buffers.
constexpr uint64_t kRuntimeReserveBytes = 512ull << 20;

// Whether the plan's KV cache is int8 (--kv-dtype int8).
bool hasInt8Kv(const plan::PlanT& plan);

// The plan's weights, activations, KV cache and workspace, and the runtime's reserve.
uint64_t planDeviceBytes(const plan::PlanT& plan);

// "" where the plan fits the target's memory (or the target's memory is not known). Else
// "the plan needs X GiB but CARD has Y GiB" and each change that alone would make it fit: the
// longest --ctx that does, --kv-dtype int8 for an fp16 KV cache, --quant q4 for 16-bit
// weights (or that the weights alone do not fit).
std::string memoryFitError(const plan::PlanT& plan, const Target& target);

} // namespace ninfer
