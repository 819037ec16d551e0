#include "PlanFusion.h"

#include <vector>

namespace ninfer {
namespace {

bool overlaps(const plan::BufferT &a, const plan::BufferT &b) {
  if (&a == &b)
    return true;
  if (a.kind != b.kind || a.size_bytes == 0 || b.size_bytes == 0)
    return false;
  // Tokens and logits are separate allocations; arenas share an address space per kind.
  if (a.kind == plan::BufferKind::Tokens || a.kind == plan::BufferKind::Logits)
    return false;
  return a.offset < b.offset + b.size_bytes && b.offset < a.offset + a.size_bytes;
}

bool sameStart(const plan::BufferT &a, const plan::BufferT &b) {
  return &a == &b || (a.kind == b.kind && a.offset == b.offset);
}

// How many op inputs name each buffer.
std::vector<int> readerCounts(const plan::PlanT &plan) {
  std::vector<int> readers(plan.buffers.size(), 0);
  for (const auto &op : plan.ops)
    for (uint32_t input : op->inputs)
      if (input < readers.size())
        ++readers[input];
  return readers;
}

} // namespace

int fuseResidualAdds(plan::PlanT &plan) {
  int fused = 0;
  const std::vector<int> readers = readerCounts(plan);
  std::vector<std::unique_ptr<plan::OpT>> kept;
  kept.reserve(plan.ops.size());
  for (auto &op : plan.ops) {
    plan::OpT *linearOp = kept.empty() ? nullptr : kept.back().get();
    plan::LinearAttrsT *linear =
        linearOp ? linearOp->attrs.AsLinearAttrs() : nullptr; // null unless a Linear
    const bool candidate = op->attrs.type == plan::OpAttrs::AddAttrs && linear &&
                           !linear->last_row_only && !linear->residual &&
                           op->inputs.size() == 2 && op->outputs.size() == 1 &&
                           linearOp->outputs.size() == 1;
    if (candidate) {
      const uint32_t produced = linearOp->outputs[0];
      const int side = op->inputs[0] == produced ? 0 : op->inputs[1] == produced ? 1 : -1;
      const uint32_t residual = side < 0 ? 0 : op->inputs[1 - side];
      const uint32_t output = op->outputs[0];
      const auto &buffers = plan.buffers;
      const bool safe =
          side >= 0 && residual != produced && readers[produced] == 1 &&
          produced != plan.logits_buffer &&
          !overlaps(*buffers[output], *buffers[linearOp->inputs[0]]) &&
          (!overlaps(*buffers[output], *buffers[residual]) ||
           sameStart(*buffers[output], *buffers[residual]));
      if (safe) {
        linearOp->inputs.push_back(residual);
        linearOp->outputs[0] = output;
        linear->residual = true;
        ++fused;
        continue; // the add is gone
      }
    }
    kept.push_back(std::move(op));
  }
  plan.ops = std::move(kept);
  return fused;
}

} // namespace ninfer
