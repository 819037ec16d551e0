// The weight store: every tensor of the checkpoint, memory-mapped, never
// copied, plus tensors the compiler makes (RoPE tables). IR ops refer to
// entries by name; bytes only move when the plan writer copies them out.
#pragma once

#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ninfer {

class MappedFile;

// TQ2, TQ1: packed ternary weights (ninfer/TernaryDType.h); not element-sized,
// so dtypeSize() is 0 and tensorBytes() gives their size.
enum class WeightDType { F32, F16, BF16, I32, TQ2,
  // Group-quantized [rows, cols] weights (ninfer/QuantFormats.h), in the order
  // of quant::QuantFormatId: Q8G32 + id. Not element-sized: see tensorBytes().
  Q8G32, Q8G64, Q8G128, Q4G32, Q4G64, Q4G128, Q3G32, Q3G64, Q3G128, Q2G32, Q2G64, Q2G128,
  TQ1,
  // Raw bytes of a checkpoint (Hugging Face BitNet packed weights, see
  // BitNetImport.h); never a plan dtype.
  U8,
  // More group-quantized weights: Q6G32 + (id - 12) for ids 12.. (Q6, Q5, K16).
  Q6G32, Q6G64, Q6G128, Q5G32, Q5G64, Q5G128, Q2K16, Q3K16, Q4K16 };
// The QuantFormatId of a group-quantized dtype, -1 for the others; and back.
int quantFormatOf(WeightDType dtype);
WeightDType weightDTypeOfQuantFormat(int formatId);
size_t dtypeSize(WeightDType dtype);
uint64_t tensorBytes(WeightDType dtype, const std::vector<int64_t>& shape);
const char* dtypeName(WeightDType dtype);

struct TensorRef {
  std::string name;
  WeightDType dtype = WeightDType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr; // nullptr for dummy tensors
  uint64_t bytes = 0;
  uint64_t elements() const;
};

class WeightStore {
public:
  // A directory with model.safetensors or model.safetensors.index.json (shards).
  static llvm::Expected<std::unique_ptr<WeightStore>> openCheckpoint(const std::string& dir);
  // A store without bytes: tensors are declared with addDummy (--dummy-weights).
  static std::unique_ptr<WeightStore> createDummy();
  // A store to fill with addMapped/addOwned (other checkpoint formats: GGUF).
  static std::unique_ptr<WeightStore> createEmpty();
  ~WeightStore();

  bool isDummy() const { return dummy_; }
  const TensorRef* find(const std::string& name) const;
  // Shape and dtype checked lookup: the error names the tensor, the expected
  // and the found shape.
  llvm::Expected<const TensorRef*> get(const std::string& name,
                                       const std::vector<int64_t>& shape) const;
  const TensorRef& addOwned(const std::string& name, WeightDType dtype,
                            std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  // A tensor whose bytes lie in `file` (ref.data points into it); the store keeps the
  // mapping alive.
  const TensorRef& addMapped(TensorRef ref, std::shared_ptr<const MappedFile> file);
  const TensorRef& addDummy(const std::string& name, WeightDType dtype, std::vector<int64_t> shape);
  // Rows [begin, begin + rows) of the 2-D tensor `of` (or elements of a 1-D one) as a
  // tensor of their own, `name`: element-sized dtypes share its bytes (fused projections
  // split without a copy), group-quantized ones get a copy of the rows' codes and scales.
  // The caller checked the range and that the dtype is one of those.
  const TensorRef& addRows(const std::string& name, const TensorRef& of, int64_t begin,
                           int64_t rows);
  const std::map<std::string, TensorRef>& tensors() const { return tensors_; }

private:
  WeightStore() = default;
  bool dummy_ = false;
  std::map<std::string, TensorRef> tensors_;
  std::vector<std::shared_ptr<const MappedFile>> mappings_;
  std::vector<std::vector<uint8_t>> owned_;
};

} // namespace ninfer
