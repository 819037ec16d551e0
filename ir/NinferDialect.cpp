// Registers the ninfer ops with the dialect.
#include "ir/NinferDialect.h"
#include "ir/NinferOps.h"

#include "ir/NinferDialect.cpp.inc"

namespace ninfer {

void NinferDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/NinferOps.cpp.inc"
      >();
}

} // namespace ninfer
