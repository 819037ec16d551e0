// Hugging Face BitNet checkpoints (compiler/BitNetImport.h): the committed tiny
// checkpoint tests/ternary/bitnet/tiny-bitnet-llama (made by
// make_bitnet_checkpoint.py with transformers' own pack_weights) imports to
// exactly the weights transformers' unpack_weights gives (reference.safetensors),
// those pack losslessly into TQ1 and TQ2, autobitlinear multiplies by the scale
// instead of dividing, the packing convention on a hand-made example, and the
// variants ninfer cannot reproduce are refused with one clear line.
#include "BitNetImport.h"
#include "Importer.h"
#include "ModelConfig.h"
#include "Safetensors.h"
#include "TernaryPacking.h"
#include "WeightStore.h"
#include "ir/NinferDialect.h"

#include "ninfer/TernaryDType.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>

namespace ninfer {
namespace {

const std::string kCheckpoint = std::string(NINFER_BITNET_DIR) + "/tiny-bitnet-llama";
constexpr int kLinears = 14; // 2 layers x q, k, v, o, gate, up, down

std::string errorText(llvm::Error error) { return llvm::toString(std::move(error)); }

float valueAt(const TensorRef& ref, size_t i) {
  float value = 0.0f;
  if (ref.dtype == WeightDType::F32) {
    std::memcpy(&value, ref.data + 4 * i, 4);
  } else {
    const uint32_t bits = (uint32_t(ref.data[2 * i]) | (uint32_t(ref.data[2 * i + 1]) << 8)) << 16;
    std::memcpy(&value, &bits, 4);
  }
  return value;
}

// reference.safetensors: name -> f32 values (transformers' unpack_weights / scale).
struct Reference {
  std::unique_ptr<llvm::MemoryBuffer> file;
  std::map<std::string, TensorRef> tensors;
};

Reference readReference() {
  Reference reference;
  auto buffer = llvm::MemoryBuffer::getFile(kCheckpoint + "/reference.safetensors");
  EXPECT_TRUE(bool(buffer)) << kCheckpoint;
  if (!buffer)
    return reference;
  reference.file = std::move(*buffer);
  auto parsed = parseSafetensors("reference.safetensors",
                                 reinterpret_cast<const uint8_t*>(reference.file->getBufferStart()),
                                 reference.file->getBufferSize());
  EXPECT_TRUE(bool(parsed));
  if (!parsed)
    return reference;
  for (TensorRef& ref : *parsed)
    reference.tensors[ref.name] = ref;
  return reference;
}

std::unique_ptr<WeightStore> openImported(const std::string& dir, BitNetImport* import) {
  auto store = WeightStore::openCheckpoint(dir);
  EXPECT_TRUE(bool(store)) << (store ? "" : errorText(store.takeError()));
  if (!store)
    return nullptr;
  auto imported = importBitNetWeights(dir, **store);
  EXPECT_TRUE(bool(imported)) << (imported ? "" : errorText(imported.takeError()));
  if (!imported)
    return nullptr;
  *import = *imported;
  return std::move(*store);
}

TEST(BitNetImport, UnpacksLikeTransformers) {
  // Packed [2, 2] -> rows i * 2 + p: bits 2i..2i+1 of packed row p, code t + 1.
  const uint8_t packed[4] = {0b10100001, 0b00011000, 0b10010000, 0b00001010};
  const std::vector<signed char> expected = {0, -1, -1, 1, -1, 1, -1, 1, 1, 0, 0, -1, 1, -1, 1, -1};
  EXPECT_EQ(unpackBitNetRows(packed, 2, 2), expected);
}

TEST(BitNetImport, ImportedWeightsEqualTransformersUnpack) {
  BitNetImport import;
  auto store = openImported(kCheckpoint, &import);
  ASSERT_TRUE(store);
  EXPECT_TRUE(import.bitnet);
  EXPECT_TRUE(import.divideScale);
  EXPECT_EQ(import.unpacked, kLinears);
  Reference reference = readReference();
  ASSERT_EQ(reference.tensors.size(), size_t(kLinears));
  for (const auto& [name, expected] : reference.tensors) {
    const TensorRef* got = store->find(name);
    ASSERT_TRUE(got) << name;
    ASSERT_TRUE(got->dtype == WeightDType::F32 || got->dtype == WeightDType::BF16) << name;
    ASSERT_EQ(got->shape, expected.shape) << name;
    for (size_t i = 0; i < expected.elements(); ++i)
      ASSERT_EQ(valueAt(*got, i), valueAt(expected, i)) << name << " value " << i;
  }
  // Embeddings and lm_head (not converted) stay as they were.
  EXPECT_EQ(store->find("lm_head.weight")->dtype, WeightDType::BF16);
}

// Imported, then packed by the ordinary ternary path: every block linear packs,
// and its decoded rows are the reference values.
TEST(BitNetImport, PacksLosslesslyAsTq1AndTq2) {
  Reference reference = readReference();
  for (TernaryFormat format : {TernaryFormat::TQ1, TernaryFormat::TQ2}) {
    BitNetImport import;
    auto store = openImported(kCheckpoint, &import);
    ASSERT_TRUE(store);
    auto config = loadModelConfig(kCheckpoint + "/config.json");
    ASSERT_TRUE(bool(config)) << errorText(config.takeError());
    mlir::DialectRegistry registry;
    registry.insert<NinferDialect, mlir::func::FuncDialect>();
    mlir::MLIRContext context(registry);
    context.loadAllAvailableDialects();
    auto module = importModel(context, *config, *store);
    ASSERT_TRUE(bool(module)) << errorText(module.takeError());
    TernaryReport report;
    llvm::Error packed = applyTernary(*store, **module, QuantMode::Ternary, format, &report);
    ASSERT_FALSE(bool(packed)) << errorText(std::move(packed));
    EXPECT_EQ(report.packed, kLinears);
    const int dtype =
        format == TernaryFormat::TQ1 ? ternary::kPlanDTypeTq1 : ternary::kPlanDTypeTq2;
    for (const auto& [name, expected] : reference.tensors) {
      const TensorRef* got = store->find(name);
      ASSERT_TRUE(got) << name;
      EXPECT_EQ(got->dtype, format == TernaryFormat::TQ1 ? WeightDType::TQ1 : WeightDType::TQ2);
      const int64_t rows = got->shape[0], cols = got->shape[1];
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        ternary::dequantizeRowOf(dtype, got->data, rows, cols, r, row.data());
        for (int64_t k = 0; k < cols; ++k)
          ASSERT_EQ(row[size_t(k)], valueAt(expected, size_t(r * cols + k)))
              << ternaryFormatName(format) << " " << name << " [" << r << ", " << k << "]";
      }
    }
  }
}

// A temporary checkpoint: the committed weights with another config.json.
struct VariantDir {
  llvm::SmallString<128> path;
  explicit VariantDir(const std::string& quantizationConfig) {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("ninfer-bitnet-test", path));
    std::ofstream(std::string(path.str()) + "/config.json")
        << R"({"model_type": "llama", "quantization_config": )" << quantizationConfig << "}";
    EXPECT_FALSE(llvm::sys::fs::create_link(kCheckpoint + "/model.safetensors",
                                            std::string(path.str()) + "/model.safetensors"));
  }
  ~VariantDir() { llvm::sys::fs::remove_directories(path); }
  std::string dir() const { return path.str().str(); }
};

