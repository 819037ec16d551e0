// The plan loader: a valid plan opens; every kind of damage is refused with one
// line that names the file and the problem, and nothing crashes.
#include "TestModel.h"
#include "TestPlan.h"

#include "ninfer/Executor.h"
#include "ninfer/Format.h"
#include "ninfer/Plan.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace test {
namespace {

TinyModel smallModel() {
  TinyModelSpec spec;
  spec.layers = 1;
  return buildTinyModel(spec);
}

std::string openError(const std::string& path) {
  auto result = PlanFile::open(path);
  EXPECT_FALSE(result.isOk()) << "plan " << path << " was accepted";
  if (result.isOk())
    return "";
  const std::string& message = result.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.rfind(path, 0), 0u) << "message should start with the path: " << message;
  return message;
}

std::string openBytesError(const std::vector<uint8_t>& bytes, const std::string& name) {
  const std::string path = tempPath(name);
  writeFile(path, bytes);
  return openError(path);
}

TEST(PlanFile, OpensAValidPlanAndMapsWeights) {
  TinyModel m = smallModel();
  const std::string path = m.maker.write("valid.nplan");
  auto file = PlanFile::open(path);
  ASSERT_TRUE(file.isOk()) << file.status().message();
  const plan::Plan& p = file.value()->plan();
  // A plan of one sequence is written as the oldest version that describes it.
  EXPECT_EQ(p.format_version(), formatVersionFor(1));
  EXPECT_EQ(p.max_batch(), 1);
  EXPECT_EQ(p.context(), m.spec.context);
  EXPECT_EQ(p.weights_file_offset() % kWeightAlignment, 0u);
  for (const auto& [index, bytes] : m.maker.weightBytes) {
    const uint8_t* data = file.value()->weightData(index);
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(std::memcmp(data, bytes.data(), bytes.size()), 0) << "weight " << index;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % kWeightAlignment, 0u);
  }
  EXPECT_EQ(file.value()->weightData(m.maker.tokens()), nullptr);
  EXPECT_EQ(file.value()->weightData(100000), nullptr);
}

TEST(PlanFile, RejectsMissingAndTinyFiles) {
  EXPECT_NE(openError(tempPath("does_not_exist.nplan")).find("cannot open"), std::string::npos);
  EXPECT_NE(openBytesError({}, "empty.nplan").find("too small"), std::string::npos);
  EXPECT_NE(openBytesError({1, 2, 3}, "three.nplan").find("too small"), std::string::npos);
}

TEST(PlanFile, RejectsEveryTruncation) {
  TinyModel m = smallModel();
  const std::vector<uint8_t> bytes = m.maker.bytes();
  // Every cut in the header, a dense sample over the flatbuffer and a sparse one
  // over the weights.
  for (size_t cut = 0; cut < bytes.size(); cut += cut < 512 ? 1 : cut < 8192 ? 7 : 997) {
    std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + cut);
    const std::string path = tempPath("truncated.nplan");
    writeFile(path, truncated);
    auto result = PlanFile::open(path);
    ASSERT_FALSE(result.isOk()) << "accepted a plan cut at " << cut << " of " << bytes.size();
  }
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
  EXPECT_NE(openBytesError(cut, "cut.nplan").find("past the end of the file"), std::string::npos);
  std::vector<uint8_t> half(bytes.begin(), bytes.begin() + 200);
  EXPECT_NE(openBytesError(half, "half.nplan").find("truncated"), std::string::npos);
}

TEST(PlanFile, RejectsWrongIdentifier) {
  TinyModel m = smallModel();
  std::vector<uint8_t> bytes = m.maker.bytes();
  bytes[8] = 'X';
  EXPECT_NE(openBytesError(bytes, "ident.nplan").find("not a ninfer plan"), std::string::npos);
}

TEST(PlanFile, RejectsAFlippedRootOffset) {
  TinyModel m = smallModel();
  std::vector<uint8_t> bytes = m.maker.bytes();
  bytes[6] ^= 0x10; // root table offset now points far outside the buffer
  EXPECT_NE(openBytesError(bytes, "flip.nplan").find("corrupt plan"), std::string::npos);
}

