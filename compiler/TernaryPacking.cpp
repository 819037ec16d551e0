// Ternary packing in the plan-builder layer (no MLIR pass: the bytes live in
// the weight store, the IR only learns the storage format through an
// attribute). Detection is exact (TernaryDetect), packing is a bit-pattern
// rewrite (sign bit -> 10, non-zero -> 01, zero -> 00), so a packed tensor
// dequantizes to the checkpoint's values bit for bit.
#include "TernaryPacking.h"

#include "TernaryDetect.h"

#include "ir/NinferDialect.h"
#include "ir/NinferOps.h"

#include "ninfer/TernaryDType.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <cstring>

namespace ninfer {
namespace {

llvm::Error makeError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

int planDTypeOf(TernaryFormat format) {
  return format == TernaryFormat::TQ1 ? ternary::kPlanDTypeTq1 : ternary::kPlanDTypeTq2;
}

WeightDType weightDTypeOf(TernaryFormat format) {
  return format == TernaryFormat::TQ1 ? WeightDType::TQ1 : WeightDType::TQ2;
}

bool isPackableCols(TernaryFormat format, int64_t cols) {
  return ternary::isPackableColsOf(planDTypeOf(format), cols);
}

std::string colsRule(TernaryFormat format) {
  return std::string(ternaryFormatName(format)) + " needs a multiple of " +
         std::to_string(ternary::colsMultipleOf(planDTypeOf(format))) + " columns";
}

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
std::string whyNotPackable(const TensorRef& ref, const TernaryInfo& info, TernaryFormat format) {
  if (ref.shape.size() != 2)
    return "is not a matrix";
  if (info.kind == TernaryKind::NotTernary) {
    std::string count = std::to_string(info.distinctValues) + (info.distinctCapped ? "+" : "");
    return "is not ternary (" + count + " distinct values)";
  }
  if (info.kind == TernaryKind::PerRow)
    return std::string("is ternary with one scale per row, but ") + ternaryFormatName(format) +
           " holds one scale per tensor";
  if (!isPackableCols(format, ref.shape[1]))
    return "has " + std::to_string(ref.shape[1]) + " columns, " + colsRule(format);
  return std::string();
}

// The storage attribute names the store's dtype (the plan builder checks that).
void markStorage(std::vector<WeightOp>& ops, TernaryFormat format) {
  for (WeightOp op : ops)
    op->setAttr(kStorageAttr,
                mlir::StringAttr::get(op->getContext(),
                                      llvm::StringRef(ternaryFormatName(format)).lower()));
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

namespace {

// Reads row r of a 2-D F32/F16/BF16 tensor as t[k] in {-1, 0, +1}, comparing
// each non-zero magnitude with the scale's exact pattern.
class TernaryRowReader {
public:
  static llvm::Expected<TernaryRowReader> create(const TensorRef& ref, float scale,
                                                 const char* format) {
    const bool sixteen = ref.dtype == WeightDType::BF16 || ref.dtype == WeightDType::F16;
    if (ref.shape.size() != 2 || !ref.data || !(sixteen || ref.dtype == WeightDType::F32))
      return makeError(llvm::Twine("cannot pack '") + ref.name + "' as " + format +
                       ": it must be a 2-D F32/F16/BF16 tensor with bytes");
    TernaryRowReader reader(ref, scale, format);
    if (ref.dtype == WeightDType::BF16) {
      uint32_t bits;
      std::memcpy(&bits, &scale, 4);
      reader.expected_ = bits >> 16;
      if ((reader.expected_ << 16) != bits)
        return makeError("cannot pack '" + ref.name + "': scale is not a bf16 value");
    } else if (ref.dtype == WeightDType::F32) {
      std::memcpy(&reader.expected_, &scale, 4);
    }
    return reader;
  }

  llvm::Error read(int64_t r, signed char* t) const {
    const int64_t cols = ref_.shape[1];
    const int elementBytes = ref_.dtype == WeightDType::F32 ? 4 : 2;
    const uint32_t signBit = elementBytes == 2 ? 0x8000u : 0x80000000u;
    for (int64_t k = 0; k < cols; ++k) {
      uint32_t bits = 0;
      std::memcpy(&bits, ref_.data + (r * cols + k) * elementBytes, elementBytes); // little-endian
      const uint32_t magnitude = bits & ~signBit;
      t[k] = 0;
      if (magnitude == 0)
        continue;
      if (!matches(magnitude))
        return makeError(llvm::Twine("cannot pack '") + ref_.name + "' as " + format_ +
                         ": value at [" + llvm::Twine(r) + ", " + llvm::Twine(k) +
                         "] is not in {-s, 0, +s}");
      t[k] = (bits & signBit) ? -1 : 1;
    }
    return llvm::Error::success();
  }

private:
  TernaryRowReader(const TensorRef& ref, float scale, const char* format)
      : ref_(ref), scale_(scale), format_(format) {}

  bool matches(uint32_t magnitude) const {
    if (ref_.dtype != WeightDType::F16)
      return magnitude == expected_;
    // f16: compare the exact f32 value of the pattern with the f32 scale.
    const uint32_t exponent = (magnitude >> 10) & 0x1Fu;
    float value = 0.0f;
    if (exponent != 0) {
      const uint32_t f = ((exponent + 112u) << 23) | ((magnitude & 0x3FFu) << 13);
      std::memcpy(&value, &f, 4);
    } else {
      value = static_cast<float>(magnitude) * 5.9604644775390625e-8f; // 2^-24
    }
    return value == scale_;
  }

  const TensorRef& ref_;
  float scale_;
  const char* format_;
  uint32_t expected_ = 0; // the magnitude pattern of the scale (F32, BF16)
};

} // namespace

llvm::Expected<std::vector<uint8_t>> packTernary(const TensorRef& ref, float scale,
                                                 TernaryFormat format) {
  const char* name = ternaryFormatName(format);
  llvm::Expected<TernaryRowReader> reader = TernaryRowReader::create(ref, scale, name);
  if (!reader)
    return reader.takeError();
  const int64_t rows = ref.shape[0], cols = ref.shape[1];
  const bool tq1 = format == TernaryFormat::TQ1;
  if (!isPackableCols(format, cols))
    return makeError("cannot pack '" + ref.name + "': it has " + llvm::Twine(cols) + " columns, " +
                     colsRule(format));
  std::vector<uint8_t> bytes(
      static_cast<size_t>(ternary::tensorBytesOf(planDTypeOf(format), rows, cols)), 0);
  std::vector<signed char> t(static_cast<size_t>(cols));
  std::vector<uint32_t> words(tq1 ? 0 : static_cast<size_t>(ternary::rowWords(cols)));
  for (int64_t r = 0; r < rows; ++r) {
    if (llvm::Error error = reader->read(r, t.data()))
      return error;
    if (tq1) {
      tq1::packRow(t.data(), cols, bytes.data() + r * tq1::rowBytes(cols));
    } else {
      ternary::packRow(t.data(), cols, words.data());
      std::memcpy(bytes.data() + r * ternary::rowBytes(cols), words.data(),
                  static_cast<size_t>(ternary::rowBytes(cols))); // little-endian, like the file
    }
  }
  if (tq1)
    tq1::writeScale(bytes.data(), rows, cols, scale);
  else
    ternary::writeScale(bytes.data(), rows, cols, scale);
  return bytes;
}

llvm::Expected<TernaryFormat> parseTernaryFormat(llvm::StringRef text) {
  if (text == "tq1")
    return TernaryFormat::TQ1;
  if (text == "tq2")
    return TernaryFormat::TQ2;
  return makeError("--ternary-format expects tq1 or tq2, got '" + text + "'");
}

const char* ternaryFormatName(TernaryFormat format) {
  return format == TernaryFormat::TQ1 ? "TQ1" : "TQ2";
}

llvm::Error applyTernary(WeightStore& weights, mlir::ModuleOp module, QuantMode mode,
                         TernaryFormat format, TernaryReport* report) {
  TernaryReport local;
  TernaryReport& out = report ? *report : local;
  out = TernaryReport();
  if (mode == QuantMode::None)
    return llvm::Error::success();
  LinearWeights linear = collectLinearWeights(module);

  if (weights.isDummy()) {
    // Dummy weights are not trained at all: auto keeps them as declared; ternary
    // declares every linear weight ternary so the plan has ternary shapes and speed.
    for (const std::string& name : linear.names) {
      const TensorRef* ref = weights.find(name);
      if (!ref)
        return makeError("weight '" + name + "' is not in the weight store");
      if (mode != QuantMode::Ternary) {
        out.kept.push_back(name + ": dummy weights are not ternary-trained (use --quant ternary)");
        continue;
      }
      if (ref->shape.size() != 2 || !isPackableCols(format, ref->shape[1]))
        return makeError("--quant ternary: '" + name + "' has shape " + shapeText(ref->shape) +
                         "; " + colsRule(format) + " (and a matrix)");
      const std::vector<int64_t> shape = ref->shape;
      out.bytesBefore += ref->bytes;
      out.values += ref->elements();
      const TensorRef& packed = weights.addDummy(name, weightDTypeOf(format), shape);
      out.bytesAfter += packed.bytes;
      ++out.packed;
      markStorage(linear.ops[name], format);
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
    const std::string why = whyNotPackable(*ref, info, format);
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
    llvm::Expected<std::vector<uint8_t>> bytes = packTernary(*ref, choice.scale, format);
    if (!bytes)
      return bytes.takeError();
    out.bytesBefore += ref->bytes;
    out.values += ref->elements();
    const std::vector<int64_t> shape = ref->shape;
    const TensorRef& packed =
        weights.addOwned(choice.name, weightDTypeOf(format), shape, std::move(*bytes));
    out.bytesAfter += packed.bytes;
    ++out.packed;
    markStorage(linear.ops[choice.name], format);
  }
  return llvm::Error::success();
}

} // namespace ninfer
