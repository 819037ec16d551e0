// Validating parser for safetensors headers. Nothing in the file is trusted:
// lengths, offsets, dtypes and shapes are all checked before a TensorRef is
// handed out, so a corrupt checkpoint ends in an error, never a bad read.
#include "Safetensors.h"

#include "llvm/Support/JSON.h"

#include <limits>
#include <optional>

namespace ninfer {
namespace {

llvm::Error makeError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::optional<WeightDType> parseDType(llvm::StringRef name) {
  if (name == "F32")
    return WeightDType::F32;
  if (name == "F16")
    return WeightDType::F16;
  if (name == "BF16")
    return WeightDType::BF16;
  if (name == "I32")
    return WeightDType::I32;
  if (name == "U8")
    return WeightDType::U8;
  return std::nullopt;
}

std::optional<uint64_t> nonNegative(const llvm::json::Value& value) {
  std::optional<int64_t> number = value.getAsInteger();
  if (!number || *number < 0)
    return std::nullopt;
  return static_cast<uint64_t>(*number);
}

} // namespace

llvm::Expected<std::vector<TensorRef>> parseSafetensors(llvm::StringRef file, const uint8_t* data,
                                                        uint64_t size) {
  if (size < 8)
    return makeError(file + ": not a safetensors file: shorter than 8 bytes (" + llvm::Twine(size) +
                     " bytes)");
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i)
    headerLength = (headerLength << 8) | data[i];
  if (headerLength > size - 8)
    return makeError(file + ": safetensors header length " + llvm::Twine(headerLength) +
                     " exceeds the file size (" + llvm::Twine(size) + " bytes)");

  llvm::StringRef headerText(reinterpret_cast<const char*>(data + 8), headerLength);
  llvm::Expected<llvm::json::Value> header = llvm::json::parse(headerText);
  if (!header)
    return makeError(
        file + ": safetensors header is not valid JSON: " + llvm::toString(header.takeError()));
  const llvm::json::Object* table = header->getAsObject();
  if (!table)
    return makeError(file + ": safetensors header is not a JSON object");

  const uint8_t* dataStart = data + 8 + headerLength;
  const uint64_t dataSize = size - 8 - headerLength;
  std::vector<TensorRef> tensors;
  tensors.reserve(table->size());
  for (const auto& entry : *table) {
    llvm::StringRef name = entry.first;
    if (name == "__metadata__")
      continue;
    auto bad = [&](const llvm::Twine& what) {
      return makeError(file + ": tensor '" + name + "': " + what);
    };
    const llvm::json::Object* info = entry.second.getAsObject();
    if (!info)
      return bad("entry is not a JSON object");

    const llvm::json::Value* dtypeValue = info->get("dtype");
    std::optional<llvm::StringRef> dtypeName =
        dtypeValue ? dtypeValue->getAsString() : std::nullopt;
    if (!dtypeName)
      return bad("missing or non-string 'dtype'");
    std::optional<WeightDType> dtype = parseDType(*dtypeName);
    if (!dtype)
      return bad("unsupported dtype '" + *dtypeName + "' (supported: F32, F16, BF16, I32, U8)");

    const llvm::json::Array* shapeArray = info->getArray("shape");
    if (!shapeArray)
      return bad("missing or non-list 'shape'");
    TensorRef ref;
    ref.name = name.str();
    ref.dtype = *dtype;
    uint64_t elements = 1;
    for (const llvm::json::Value& dimValue : *shapeArray) {
      std::optional<uint64_t> dim = nonNegative(dimValue);
      if (!dim)
        return bad("'shape' must hold non-negative integers");
      // Checked so that a huge shape cannot wrap around to a small byte count.
      if (*dim != 0 && elements > std::numeric_limits<uint64_t>::max() / 16 / *dim)
        return bad("shape is too large");
      elements *= *dim;
      ref.shape.push_back(static_cast<int64_t>(*dim));
    }

    const llvm::json::Array* offsets = info->getArray("data_offsets");
    std::optional<uint64_t> begin, end;
    if (offsets && offsets->size() == 2) {
      begin = nonNegative((*offsets)[0]);
      end = nonNegative((*offsets)[1]);
    }
    if (!begin || !end)
      return bad("'data_offsets' must be two non-negative integers");
    if (*begin > *end || *end > dataSize)
      return bad("data_offsets [" + llvm::Twine(*begin) + ", " + llvm::Twine(*end) +
                 "] are outside the data section (" + llvm::Twine(dataSize) + " bytes)");
    const uint64_t expectedBytes = elements * dtypeSize(*dtype);
    if (*end - *begin != expectedBytes)
      return bad("data_offsets span " + llvm::Twine(*end - *begin) + " bytes but dtype " +
                 *dtypeName + " and the shape need " + llvm::Twine(expectedBytes));
    ref.data = dataStart + *begin;
    ref.bytes = expectedBytes;
    tensors.push_back(std::move(ref));
  }
  return tensors;
}

} // namespace ninfer
