// Validating GGUF parser: every count, length and offset is checked against the
// bytes that are left before it is used, so a truncated or corrupt file ends in an
// error that says where, never in a bad read or a huge allocation.
#include "GgufFile.h"

#include <cstring>
#include <limits>
#include <set>

namespace ninfer {
namespace {

constexpr uint32_t kMaxDims = 4; // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;

// Metadata value types, as the GGUF specification numbers them.
enum ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12
};

int scalarBytes(uint32_t type) {
  switch (type) {
  case U8:
  case I8:
  case BOOL:
    return 1;
  case U16:
  case I16:
    return 2;
  case U32:
  case I32:
  case F32:
    return 4;
  case U64:
  case I64:
  case F64:
    return 8;
  default:
    return 0;
  }
}

class Reader {
public:
  Reader(llvm::StringRef file, const uint8_t* data, uint64_t size)
      : file_(file), data_(data), size_(size) {}

  uint64_t offset() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  llvm::Error error(const llvm::Twine& what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), file_ + ": " + what);
  }
  llvm::Error truncated(const llvm::Twine& what) const {
    return error("truncated at byte " + llvm::Twine(pos_) + " (" + what + "): the file is " +
                 llvm::Twine(size_) + " bytes");
  }

  template <typename T> llvm::Expected<T> read(const llvm::Twine& what) {
    if (left() < sizeof(T))
      return truncated(what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  llvm::Expected<std::string> readString(const llvm::Twine& what) {
    auto length = read<uint64_t>(what);
    if (!length)
      return length.takeError();
    if (*length > left())
      return error(what + ": a string of " + llvm::Twine(*length) + " bytes at byte " +
                   llvm::Twine(pos_) + " runs past the end of the file");
    std::string text(reinterpret_cast<const char*>(data_ + pos_), *length);
    pos_ += *length;
    return text;
  }
  // Reads one value of `type` into `out` (arrays of arrays are walked and kept as Other).
  llvm::Error readValue(uint32_t type, const std::string& key, GgufValue& out, int depth = 0);

private:
  struct Number {
    int64_t integer;
    double number;
  };
  llvm::Expected<Number> readNumber(uint32_t type, const std::string& key);

  llvm::StringRef file_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

llvm::Expected<Reader::Number> Reader::readNumber(uint32_t type, const std::string& key) {
  const std::string what = "value of '" + key + "'";
  // Integers exactly (a u64 above INT64_MAX wraps), floats as double.
  auto take = [&](auto tag) -> llvm::Expected<Number> {
    auto value = read<decltype(tag)>(what);
    if (!value)
      return value.takeError();
    return Number{static_cast<int64_t>(*value), static_cast<double>(*value)};
  };
  switch (type) {
  case U8:
  case BOOL:
    return take(uint8_t{});
  case I8:
    return take(int8_t{});
  case U16:
    return take(uint16_t{});
  case I16:
    return take(int16_t{});
  case U32:
    return take(uint32_t{});
  case I32:
    return take(int32_t{});
  case F32:
    return take(float{});
  case U64:
    return take(uint64_t{});
  case I64:
    return take(int64_t{});
  case F64:
    return take(double{});
  default:
    return error("metadata '" + key + "' has unknown value type " + llvm::Twine(type));
  }
}

llvm::Error Reader::readValue(uint32_t type, const std::string& key, GgufValue& out, int depth) {
  if (type == STRING) {
    auto text = readString("value of '" + key + "'");
    if (!text)
      return text.takeError();
    out.kind = GgufValue::Kind::String;
    out.text = std::move(*text);
    return llvm::Error::success();
  }
  if (type == ARRAY) {
    auto elementType = read<uint32_t>("array type of '" + key + "'");
    if (!elementType)
      return elementType.takeError();
    auto count = read<uint64_t>("array length of '" + key + "'");
    if (!count)
      return count.takeError();
    // Every element takes at least one byte (a string at least its 8-byte length).
    const uint64_t minBytes = *elementType == STRING  ? 8
                              : *elementType == ARRAY ? 12
                                                      : std::max(scalarBytes(*elementType), 1);
    if (*count > left() / minBytes)
      return error("metadata '" + key + "': an array of " + llvm::Twine(*count) +
                   " elements cannot fit in the " + llvm::Twine(left()) + " bytes left");
    if (*elementType == ARRAY) {
      if (depth > 4)
        return error("metadata '" + key + "': arrays nested too deeply");
      GgufValue ignored;
      for (uint64_t i = 0; i < *count; ++i)
        if (llvm::Error err = readValue(ARRAY, key, ignored, depth + 1))
          return err;
      out.kind = GgufValue::Kind::Other;
      return llvm::Error::success();
    }
    if (*elementType == STRING) {
      out.kind = GgufValue::Kind::StringArray;
      out.strings.reserve(*count);
      for (uint64_t i = 0; i < *count; ++i) {
        auto text = readString("element " + llvm::Twine(i) + " of '" + key + "'");
        if (!text)
          return text.takeError();
        out.strings.push_back(std::move(*text));
      }
      return llvm::Error::success();
    }
    if (scalarBytes(*elementType) == 0)
      return error("metadata '" + key + "' is an array of unknown type " +
                   llvm::Twine(*elementType));
    const bool floats = *elementType == F32 || *elementType == F64;
    out.kind = floats ? GgufValue::Kind::FloatArray : GgufValue::Kind::IntegerArray;
    (floats ? out.numbers.reserve(*count) : out.integers.reserve(*count));
    for (uint64_t i = 0; i < *count; ++i) {
      auto value = readNumber(*elementType, key);
      if (!value)
        return value.takeError();
      if (floats)
        out.numbers.push_back(value->number);
      else
        out.integers.push_back(value->integer);
    }
    return llvm::Error::success();
  }
  auto value = readNumber(type, key);
  if (!value)
    return value.takeError();
  out.kind = type == BOOL                 ? GgufValue::Kind::Bool
             : type == F32 || type == F64 ? GgufValue::Kind::Float
                                          : GgufValue::Kind::Integer;
  out.integer = value->integer;
  out.number = value->number;
  return llvm::Error::success();
}

} // namespace

GgmlTypeTraits ggmlTypeTraits(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
  case GgmlType::F32:
    return {"F32", 1, 4};
  case GgmlType::F16:
    return {"F16", 1, 2};
  case GgmlType::BF16:
    return {"BF16", 1, 2};
  case GgmlType::F64:
    return {"F64", 1, 8};
  case GgmlType::I8:
    return {"I8", 1, 1};
  case GgmlType::I16:
    return {"I16", 1, 2};
  case GgmlType::I32:
    return {"I32", 1, 4};
  case GgmlType::I64:
    return {"I64", 1, 8};
  case GgmlType::Q4_0:
    return {"Q4_0", 32, 18};
  case GgmlType::Q4_1:
    return {"Q4_1", 32, 20};
  case GgmlType::Q5_0:
    return {"Q5_0", 32, 22};
  case GgmlType::Q5_1:
    return {"Q5_1", 32, 24};
  case GgmlType::Q8_0:
    return {"Q8_0", 32, 34};
  case GgmlType::Q8_1:
    return {"Q8_1", 32, 36};
  case GgmlType::Q2_K:
    return {"Q2_K", 256, 84};
  case GgmlType::Q3_K:
    return {"Q3_K", 256, 110};
  case GgmlType::Q4_K:
    return {"Q4_K", 256, 144};
  case GgmlType::Q5_K:
    return {"Q5_K", 256, 176};
  case GgmlType::Q6_K:
    return {"Q6_K", 256, 210};
  case GgmlType::Q8_K:
    return {"Q8_K", 256, 292};
  case GgmlType::IQ2_XXS:
    return {"IQ2_XXS", 256, 66};
  case GgmlType::IQ2_XS:
    return {"IQ2_XS", 256, 74};
  case GgmlType::IQ3_XXS:
    return {"IQ3_XXS", 256, 98};
  case GgmlType::IQ1_S:
    return {"IQ1_S", 256, 50};
  case GgmlType::IQ4_NL:
    return {"IQ4_NL", 32, 18};
  case GgmlType::IQ3_S:
    return {"IQ3_S", 256, 110};
  case GgmlType::IQ2_S:
    return {"IQ2_S", 256, 82};
  case GgmlType::IQ4_XS:
    return {"IQ4_XS", 256, 136};
  case GgmlType::IQ1_M:
    return {"IQ1_M", 256, 56};
  case GgmlType::TQ1_0:
    return {"TQ1_0", 256, 54};
  case GgmlType::TQ2_0:
    return {"TQ2_0", 256, 66};
  case GgmlType::MXFP4:
    return {"MXFP4", 32, 17};
  }
  return {"unknown", 0, 0};
}

