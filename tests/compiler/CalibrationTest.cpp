// The calibration runner on the shipped 4M model (examples/pycode-llama-3m):
// statistics for every linear input, and the per-tensor sensitivity measure.
// A sensitivity run resumes in the middle of the model from the activations the
// reference run saved, so with the tensor left unchanged it must reproduce the
// reference exactly, wherever the tensor sits: the same KL divergence as the
// full run that the embedding (read by the first op) gets, which is only the
// f32 rounding of the stored reference log-probabilities (~1e-8). The same
// holds when the scored tokens end inside a chunk.
// Sequential statistics run the model input group by input group: with
// nothing replaced they are collect()'s bit for bit, and with a tensor
// replaced they are what collect() gives on a weight store holding the
// replacement; the float target's shift X^T (X_float - X) is zero until a
// replaced tensor has run.
#include "Calibration.h"
#include "Importer.h"
#include "ModelConfig.h"
#include "TokenizerImport.h"
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
    out[i] = bitsToFloat(uint32_t(bits) << 16);
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
  auto tokenizer = importTokenizer(kModel, *config);
  ASSERT_TRUE(bool(tokenizer)) << llvm::toString(tokenizer.takeError());

  // Whole chunks (512), the first chunk cut short (300: a reference run of its
  // own over the scored tokens), a whole chunk and a cut one (768). The
  // statistics never depend on it.
  std::vector<double> firstH;
  for (int64_t scored : {512, 300, 768}) {
    SCOPED_TRACE("sensitivity tokens " + std::to_string(scored));
    CalibrationOptions options;
    options.textPath = kCalib;
    options.tokenizer = tokenizer->get();
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


// The 3m model imported once per test.
struct Loaded {
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<ModelConfig> config;
  std::unique_ptr<WeightStore> weights;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<plan::TokenizerT> tokenizer;
};

std::unique_ptr<Loaded> load() {
  auto out = std::make_unique<Loaded>();
  auto config = loadModelConfig(kModel);
  EXPECT_TRUE(bool(config)) << llvm::toString(config.takeError());
  auto weights = WeightStore::openCheckpoint(kModel);
  EXPECT_TRUE(bool(weights)) << llvm::toString(weights.takeError());
  if (!config || !weights)
    return nullptr;
  out->config = std::make_unique<ModelConfig>(*config);
  out->weights = std::move(*weights);
  mlir::DialectRegistry registry;
  registry.insert<NinferDialect, mlir::func::FuncDialect>();
  out->context = std::make_unique<mlir::MLIRContext>(registry);
  out->context->loadAllAvailableDialects();
  auto module = importModel(*out->context, *out->config, *out->weights);
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (!module)
    return nullptr;
  out->module = std::move(*module);
  auto tokenizer = importTokenizer(kModel, *out->config);
  EXPECT_TRUE(bool(tokenizer)) << llvm::toString(tokenizer.takeError());
  if (!tokenizer)
    return nullptr;
  out->tokenizer = std::move(*tokenizer);
  return out;
}

std::unique_ptr<CalibrationRunner> makeRunner(const Loaded& m, const WeightStore& weights,
                                              CalibrationData& data) {
  CalibrationOptions options;
  options.textPath = kCalib;
  options.tokenizer = m.tokenizer.get();
  options.maxTokens = 1024;
  options.threads = 2;
  options.progress = false;
  auto runner = CalibrationRunner::create(*m.module, weights, *m.config, options);
  EXPECT_TRUE(bool(runner)) << llvm::toString(runner.takeError());
  if (!runner)
    return nullptr;
  llvm::Error collected = (*runner)->collect(data);
  EXPECT_FALSE(bool(collected)) << llvm::toString(std::move(collected));
  return std::move(*runner);
}

// Every third value negated (exact in bf16 and f32).
std::vector<float> changed(std::vector<float> w) {
  for (size_t i = 0; i < w.size(); i += 3)
    w[i] = -w[i];
  return w;
}

TEST(Calibration, SequentialStatisticsFollowTheReplacedTensors) {
  std::unique_ptr<Loaded> m = load();
  ASSERT_TRUE(m);
  const std::string q0 = "model.layers.0.self_attn.q_proj.weight";
  const std::string o0 = "model.layers.0.self_attn.o_proj.weight";
  const std::string down1 = "model.layers.1.mlp.down_proj.weight";
  const std::string q2 = "model.layers.2.self_attn.q_proj.weight";
  const std::string down3 = "model.layers.3.mlp.down_proj.weight";
  const std::vector<float> down1Changed = changed(readWeight(*m->weights, down1));

  // The reference: collect() on a store whose down_proj of layer 1 is replaced.
  auto replacedStore = WeightStore::openCheckpoint(kModel);
  ASSERT_TRUE(bool(replacedStore));
  std::vector<uint8_t> bytes(down1Changed.size() * 2); // bf16, as the IR declares (exact)
  for (size_t i = 0; i < down1Changed.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &down1Changed[i], 4);
    const uint16_t high = uint16_t(bits >> 16);
    std::memcpy(bytes.data() + 2 * i, &high, 2);
  }
  (*replacedStore)
      ->addOwned(down1, WeightDType::BF16, m->weights->find(down1)->shape, std::move(bytes));
  // The tensors the importer added (RoPE tables) as the imported store holds them.
  for (const auto& [name, ref] : m->weights->tensors())
    if (!(*replacedStore)->find(name))
      (*replacedStore)
          ->addOwned(name, ref.dtype, ref.shape,
                     std::vector<uint8_t>(ref.data, ref.data + ref.bytes));
  CalibrationData reference;
  std::unique_ptr<CalibrationRunner> referenceRunner = makeRunner(*m, **replacedStore, reference);
  ASSERT_TRUE(referenceRunner);

  for (bool floatTarget : {false, true}) {
    SCOPED_TRACE(floatTarget ? "float target" : "quantized target");
    CalibrationData data;
    std::unique_ptr<CalibrationRunner> runner = makeRunner(*m, *m->weights, data);
    ASSERT_TRUE(runner);
    // Nothing replaced yet: collect()'s statistics, no shift.
    for (const std::string& name : {q0, o0, down1}) {
      SCOPED_TRACE(name);
      auto stats = runner->sequentialStatistics(name, floatTarget);
      ASSERT_TRUE(bool(stats)) << llvm::toString(stats.takeError());
      EXPECT_EQ((*stats)->h, data.inputs.at(name)->h);
      EXPECT_EQ((*stats)->meanAbs, data.inputs.at(name)->meanAbs);
      if (floatTarget)
        EXPECT_EQ((*stats)->floatShift, std::vector<double>((*stats)->h.size(), 0.0));
      else
        EXPECT_TRUE((*stats)->floatShift.empty());
    }
    // The tensor at the current input can still be replaced; later inputs see it.
    ASSERT_FALSE(bool(runner->replaceWeight(down1, down1Changed)));
    for (const std::string& name : {q2, down3}) {
      SCOPED_TRACE(name);
      auto stats = runner->sequentialStatistics(name, floatTarget);
      ASSERT_TRUE(bool(stats)) << llvm::toString(stats.takeError());
      EXPECT_EQ((*stats)->h, reference.inputs.at(name)->h);
      EXPECT_NE((*stats)->h, data.inputs.at(name)->h);
      if (floatTarget) {
        double shift = 0;
        for (double v : (*stats)->floatShift)
          shift += std::fabs(v);
        EXPECT_GT(shift, 0.0);
      }
    }
    // Out of order: clear errors.
    auto early = runner->sequentialStatistics(o0, floatTarget);
    ASSERT_FALSE(bool(early));
    EXPECT_NE(llvm::toString(early.takeError()).find("after a later input"), std::string::npos);
    llvm::Error late = runner->replaceWeight(q0, readWeight(*m->weights, q0));
    ASSERT_TRUE(bool(late));
    EXPECT_NE(llvm::toString(std::move(late)).find("passed an op"), std::string::npos);
    auto kld = runner->klDivergenceWith(q0, readWeight(*m->weights, q0));
    ASSERT_FALSE(bool(kld));
    llvm::consumeError(kld.takeError());
  }
}

} // namespace
} // namespace ninfer
