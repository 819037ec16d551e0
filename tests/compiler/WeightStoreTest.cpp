// WeightStore and the safetensors reader: the shared pycode checkpoint (facts
// recorded with safetensors + numpy by make_safetensors_fixtures.py), a sharded
// checkpoint written by the safetensors package, and corrupted files built here.
#include "WeightStore.h"
#include "TestUtil.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

using namespace ninfer;
using ninfer::test::errorText;
using ninfer::test::safetensorsBytes;
using ninfer::test::safetensorsHeader;
using ninfer::test::ScratchDir;
using ninfer::test::TensorSpec;
using ::testing::HasSubstr;

namespace {

float bf16ToFloat(const uint8_t* p) {
  uint32_t bits = static_cast<uint32_t>(p[0] | (p[1] << 8)) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

float f16ToFloat(uint16_t h) {
  // Normal numbers and zero only: all the fixture uses.
  if ((h & 0x7fff) == 0)
    return 0.0f;
  uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits = (sign << 31) | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

std::string openError(const std::string& dir) {
  llvm::Expected<std::unique_ptr<WeightStore>> store = WeightStore::openCheckpoint(dir);
  EXPECT_FALSE(static_cast<bool>(store)) << "expected an error for " << dir;
  return errorText(store);
}

TEST(WeightStore, DTypeHelpers) {
  EXPECT_EQ(dtypeSize(WeightDType::F32), 4u);
  EXPECT_EQ(dtypeSize(WeightDType::F16), 2u);
  EXPECT_EQ(dtypeSize(WeightDType::BF16), 2u);
  EXPECT_EQ(dtypeSize(WeightDType::I32), 4u);
  EXPECT_STREQ(dtypeName(WeightDType::BF16), "BF16");
  EXPECT_STREQ(dtypeName(WeightDType::I32), "I32");
  TensorRef ref;
  ref.shape = {3, 4, 5};
  EXPECT_EQ(ref.elements(), 60u);
  ref.shape = {};
  EXPECT_EQ(ref.elements(), 1u); // a scalar
}

TEST(WeightStore, SharedPycodeLlama) {
  auto factsBuffer =
      llvm::MemoryBuffer::getFile(test::testDir() + "/fixtures/pycode_llama_23m_facts.json");
  ASSERT_TRUE(static_cast<bool>(factsBuffer));
  llvm::Expected<llvm::json::Value> facts = llvm::json::parse((*factsBuffer)->getBuffer());
  ASSERT_TRUE(static_cast<bool>(facts)) << llvm::toString(facts.takeError());
  const llvm::json::Object& root = *facts->getAsObject();

  llvm::Expected<std::unique_ptr<WeightStore>> store =
      WeightStore::openCheckpoint(test::sharedDir() + "/models/pycode-llama-23m");
  ASSERT_TRUE(static_cast<bool>(store)) << errorText(store);
  EXPECT_FALSE((*store)->isDummy());
  EXPECT_EQ(static_cast<int64_t>((*store)->tensors().size()), *root.getInteger("tensor_count"));

  int checkedValues = 0;
  for (const llvm::json::Value& entry : *root.getArray("tensors")) {
    const llvm::json::Object& tensor = *entry.getAsObject();
    std::string name = tensor.getString("name")->str();
    SCOPED_TRACE(name);
    std::vector<int64_t> shape;
    for (const llvm::json::Value& d : *tensor.getArray("shape"))
      shape.push_back(*d.getAsInteger());
    llvm::Expected<const TensorRef*> ref = (*store)->get(name, shape);
    ASSERT_TRUE(static_cast<bool>(ref)) << errorText(ref);
    EXPECT_EQ(std::string(dtypeName((*ref)->dtype)), tensor.getString("dtype")->str());
    EXPECT_EQ((*ref)->bytes, (*ref)->elements() * dtypeSize((*ref)->dtype));
    ASSERT_NE((*ref)->data, nullptr);
    ASSERT_EQ((*ref)->dtype, WeightDType::BF16);
    for (const llvm::json::Value& v : *tensor.getArray("values")) {
      const llvm::json::Object& value = *v.getAsObject();
      uint64_t flat = 0;
      size_t axis = 0;
      for (const llvm::json::Value& i : *value.getArray("index"))
        flat = flat * static_cast<uint64_t>(shape[axis++]) + *i.getAsInteger();
      // bf16 -> float is exact, so the values must be identical.
      EXPECT_EQ(bf16ToFloat((*ref)->data + 2 * flat), *value.getNumber("value"));
      ++checkedValues;
    }
  }
  EXPECT_GE(checkedValues, 10);
}

TEST(WeightStore, ShardedCheckpoint) {
  llvm::Expected<std::unique_ptr<WeightStore>> store =
      WeightStore::openCheckpoint(test::testDir() + "/fixtures/sharded");
  ASSERT_TRUE(static_cast<bool>(store)) << errorText(store);
  EXPECT_EQ((*store)->tensors().size(), 3u);

  llvm::Expected<const TensorRef*> a = (*store)->get("a.weight", {3, 4});
  ASSERT_TRUE(static_cast<bool>(a)) << errorText(a);
  ASSERT_EQ((*a)->dtype, WeightDType::F32);
  for (int i = 0; i < 12; ++i) { // arange(12)
    float value;
    std::memcpy(&value, (*a)->data + 4 * i, 4);
    EXPECT_EQ(value, static_cast<float>(i));
  }
  llvm::Expected<const TensorRef*> b = (*store)->get("b.weight", {6});
  ASSERT_TRUE(static_cast<bool>(b)) << errorText(b);
  ASSERT_EQ((*b)->dtype, WeightDType::F16);
  for (int i = 0; i < 6; ++i) { // 0.5 * arange(6)
    uint16_t half;
    std::memcpy(&half, (*b)->data + 2 * i, 2);
    EXPECT_EQ(f16ToFloat(half), 0.5f * i);
  }
  const TensorRef* ids = (*store)->find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, WeightDType::I32);
  int32_t last;
  std::memcpy(&last, ids->data + 16, 4);
  EXPECT_EQ(last, -4);
  // get() is for float weights; integer tables are found with find().
  llvm::Expected<const TensorRef*> idsChecked = (*store)->get("ids", {5});
  EXPECT_THAT(errorText(idsChecked), HasSubstr("I32"));
}

TEST(WeightStore, ShardIndexErrors) {
  ScratchDir dir;
  dir.write("model-1.safetensors", safetensorsBytes({{"x", "F32", {2}}}));
  dir.write("model.safetensors.index.json",
            R"({"weight_map": {"x": "model-1.safetensors", "y": "model-1.safetensors"}})");
  std::string message = openError(dir.path());
  EXPECT_THAT(message, HasSubstr("'y'"));
  EXPECT_THAT(message, HasSubstr("model-1.safetensors"));

  dir.write("model.safetensors.index.json", R"({"weight_map": {"x": "missing.safetensors"}})");
  EXPECT_THAT(openError(dir.path()), HasSubstr("missing.safetensors"));

  dir.write("model.safetensors.index.json", R"({"weight_map": {"x": "../model-1.safetensors"}})");
  EXPECT_THAT(openError(dir.path()), HasSubstr("must be a file name"));

  dir.write("model.safetensors.index.json", "{not json");
  EXPECT_THAT(openError(dir.path()), HasSubstr("invalid JSON"));

  dir.write("model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_THAT(openError(dir.path()), HasSubstr("weight_map"));
}

TEST(WeightStore, MissingCheckpoint) {
  ScratchDir dir;
  EXPECT_THAT(openError(dir.path()), HasSubstr("no model.safetensors"));
  EXPECT_THAT(openError(dir.file("absent")), HasSubstr("does not exist"));
}

TEST(WeightStore, TruncatedFile) {
  ScratchDir dir;
  dir.write("model.safetensors", std::string("\x10\x00\x00", 3));
  std::string message = openError(dir.path());
  EXPECT_THAT(message, HasSubstr("shorter than 8 bytes"));
  EXPECT_THAT(message, HasSubstr("model.safetensors"));

  dir.write("model.safetensors", "");
  EXPECT_THAT(openError(dir.path()), HasSubstr("shorter than 8 bytes"));
}

TEST(WeightStore, HeaderLengthTooBig) {
  ScratchDir dir;
  std::string file = safetensorsBytes({{"x", "F32", {4}}});
  file[6] = 0x01; // header length now ~2^48
  dir.write("model.safetensors", file);
  EXPECT_THAT(openError(dir.path()), HasSubstr("exceeds the file size"));
}

TEST(WeightStore, HeaderNotJson) {
  ScratchDir dir;
  dir.write("model.safetensors", safetensorsBytes("{\"x\": [1, 2", 0));
  std::string message = openError(dir.path());
  EXPECT_THAT(message, HasSubstr("not valid JSON"));
  EXPECT_THAT(message, HasSubstr("model.safetensors"));

  dir.write("model.safetensors", safetensorsBytes("[1, 2]", 0));
  EXPECT_THAT(openError(dir.path()), HasSubstr("not a JSON object"));
}

TEST(WeightStore, TruncatedData) {
  ScratchDir dir;
  std::string file = safetensorsBytes({{"x", "F32", {4}}, {"y", "F32", {4}}});
  dir.write("model.safetensors", file.substr(0, file.size() - 3));
  std::string message = openError(dir.path());
  EXPECT_THAT(message, HasSubstr("'y'"));
  EXPECT_THAT(message, HasSubstr("outside the data section"));
}

TEST(WeightStore, DTypeShapeMismatch) {
  ScratchDir dir;
  // 4 F32 values need 16 bytes; the offsets claim 8.
  std::string header = R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}})";
  dir.write("model.safetensors", safetensorsBytes(header, 16));
  std::string message = openError(dir.path());
  EXPECT_THAT(message, HasSubstr("tensor 'w'"));
  EXPECT_THAT(message, HasSubstr("span 8 bytes"));
  EXPECT_THAT(message, HasSubstr("need 16"));
}

