// The ninfer dialect class (generated from NinferDialect.td).
#pragma once

#include "mlir/IR/Dialect.h"

#include "ir/NinferDialect.h.inc"

namespace ninfer {

// Discardable attributes memory planning adds and the plan builder reads.
inline constexpr const char* kArenaOffsetAttr = "ninfer.arena_offset";         // on the op, i64
inline constexpr const char* kActivationBytesAttr = "ninfer.activation_bytes"; // on the module
inline constexpr const char* kMaxStepTokensAttr = "ninfer.max_step_tokens";    // on the module
// On ninfer.weight: how the store holds the tensor when not in its IR element
// type; "tq2" = packed ternary (ninfer/TernaryFormat.h, compiler/TernaryPacking.h).
inline constexpr const char* kStorageAttr = "ninfer.storage";

} // namespace ninfer
