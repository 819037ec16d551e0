// The weight store: memory-maps the checkpoint's safetensors files (single file
// or sharded with an index) so tensors are read in place, and holds the few
// tensors the compiler creates itself.
#include "WeightStore.h"

#include "MappedFile.h"
#include "Safetensors.h"

#include "ninfer/QuantFormats.h"
#include "ninfer/TernaryDType.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace ninfer {
namespace {

llvm::Error makeError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string joinPath(const std::string& dir, llvm::StringRef name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace

size_t dtypeSize(WeightDType dtype) {
  switch (dtype) {
  case WeightDType::F32:
  case WeightDType::I32:
    return 4;
  case WeightDType::F16:
  case WeightDType::BF16:
    return 2;
  case WeightDType::U8:
    return 1;
  case WeightDType::TQ2:
  case WeightDType::TQ1:
    return 0;
  default: // group-quantized: not element-sized
    return 0;
  }
}

// Two runs of the enum: ids 0..11 from Q8G32, the later ones from Q6G32.
constexpr int kFirstRunFormats = static_cast<int>(quant::QuantFormatId::Q6G32);

int quantFormatOf(WeightDType dtype) {
  const int first = static_cast<int>(dtype) - static_cast<int>(WeightDType::Q8G32);
  if (first >= 0 && first < kFirstRunFormats)
    return first;
  const int second = static_cast<int>(dtype) - static_cast<int>(WeightDType::Q6G32);
  return second >= 0 && kFirstRunFormats + second < quant::kQuantFormatCount
             ? kFirstRunFormats + second
             : -1;
}

WeightDType weightDTypeOfQuantFormat(int formatId) {
  return formatId < kFirstRunFormats
             ? static_cast<WeightDType>(static_cast<int>(WeightDType::Q8G32) + formatId)
             : static_cast<WeightDType>(static_cast<int>(WeightDType::Q6G32) + formatId -
                                        kFirstRunFormats);
}

uint64_t tensorBytes(WeightDType dtype, const std::vector<int64_t>& shape) {
  if (const int format = quantFormatOf(dtype); format >= 0) {
    const auto traits = quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format));
    return shape.size() == 2 ? static_cast<uint64_t>(quant::quantTensorBytes(
                                   traits.bits, traits.groupSize, shape[0], shape[1]))
                             : 0;
  }
  uint64_t elements = 1;
  for (int64_t dim : shape)
    elements *= static_cast<uint64_t>(dim);
  if (dtype == WeightDType::TQ2 || dtype == WeightDType::TQ1) {
    const int planDType =
        dtype == WeightDType::TQ1 ? ternary::kPlanDTypeTq1 : ternary::kPlanDTypeTq2;
    return shape.size() == 2
               ? static_cast<uint64_t>(ternary::tensorBytesOf(planDType, shape[0], shape[1]))
               : 0;
  }
  return elements * dtypeSize(dtype);
}

const char* dtypeName(WeightDType dtype) {
  if (const int format = quantFormatOf(dtype); format >= 0)
    return quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format)).name;
  switch (dtype) {
  case WeightDType::F32:
    return "F32";
  case WeightDType::F16:
    return "F16";
  case WeightDType::BF16:
    return "BF16";
  case WeightDType::I32:
    return "I32";
  case WeightDType::TQ2:
    return "TQ2";
  case WeightDType::TQ1:
    return "TQ1";
  case WeightDType::U8:
    return "U8";
  default:
    break;
  }
  return "?";
}

uint64_t TensorRef::elements() const {
  uint64_t count = 1;
  for (int64_t dim : shape)
    count *= static_cast<uint64_t>(dim);
  return count;
}

WeightStore::~WeightStore() = default;

std::unique_ptr<WeightStore> WeightStore::createEmpty() {
  return std::unique_ptr<WeightStore>(new WeightStore());
}

std::unique_ptr<WeightStore> WeightStore::createDummy() {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dummy_ = true;
  return store;
}

