// ninfer-opt: mlir-opt for the ninfer dialect. Parses, verifies and runs ninfer
// passes on textual IR; the lit tests drive the dialect and passes through it.
#include "ir/NinferDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<ninfer::NinferDialect, mlir::func::FuncDialect>();
  ninfer::registerNinferPassesAndPipelines();
  // The generic passes the pipeline uses, for experimenting with the order.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "ninfer optimizer driver\n", registry));
}
