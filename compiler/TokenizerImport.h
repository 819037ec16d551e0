// Reads the checkpoint's tokenizer files (tokenizer.json, tokenizer_config.json,
// generation_config.json) into the plan's tokenizer table. A checkpoint without
// tokenizer files gets a table of kind None that still carries BOS/EOS ids.
#pragma once

#include "ModelConfig.h"
#include "plan_generated.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace ninfer {

llvm::Expected<std::unique_ptr<plan::TokenizerT>> importTokenizer(const std::string& modelDir,
                                                                  const ModelConfig& config);

} // namespace ninfer
