// Builds the ninfer dialect program of one model step from a ModelConfig,
// checking every referenced tensor's shape and dtype against the weight store.
#pragma once

#include "ModelConfig.h"
#include "WeightStore.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace ninfer {

// For a dummy store the importer declares every tensor it needs (f16) instead
// of looking it up. Also adds the RoPE inv_freq table to the store.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(mlir::MLIRContext& context, const ModelConfig& config, WeightStore& weights);

} // namespace ninfer