TEST(BitNetImport, AutoBitLinearMultipliesByTheScale) {
  VariantDir variant(R"({"quant_method": "bitnet", "linear_class": "autobitlinear"})");
  BitNetImport import;
  auto store = openImported(variant.dir(), &import);
  ASSERT_TRUE(store);
  EXPECT_FALSE(import.divideScale);
  EXPECT_EQ(import.unpacked, kLinears);
  Reference reference = readReference();
  for (const auto& [name, expected] : reference.tensors) {
    const TensorRef* got = store->find(name);
    const TensorRef* scale = store->find(name + "_scale");
    ASSERT_TRUE(got && scale) << name;
    const float s = valueAt(*scale, 0);
    for (size_t i = 0; i < expected.elements(); ++i) {
      const float t = valueAt(expected, i);
      ASSERT_EQ(valueAt(*got, i), t > 0 ? s : t < 0 ? -s : 0.0f) << name << " value " << i;
    }
  }
}

TEST(BitNetImport, RefusesWhatItCannotReproduce) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"quant_method": "bitnet", "quantization_mode": "online"})",
       "quantization_mode 'online' is not supported"},
      {R"({"quant_method": "bitnet", "use_rms_norm": true})", "use_rms_norm"},
      {R"({"quant_method": "bitnet", "linear_class": "fancy"})", "linear_class 'fancy' is unknown"},
  };
  for (const auto& [config, message] : cases) {
    VariantDir variant(config);
    auto store = WeightStore::openCheckpoint(variant.dir());
    ASSERT_TRUE(bool(store)) << errorText(store.takeError());
    auto imported = importBitNetWeights(variant.dir(), **store);
    ASSERT_FALSE(bool(imported)) << config;
    const std::string error = errorText(imported.takeError());
    EXPECT_NE(error.find(message), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  // Another quantization method, or none: nothing to do.
  VariantDir other(R"({"quant_method": "gptq"})");
  auto store = WeightStore::openCheckpoint(other.dir());
  ASSERT_TRUE(bool(store));
  auto imported = importBitNetWeights(other.dir(), **store);
  ASSERT_TRUE(bool(imported));
  EXPECT_FALSE(imported->bitnet);
  EXPECT_EQ((*store)->find("model.layers.0.mlp.up_proj.weight")->dtype, WeightDType::U8);
}

} // namespace
} // namespace ninfer
