// --dummy-weights --quant qN plans (H14): the compiler declares every linear,
// lm_head and embedding weight in the group format without bytes, the plan
// gives them a DummyFill, and the executors generate the packed bytes with the
// shared quant::dummyUnit (QuantFormats.h). Checks: the plan's buffers, a CPU
// step with finite logits, the CPU executor's weights equal the decoding of a
// direct call of quant::dummyUnit, the layout of the shared fill for all 12
// formats, clear --bpw / --awq refusals, and NVRTC compiling the fill kernel
// (which dispatches every quantized dtype) without a GPU. Also the plan
// builder's KV caches for --kv-dtype int8 and its attention workspace.
#include "CompileDriver.h"
#include "KernelEmitter.h"
#include "Nvrtc.h"

#include "ninfer/DummyFill.h"
#include "ninfer/Executor.h"
#include "ninfer/KvFormat.h"
#include "ninfer/Plan.h"
#include "ninfer/QuantDType.h"
#include "ninfer/QuantFormats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <unistd.h>

namespace ninfer {
namespace {

const std::string kModel = std::string(NINFER_SHARED_DIR) + "/models/pycode-llama-3m";

struct DummyPlan {
  std::string path;
  std::unique_ptr<PlanFile> file;
  ~DummyPlan() {
    file.reset();
    if (!path.empty())
      std::remove(path.c_str());
  }
};

// ninferc's steps for `config.json --dummy-weights --quant <mode> --group <group>`
// without kernels (the CPU executor needs none).
std::unique_ptr<DummyPlan> buildDummyPlan(const QuantOptions& quantOptions, std::string* error,
                                          plan::DType kvDType = plan::DType::F16) {
  auto built = std::make_unique<DummyPlan>();
  static int counter = 0;
  CompileOptions options;
  options.input = kModel + "/config.json";
  options.dummyWeights = true;
  options.quant = quantOptions;
  options.quant.quiet = true;
  options.context = 128;
  options.maxStepTokens = 64;
  options.kvDType = kvDType;
  options.compiler = "compiler_tests";
  options.target = "cpu";
  options.output = "/tmp/ninfer_dummy_quant_test_" + std::to_string(getpid()) + "_" +
                   std::to_string(counter++) + ".nplan";
  auto compiled = compileModel(options);
  if (!compiled) {
    *error = llvm::toString(compiled.takeError());
    return nullptr;
  }
  built->path = options.output;
  auto file = PlanFile::open(built->path);
  if (!file) {
    *error = file.status().message();
    return nullptr;
  }
  built->file = std::move(*file);
  return built;
}

QuantOptions quantMode(const char* mode, int group) {
  QuantOptions options;
  options.mode = mode;
  options.group = group;
  return options;
}

// The f32 values of a dummy quantized buffer, decoded from a direct call of the
// shared fill (the reference the CPU executor's weights must equal).
std::vector<float> referenceWeights(const plan::Buffer& b) {
  const int format = quant::formatOfPlanDType(int(b.dtype()));
  const auto traits = quant::quantFormatTraits(quant::QuantFormatId(format));
  const int64_t rows = b.shape()->Get(0), cols = b.shape()->Get(1);
  const uint64_t units = b.size_bytes() / 2;
  std::vector<uint16_t> bytes(units);
  for (uint64_t u = 0; u < units; ++u)
    bytes[u] = quant::dummyUnit(format, b.dummy()->seed(), u, units, b.dummy()->scale());
  const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
  const auto* scales = reinterpret_cast<const uint16_t*>(
      base + quant::quantScalePlaneOffset(traits.bits, rows, cols));
  std::vector<float> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const auto* words =
        reinterpret_cast<const unsigned int*>(base + r * quant::quantRowWeightBytes(traits.bits, cols));
    for (int64_t k = 0; k < cols; ++k) {
      const unsigned int code = quant::quantCodeAt(traits.bits, words, k);
      const float scale = halfBitsToFloat(quant::quantGroupScaleBitsOf(
          traits.groupSize, scales + r * quant::quantRowScaleBytes(traits.groupSize, cols) / 2,
          k / traits.groupSize));
      out[size_t(r * cols + k)] = scale * float(int(code) - (1 << (traits.bits - 1)));
    }
  }
  return out;
}

// Records the weights the CPU executor hands each Linear / Embedding op.
class WeightRecorder final : public CpuObserver {
public:
  void linearInput(int, const float*, int, int) override {}
  const float* weight(int opIndex, const float* values) override {
    seen[opIndex] = values;
    return values;
  }
  std::map<int, const float*> seen;
};

void checkDummyPlan(const char* mode, int group, plan::DType expected) {
  SCOPED_TRACE(std::string(mode) + " group " + std::to_string(group));
  std::string error;
  auto built = buildDummyPlan(quantMode(mode, group), &error);
  ASSERT_TRUE(built) << error;
  const plan::Plan& plan = built->file->plan();
  EXPECT_TRUE(plan.dummy_weights());
  int quantized = 0;
  for (const plan::Buffer* b : *plan.buffers()) {
    if (b->kind() != plan::BufferKind::Weight)
      continue;
    const std::string name = b->name()->str();
    const bool matrix = name.find("_proj.weight") != std::string::npos ||
                        name == "model.embed_tokens.weight" || name == "lm_head.weight";
    if (!matrix) {
      EXPECT_LT(quant::formatOfPlanDType(int(b->dtype())), 0) << name;
      continue;
    }
    ++quantized;
    EXPECT_EQ(b->dtype(), expected) << name;
    ASSERT_TRUE(b->dummy()) << name;
    const auto traits = quant::quantFormatTraits(
        quant::QuantFormatId(quant::formatOfPlanDType(int(expected))));
    EXPECT_EQ(b->size_bytes(), uint64_t(quant::quantTensorBytes(traits.bits, traits.groupSize,
                                                                b->shape()->Get(0),
                                                                b->shape()->Get(1))))
        << name;
  }
  EXPECT_EQ(quantized, 4 * 7 + 1); // 7 linears a layer + the tied embedding / lm_head

  WeightRecorder recorder;
  auto cpu = createCpuExecutor(*built->file, 2, &recorder);
  ASSERT_TRUE(cpu) << cpu.status().message();
  std::vector<int32_t> ids = {0, 5, 17, 300};
  std::vector<float> logits(4096);
  ASSERT_TRUE((*cpu)->forward(ids.data(), 4, 0, logits.data()));
  double sum = 0, sumSquares = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sumSquares += double(v) * v;
  }
  const double variance = sumSquares / 4096 - (sum / 4096) * (sum / 4096);
  EXPECT_GT(variance, 0.0) << "logits are all equal: the weights are not random";

