// Verifiers of the ninfer ops: the shape and dtype rules the plan builder and
// the kernels rely on. Messages name the operand and both sizes.
#include "ir/NinferOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;

namespace ninfer {
namespace {

// Row counts agree when equal or when either is dynamic (the token dimension).
bool rowsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

// Memory planning sizes every activation buffer from its width, so the width
// must be static.
LogicalResult verifyActivation(Operation* op, RankedTensorType type, StringRef what) {
  if (ShapedType::isDynamic(type.getDimSize(1)) || type.getDimSize(1) <= 0)
    return op->emitOpError() << what << " width must be static and positive, got " << type;
  return success();
}

LogicalResult verifyStaticShape(Operation* op, RankedTensorType type, StringRef what) {
  if (!type.hasStaticShape())
    return op->emitOpError() << what << " must have a static shape, got " << type;
  return success();
}

// Same rows and width as `reference` (the elementwise ops and in-place ops).
LogicalResult verifySameActivation(Operation* op, RankedTensorType value,
                                   RankedTensorType reference, StringRef what) {
  if (value.getDimSize(1) != reference.getDimSize(1) ||
      !rowsCompatible(value.getDimSize(0), reference.getDimSize(0)))
    return op->emitOpError() << what << " type " << value << " does not match " << reference;
  return success();
}

LogicalResult verifyPositive(Operation* op, IntegerAttr attr, StringRef name) {
  if (attr.getInt() <= 0)
    return op->emitOpError() << "'" << name << "' must be positive, got " << attr.getInt();
  return success();
}

} // namespace

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError("weight name must not be empty");
  return verifyStaticShape(*this, getOutput().getType(), "weight");
}

LogicalResult EmbeddingOp::verify() {
  auto tokens = getTokens().getType();
  auto table = getTable().getType();
  auto out = getOutput().getType();
  if (failed(verifyStaticShape(*this, table, "table")) ||
      failed(verifyActivation(*this, out, "result")))
    return failure();
  if (out.getDimSize(1) != table.getDimSize(1))
    return emitOpError() << "result width " << out.getDimSize(1) << " != table width "
                         << table.getDimSize(1);
  if (!rowsCompatible(out.getDimSize(0), tokens.getDimSize(0)))
    return emitOpError() << "result rows " << out.getDimSize(0) << " != token count "
                         << tokens.getDimSize(0);
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto in = getInput().getType();
  auto weight = getWeight().getType();
  if (failed(verifyActivation(*this, in, "input")) ||
      failed(verifyStaticShape(*this, weight, "weight")) ||
      failed(verifySameActivation(*this, getOutput().getType(), in, "result")))
    return failure();
  int64_t group = weight.getDimSize(0);
  if (group <= 0 || in.getDimSize(1) % group != 0)
    return emitOpError() << "input width " << in.getDimSize(1)
                         << " is not a multiple of the weight size " << group;
  if (getEpsAttr().getValueAsDouble() <= 0.0)
    return emitOpError("'eps' must be positive");
  return success();
}

LogicalResult LinearOp::verify() {
  auto in = getInput().getType();
  auto weight = getWeight().getType();
  auto out = getOutput().getType();
  if (failed(verifyActivation(*this, in, "input")) ||
      failed(verifyActivation(*this, out, "result")) ||
      failed(verifyStaticShape(*this, weight, "weight")))
    return failure();
  if (in.getDimSize(1) != weight.getDimSize(1))
    return emitOpError() << "input width " << in.getDimSize(1) << " != weight in_features (dim 1) "
                         << weight.getDimSize(1);
  if (out.getDimSize(1) != weight.getDimSize(0))
    return emitOpError() << "result width " << out.getDimSize(1)
                         << " != weight out_features (dim 0) " << weight.getDimSize(0);
  if (!rowsCompatible(in.getDimSize(0), out.getDimSize(0)))
    return emitOpError() << "result rows " << out.getDimSize(0) << " != input rows "
                         << in.getDimSize(0);
  if (auto bias = getBias()) {
    auto biasType = bias.getType();
    if (failed(verifyStaticShape(*this, biasType, "bias")))
      return failure();
    if (biasType.getDimSize(0) != weight.getDimSize(0))
      return emitOpError() << "bias size " << biasType.getDimSize(0) << " != out_features "
                           << weight.getDimSize(0);
  }
  return success();
}

