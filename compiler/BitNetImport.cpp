// Hugging Face BitNet checkpoints -> ordinary ternary float tensors in the
// weight store (layout and semantics in BitNetImport.h).
#include "BitNetImport.h"

#include "JsonFile.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>

namespace ninfer {
namespace {

constexpr int kRowsPerByte = 4;
constexpr const char* kScaleSuffix = "_scale"; // "X.weight" -> "X.weight_scale"

// The single value of a weight_scale tensor, exactly in f32.
llvm::Expected<float> readScale(const TensorRef& ref) {
  if (ref.elements() != 1 || !ref.data)
    return compilerError("BitNet '" + ref.name + "' must hold one value, it holds " +
                         llvm::Twine(ref.elements()));
  uint32_t bits = 0;
  float value = 0.0f;
  switch (ref.dtype) {
  case WeightDType::F32:
    std::memcpy(&value, ref.data, 4);
    break;
  case WeightDType::BF16:
    bits = (static_cast<uint32_t>(ref.data[0]) | (static_cast<uint32_t>(ref.data[1]) << 8)) << 16;
    std::memcpy(&value, &bits, 4);
    break;
  case WeightDType::F16: {
    const uint16_t half = static_cast<uint16_t>(ref.data[0] | (ref.data[1] << 8));
    llvm::APFloat wide(llvm::APFloat::IEEEhalf(), llvm::APInt(16, half));
    bool lost = false;
    wide.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
    value = wide.convertToFloat();
    break;
  }
  default:
    return compilerError("BitNet '" + ref.name + "' is " + dtypeName(ref.dtype) +
                         ", expected F32, F16 or BF16");
  }
  if (!std::isfinite(value) || value <= 0.0f)
    return compilerError("BitNet '" + ref.name + "' is " + std::to_string(value) +
                         ", expected a positive finite scale");
  return value;
}

// `t` * s as row-major bytes of `dtype` (BF16 or F32; s exact in it).
std::vector<uint8_t> ternaryBytes(const std::vector<signed char>& t, float s, WeightDType dtype) {
  uint32_t sBits;
  std::memcpy(&sBits, &s, 4);
  const int size = dtype == WeightDType::BF16 ? 2 : 4;
  if (size == 2)
    sBits >>= 16;
  const uint32_t signBit = size == 2 ? 0x8000u : 0x80000000u;
  std::vector<uint8_t> bytes(t.size() * size, 0);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == 0)
      continue;
    const uint32_t bits = t[i] < 0 ? (sBits | signBit) : sBits;
    std::memcpy(bytes.data() + i * size, &bits, size); // little-endian, like safetensors
  }
  return bytes;
}

// Replaces packed weight `name` (with scale `scale`) in `weights`.
llvm::Error importOne(WeightStore& weights, const std::string& name, const TensorRef& packed,
                      float scale, bool divideScale) {
  if (packed.shape.size() != 2 || !packed.data)
    return compilerError("BitNet weight '" + name + "' must be a 2-D uint8 tensor [out / 4, in]");
  const int64_t packedRows = packed.shape[0], cols = packed.shape[1];
  std::vector<signed char> t = unpackBitNetRows(packed.data, packedRows, cols);
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] > 1)
      return compilerError("BitNet weight '" + name + "' has the unused code 3 at packed [" +
                           llvm::Twine(int64_t(i) / cols % packedRows) + ", " +
                           llvm::Twine(int64_t(i) % cols) + "]");
  const float s = divideScale ? 1.0f / scale : scale;
  uint32_t bits;
  std::memcpy(&bits, &s, 4);
  const WeightDType dtype = (bits & 0xFFFFu) == 0 ? WeightDType::BF16 : WeightDType::F32;
  weights.addOwned(name, dtype, {kRowsPerByte * packedRows, cols}, ternaryBytes(t, s, dtype));
  return llvm::Error::success();
}

} // namespace

std::vector<signed char> unpackBitNetRows(const uint8_t* packed, int64_t packedRows, int64_t cols) {
  std::vector<signed char> t(static_cast<size_t>(kRowsPerByte * packedRows * cols));
  for (int64_t p = 0; p < packedRows; ++p)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t byte = packed[p * cols + c];
      for (int i = 0; i < kRowsPerByte; ++i)
        t[static_cast<size_t>((i * packedRows + p) * cols + c)] =
            static_cast<signed char>(((byte >> (2 * i)) & 3) - 1);
    }
  return t;
}

llvm::Expected<BitNetImport> importBitNetWeights(const std::string& modelDir,
                                                 WeightStore& weights) {
  BitNetImport result;
  llvm::SmallString<256> path(modelDir);
  llvm::sys::path::append(path, "config.json");
  llvm::Expected<llvm::json::Value> json = readJsonFile(path.str().str());
  if (!json) {
    llvm::consumeError(json.takeError()); // the config loader reports it
    return result;
  }
  const llvm::json::Object* top = json->getAsObject();
  const llvm::json::Object* quant = top ? top->getObject("quantization_config") : nullptr;
  if (!quant || quant->getString("quant_method").value_or("") != "bitnet")
    return result;
  result.bitnet = true;
  const llvm::StringRef linearClass = quant->getString("linear_class").value_or("bitlinear");
  const llvm::StringRef mode = quant->getString("quantization_mode").value_or("offline");
  if (linearClass != "bitlinear" && linearClass != "autobitlinear")
    return compilerError(path + ": BitNet linear_class '" + linearClass +
                         "' is unknown (bitlinear or autobitlinear)");
  if (mode != "offline")
    return compilerError(path + ": BitNet quantization_mode '" + mode +
                         "' is not supported: only \"offline\" checkpoints hold ternary weights");
  if (quant->getBoolean("use_rms_norm").value_or(false))
    return compilerError(path + ": BitNet use_rms_norm (an RMSNorm inside every linear) is not "
                                "supported");
  result.divideScale = linearClass == "bitlinear";

  std::vector<std::string> names;
  for (const auto& [name, ref] : weights.tensors())
    if (ref.dtype == WeightDType::U8 && weights.find(name + kScaleSuffix))
      names.push_back(name);
  for (const std::string& name : names) {
    llvm::Expected<float> scale = readScale(*weights.find(name + kScaleSuffix));
    if (!scale)
      return scale.takeError();
    if (llvm::Error error =
            importOne(weights, name, *weights.find(name), *scale, result.divideScale))
      return error;
    ++result.unpacked;
  }
  if (result.unpacked == 0)
    return compilerError(path + ": a BitNet checkpoint without packed weights (uint8 'X.weight' "
                                "next to 'X.weight_scale')");
  return result;
}

} // namespace ninfer