  // The CPU executor's weights are the shared fill's bytes, decoded.
  int compared = 0;
  for (const auto& [opIndex, values] : recorder.seen) {
    const plan::Op* op = plan.ops()->Get(uint32_t(opIndex));
    const plan::Buffer* w = plan.buffers()->Get(op->inputs()->Get(1));
    if (quant::formatOfPlanDType(int(w->dtype())) < 0)
      continue;
    const std::vector<float> reference = referenceWeights(*w);
    size_t mismatches = 0;
    float largest = 0;
    for (size_t i = 0; i < reference.size(); ++i) {
      mismatches += values[i] != reference[i];
      largest = std::max(largest, std::fabs(reference[i]));
    }
    EXPECT_EQ(mismatches, 0u) << w->name()->str();
    EXPECT_GT(largest, 0.0f) << w->name()->str();
    EXPECT_LE(largest, 1.01f * w->dummy()->scale()) << w->name()->str(); // fp16 scale rounding
    ++compared;
  }
  EXPECT_GE(compared, 4 * 7 + 1) << "every quantized linear and the embedding are compared";
}

TEST(DummyQuant, Q4PlanRunsOnCpuWithSharedFill) {
  checkDummyPlan("q4", 64, plan::DType::Q4_G64);
}

TEST(DummyQuant, OtherFormatsRunOnCpu) {
  checkDummyPlan("q8", 128, plan::DType::Q8_G128);
  checkDummyPlan("q3", 32, plan::DType::Q3_G32);
  checkDummyPlan("q2", 64, plan::DType::Q2_G64);
  checkDummyPlan("q6", 32, plan::DType::Q6_G32);
  checkDummyPlan("q5", 128, plan::DType::Q5_G128);
  checkDummyPlan("q3", 16, plan::DType::Q3_K16);
}

TEST(DummyQuant, BpwAndAwqAreRefusedClearly) {
  std::string error;
  QuantOptions bpw;
  bpw.bpw = 4.5;
  EXPECT_FALSE(buildDummyPlan(bpw, &error));
  EXPECT_EQ(error.rfind("--bpw is not supported with --dummy-weights", 0), 0u) << error;
  QuantOptions awq = quantMode("q4", 64);
  awq.awq = true;
  EXPECT_FALSE(buildDummyPlan(awq, &error));
  EXPECT_EQ(error.rfind("--awq is not supported with --dummy-weights", 0), 0u) << error;
}