// Any single flipped byte in the flatbuffer is either refused or yields a plan
// that passes the semantic checks and runs one step without crashing.
TEST(PlanFile, SurvivesEverySingleByteFlip) {
  TinyModelSpec spec;
  spec.layers = 1;
  spec.vocab = 11;
  spec.context = 8;
  spec.maxStepTokens = 2;
  TinyModel m = buildTinyModel(spec);
  const std::vector<uint8_t> bytes = m.maker.bytes();
  const uint32_t flatbufferEnd = 4 + (bytes[0] | bytes[1] << 8 | bytes[2] << 16 | bytes[3] << 24);
  int accepted = 0;
  const std::string path = tempPath("fuzz.nplan");
  for (uint32_t i = 0; i < flatbufferEnd; ++i) {
    std::vector<uint8_t> damaged = bytes;
    damaged[i] ^= 0xA5;
    writeFile(path, damaged);
    auto file = PlanFile::open(path);
    if (!file.isOk())
      continue;
    ++accepted;
    auto executor = createCpuExecutor(*file.value(), 1);
    if (!executor.isOk())
      continue;
    const int32_t tokens[2] = {1, 2};
    std::vector<float> logits(size_t(file.value()->plan().model()->vocab_size()));
    (void)executor.value()->forward(tokens, 2, 0, logits.data());
  }
  // Flipping a name character or a float value is legitimately accepted.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, int(flatbufferEnd));
}

TEST(PlanFile, RejectsOtherFormatVersion) {
  for (uint32_t version : {kFormatVersion + 1, kOldestFormatVersion - 1}) {
    TinyModel m = smallModel();
    m.maker.plan.format_version = version;
    const std::string message = openError(m.maker.write("version.nplan"));
    EXPECT_NE(message.find("plan format version " + std::to_string(version) +
                           ", this ninfer reads versions " + std::to_string(kOldestFormatVersion) +
                           " to " + std::to_string(kFormatVersion) + ": recompile the plan"),
              std::string::npos)
        << message;
  }
  // Every version in the range opens.
  for (uint32_t version = kOldestFormatVersion; version <= kFormatVersion; ++version) {
    TinyModel m = smallModel();
    m.maker.plan.format_version = version;
    EXPECT_TRUE(PlanFile::open(m.maker.write("version_ok.nplan")).isOk()) << version;
  }
}

// Plans of several sequences (ninferc --batch): max_batch in range, format
// version 2, a slot per sequence in every KV cache, a logits row per sequence.
TEST(PlanFile, ChecksPlansOfSeveralSequences) {
  auto batchModel = [](int maxBatch) {
    TinyModelSpec spec;
    spec.layers = 1;
    spec.maxBatch = maxBatch;
    return buildTinyModel(spec);
  };
  {
    TinyModel m = batchModel(4);
    auto file = PlanFile::open(m.maker.write("batch4.nplan"));
    ASSERT_TRUE(file.isOk()) << file.status().message();
    EXPECT_EQ(file.value()->plan().max_batch(), 4);
    EXPECT_EQ(file.value()->plan().format_version(), 2u);
  }
  for (int bad : {0, -1, 9}) {
    TinyModel m = batchModel(4);
    m.maker.plan.max_batch = bad;
    EXPECT_NE(openError(m.maker.write("batch_bad.nplan"))
                  .find("the plan's max_batch is " + std::to_string(bad) + ", expected 1 to 8"),
              std::string::npos);
  }
  {
    TinyModel m = batchModel(4);
    m.maker.plan.max_step_tokens = 3; // rows of a batch step are activation rows
    EXPECT_NE(openError(m.maker.write("batch_steps.nplan")).find("max_batch is 4, expected 1 to 3"),
              std::string::npos);
  }
  {
    TinyModel m = batchModel(4);
    m.maker.plan.format_version = 1;
    EXPECT_NE(openError(m.maker.write("batch_v1.nplan"))
                  .find("plan format version 1 cannot hold a plan of several sequences"),
              std::string::npos);
  }
  {
    // A cache of one sequence in a plan of two, and the other way round (the
    // logits made right for the plan, so the caches are what is wrong).
    auto setLogitsRows = [](TinyModel& m, int rows) {
      auto& logits = *m.maker.plan.buffers[m.maker.logits()];
      logits.shape = {rows, m.spec.vocab};
      logits.size_bytes = uint64_t(rows) * uint64_t(m.spec.vocab) * 4;
    };
    TinyModel one = batchModel(1);
    one.maker.plan.max_batch = 2;
    one.maker.plan.format_version = 2;
    setLogitsRows(one, 2);
    EXPECT_NE(openError(one.maker.write("batch_cache3.nplan"))
                  .find("a KV cache must be [2, context, kv_heads, head_dim] in a plan of "
                        "max_batch 2"),
              std::string::npos);
    TinyModel two = batchModel(2);
    two.maker.plan.max_batch = 1;
    setLogitsRows(two, 1);
    EXPECT_NE(openError(two.maker.write("batch_cache4.nplan"))
                  .find("a KV cache must be [context, kv_heads, head_dim] in a plan of "
                        "max_batch 1"),
              std::string::npos);
  }
  {
    // The logits hold a row per sequence.
    TinyModel m = batchModel(2);
    auto& logits = *m.maker.plan.buffers[m.maker.logits()];
    logits.shape = {1, m.spec.vocab};
    logits.size_bytes = uint64_t(m.spec.vocab) * 4;
    EXPECT_NE(openError(m.maker.write("batch_logits.nplan"))
                  .find("the logits buffer must be F32 with max_batch x vocab_size (2 x 37)"),
              std::string::npos);
  }
  {
    // A launch with a steps value the schema does not know.
    TinyModel m = batchModel(2);
    auto launch = std::make_unique<plan::LaunchT>();
    launch->grid_base = {1, 1, 1};
    launch->grid_per_token = {0, 0, 0};
    launch->block = {32, 1, 1};
    launch->steps = static_cast<plan::LaunchSteps>(7);
    m.maker.plan.kernels->functions = {"k"};
    m.maker.plan.ops[0]->launches.push_back(std::move(launch));
    EXPECT_NE(
        openError(m.maker.write("batch_steps_enum.nplan")).find("launch 0 has unknown steps 7"),
        std::string::npos);
  }
}