TEST(WeightStore, UnknownDType) {
  ScratchDir dir;
  std::string header = R"({"w": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}})";
  dir.write("model.safetensors", safetensorsBytes(header, 4));
  std::string message = openError(dir.path());
  EXPECT_THAT(message, HasSubstr("tensor 'w'"));
  EXPECT_THAT(message, HasSubstr("unsupported dtype 'F8_E4M3'"));
}

TEST(WeightStore, MalformedEntries) {
  ScratchDir dir;
  const char* headers[] = {
      R"({"w": 3})",
      R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
      R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4]}})",
      R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
      R"({"w": {"shape": [1], "data_offsets": [0, 4]}})",
      R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})",
  };
  for (const char* header : headers) {
    SCOPED_TRACE(header);
    dir.write("model.safetensors", safetensorsBytes(header, 16));
    EXPECT_THAT(openError(dir.path()), HasSubstr("tensor 'w'"));
  }
}

TEST(WeightStore, GetChecksShape) {
  ScratchDir dir;
  dir.write("model.safetensors", safetensorsBytes({{"layer.weight", "BF16", {8, 4}}}));
  llvm::Expected<std::unique_ptr<WeightStore>> store = WeightStore::openCheckpoint(dir.path());
  ASSERT_TRUE(static_cast<bool>(store)) << errorText(store);
  llvm::Expected<const TensorRef*> ok = (*store)->get("layer.weight", {8, 4});
  ASSERT_TRUE(static_cast<bool>(ok)) << errorText(ok);
  EXPECT_EQ((*ok)->data[3], 3); // the data pattern, read in place

  llvm::Expected<const TensorRef*> wrong = (*store)->get("layer.weight", {4, 8});
  std::string message = errorText(wrong);
  EXPECT_THAT(message, HasSubstr("'layer.weight'"));
  EXPECT_THAT(message, HasSubstr("[8, 4]"));
  EXPECT_THAT(message, HasSubstr("expected [4, 8]"));

  llvm::Expected<const TensorRef*> missing = (*store)->get("other.weight", {1});
  EXPECT_THAT(errorText(missing), HasSubstr("'other.weight'"));
}

