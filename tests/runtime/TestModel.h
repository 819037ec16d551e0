// A tiny llama-style model built as a plan (for the CPU executor, the generator
// and the CLI tests) together with a naive double-precision reference of the
// same model that tests compare the executor against.
#pragma once

#include "TestPlan.h"

#include "ninfer/Executor.h"
#include "ninfer/Plan.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ninfer {
namespace test {

struct TinyModelSpec {
  int vocab = 37;
  int hidden = 16;
  int heads = 4;
  int kvHeads = 2;
  int headDim = 4;
  int intermediate = 24;
  int layers = 2;
  int context = 40;
  int maxStepTokens = 8;
  int maxBatch = 1; // sequences (KV-cache slots) of the plan
  int window = 0;
  bool qkvBias = false;
  bool qkNorm = false;
  float theta = 10000.0f;
  float attentionFactor = 1.0f;
  float dynamicFactor = 0.0f; // > 0: dynamic NTK RoPE
  int originalMaxPositions = 0;
  bool longFactors = false; // LongRoPE: a long inv_freq table past originalMaxPositions
  plan::DType weightDtype = plan::DType::F32;
  plan::DType kvDtype = plan::DType::F16; // F16 or Q8_KV (the reference model ignores it)
  uint32_t seed = 1;
  float eps = 1e-5f;
};

struct TinyModel {
  TinyModelSpec spec;
  PlanMaker maker;
  // Weights as the executor sees them (rounded through weightDtype).
  struct Layer {
    std::vector<float> attnNorm, wq, wk, wv, bq, bk, bv, qNorm, kNorm, wo, mlpNorm, wg, wu, wd;
  };
  std::vector<float> embed, finalNorm, lmHead, invFreq;
  std::vector<Layer> layers;
};

TinyModel buildTinyModel(const TinyModelSpec& spec);

// A plan file opened with a CPU executor of `threads` threads; members stay
// null (and the test fails) when a step fails.
struct Loaded {
  std::unique_ptr<PlanFile> file;
  std::unique_ptr<Executor> executor;
};
Loaded openWithCpu(const std::string& path, int threads = 2);
// The model's plan written to `fileName`, then openWithCpu().
Loaded load(TinyModel& model, const std::string& fileName, int threads = 2);

// Runs the reference over `tokens` in steps of the given sizes (positions
// continue across steps, like the executor's KV cache) and returns the logits
// of every step's last token. K and V are rounded to f16 as the cache stores them.
std::vector<std::vector<double>> referenceStepLogits(const TinyModel& model,
                                                     const std::vector<int32_t>& tokens,
                                                     const std::vector<int>& steps);

} // namespace test
} // namespace ninfer
