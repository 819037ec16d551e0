// Test helpers: build small plans with the flatbuffers object API and write
// them as .nplan files (size-prefixed flatbuffer with the NPLN identifier, zero
// padding, 4096-aligned weight segments), independently of the compiler's writer.
#pragma once

#include "plan_generated.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ninfer {
namespace test {

// Builds a plan buffer by buffer. Activations and KV caches are packed into
// their arenas in order; weights get their bytes from the given values.
class PlanMaker {
public:
  // maxBatch > 1: a plan of several sequences (KV caches and logits get a
  // slot / row per sequence).
  PlanMaker(int vocab, int context, int maxStepTokens, int maxBatch = 1);

  uint32_t tokens() const { return tokens_; }
  uint32_t logits() const { return logits_; }

  uint32_t addWeight(const std::string& name, plan::DType dtype, std::vector<int64_t> shape,
                     const std::vector<float>& values);
  uint32_t addDummyWeight(const std::string& name, plan::DType dtype, std::vector<int64_t> shape,
                          uint32_t seed, float scale, float offset);
  uint32_t addActivation(const std::string& name, int64_t width);
  // An F16 or Q8_KV cache [context, kvHeads, headDim] ([max_batch, context,
  // kvHeads, headDim] in a plan of several sequences).
  uint32_t addKvCache(const std::string& name, int kvHeads, int headDim,
                      plan::DType dtype = plan::DType::F16);

  template <typename Attrs>
  void addOp(const std::string& name, const Attrs& attrs, std::vector<uint32_t> inputs,
             std::vector<uint32_t> outputs) {
    auto op = std::make_unique<plan::OpT>();
    op->name = name;
    op->attrs.Set(Attrs(attrs));
    op->inputs = std::move(inputs);
    op->outputs = std::move(outputs);
    plan.ops.push_back(std::move(op));
  }

  // Serialized file bytes (format_version as set in `plan`, default current).
  std::vector<uint8_t> bytes();
  // Writes bytes() to a fresh file under the test temp dir; returns its path.
  std::string write(const std::string& fileName);

  plan::PlanT plan;
  std::map<uint32_t, std::vector<uint8_t>> weightBytes;

private:
  uint32_t addBuffer(const std::string& name, plan::BufferKind kind, plan::DType dtype,
                     std::vector<int64_t> shape);
  uint32_t tokens_ = 0;
  uint32_t logits_ = 0;
};

// Size-prefixed flatbuffer + padding + weights; sets the weight offsets,
// weights_file_offset and weights_size in `plan`.
std::vector<uint8_t> serializePlan(plan::PlanT& plan,
                                   const std::map<uint32_t, std::vector<uint8_t>>& weights);

std::string tempPath(const std::string& fileName);
void writeFile(const std::string& path, const std::vector<uint8_t>& bytes);

} // namespace test
} // namespace ninfer
