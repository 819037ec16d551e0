// What a compile starts from: the architecture, the weights and the tokenizer table
// (with the chat template), whichever format they were read from (a Hugging Face
// folder, a GGUF file, or a config.json alone with --dummy-weights).
#pragma once

#include "ModelConfig.h"
#include "WeightStore.h"

#include "plan_generated.h"

#include <memory>

namespace ninfer {

struct ModelSource {
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
  std::unique_ptr<plan::TokenizerT> tokenizer;
};

} // namespace ninfer
