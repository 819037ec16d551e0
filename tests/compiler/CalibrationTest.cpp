// The calibration runner on the shipped 4M model (examples/pycode-llama-3m):
// statistics for every linear input, and the per-tensor sensitivity measure.
// A sensitivity run resumes in the middle of the model from the activations the
// reference run saved, so with the tensor left unchanged it must reproduce the
// reference exactly, wherever the tensor sits: the same KL divergence as the
// full run that the embedding (read by the first op) gets, which is only the
// f32 rounding of the stored reference log-probabilities (~1e-8). The same
// holds when the scored tokens end inside a chunk.
#include "Calibration.h"
#include "Importer.h"
#include "ModelConfig.h"
#include "WeightStore.h"
#include "ir/NinferDialect.h"

#include "ninfer/QuantFormats.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace ninfer {
namespace {

const std::string kModel =
    std::string(NINFER_COMPILER_TEST_DIR) + "/../../examples/pycode-llama-3m";
const std::string kCalib =
    std::string(NINFER_COMPILER_TEST_DIR) + "/../../examples/data/calib_python.txt";

// The bf16 weight `name` as f32.
std::vector<float> readWeight(const WeightStore& store, const std::string& name) {
  const TensorRef* ref = store.find(name);
  EXPECT_TRUE(ref && ref->dtype == WeightDType::BF16) << name;
  std::vector<float> out(ref ? ref->elements() : 0);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, ref->data + 2 * i, 2);
    out[i] = quant::bitsToFloat(uint32_t(bits) << 16);
  }
  return out;
}

TEST(Calibration, SensitivityRunsResumeExactly) {
  auto config = loadModelConfig(kModel);
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  auto weights = WeightStore::openCheckpoint(kModel);
  ASSERT_TRUE(bool(weights)) << llvm::toString(weights.takeError());
  mlir::DialectRegistry registry;
  registry.insert<NinferDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto module = importModel(context, *config, **weights);
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());

  // Whole chunks (512), the first chunk cut short (300: a reference run of its
  // own over the scored tokens), a whole chunk and a cut one (768). The
  // statistics never depend on it.
  std::vector<double> firstH;
  for (int64_t scored : {512, 300, 768}) {
    SCOPED_TRACE("sensitivity tokens " + std::to_string(scored));
    CalibrationOptions options;
    options.textPath = kCalib;
    options.modelDir = kModel;
    options.maxTokens = 1024;
    options.sensitivityTokens = scored;
    options.threads = 2;
    options.progress = false;
    auto runner = CalibrationRunner::create(**module, **weights, *config, options);
    ASSERT_TRUE(bool(runner)) << llvm::toString(runner.takeError());
    CalibrationData data;
    llvm::Error collected = (*runner)->collect(data);
    ASSERT_FALSE(bool(collected)) << llvm::toString(std::move(collected));
    EXPECT_EQ(data.tokens, 1024);
    EXPECT_EQ((*runner)->sensitivityTokensUsed(), scored);
    const std::string down = "model.layers.2.mlp.down_proj.weight";
    ASSERT_TRUE(data.inputs.count(down));
    EXPECT_EQ(data.inputs.at(down)->cols, config->intermediateSize);
    if (firstH.empty())
      firstH = data.inputs.at(down)->h;
    EXPECT_EQ(data.inputs.at(down)->h, firstH);

    // The tied embedding (read by the first op: no resume), the first layer
    // (resumes at q/k/v), a later down_proj.
    double floor = -1;
    for (const std::string& name : {std::string("model.embed_tokens.weight"),
                                    std::string("model.layers.0.self_attn.k_proj.weight"), down}) {
      SCOPED_TRACE(name);
      std::vector<float> w = readWeight(**weights, name);
      llvm::Expected<double> same = (*runner)->klDivergenceWith(name, w);
      ASSERT_TRUE(bool(same)) << llvm::toString(same.takeError());
      EXPECT_LT(*same, 1e-7);
      if (floor < 0)
        floor = *same;
      EXPECT_EQ(*same, floor);
      for (size_t i = 0; i < w.size(); i += 3)
        w[i] = -w[i];
      llvm::Expected<double> changed = (*runner)->klDivergenceWith(name, w);
      ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
      EXPECT_GT(*changed, 1e-3);
      EXPECT_TRUE(std::isfinite(*changed));
    }
  }
}

} // namespace
} // namespace ninfer