llvm::Expected<std::unique_ptr<WeightStore>> WeightStore::openCheckpoint(const std::string& dir) {
  if (!llvm::sys::fs::is_directory(dir))
    return makeError("checkpoint directory " + dir + " does not exist");
  std::unique_ptr<WeightStore> store(new WeightStore());

  // Maps one safetensors file and adds its tensors; returns their names.
  auto addFile = [&](const std::string& path) -> llvm::Expected<std::set<std::string>> {
    llvm::Expected<std::shared_ptr<const MappedFile>> mapping = MappedFile::open(path);
    if (!mapping)
      return mapping.takeError();
    llvm::Expected<std::vector<TensorRef>> tensors =
        parseSafetensors(path, (*mapping)->data(), (*mapping)->size());
    if (!tensors)
      return tensors.takeError();
    std::set<std::string> names;
    for (TensorRef& ref : *tensors) {
      if (store->tensors_.count(ref.name))
        return makeError(path + ": tensor '" + ref.name + "' appears in more than one file");
      names.insert(ref.name);
      std::string name = ref.name;
      store->tensors_.emplace(std::move(name), std::move(ref));
    }
    store->mappings_.push_back(std::move(*mapping));
    return names;
  };

  const std::string single = joinPath(dir, "model.safetensors");
  const std::string indexPath = joinPath(dir, "model.safetensors.index.json");
  if (llvm::sys::fs::exists(single)) {
    llvm::Expected<std::set<std::string>> names = addFile(single);
    if (!names)
      return names.takeError();
    return store;
  }
  if (!llvm::sys::fs::exists(indexPath))
    return makeError("no model.safetensors or model.safetensors.index.json in " + dir);

  auto indexBuffer = llvm::MemoryBuffer::getFile(indexPath, /*IsText=*/true);
  if (!indexBuffer)
    return makeError("cannot read " + indexPath + ": " + indexBuffer.getError().message());
  llvm::Expected<llvm::json::Value> index = llvm::json::parse((*indexBuffer)->getBuffer());
  if (!index)
    return makeError(indexPath + ": invalid JSON: " + llvm::toString(index.takeError()));
  const llvm::json::Object* top = index->getAsObject();
  const llvm::json::Object* weightMap = top ? top->getObject("weight_map") : nullptr;
  if (!weightMap)
    return makeError(indexPath + ": missing 'weight_map' object");

  // Shard name -> tensors the index says it holds, in a stable order.
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& entry : *weightMap) {
    std::optional<llvm::StringRef> shard = entry.second.getAsString();
    if (!shard || shard->empty())
      return makeError(indexPath + ": weight_map entry '" + llvm::StringRef(entry.first) +
                       "' must name a shard file");
    // Shards live next to the index; a path would let a checkpoint read elsewhere.
    if (shard->contains('/') || shard->contains('\\') || *shard == "." || *shard == "..")
      return makeError(indexPath + ": shard name '" + *shard + "' for tensor '" +
                       llvm::StringRef(entry.first) +
                       "' must be a file name in the checkpoint directory");
    shards[shard->str()].push_back(entry.first.str());
  }
  if (shards.empty())
    return makeError(indexPath + ": 'weight_map' is empty");
  for (const auto& [shard, expected] : shards) {
    const std::string path = joinPath(dir, shard);
    llvm::Expected<std::set<std::string>> names = addFile(path);
    if (!names)
      return names.takeError();
    for (const std::string& name : expected)
      if (!names->count(name))
        return makeError(indexPath + ": tensor '" + name + "' is mapped to " + shard +
                         " but that file does not contain it");
  }
  return store;
}

const TensorRef* WeightStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

llvm::Expected<const TensorRef*> WeightStore::get(const std::string& name,
                                                  const std::vector<int64_t>& shape) const {
  const TensorRef* ref = find(name);
  if (!ref)
    return makeError("tensor '" + name + "' (expected shape " + shapeString(shape) +
                     ") is missing from the checkpoint");
  if (ref->shape != shape)
    return makeError("tensor '" + name + "' has shape " + shapeString(ref->shape) + ", expected " +
                     shapeString(shape));
  if (ref->dtype == WeightDType::I32)
    return makeError("tensor '" + name +
                     "' has dtype I32, expected a floating-point dtype "
                     "(F32, F16 or BF16)");
  return ref;
}

const TensorRef& WeightStore::addOwned(const std::string& name, WeightDType dtype,
                                       std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  TensorRef ref;
  ref.name = name;
  ref.dtype = dtype;
  ref.shape = std::move(shape);
  ref.bytes = bytes.size();
  // Moving the vector keeps its heap buffer, so the pointer stays valid.
  owned_.push_back(std::move(bytes));
  ref.data = owned_.back().data();
  TensorRef& slot = tensors_[name];
  slot = std::move(ref);
  return slot;
}

const TensorRef& WeightStore::addMapped(TensorRef ref, std::shared_ptr<const MappedFile> file) {
  if (std::find(mappings_.begin(), mappings_.end(), file) == mappings_.end())
    mappings_.push_back(std::move(file));
  TensorRef& slot = tensors_[ref.name];
  slot = std::move(ref);
  return slot;
}

const TensorRef& WeightStore::addDummy(const std::string& name, WeightDType dtype,
                                       std::vector<int64_t> shape) {
  TensorRef ref;
  ref.name = name;
  ref.dtype = dtype;
  ref.shape = std::move(shape);
  ref.bytes = tensorBytes(dtype, ref.shape);
  TensorRef& slot = tensors_[name];
  slot = std::move(ref);
  return slot;
}

const TensorRef& WeightStore::addRows(const std::string& name, const TensorRef& of, int64_t begin,
                                      int64_t rows) {
  std::vector<int64_t> shape = of.shape;
  shape[0] = rows;
  const int format = quantFormatOf(of.dtype);
  if (format >= 0 && of.data) {
    // Packed: the rows' codes, then their scales, each from its plane.
    const quant::QuantFormatTraits traits =
        quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format));
    const uint64_t codeBytes = uint64_t(quant::quantRowWeightBytes(traits.bits, of.shape[1]));
    const uint64_t scaleBytes = uint64_t(quant::quantRowScaleBytes(traits.groupSize, of.shape[1]));
    const uint8_t* scales =
        of.data + quant::quantScalePlaneOffset(traits.bits, of.shape[0], of.shape[1]);
    std::vector<uint8_t> bytes(uint64_t(rows) * (codeBytes + scaleBytes));
    std::memcpy(bytes.data(), of.data + uint64_t(begin) * codeBytes, uint64_t(rows) * codeBytes);
    std::memcpy(bytes.data() + uint64_t(rows) * codeBytes, scales + uint64_t(begin) * scaleBytes,
                uint64_t(rows) * scaleBytes);
    return addOwned(name, of.dtype, std::move(shape), std::move(bytes));
  }
  TensorRef ref;
  ref.name = name;
  ref.dtype = of.dtype;
  ref.shape = std::move(shape);
  const uint64_t rowBytes = tensorBytes(of.dtype, of.shape) / uint64_t(of.shape[0]);
  ref.bytes = rowBytes * uint64_t(rows);
  ref.data = of.data ? of.data + rowBytes * uint64_t(begin) : nullptr;
  TensorRef& slot = tensors_[name];
  slot = std::move(ref);
  return slot;
}

} // namespace ninfer
