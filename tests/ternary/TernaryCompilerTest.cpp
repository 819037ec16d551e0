// Ternary weights through the compiler: exact detection on the shared
// checkpoints (pycode-ternary-llama-23m: every block linear ternary with one
// scale, embeddings / lm_head / norms not; pycode-llama-23m: nothing ternary),
// the --quant ternary refusal for a model not trained ternary, dummy TQ1 and
// TQ2 plans, and the TQ1 and TQ2 plans against the bf16 plan of the same
// checkpoint on the CPU executor: identical greedy ids for 64 tokens from
// several prompts and identical logits (the CPU executor decodes both formats
// to the checkpoint's exact values, so the difference must be 0). Also prints
// bpw and file sizes of the plans.
#include "CompileDriver.h"
#include "TernaryDetect.h"
#include "TernaryPacking.h"
#include "WeightStore.h"

#include "ninfer/Executor.h"
#include "ninfer/Plan.h"
#include "ninfer/TernaryDType.h"
#include "ninfer/Tokenizer.h"


#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace ninfer {
namespace {

const std::string kShared = NINFER_SHARED_DIR;
const std::string kTernaryModel = kShared + "/models/pycode-ternary-llama-23m";
const std::string kPlainModel = kShared + "/models/pycode-llama-23m";

std::string errorText(llvm::Error error) { return llvm::toString(std::move(error)); }

bool isBlockLinear(const std::string& name) {
  auto ends = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  return name.rfind("model.layers.", 0) == 0 && ends("_proj.weight");
}

std::unique_ptr<WeightStore> openStore(const std::string& dir) {
  auto store = WeightStore::openCheckpoint(dir);
  if (!store) {
    ADD_FAILURE() << errorText(store.takeError());
    return nullptr;
  }
  return std::move(*store);
}

TEST(TernaryDetect, TernaryCheckpoint) {
  auto store = openStore(kTernaryModel);
  ASSERT_TRUE(store);
  int linears = 0, others = 0;
  for (const auto& [name, ref] : store->tensors()) {
    const TernaryInfo info = detectTernary(ref);
    if (isBlockLinear(name)) {
      ++linears;
      EXPECT_EQ(info.kind, TernaryKind::PerTensor)
          << name << ": " << ternaryKindName(info.kind) << ", " << info.distinctValues << " values";
      EXPECT_EQ(info.distinctValues, 3u) << name;
      EXPECT_GT(info.scale, 0.0f) << name;
      EXPECT_GT(info.zeroFraction, 0.05) << name;
      EXPECT_LT(info.zeroFraction, 0.95) << name;
    } else {
      ++others;
      EXPECT_EQ(info.kind, TernaryKind::NotTernary) << name;
    }
  }
  EXPECT_EQ(linears, 6 * 7);
  EXPECT_EQ(others, 2 + 6 * 2 + 1); // embeddings, lm_head, 2 norms per layer, final norm
  // training_summary.json: zero_fraction_layer0_q = 0.3399467468261719.
  const TernaryInfo q = detectTernary(*store->find("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_NEAR(q.zeroFraction, 0.3399467468261719, 1e-12);
}

TEST(TernaryDetect, PlainCheckpointHasNone) {
  auto store = openStore(kPlainModel);
  ASSERT_TRUE(store);
  for (const auto& [name, ref] : store->tensors()) {
    const TernaryInfo info = detectTernary(ref);
    EXPECT_EQ(info.kind, TernaryKind::NotTernary) << name;
    if (ref.shape.size() == 2) {
      EXPECT_GT(info.distinctValues, 3u) << name;
    }
  }
}

// Synthetic tensors: per-row scales, -0, non-finite values, all zeros, f16/f32.
TEST(TernaryDetect, Synthetic) {
  auto bf16 = [](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return uint16_t(bits >> 16);
  };
  auto tensor = [](WeightDType dtype, std::vector<int64_t> shape, const void* data,
                   uint64_t bytes) {
    TensorRef ref;
    ref.name = "t";
    ref.dtype = dtype;
    ref.shape = std::move(shape);
    ref.data = static_cast<const uint8_t*>(data);
    ref.bytes = bytes;
    return ref;
  };
  std::vector<uint16_t> values = {bf16(0.5f), bf16(-0.5f), bf16(0.0f),  bf16(-0.0f),
                                  bf16(0.5f), bf16(0.0f),  bf16(-0.5f), bf16(0.5f)};
  TernaryInfo info = detectTernary(tensor(WeightDType::BF16, {2, 4}, values.data(), 16));
  EXPECT_EQ(info.kind, TernaryKind::PerTensor);
  EXPECT_EQ(info.scale, 0.5f);
  EXPECT_EQ(info.distinctValues, 3u); // -0 counts as 0
  EXPECT_DOUBLE_EQ(info.zeroFraction, 3.0 / 8.0);

  values[4] = bf16(0.25f), values[6] = bf16(-0.25f), values[7] = bf16(0.25f);
  info = detectTernary(tensor(WeightDType::BF16, {2, 4}, values.data(), 16));
  EXPECT_EQ(info.kind, TernaryKind::PerRow);

  values[7] = bf16(0.125f);
  info = detectTernary(tensor(WeightDType::BF16, {2, 4}, values.data(), 16));
  EXPECT_EQ(info.kind, TernaryKind::NotTernary);
  EXPECT_EQ(info.distinctValues, 6u);

  std::vector<uint16_t> zeros(8, 0);
  EXPECT_EQ(detectTernary(tensor(WeightDType::BF16, {2, 4}, zeros.data(), 16)).kind,
            TernaryKind::NotTernary);
  std::vector<uint16_t> inf = {0x7F80, 0xFF80, 0, 0, 0x7F80, 0, 0, 0}; // +-inf: one magnitude
  EXPECT_EQ(detectTernary(tensor(WeightDType::BF16, {2, 4}, inf.data(), 16)).kind,
            TernaryKind::NotTernary);

  std::vector<float> f32 = {0.3f, -0.3f, 0.0f, 0.3f};
  info = detectTernary(tensor(WeightDType::F32, {1, 4}, f32.data(), 16));
  EXPECT_EQ(info.kind, TernaryKind::PerTensor);
  EXPECT_EQ(info.scale, 0.3f);
  std::vector<uint16_t> f16 = {0x3C00, 0xBC00, 0x0000, 0x3C00}; // 1, -1, 0, 1
  info = detectTernary(tensor(WeightDType::F16, {1, 4}, f16.data(), 8));
  EXPECT_EQ(info.kind, TernaryKind::PerTensor);
  EXPECT_EQ(info.scale, 1.0f);
}

// A compiled plan in a temporary file, removed with the object.
struct BuiltPlan {
  std::string path;
  std::unique_ptr<PlanFile> file;
  TernaryReport report;
  ~BuiltPlan() {
    if (!path.empty())
      std::remove(path.c_str());
  }
};

// ninferc's steps without kernels (the CPU executor needs none).
std::unique_ptr<BuiltPlan> buildPlanFor(const std::string& modelDir, const std::string& quantMode,
                                        bool dummy, std::string* error,
                                        TernaryFormat format = TernaryFormat::TQ1) {
  auto built = std::make_unique<BuiltPlan>();
  static int counter = 0;
  CompileOptions options;
  options.input = dummy ? modelDir + "/config.json" : modelDir;
  options.dummyWeights = dummy;
  options.quant.mode = quantMode;
  options.quant.quiet = true;
  options.ternaryFormat = format;
  options.context = 256;
  options.maxStepTokens = 128;
  options.compiler = "ternary_compiler_tests";
  options.target = "cpu";
  options.output = "/tmp/ninfer_ternary_test_" + std::to_string(getpid()) + "_" +
                   std::to_string(counter++) + ".nplan";
  auto compiled = compileModel(options);
  if (!compiled) {
    *error = errorText(compiled.takeError());
    return nullptr;
  }
  built->path = options.output;
  built->report = compiled->ternary;
  auto file = PlanFile::open(built->path);
  if (!file) {
    *error = file.status().message();
    return nullptr;
  }
  built->file = std::move(*file);
  return built;
}

TEST(TernaryPacking, RefusesModelNotTrainedTernary) {
  std::string error;
  auto built = buildPlanFor(kPlainModel, "ternary", false, &error);
  EXPECT_FALSE(built);
  EXPECT_EQ(error.rfind("--quant ternary: 'model.layers.0.", 0), 0u) << error;
  EXPECT_NE(error.find("' is not ternary ("), std::string::npos) << error;
  EXPECT_NE(error.find(" distinct values): this model was not trained ternary and ternarizing "
                       "it would destroy it"),
            std::string::npos)
      << error;
  // auto keeps every tensor of that model in bf16.
  built = buildPlanFor(kPlainModel, "auto", false, &error);
  ASSERT_TRUE(built) << error;
  EXPECT_EQ(built->report.packed, 0);
  EXPECT_EQ(built->report.kept.size(), 42u);
  for (const plan::Buffer* b : *built->file->plan().buffers())
    EXPECT_FALSE(ternary::isTernaryPlanDType(int(b->dtype()))) << b->name()->str();
}

TEST(TernaryPacking, DummyTernaryPlanRuns) {
  std::string error;
  for (auto [format, dtype] : {std::pair{TernaryFormat::TQ1, plan::DType::TQ1},
                               std::pair{TernaryFormat::TQ2, plan::DType::TQ2}}) {
    auto built = buildPlanFor(kTernaryModel, "ternary", true, &error, format);
    ASSERT_TRUE(built) << error;
    EXPECT_EQ(built->report.packed, 42);
    int packed = 0;
    for (const plan::Buffer* b : *built->file->plan().buffers())
      if (b->dtype() == dtype) {
        ++packed;
        EXPECT_TRUE(b->dummy()) << b->name()->str();
        EXPECT_EQ(b->size_bytes(), uint64_t(ternary::tensorBytesOf(int(dtype), b->shape()->Get(0),
                                                                   b->shape()->Get(1))));
      }
    EXPECT_EQ(packed, 42) << ternaryFormatName(format);
    auto cpu = createCpuExecutor(*built->file, 2);
    ASSERT_TRUE(cpu) << cpu.status().message();
    std::vector<int32_t> ids = {0, 5, 17, 300};
    std::vector<float> logits(4096);
    ASSERT_TRUE((*cpu)->forward(ids.data(), 4, 0, logits.data()));
    for (float v : logits)
      ASSERT_TRUE(std::isfinite(v));
  }
  // auto mode on dummy weights keeps them (not ternary-trained).
  auto built = buildPlanFor(kTernaryModel, "auto", true, &error);
  ASSERT_TRUE(built) << error;
  EXPECT_EQ(built->report.packed, 0);
}

uint64_t weightBytes(const PlanFile& file, bool linearOnly) {
  uint64_t bytes = 0;
  for (const plan::Buffer* b : *file.plan().buffers())
    if (b->kind() == plan::BufferKind::Weight && (!linearOnly || isBlockLinear(b->name()->str())))
      bytes += b->size_bytes();
  return bytes;
}

// The bf16 plan against the packed plan of the same checkpoint in `format`.
void expectPackedPlanMatchesBf16Plan(TernaryFormat format, plan::DType dtype) {
  const char* name = ternaryFormatName(format);
  std::string error;
  auto bf16 = buildPlanFor(kTernaryModel, "none", false, &error);
  ASSERT_TRUE(bf16) << error;
  auto packed = buildPlanFor(kTernaryModel, "auto", false, &error, format);
  ASSERT_TRUE(packed) << error;
  EXPECT_EQ(packed->report.packed, 42);
  EXPECT_TRUE(packed->report.kept.empty());
  int packedBuffers = 0;
  for (const plan::Buffer* b : *packed->file->plan().buffers())
    if (b->dtype() == dtype) {
      ++packedBuffers;
      EXPECT_TRUE(isBlockLinear(b->name()->str())) << b->name()->str();
    }
  EXPECT_EQ(packedBuffers, 42);

  const double params = double(packed->file->plan().model()->parameters());
  const double linearValues = double(packed->report.values);
  const double linearBpw = 8.0 * double(weightBytes(*packed->file, true)) / linearValues;
  const double planBpw = 8.0 * double(weightBytes(*packed->file, false)) / params;
  const double bf16PlanBpw = 8.0 * double(weightBytes(*bf16->file, false)) / params;
  std::printf("pycode-ternary-llama-23m: %.0f parameters, %.0f in block linears\n", params,
              linearValues);
  std::printf("  bf16 plan: %10llu bytes file, %.3f bpw (weights)\n",
              (unsigned long long)bf16->file->fileSize(), bf16PlanBpw);
  std::printf("  %s plan:  %10llu bytes file, %.3f bpw (weights), linear layers %.4f bpw\n", name,
              (unsigned long long)packed->file->fileSize(), planBpw, linearBpw);
  EXPECT_LE(linearBpw, format == TernaryFormat::TQ1 ? 2.0 : 2.0 + 1e-3);
  EXPECT_LT(packed->file->fileSize(), bf16->file->fileSize() / 2);

  auto a = createCpuExecutor(*bf16->file, 0);
  auto b = createCpuExecutor(*packed->file, 0);
  ASSERT_TRUE(a && b);
  auto tokenizer = Tokenizer::fromPlan(bf16->file->plan().tokenizer());
  ASSERT_TRUE(tokenizer) << tokenizer.status().message();
  const std::vector<std::string> prompts = {
      "def fibonacci(n):\n",
      "import os\nimport sys\n\n\ndef main():\n",
      "class Stack:\n    def __init__(self):\n        self.items = []\n",
      "for i in range(10):\n    print(",
  };
  const int vocab = bf16->file->plan().model()->vocab_size();
  std::vector<float> la(static_cast<size_t>(vocab)), lb(static_cast<size_t>(vocab));
  double worst = 0;
  for (const std::string& prompt : prompts) {
    auto ids = (*tokenizer)->encode(prompt, true);
    ASSERT_TRUE(ids);
    std::vector<int32_t> seq = *ids;
    ASSERT_TRUE((*a)->forward(seq.data(), int(seq.size()), 0, la.data()));
    ASSERT_TRUE((*b)->forward(seq.data(), int(seq.size()), 0, lb.data()));
    int pos = int(seq.size());
    for (int step = 0; step < 64; ++step) {
      for (int v = 0; v < vocab; ++v)
        worst = std::max(worst, double(std::fabs(la[size_t(v)] - lb[size_t(v)])));
      const int32_t na = int32_t(std::max_element(la.begin(), la.end()) - la.begin());
      const int32_t nb = int32_t(std::max_element(lb.begin(), lb.end()) - lb.begin());
      ASSERT_EQ(na, nb) << "prompt " << prompt << " step " << step;
      seq.push_back(na);
      ASSERT_TRUE((*a)->forward(&na, 1, pos, la.data()));
      ASSERT_TRUE((*b)->forward(&nb, 1, pos, lb.data()));
      ++pos;
    }
    std::string text;
    for (size_t i = ids->size(); i < seq.size(); ++i)
      text += std::to_string(seq[i]) + " ";
    std::printf("  prompt %zu: 64 identical greedy ids (%s...)\n", prompt.size(),
                text.substr(0, 40).c_str());
  }
  std::printf("  max |logit(bf16 plan) - logit(%s plan)| over all steps: %g\n", name, worst);
  // Decoded weights equal the checkpoint's values, so the CPU results are bitwise equal.
  EXPECT_EQ(worst, 0.0);
}

TEST(TernaryPacking, Tq1PlanMatchesBf16Plan) {
  expectPackedPlanMatchesBf16Plan(TernaryFormat::TQ1, plan::DType::TQ1);
}

TEST(TernaryPacking, Tq2PlanMatchesBf16Plan) {
  expectPackedPlanMatchesBf16Plan(TernaryFormat::TQ2, plan::DType::TQ2);
}

} // namespace
} // namespace ninfer
