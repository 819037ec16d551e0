// Phi-3 checkpoints (model_type phi3) are llama decoders whose q/k/v projections are one
// qkv_proj matrix and whose gate/up projections are one gate_up_proj matrix.
#pragma once

#include "ModelConfig.h"
#include "WeightStore.h"

#include "llvm/Support/Error.h"

namespace ninfer {

// Gives `weights` the llama names (self_attn.{q,k,v}_proj, mlp.{gate,up}_proj) as row ranges
// of each layer's fused matrices, sharing their bytes, so the importer builds a phi3 model
// as it builds llama. An error names a fused tensor that is missing or has the wrong shape.
llvm::Error splitPhi3Projections(const ModelConfig& config, WeightStore& weights);

} // namespace ninfer
