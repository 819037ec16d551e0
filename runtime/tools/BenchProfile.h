// `ninfer bench --profile`: where the time of a step goes, kernel by kernel.
#pragma once

#include "ninfer/Executor.h"
#include "ninfer/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer {
namespace plan {
struct Plan;
}

// What op `opIndex` is, for tables: its kind, and a linear's shape and weight dtype
// ("Linear 4096->6144 Q4_G64").
std::string describeOp(const plan::Plan& p, uint32_t opIndex);

// Rows of a synthetic decode step at position `context`: one row (batch <= 1), or `batch`
// rows of sequences 0..batch-1, all at that position, each with the same token id.
struct SyntheticStep {
  std::vector<int32_t> tokens, positions, sequences;
};
SyntheticStep syntheticDecodeStep(const plan::Plan& p, int context, int batch);

// Times every launch of one decode step at position `context` (with batch > 1: one batch
// step of sequences 0..batch-1, each at position `context`) and of one prefill step of
// `prefillTokens` tokens at position 0 (each repeated, median per launch), groups the
// launches by kernel and prints a table: calls per step, microseconds per call and per
// step, share, and the weight bytes the kernel's ops read per second. `decodeStepMs` (the
// measured median decode or batch step latency, 0 if unknown) is set against the sum of
// kernel times: the time a step spends outside kernels (launch gaps, host), or, where its
// launches overlap (graphs, programmatic dependent launch), by how much the sum exceeds it.
Status printKernelProfile(Executor &executor, const plan::Plan &p, int context, int prefillTokens,
                          double decodeStepMs, int batch = 1);

} // namespace ninfer