bool hasGgufMagic(const uint8_t* data, uint64_t size) {
  return size >= 4 && std::memcmp(data, "GGUF", 4) == 0;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

llvm::Expected<GgufFile> parseGguf(llvm::StringRef file, const uint8_t* data, uint64_t size) {
  Reader in(file, data, size);
  if (!hasGgufMagic(data, size))
    return in.error("not a GGUF file (it does not start with \"GGUF\")");
  (void)in.read<uint32_t>("magic");
  GgufFile gguf;
  auto version = in.read<uint32_t>("version");
  if (!version)
    return version.takeError();
  if (*version == 0x02000000u || *version == 0x03000000u)
    return in.error("a big-endian GGUF file; ninferc reads little-endian ones");
  if (*version != 2 && *version != 3)
    return in.error("GGUF version " + llvm::Twine(*version) +
                    " is not supported (versions 2 and 3 are)");
  gguf.version = *version;
  auto tensorCount = in.read<uint64_t>("tensor count");
  if (!tensorCount)
    return tensorCount.takeError();
  auto metadataCount = in.read<uint64_t>("metadata count");
  if (!metadataCount)
    return metadataCount.takeError();
  // A metadata entry takes at least 12 bytes, a tensor info at least 24.
  if (*metadataCount > in.left() / 12 || *tensorCount > in.left() / 24)
    return in.error("the header counts " + llvm::Twine(*tensorCount) + " tensors and " +
                    llvm::Twine(*metadataCount) + " metadata entries, more than the file holds");

  for (uint64_t i = 0; i < *metadataCount; ++i) {
    auto key = in.readString("metadata key " + llvm::Twine(i));
    if (!key)
      return key.takeError();
    auto type = in.read<uint32_t>("type of '" + *key + "'");
    if (!type)
      return type.takeError();
    GgufValue value;
    if (llvm::Error err = in.readValue(*type, *key, value))
      return err;
    if (!gguf.metadata.emplace(*key, std::move(value)).second)
      return in.error("metadata key '" + *key + "' appears twice");
  }

  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* value = gguf.find("general.alignment")) {
    if (value->kind != GgufValue::Kind::Integer || value->integer <= 0 ||
        (value->integer & (value->integer - 1)) != 0)
      return in.error("general.alignment must be a power of two");
    alignment = static_cast<uint64_t>(value->integer);
  }

  struct Info {
    uint64_t offset;
  };
  std::set<std::string> names;
  std::vector<Info> infos;
  gguf.tensors.reserve(*tensorCount);
  for (uint64_t i = 0; i < *tensorCount; ++i) {
    GgufTensor tensor;
    auto name = in.readString("tensor name " + llvm::Twine(i));
    if (!name)
      return name.takeError();
    tensor.name = std::move(*name);
    auto bad = [&](const llvm::Twine& what) {
      return in.error("tensor '" + tensor.name + "': " + what);
    };
    if (!names.insert(tensor.name).second)
      return bad("appears twice");
    auto dimCount = in.read<uint32_t>("dimensions of '" + tensor.name + "'");
    if (!dimCount)
      return dimCount.takeError();
    if (*dimCount == 0 || *dimCount > kMaxDims)
      return bad(llvm::Twine(*dimCount) + " dimensions (1 to 4 are allowed)");
    uint64_t elements = 1;
    for (uint32_t d = 0; d < *dimCount; ++d) {
      auto dim = in.read<uint64_t>("dimensions of '" + tensor.name + "'");
      if (!dim)
        return dim.takeError();
      if (*dim == 0 || *dim > (uint64_t(1) << 40) ||
          elements > std::numeric_limits<uint64_t>::max() / 256 / *dim)
        return bad("dimension " + llvm::Twine(*dim) + " is out of range");
      elements *= *dim;
      tensor.dims.push_back(static_cast<int64_t>(*dim));
    }
    auto type = in.read<uint32_t>("type of '" + tensor.name + "'");
    if (!type)
      return type.takeError();
    tensor.type = *type;
    const GgmlTypeTraits traits = ggmlTypeTraits(*type);
    if (traits.blockValues == 0)
      return bad("unknown ggml type " + llvm::Twine(*type));
    if (tensor.dims[0] % traits.blockValues != 0)
      return bad("its rows of " + llvm::Twine(tensor.dims[0]) + " values are not whole " +
                 traits.name + " blocks of " + llvm::Twine(traits.blockValues));
    tensor.bytes = elements / traits.blockValues * traits.blockBytes;
    auto offset = in.read<uint64_t>("offset of '" + tensor.name + "'");
    if (!offset)
      return offset.takeError();
    if (*offset % alignment != 0)
      return bad("offset " + llvm::Twine(*offset) + " is not a multiple of the alignment " +
                 llvm::Twine(alignment));
    infos.push_back({*offset});
    gguf.tensors.push_back(std::move(tensor));
  }

  const uint64_t dataStart = (in.offset() + alignment - 1) / alignment * alignment;
  if (dataStart > size && !gguf.tensors.empty())
    return in.truncated("the tensor data is missing");
  const uint64_t dataSize = dataStart <= size ? size - dataStart : 0;
  for (size_t i = 0; i < gguf.tensors.size(); ++i) {
    GgufTensor& tensor = gguf.tensors[i];
    if (infos[i].offset > dataSize || tensor.bytes > dataSize - infos[i].offset)
      return in.error("tensor '" + tensor.name + "' (" + llvm::Twine(tensor.bytes) +
                      " bytes at data offset " + llvm::Twine(infos[i].offset) +
                      ") runs past the end of the file: the data section has " +
                      llvm::Twine(dataSize) + " bytes");
    tensor.data = data + dataStart + infos[i].offset;
  }
  return gguf;
}

} // namespace ninfer