// The shared fill's layout for every format: weight-plane units are halves of
// dummyHash words, every scale-plane unit is fp16(scale / 2^(bits-1)) (K16:
// records of that unit scale and sub-scales 1, so the group scales are the same).
TEST(DummyQuant, SharedFillLayout) {
  for (int id = 0; id < quant::kQuantFormatCount; ++id) {
    const auto traits = quant::quantFormatTraits(quant::QuantFormatId(id));
    SCOPED_TRACE(traits.name);
    for (int64_t rows : {1, 3, 8}) {
      const int64_t cols = 256;
      const uint64_t bytes = uint64_t(quant::quantTensorBytes(traits.bits, traits.groupSize, rows,
                                                              cols));
      const uint64_t units = bytes / 2;
      const uint64_t weightUnits =
          uint64_t(quant::quantScalePlaneOffset(traits.bits, rows, cols)) / 2;
      const uint16_t scale = floatToHalfBits(0.02f / float(1 << (traits.bits - 1)));
      for (uint64_t u = 0; u < units; ++u) {
        const uint16_t got = quant::dummyUnit(id, 7, u, units, 0.02f);
        uint16_t want = scale;
        if (traits.groupSize == quant::kQuantK16Group && u >= weightUnits) {
          uint16_t record[4];
          const int ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
          quant::setK16Record(record, scale, ones);
          want = record[(u - weightUnits) % 4];
          ASSERT_EQ(quant::quantGroupScaleBits<quant::kQuantK16Group>(record, 5), scale);
        }
        if (u < weightUnits) {
          const uint32_t word = uint32_t(dummyHash(7, u / 2));
          want = uint16_t(u % 2 ? word >> 16 : word & 0xFFFFu);
        }
        ASSERT_EQ(got, want) << "rows " << rows << " unit " << u << " of " << units;
      }
    }
  }
}

// NVRTC compiles the fill kernel (one kernel, every quantized dtype is a
// runtime branch) plus a probe that calls the dtype mapping and the shared
// fill in device code for each quantized dtype. No GPU needed.
TEST(DummyQuant, FillKernelCompilesWithNvrtc) {
  std::string source = "#include \"fill.cuh\"\n"
                       "extern \"C\" __global__ void probe(unsigned short *out) {\n";
  for (int dtype = 0; dtype < 256; ++dtype)
    if (quant::formatOfPlanDType(dtype) >= 0)
      source += "  out[" + std::to_string(dtype) +
                "] = ninfer::quant::dummyUnit(ninfer::quant::formatOfPlanDType(" +
                std::to_string(dtype) + "), 1u, threadIdx.x, 1000ull, 0.02f);\n";
  source += "}\n";
  for (const char* arch : {"compute_75", "sm_90"}) {
    Result<std::string> compiled = nvrtc::compile(source, "dummy_quant_fill", arch);
    ASSERT_TRUE(compiled) << arch << ": " << compiled.status().message();
    EXPECT_FALSE(compiled->empty());
    if (std::string(arch).rfind("compute_", 0) == 0) {
      EXPECT_NE(compiled->find("ninfer_fill_dummy"), std::string::npos);
      EXPECT_NE(compiled->find("probe"), std::string::npos);
    }
  }
}

// --kv-dtype int8: every layer's caches are Q8_KV sized by KvFormat.h, the KV
// arena shrinks accordingly, one workspace serves all attention ops, and the
// CPU executor runs the plan.
TEST(KvCachePlan, Int8CachesAndSharedWorkspace) {
  std::string error;
  auto f16 = buildDummyPlan(quantMode("none", 64), &error);
  ASSERT_TRUE(f16) << error;
  auto q8 = buildDummyPlan(quantMode("none", 64), &error, plan::DType::Q8_KV);
  ASSERT_TRUE(q8) << error;
  const plan::Plan& p = q8->file->plan();
  int caches = 0;
  uint32_t workspace = 0;
  for (const plan::Op* op : *p.ops()) {
    const auto* a = op->attrs_as_AttentionAttrs();
    if (!a)
      continue;
    ASSERT_EQ(op->inputs()->size(), 6u);
    for (uint32_t k = 3; k <= 4; ++k) {
      const plan::Buffer* cache = p.buffers()->Get(op->inputs()->Get(k));
      EXPECT_EQ(cache->dtype(), plan::DType::Q8_KV);
      EXPECT_EQ(cache->size_bytes(),
                uint64_t(kv::q8CacheBytes(a->context(), a->kv_heads(), a->head_dim())));
      ++caches;
    }
    const uint32_t ws = op->inputs()->Get(5);
    EXPECT_TRUE(workspace == 0 || workspace == ws);
    workspace = ws;
    EXPECT_EQ(p.buffers()->Get(ws)->kind(), plan::BufferKind::Workspace);
    EXPECT_GE(p.buffers()->Get(ws)->size_bytes(),
              attentionWorkspaceBytes(a->heads(), a->kv_heads(), a->head_dim(), a->context()));
  }
  EXPECT_EQ(caches, 2 * p.model()->layers());
  EXPECT_GE(p.memory()->workspace_bytes(), p.buffers()->Get(workspace)->size_bytes());
  EXPECT_LT(p.memory()->kv_bytes(), f16->file->plan().memory()->kv_bytes() * 6 / 10);
  auto executor = createCpuExecutor(*q8->file, 2);
  ASSERT_TRUE(executor.isOk()) << executor.status().message();
  std::vector<float> logits(size_t(p.model()->vocab_size()));
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  ASSERT_TRUE((*executor)->forward(tokens.data(), 4, 0, logits.data()).isOk());
  ASSERT_TRUE((*executor)->forward(tokens.data(), 1, 4, logits.data()).isOk());
  for (float x : logits)
    ASSERT_TRUE(std::isfinite(x));
}

} // namespace
} // namespace ninfer
