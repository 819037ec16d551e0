// Ternary packing in the plan-builder layer (no MLIR pass: the bytes live in
// the weight store, the IR only learns the storage format through an
// attribute). Detection is exact (TernaryDetect), packing is a bit-pattern
// rewrite (sign bit -> 10, non-zero -> 01, zero -> 00), so a packed tensor
// dequantizes to the checkpoint's values bit for bit.
#include "TernaryPacking.h"

#include "TernaryDetect.h"

#include "ir/NinferDialect.h"
#include "ir/NinferOps.h"

#include "ninfer/TernaryFormat.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

namespace ninfer {
namespace {

llvm::Error makeError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

constexpr const char* kStorageTq2 = "tq2";

// Linear weight names in program order, with every weight op carrying each
// name. A name also read by something other than a linear's weight operand
// (e.g. an embedding table tied to a projection) is left out.
struct LinearWeights {
  std::vector<std::string> names;
  llvm::StringMap<std::vector<WeightOp>> ops;
};

LinearWeights collectLinearWeights(mlir::ModuleOp module) {
  LinearWeights result;
  llvm::StringMap<bool> onlyLinear;
  module.walk([&](WeightOp weight) {
    bool linearOnly = !weight.getOutput().use_empty();
    for (mlir::OpOperand& use : weight.getOutput().getUses())
      if (!mlir::isa<LinearOp>(use.getOwner()) || use.getOperandNumber() != 1)
        linearOnly = false;
    auto [it, added] = onlyLinear.try_emplace(weight.getName(), linearOnly);
    if (!added)
      it->second = it->second && linearOnly;
    result.ops[weight.getName()].push_back(weight);
    if (added)
      result.names.push_back(weight.getName().str());
  });
  std::vector<std::string> names;
  for (const std::string& name : result.names)
    if (onlyLinear[name])
      names.push_back(name);
  result.names = std::move(names);
  return result;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "x" : "") + std::to_string(shape[i]);
  return text;
}

// Why a linear weight is not packed (empty when it is packable).
std::string whyNotPackable(const TensorRef& ref, const TernaryInfo& info) {
  if (ref.shape.size() != 2)
    return "is not a matrix";
  if (info.kind == TernaryKind::NotTernary) {
    std::string count = std::to_string(info.distinctValues) + (info.distinctCapped ? "+" : "");
    return "is not ternary (" + count + " distinct values)";
  }
  if (info.kind == TernaryKind::PerRow)
    return "is ternary with one scale per row, but TQ2 holds one scale per tensor";
  if (!ternary::isPackableCols(ref.shape[1]))
    return "has " + std::to_string(ref.shape[1]) + " columns, TQ2 needs a multiple of " +
           std::to_string(ternary::kColsMultiple);
  return std::string();
}

void markTq2(std::vector<WeightOp>& ops) {
  for (WeightOp op : ops)
    op->setAttr(kStorageAttr, mlir::StringAttr::get(op->getContext(), kStorageTq2));
}

} // namespace

llvm::Expected<QuantMode> parseQuantMode(llvm::StringRef text) {
  if (text == "auto")
    return QuantMode::Auto;
  if (text == "none")
    return QuantMode::None;
  if (text == "ternary")
    return QuantMode::Ternary;
  return makeError("--quant expects auto, none or ternary, got '" + text + "'");
}

llvm::Error checkCheckpointQuantization(const std::string& modelDir) {
  llvm::SmallString<256> path(modelDir);
  llvm::sys::path::append(path, "config.json");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return llvm::Error::success(); // the config loader reports a missing config
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError()); // likewise for invalid JSON
    return llvm::Error::success();
  }
  const llvm::json::Object* top = json->getAsObject();
  const llvm::json::Object* quant = top ? top->getObject("quantization_config") : nullptr;
  if (!quant)
    return llvm::Error::success();
  std::optional<llvm::StringRef> method = quant->getString("quant_method");
  if (method && *method == "bitnet")
    return makeError(
        path + ": Hugging Face BitNet checkpoints (quantization_config.quant_method = \"bitnet\", "
               "uint8-packed weights + weight_scale) are not supported yet: their BitLinear "
               "layers also quantize activations to int8 per token, which ninfer's linear op "
               "does not model. Ternary checkpoints stored as plain bf16 {-s, 0, +s} weights are "
               "supported (--quant auto or ternary).");
  return llvm::Error::success();
}