TEST(WeightStore, DummyAndOwned) {
  std::unique_ptr<WeightStore> store = WeightStore::createDummy();
  EXPECT_TRUE(store->isDummy());
  const TensorRef& dummy = store->addDummy("w", WeightDType::F16, {16, 8});
  EXPECT_EQ(dummy.data, nullptr);
  EXPECT_EQ(dummy.bytes, 16u * 8u * 2u);
  llvm::Expected<const TensorRef*> found = store->get("w", {16, 8});
  ASSERT_TRUE(static_cast<bool>(found)) << errorText(found);

  std::vector<uint8_t> bytes = {1, 2, 3, 4, 5, 6, 7, 8};
  const TensorRef& owned = store->addOwned("t", WeightDType::F32, {2}, bytes);
  // Many more owned tensors must not move the first one's bytes.
  for (int i = 0; i < 100; ++i)
    store->addOwned("t" + std::to_string(i), WeightDType::F32, {1}, {0, 0, 0, 0});
  const TensorRef* again = store->find("t");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again, &owned);
  EXPECT_EQ(std::vector<uint8_t>(again->data, again->data + 8), bytes);
  EXPECT_EQ(again->bytes, 8u);
}

// addRows: rows of a 16-bit tensor share its bytes; rows of a group-quantized one (q8_g32:
// 128 code bytes and 8 scale bytes a row of 128 values, codes plane then scales plane) are
// copied, the rows' codes and then their scales.
TEST(WeightStore, RowsOfPlainAndPackedTensors) {
  std::unique_ptr<WeightStore> store = WeightStore::createEmpty();
  std::vector<uint8_t> plain(4 * 8 * 2);
  for (size_t i = 0; i < plain.size(); ++i)
    plain[i] = uint8_t(i);
  const TensorRef& f16 = store->addOwned("f16", WeightDType::F16, {4, 8}, plain);
  const TensorRef& middle = store->addRows("f16.rows", f16, 1, 2);
  EXPECT_EQ(middle.shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(middle.data, f16.data + 16);
  EXPECT_EQ(middle.bytes, 32u);

  const int rows = 4, codeBytes = 128, scaleBytes = 8;
  std::vector<uint8_t> packed(rows * (codeBytes + scaleBytes));
  for (int r = 0; r < rows; ++r) {
    std::fill_n(packed.begin() + r * codeBytes, codeBytes, uint8_t(10 + r));
    std::fill_n(packed.begin() + rows * codeBytes + r * scaleBytes, scaleBytes, uint8_t(50 + r));
  }
  ASSERT_EQ(tensorBytes(WeightDType::Q8G32, {rows, 128}), packed.size());
  const TensorRef& q8 = store->addOwned("q8", WeightDType::Q8G32, {rows, 128}, packed);
  const TensorRef& part = store->addRows("q8.rows", q8, 1, 2);
  EXPECT_EQ(part.dtype, WeightDType::Q8G32);
  EXPECT_EQ(part.shape, (std::vector<int64_t>{2, 128}));
  ASSERT_EQ(part.bytes, uint64_t(2 * (codeBytes + scaleBytes)));
  std::vector<uint8_t> expected;
  expected.insert(expected.end(), codeBytes, 11);
  expected.insert(expected.end(), codeBytes, 12);
  expected.insert(expected.end(), scaleBytes, 51);
  expected.insert(expected.end(), scaleBytes, 52);
  EXPECT_EQ(std::vector<uint8_t>(part.data, part.data + part.bytes), expected);
}

} // namespace