TEST(PlanFile, RejectsOutOfRangeBufferIndexNamingTheOp) {
  TinyModel m = smallModel();
  plan::OpT& op = *m.maker.plan.ops[2]; // layers.0.q_proj
  ASSERT_EQ(op.name, "layers.0.q_proj");
  op.inputs[1] = 999;
  const std::string message = openError(m.maker.write("index.nplan"));
  EXPECT_NE(message.find("op 2 (layers.0.q_proj, Linear): input 1 refers to buffer 999"),
            std::string::npos)
      << message;
}

TEST(PlanFile, RejectsWrongBufferKindsAndShapes) {
  {
    TinyModel m = smallModel();
    m.maker.plan.ops[2]->inputs[1] = m.maker.plan.ops[2]->inputs[0]; // activation as weight
    const std::string message = openError(m.maker.write("kind.nplan"));
    EXPECT_NE(message.find("op 2 (layers.0.q_proj, Linear): weight is buffer"), std::string::npos)
        << message;
  }
  {
    TinyModel m = smallModel();
    m.maker.plan.ops[2]->attrs.AsLinearAttrs()->in_features = 17;
    const std::string message = openError(m.maker.write("width.nplan"));
    EXPECT_NE(message.find("op 2 (layers.0.q_proj, Linear)"), std::string::npos) << message;
  }
  {
    TinyModel m = smallModel();
    m.maker.plan.ops[2]->inputs.pop_back();
    const std::string message = openError(m.maker.write("arity.nplan"));
    EXPECT_NE(message.find("has 1 inputs and 1 outputs, expected 2 and 1"), std::string::npos)
        << message;
  }
  {
    TinyModel m = smallModel();
    m.maker.plan.buffers[5]->size_bytes += 4;
    const std::string message = openError(m.maker.write("size.nplan"));
    EXPECT_NE(message.find("does not match its shape and dtype"), std::string::npos) << message;
  }
  {
    TinyModel m = smallModel();
    m.maker.plan.logits_buffer = m.maker.tokens();
    const std::string message = openError(m.maker.write("logits.nplan"));
    EXPECT_NE(message.find("is not a Logits buffer"), std::string::npos) << message;
  }
  {
    TinyModel m = smallModel();
    m.maker.plan.memory->activation_bytes = 64;
    const std::string message = openError(m.maker.write("arena.nplan"));
    EXPECT_NE(message.find("outside the activation arena"), std::string::npos) << message;
  }
  {
    TinyModel m = smallModel();
    // o_proj writing into its own input (not allowed for a Linear).
    plan::OpT& oProj = *m.maker.plan.ops[8];
    ASSERT_EQ(oProj.name, "layers.0.o_proj");
    oProj.outputs[0] = m.maker.plan.ops[7]->outputs[0]; // attention output, same width?
    const std::string message = openError(m.maker.write("alias.nplan"));
    EXPECT_NE(message.find("op 8 (layers.0.o_proj, Linear)"), std::string::npos) << message;
  }
}