llvm::Expected<std::vector<uint8_t>> packTernary(const TensorRef& ref, float scale) {
  const bool sixteen = ref.dtype == WeightDType::BF16 || ref.dtype == WeightDType::F16;
  if (ref.shape.size() != 2 || !ref.data || !(sixteen || ref.dtype == WeightDType::F32))
    return makeError("cannot pack '" + ref.name +
                     "' as TQ2: it must be a 2-D F32/F16/BF16 "
                     "tensor with bytes");
  const int64_t rows = ref.shape[0], cols = ref.shape[1];
  if (!ternary::isPackableCols(cols))
    return makeError("cannot pack '" + ref.name + "' as TQ2: " + llvm::Twine(cols) +
                     " columns is not a multiple of " + llvm::Twine(ternary::kColsMultiple));
  const int elementBytes = sixteen ? 2 : 4;
  const uint32_t signBit = sixteen ? 0x8000u : 0x80000000u;
  // The magnitude pattern every non-zero value must have.
  uint32_t expected = 0;
  if (ref.dtype == WeightDType::F32) {
    std::memcpy(&expected, &scale, 4);
  } else if (ref.dtype == WeightDType::BF16) {
    uint32_t bits;
    std::memcpy(&bits, &scale, 4);
    expected = bits >> 16;
    if ((expected << 16) != bits)
      return makeError("cannot pack '" + ref.name + "': scale is not a bf16 value");
  } else {
    // f16 scale: compare through the f32 value of each pattern instead.
    expected = 0;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(ternary::tensorBytes(rows, cols)), 0);
  const uint8_t* data = ref.data;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = bytes.data() + r * ternary::rowBytes(cols);
    for (int64_t w = 0; w < ternary::rowWords(cols); ++w) {
      uint32_t word = 0;
      for (int j = 0; j < ternary::kValuesPerWord; ++j) {
        const int64_t k = w * ternary::kValuesPerWord + j;
        const uint8_t* p = data + (r * cols + k) * elementBytes;
        uint32_t bits = 0;
        std::memcpy(&bits, p, elementBytes); // little-endian host, like the file
        const uint32_t magnitude = bits & ~signBit;
        if (magnitude == 0)
          continue;
        bool matches = magnitude == expected;
        if (ref.dtype == WeightDType::F16) {
          // Exact f16 -> f32 for normal values; subnormal scales are compared
          // through the same conversion the detector used (via the f32 scale).
          const uint32_t exponent = (magnitude >> 10) & 0x1Fu;
          float value = 0.0f;
          if (exponent != 0) {
            const uint32_t f = ((exponent + 112u) << 23) | ((magnitude & 0x3FFu) << 13);
            std::memcpy(&value, &f, 4);
          } else {
            value = static_cast<float>(magnitude) * 5.9604644775390625e-8f;
          }
          matches = value == scale;
        }
        if (!matches)
          return makeError("cannot pack '" + ref.name + "' as TQ2: value at [" + llvm::Twine(r) +
                           ", " + llvm::Twine(k) + "] is not in {-s, 0, +s}");
        word |= ((bits & signBit) ? ternary::kCodeMinus : ternary::kCodePlus) << (2 * j);
      }
      for (int b = 0; b < 4; ++b)
        row[w * 4 + b] = static_cast<uint8_t>(word >> (8 * b));
    }
  }
  ternary::writeScale(bytes.data(), rows, cols, scale);
  return bytes;
}

llvm::Error applyTernary(WeightStore& weights, mlir::ModuleOp module, QuantMode mode,
                         TernaryReport* report) {
  TernaryReport local;
  TernaryReport& out = report ? *report : local;
  out = TernaryReport();
  if (mode == QuantMode::None)
    return llvm::Error::success();
  LinearWeights linear = collectLinearWeights(module);

  if (weights.isDummy()) {
    // Dummy weights are not trained at all: auto keeps them as declared; ternary
    // declares every linear weight TQ2 so the plan has ternary shapes and speed.
    for (const std::string& name : linear.names) {
      const TensorRef* ref = weights.find(name);
      if (!ref)
        return makeError("weight '" + name + "' is not in the weight store");
      if (mode != QuantMode::Ternary) {
        out.kept.push_back(name + ": dummy weights are not ternary-trained (use --quant ternary)");
        continue;
      }
      if (ref->shape.size() != 2 || !ternary::isPackableCols(ref->shape[1]))
        return makeError("--quant ternary: '" + name + "' has shape " + shapeText(ref->shape) +
                         "; TQ2 needs a matrix with a multiple of " +
                         llvm::Twine(ternary::kColsMultiple) + " columns");
      const std::vector<int64_t> shape = ref->shape;
      out.bytesBefore += ref->bytes;
      out.values += ref->elements();
      const TensorRef& packed = weights.addDummy(name, WeightDType::TQ2, shape);
      out.bytesAfter += packed.bytes;
      ++out.packed;
      markTq2(linear.ops[name]);
    }
    return llvm::Error::success();
  }

  // Decide everything first, so a refusal leaves the store and module untouched.
  struct Choice {
    std::string name;
    float scale;
  };
  std::vector<Choice> toPack;
  for (const std::string& name : linear.names) {
    const TensorRef* ref = weights.find(name);
    if (!ref)
      return makeError("weight '" + name + "' is not in the weight store");
    const TernaryInfo info = detectTernary(*ref);
    const std::string why = whyNotPackable(*ref, info);
    if (why.empty()) {
      toPack.push_back({name, info.scale});
      continue;
    }
    if (mode == QuantMode::Ternary) {
      if (info.kind == TernaryKind::NotTernary)
        return makeError("--quant ternary: '" + name + "' " + why +
                         ": this model was not trained ternary and ternarizing it would "
                         "destroy it");
      return makeError("--quant ternary: '" + name + "' " + why);
    }
    out.kept.push_back(name + ": " + why);
  }
  for (const Choice& choice : toPack) {
    const TensorRef* ref = weights.find(choice.name);
    llvm::Expected<std::vector<uint8_t>> bytes = packTernary(*ref, choice.scale);
    if (!bytes)
      return bytes.takeError();
    out.bytesBefore += ref->bytes;
    out.values += ref->elements();
    const std::vector<int64_t> shape = ref->shape;
    const TensorRef& packed =
        weights.addOwned(choice.name, WeightDType::TQ2, shape, std::move(*bytes));
    out.bytesAfter += packed.bytes;
    ++out.packed;
    markTq2(linear.ops[choice.name]);
  }
  return llvm::Error::success();
}

} // namespace ninfer
