// Plan construction and serialization for the runtime tests.
#include "TestPlan.h"

#include "Half.h"
#include "ninfer/Format.h"
#include "ninfer/KvFormat.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>
#include <unistd.h>

namespace ninfer {
namespace test {

PlanMaker::PlanMaker(int vocab, int context, int maxStepTokens, int maxBatch) {
  plan.format_version = formatVersionFor(maxBatch);
  plan.max_batch = maxBatch;
  plan.compiler = "test";
  plan.target = "cpu-test";
  plan.context = context;
  plan.max_step_tokens = maxStepTokens;
  plan.model = std::make_unique<plan::ModelInfoT>();
  plan.model->family = "test";
  plan.model->vocab_size = vocab;
  plan.memory = std::make_unique<plan::MemoryPlanT>();
  plan.tokenizer = std::make_unique<plan::TokenizerT>();
  plan.kernels = std::make_unique<plan::KernelModuleT>();
  tokens_ = addBuffer("tokens", plan::BufferKind::Tokens, plan::DType::I32, {maxStepTokens});
  logits_ = addBuffer("logits", plan::BufferKind::Logits, plan::DType::F32, {maxBatch, vocab});
  plan.tokens_buffer = tokens_;
  plan.logits_buffer = logits_;
}

uint32_t PlanMaker::addBuffer(const std::string& name, plan::BufferKind kind, plan::DType dtype,
                              std::vector<int64_t> shape) {
  auto b = std::make_unique<plan::BufferT>();
  b->name = name;
  b->kind = kind;
  b->dtype = dtype;
  uint64_t elements = 1;
  for (int64_t d : shape)
    elements *= uint64_t(d);
  b->shape = std::move(shape);
  b->size_bytes = elements * (dtype == plan::DType::F16 || dtype == plan::DType::BF16 ? 2 : 4);
  plan.buffers.push_back(std::move(b));
  return uint32_t(plan.buffers.size() - 1);
}

uint32_t PlanMaker::addWeight(const std::string& name, plan::DType dtype,
                              std::vector<int64_t> shape, const std::vector<float>& values) {
  const uint32_t index = addBuffer(name, plan::BufferKind::Weight, dtype, std::move(shape));
  if (values.size() * (dtype == plan::DType::F32 ? 4 : 2) != plan.buffers[index]->size_bytes)
    throw std::runtime_error("addWeight: value count does not match the shape of " + name);
  std::vector<uint8_t>& bytes = weightBytes[index];
  bytes.resize(plan.buffers[index]->size_bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == plan::DType::F32) {
      std::memcpy(&bytes[4 * i], &values[i], 4);
    } else {
      const uint16_t bits =
          dtype == plan::DType::F16 ? floatToHalfBits(values[i]) : floatToBf16(values[i]);
      std::memcpy(&bytes[2 * i], &bits, 2);
    }
  }
  plan.memory->weight_bytes += bytes.size();
  return index;
}

uint32_t PlanMaker::addDummyWeight(const std::string& name, plan::DType dtype,
                                   std::vector<int64_t> shape, uint32_t seed, float scale,
                                   float offset) {
  const uint32_t index = addBuffer(name, plan::BufferKind::Weight, dtype, std::move(shape));
  plan.buffers[index]->dummy = std::make_unique<plan::DummyFill>(seed, scale, offset);
  plan.dummy_weights = true;
  return index;
}

uint32_t PlanMaker::addActivation(const std::string& name, int64_t width) {
  const uint32_t index = addBuffer(name, plan::BufferKind::Activation, plan::DType::F32,
                                   {plan.max_step_tokens, width});
  plan.buffers[index]->offset = plan.memory->activation_bytes;
  plan.memory->activation_bytes += alignUp(plan.buffers[index]->size_bytes, 256);
  return index;
}

uint32_t PlanMaker::addKvCache(const std::string& name, int kvHeads, int headDim,
                              plan::DType dtype) {
  std::vector<int64_t> shape{plan.context, kvHeads, headDim};
  if (plan.max_batch > 1)
    shape.insert(shape.begin(), plan.max_batch);
  const uint32_t index = addBuffer(name, plan::BufferKind::KvCache, dtype, shape);
  if (dtype == plan::DType::Q8_KV)
    plan.buffers[index]->size_bytes =
        uint64_t(plan.max_batch) * uint64_t(kv::q8CacheBytes(plan.context, kvHeads, headDim));
  plan.buffers[index]->offset = plan.memory->kv_bytes;
  plan.memory->kv_bytes += alignUp(plan.buffers[index]->size_bytes, 256);
  return index;
}

std::vector<uint8_t> PlanMaker::bytes() { return serializePlan(plan, weightBytes); }

std::string PlanMaker::write(const std::string& fileName) {
  const std::string path = tempPath(fileName);
  writeFile(path, bytes());
  return path;
}

std::vector<uint8_t> serializePlan(plan::PlanT& p,
                                   const std::map<uint32_t, std::vector<uint8_t>>& weights) {
  uint64_t weightArea = 0;
  for (const auto& [index, bytes] : weights) {
    p.buffers.at(index)->offset = weightArea;
    weightArea = alignUp(weightArea + bytes.size(), kWeightAlignment);
  }
  p.weights_size = weightArea;
  // The flatbuffer's size depends on whether weights_file_offset is non-zero,
  // not on its value: build once with a placeholder, then with the real offset.
  p.weights_file_offset = kWeightAlignment;
  flatbuffers::FlatBufferBuilder builder;
  for (int pass = 0; pass < 3; ++pass) {
    builder.Clear();
    builder.FinishSizePrefixed(plan::Plan::Pack(builder, &p), plan::PlanIdentifier());
    const uint64_t start = alignUp(builder.GetSize(), kWeightAlignment);
    if (start == p.weights_file_offset)
      break;
    p.weights_file_offset = start;
  }
  std::vector<uint8_t> file(p.weights_file_offset + weightArea, 0);
  std::memcpy(file.data(), builder.GetBufferPointer(), builder.GetSize());
  for (const auto& [index, bytes] : weights)
    std::memcpy(file.data() + p.weights_file_offset + p.buffers[index]->offset, bytes.data(),
                bytes.size());
  return file;
}

namespace {
// Removes the test's temporary files when the process ends.
struct TempFiles {
  std::set<std::string> paths;
  ~TempFiles() {
    for (const std::string& path : paths) {
      std::remove(path.c_str());
      std::remove((path + ".tmp").c_str());
    }
  }
};
TempFiles& tempFiles() {
  static TempFiles files;
  return files;
}
} // namespace

std::string tempPath(const std::string& fileName) {
  // tmpfs when there is one: the loader tests write thousands of small files.
  const char* env = std::getenv("TMPDIR");
  std::string dir = env && *env ? env : "/tmp";
  if (!(env && *env) && access("/dev/shm", W_OK) == 0)
    dir = "/dev/shm";
  const std::string path = dir + "/ninfer_rt_" + std::to_string(getpid()) + "_" + fileName;
  tempFiles().paths.insert(path);
  return path;
}

void writeFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

} // namespace test
} // namespace ninfer