// int8 KV caches are sized as KvFormat.h says and must match each other; a
// workspace input must be a Workspace buffer inside the workspace.
TEST(PlanFile, ChecksQ8KvCachesAndWorkspaces) {
  TinyModelSpec spec;
  spec.layers = 1;
  spec.kvDtype = plan::DType::Q8_KV;
  {
    TinyModel m = buildTinyModel(spec);
    EXPECT_TRUE(PlanFile::open(m.maker.write("q8.nplan")).isOk());
  }
  auto cacheOf = [](TinyModel& m, int which) -> plan::BufferT& {
    return *m.maker.plan.buffers[m.maker.plan.ops[7]->inputs[size_t(3 + which)]];
  };
  {
    TinyModel m = buildTinyModel(spec);
    cacheOf(m, 0).size_bytes -= 4; // one scale short
    const std::string message = openError(m.maker.write("q8size.nplan"));
    EXPECT_NE(message.find("does not match its shape and dtype Q8_KV"), std::string::npos)
        << message;
  }
  {
    TinyModel m = buildTinyModel(spec);
    plan::BufferT& v = cacheOf(m, 1);
    v.dtype = plan::DType::F16;
    v.size_bytes = uint64_t(spec.context) * spec.kvHeads * spec.headDim * 2;
    const std::string message = openError(m.maker.write("q8mixed.nplan"));
    EXPECT_NE(message.find("k_cache and v_cache have different dtypes"), std::string::npos)
        << message;
  }
  {
    TinyModel m = buildTinyModel(spec);
    m.maker.plan.ops[7]->inputs.push_back(m.maker.plan.ops[7]->inputs[0]); // q as workspace
    const std::string message = openError(m.maker.write("workspace.nplan"));
    EXPECT_NE(message.find("workspace is buffer"), std::string::npos) << message;
  }
  {
    TinyModel m = buildTinyModel(spec);
    auto workspace = std::make_unique<plan::BufferT>();
    workspace->name = "ws";
    workspace->kind = plan::BufferKind::Workspace;
    workspace->dtype = plan::DType::F32;
    workspace->shape = {64};
    workspace->size_bytes = 256;
    m.maker.plan.buffers.push_back(std::move(workspace));
    m.maker.plan.ops[7]->inputs.push_back(uint32_t(m.maker.plan.buffers.size() - 1));
    m.maker.plan.memory->workspace_bytes = 256;
    EXPECT_TRUE(PlanFile::open(m.maker.write("ws_ok.nplan")).isOk());
    m.maker.plan.memory->workspace_bytes = 128;
    const std::string message = openError(m.maker.write("ws_small.nplan"));
    EXPECT_NE(message.find("(ws): range [0, +256) lies outside the workspace (128 bytes)"),
              std::string::npos)
        << message;
  }
}

TEST(PlanFile, RejectsWeightSegmentPastTheWeightArea) {
  TinyModel m = smallModel();
  std::vector<uint8_t> bytes = m.maker.bytes(); // assigns offsets
  // Serialize again with one weight moved past the end of the weight area.
  plan::PlanT& p = m.maker.plan;
  const uint32_t embed = 2;
  ASSERT_EQ(p.buffers[embed]->name, "embed");
  flatbuffers::FlatBufferBuilder builder;
  p.buffers[embed]->offset = p.weights_size;
  builder.FinishSizePrefixed(plan::Plan::Pack(builder, &p), plan::PlanIdentifier());
  ASSERT_LE(builder.GetSize(), p.weights_file_offset);
  std::memcpy(bytes.data(), builder.GetBufferPointer(), builder.GetSize());
  const std::string message = openBytesError(bytes, "segment.nplan");
  EXPECT_NE(message.find("buffer 2 (embed): weight segment"), std::string::npos) << message;
  EXPECT_NE(message.find("outside the weight area"), std::string::npos) << message;
}

TEST(PlanFile, AcceptsDummyWeightsWithoutBytes) {
  PlanMaker pm(5, 4, 2);
  const uint32_t table = pm.addDummyWeight("table", plan::DType::F16, {5, 3}, 7, 0.5f, 0.0f);
  const uint32_t x = pm.addActivation("x", 3);
  plan::EmbeddingAttrsT e;
  e.dim = 3;
  e.vocab = 5;
  pm.addOp("embed", e, {pm.tokens(), table}, {x});
  auto file = PlanFile::open(pm.write("dummy.nplan"));
  ASSERT_TRUE(file.isOk()) << file.status().message();
  EXPECT_EQ(file.value()->weightData(table), nullptr);
}

} // namespace
} // namespace test
} // namespace ninfer
