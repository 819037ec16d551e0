// The ninfer ops (generated from NinferOps.td) and the side-effect resource
// that attention writes.
#pragma once

#include "ir/NinferDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace ninfer {

// The KV caches: attention reads and appends to them, which orders attention
// ops and keeps them alive even though their tensor results look pure.
struct KvCacheResource : public mlir::SideEffects::Resource::Base<KvCacheResource> {
  llvm::StringRef getName() final { return "ninfer.kv_cache"; }
};

} // namespace ninfer

#define GET_OP_CLASSES
#include "ir/NinferOps.h.inc"