LogicalResult RopeOp::verify() {
  auto in = getInput().getType();
  auto invFreq = getInvFreq().getType();
  if (failed(verifyActivation(*this, in, "input")) ||
      failed(verifySameActivation(*this, getOutput().getType(), in, "result")) ||
      failed(verifyPositive(*this, getHeadsAttr(), "heads")) ||
      failed(verifyPositive(*this, getHeadDimAttr(), "head_dim")) ||
      failed(verifyStaticShape(*this, invFreq, "inv_freq")))
    return failure();
  int64_t heads = getHeadsAttr().getInt(), headDim = getHeadDimAttr().getInt();
  if (headDim % 2 != 0)
    return emitOpError() << "head_dim must be even, got " << headDim;
  if (heads * headDim != in.getDimSize(1))
    return emitOpError() << "heads * head_dim = " << heads * headDim << " != input width "
                         << in.getDimSize(1);
  // head_dim values: LongRoPE's short and long tables.
  const bool longFactors = invFreq.getDimSize(0) == headDim;
  if (invFreq.getDimSize(0) != headDim / 2 && !longFactors)
    return emitOpError() << "inv_freq size " << invFreq.getDimSize(0)
                         << " is neither head_dim / 2 = " << headDim / 2
                         << " nor head_dim (LongRoPE's two tables)";
  if (longFactors && (getOriginalMaxPositionsAttr().getInt() <= 0 ||
                      getDynamicFactorAttr().getValueAsDouble() > 0.0))
    return emitOpError("LongRoPE's two tables need 'original_max_positions' > 0 and no dynamic "
                       "NTK scaling");
  if (getOriginalMaxPositionsAttr().getInt() < 0)
    return emitOpError("'original_max_positions' must not be negative");
  if (getDynamicFactorAttr().getValueAsDouble() > 0.0 &&
      getOriginalMaxPositionsAttr().getInt() <= 0)
    return emitOpError("dynamic NTK scaling needs 'original_max_positions' > 0");
  if (getThetaAttr().getValueAsDouble() <= 0.0)
    return emitOpError("'theta' must be positive");
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = getQ().getType(), k = getK().getType(), v = getV().getType();
  if (failed(verifyActivation(*this, q, "q")) ||
      failed(verifySameActivation(*this, getOutput().getType(), q, "result")) ||
      failed(verifyActivation(*this, k, "k")) || failed(verifySameActivation(*this, v, k, "v")) ||
      failed(verifyPositive(*this, getHeadsAttr(), "heads")) ||
      failed(verifyPositive(*this, getKvHeadsAttr(), "kv_heads")) ||
      failed(verifyPositive(*this, getHeadDimAttr(), "head_dim")))
    return failure();
  int64_t heads = getHeadsAttr().getInt(), kvHeads = getKvHeadsAttr().getInt();
  int64_t headDim = getHeadDimAttr().getInt();
  if (heads % kvHeads != 0)
    return emitOpError() << "kv_heads " << kvHeads << " does not divide heads " << heads;
  if (heads * headDim != q.getDimSize(1))
    return emitOpError() << "heads * head_dim = " << heads * headDim << " != q width "
                         << q.getDimSize(1);
  if (kvHeads * headDim != k.getDimSize(1))
    return emitOpError() << "kv_heads * head_dim = " << kvHeads * headDim << " != k width "
                         << k.getDimSize(1);
  if (!rowsCompatible(q.getDimSize(0), k.getDimSize(0)))
    return emitOpError() << "k rows " << k.getDimSize(0) << " != q rows " << q.getDimSize(0);
  if (getLayerAttr().getInt() < 0)
    return emitOpError("'layer' must not be negative");
  if (getWindowAttr().getInt() < 0)
    return emitOpError("'window' must not be negative (0 means full attention)");
  if (getScaleAttr().getValueAsDouble() <= 0.0)
    return emitOpError("'scale' must be positive");
  return success();
}

LogicalResult SwiGluOp::verify() {
  auto gate = getGate().getType();
  if (failed(verifyActivation(*this, gate, "gate")) ||
      failed(verifySameActivation(*this, getUp().getType(), gate, "up")) ||
      failed(verifySameActivation(*this, getOutput().getType(), gate, "result")))
    return failure();
  return success();
}

LogicalResult AddOp::verify() {
  auto lhs = getLhs().getType();
  if (failed(verifyActivation(*this, lhs, "lhs")) ||
      failed(verifySameActivation(*this, getRhs().getType(), lhs, "rhs")) ||
      failed(verifySameActivation(*this, getOutput().getType(), lhs, "result")))
    return failure();
  return success();
}

LogicalResult LmHeadOp::verify() {
  auto in = getInput().getType();
  auto weight = getWeight().getType();
  auto logits = getLogits().getType();
  if (failed(verifyActivation(*this, in, "input")) ||
      failed(verifyStaticShape(*this, weight, "weight")))
    return failure();
  if (in.getDimSize(1) != weight.getDimSize(1))
    return emitOpError() << "input width " << in.getDimSize(1) << " != weight dim 1 "
                         << weight.getDimSize(1);
  if (logits.getDimSize(0) != 1 || logits.getDimSize(1) != weight.getDimSize(0))
    return emitOpError() << "result must be tensor<1x" << weight.getDimSize(0)
                         << "xf32> (one row of vocab logits), got " << logits;
  return success();
}

LogicalResult SampleOp::verify() {
  auto logits = getLogits().getType();
  if (logits.getDimSize(0) != 1 || ShapedType::isDynamic(logits.getDimSize(1)))
    return emitOpError() << "logits must be one static row, got " << logits;
  if (getToken().getType().getDimSize(0) != 1)
    return emitOpError() << "result must be tensor<1xi32>, got " << getToken().getType();
  return success();
}

} // namespace ninfer

#define GET_OP_CLASSES
#include "ir/NinferOps.cpp.inc"
