/* ninfer-plan-memory: activation arena layout by liveness.
 *
 * The runtime allocates one activation arena per plan and every activation
 * buffer lives at a fixed offset in it, sized for the largest step
 * (max_step_tokens rows). Giving each value its own buffer would make the
 * arena grow with the layer count; a transformer step only has a handful of
 * values alive at any point, so reusing dead slots keeps the arena at a few
 * buffers whatever the depth.
 *
 * The program is one straight-line block, so liveness is simple: a value is
 * live from its defining op to its last user. Walking the ops in order, each
 * result gets the lowest free gap that fits (first fit over live slots), and
 * operands dying at an op are released only after its results are placed,
 * because a kernel reads its inputs while writing its output. The exception
 * is the elementwise-per-row ops (rope, add, rms_norm), whose kernels are
 * written to work in place: when operand 0 dies there, the result takes over
 * its slot, which saves a buffer and a round trip through memory.
 */
#include "passes/Passes.h"

#include "ir/NinferOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <map>

namespace ninfer {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
} // namespace ninfer

using namespace mlir;

namespace ninfer {

bool producesActivation(Operation* op) {
  return isa<EmbeddingOp, RmsNormOp, LinearOp, RopeOp, AttentionOp, SwiGluOp, AddOp>(op);
}

namespace {

// The largest max-step-tokens accepted: keeps every size computation far from
// int64 overflow for any realistic width.
constexpr int64_t kMaxStepTokensLimit = 1 << 20;

int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// First-fit allocator over the arena; slots never move once placed.
class Arena {
public:
  int64_t allocate(int64_t size) {
    int64_t cursor = 0;
    for (auto [offset, slotSize] : live_) {
      if (offset - cursor >= size)
        break;
      cursor = std::max(cursor, offset + slotSize);
    }
    live_[cursor] = size;
    end_ = std::max(end_, cursor + size);
    return cursor;
  }
  void release(int64_t offset) { live_.erase(offset); }
  int64_t end() const { return end_; }

private:
  std::map<int64_t, int64_t> live_; // offset -> size, ordered by offset
  int64_t end_ = 0;
};

bool mayWriteInPlace(Operation* op) { return isa<RopeOp, AddOp, RmsNormOp>(op); }

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  using impl::PlanMemoryBase<PlanMemoryPass>::PlanMemoryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t stepTokens = maxStepTokens;
    if (stepTokens <= 0 || stepTokens > kMaxStepTokensLimit) {
      module.emitError() << "max-step-tokens must be in [1, " << kMaxStepTokensLimit << "], got "
                         << stepTokens;
      return signalPassFailure();
    }
    int64_t arenaBytes = 0;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FailureOr<int64_t> bytes = planFunction(func);
      if (failed(bytes))
        return signalPassFailure();
      arenaBytes = std::max(arenaBytes, *bytes);
    }
    Builder builder(module.getContext());
    module->setAttr(kActivationBytesAttr, builder.getI64IntegerAttr(arenaBytes));
    module->setAttr(kMaxStepTokensAttr, builder.getI64IntegerAttr(maxStepTokens));
  }

  FailureOr<int64_t> planFunction(func::FuncOp func) {
    if (!func.getBody().hasOneBlock()) {
      func.emitError("ninfer-plan-memory expects a single-block function");
      return failure();
    }
    Block& block = func.getBody().front();

    // Index of the last op in the block that reads each activation value.
    llvm::DenseMap<Operation*, int64_t> index;
    int64_t position = 0;
    for (Operation& op : block)
      index[&op] = position++;
    llvm::DenseMap<Value, int64_t> lastUse;
    for (Operation& op : block) {
      if (!producesActivation(&op))
        continue;
      Value value = op.getResult(0);
      int64_t last = index[&op];
      for (Operation* user : value.getUsers())
        if (Operation* inBlock = block.findAncestorOpInBlock(*user))
          last = std::max(last, index[inBlock]);
      lastUse[value] = last;
    }

    Builder builder(func.getContext());
    Arena arena;
    llvm::DenseMap<Value, int64_t> slot; // values that own a live slot
    for (Operation& op : block) {
      int64_t at = index[&op];
      Value inherited;
      if (producesActivation(&op)) {
        Value result = op.getResult(0);
        int64_t width = cast<RankedTensorType>(result.getType()).getDimSize(1);
        int64_t bytes = alignTo(maxStepTokens * width * 4, kActivationAlignment);
        int64_t offset;
        Value source = op.getNumOperands() > 0 ? op.getOperand(0) : Value();
        if (mayWriteInPlace(&op) && slot.count(source) && lastUse[source] == at &&
            source.getType() == result.getType()) {
          offset = slot[source];
          slot.erase(source);
          inherited = source;
        } else {
          offset = arena.allocate(bytes);
        }
        slot[result] = offset;
        op.setAttr(kArenaOffsetAttr, builder.getI64IntegerAttr(offset));
      }
      // Release after the results are placed: the op still reads its inputs.
      for (Value operand : op.getOperands()) {
        if (operand == inherited || !slot.count(operand) || lastUse[operand] != at)
          continue;
        arena.release(slot[operand]);
        slot.erase(operand);
      }
      // A result nobody reads still needs somewhere to be written.
      if (producesActivation(&op) && lastUse[op.getResult(0)] == at) {
        arena.release(slot[op.getResult(0)]);
        slot.erase(op.getResult(0));
      }
    }
    return arena.end();
  }
};

} // namespace
} // namespace ninfer
