// splitPhi3Projections: a phi3 checkpoint's fused qkv_proj and gate_up_proj become the llama
// names as row ranges sharing their bytes (q, k, v and gate, up in transformers' order), and
// a fused tensor of the wrong shape is refused by name. The whole model against transformers:
// tests/golden (tiny-phi3).
#include "Phi3Import.h"
#include "ModelConfig.h"
#include "TestUtil.h"
#include "WeightStore.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace ninfer;
using ninfer::test::errorText;
using ninfer::test::ScratchDir;
using ::testing::HasSubstr;

namespace {

ModelConfig phi3Shape() {
  ModelConfig config;
  config.family = "phi3";
  config.hiddenSize = 8;
  config.heads = 2;
  config.kvHeads = 1;
  config.headDim = 4;
  config.intermediateSize = 6;
  config.layers = 1;
  return config;
}

// A checkpoint of phi3Shape()'s one layer: qkv_proj with 8 q, 4 k and 4 v rows of 8 bf16 values
// (16 bytes a row), and gate_up_proj with `gateUpRows` rows.
std::unique_ptr<WeightStore> fusedCheckpoint(const ScratchDir& dir, int64_t gateUpRows) {
  dir.write("model.safetensors",
            test::safetensorsBytes(
                {{"model.layers.0.self_attn.qkv_proj.weight", "BF16", {16, 8}},
                 {"model.layers.0.mlp.gate_up_proj.weight", "BF16", {gateUpRows, 8}}}));
  auto weights = WeightStore::openCheckpoint(dir.path());
  EXPECT_TRUE(static_cast<bool>(weights)) << errorText(weights);
  return weights ? std::move(*weights) : nullptr;
}

TEST(Phi3Import, FusedProjectionsBecomeRowRanges) {
  const ModelConfig config = phi3Shape();
  ScratchDir dir;
  std::unique_ptr<WeightStore> weights = fusedCheckpoint(dir, 12); // gate 6 + up 6 rows
  ASSERT_TRUE(weights);
  ASSERT_FALSE(static_cast<bool>(splitPhi3Projections(config, *weights)));
  const TensorRef* qkv = weights->find("model.layers.0.self_attn.qkv_proj.weight");
  const TensorRef* gateUp = weights->find("model.layers.0.mlp.gate_up_proj.weight");
  ASSERT_TRUE(qkv && gateUp);
  const struct {
    const char* name;
    const TensorRef* of;
    int firstRow, rows;
  } expected[] = {{"self_attn.q_proj.weight", qkv, 0, 8},
                  {"self_attn.k_proj.weight", qkv, 8, 4},
                  {"self_attn.v_proj.weight", qkv, 12, 4},
                  {"mlp.gate_proj.weight", gateUp, 0, 6},
                  {"mlp.up_proj.weight", gateUp, 6, 6}};
  for (const auto& e : expected) {
    const TensorRef* part = weights->find(std::string("model.layers.0.") + e.name);
    ASSERT_TRUE(part) << e.name;
    EXPECT_EQ(part->dtype, WeightDType::BF16) << e.name;
    EXPECT_EQ(part->shape, (std::vector<int64_t>{e.rows, 8})) << e.name;
    EXPECT_EQ(part->data, e.of->data + 16 * e.firstRow) << e.name;
    EXPECT_EQ(part->bytes, uint64_t(16 * e.rows)) << e.name;
  }
}

TEST(Phi3Import, AFusedTensorOfTheWrongShapeIsNamed) {
  const ModelConfig config = phi3Shape();
  ScratchDir dir;
  std::unique_ptr<WeightStore> weights = fusedCheckpoint(dir, 6); // gate and up need 12
  ASSERT_TRUE(weights);
  const std::string error = llvm::toString(splitPhi3Projections(config, *weights));
  EXPECT_THAT(error, HasSubstr("tensor 'model.layers.0.mlp.gate_up_proj.weight' has shape"));
}

} // namespace
