#include "Phi3Import.h"

#include <string>

namespace ninfer {

llvm::Error splitPhi3Projections(const ModelConfig& config, WeightStore& weights) {
  const int64_t q = int64_t(config.heads) * config.headDim;
  const int64_t kv = int64_t(config.kvHeads) * config.headDim;
  const int64_t inter = config.intermediateSize;
  for (int layer = 0; layer < config.layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    // transformers' Phi3Attention: q, then k, then v rows; Phi3MLP: gate rows, then up rows.
    for (const char* fused : {"self_attn.qkv_proj.weight", "mlp.gate_up_proj.weight"})
      if (const TensorRef* t = weights.find(prefix + fused))
        if (t->dtype != WeightDType::F32 && t->dtype != WeightDType::F16 &&
            t->dtype != WeightDType::BF16 && quantFormatOf(t->dtype) < 0)
          return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                         "tensor '" + t->name + "' is " + dtypeName(t->dtype) +
                                             ", which a phi3 projection cannot be split from");
    llvm::Expected<const TensorRef*> qkv =
        weights.get(prefix + "self_attn.qkv_proj.weight", {q + 2 * kv, config.hiddenSize});
    if (!qkv)
      return qkv.takeError();
    weights.addRows(prefix + "self_attn.q_proj.weight", **qkv, 0, q);
    weights.addRows(prefix + "self_attn.k_proj.weight", **qkv, q, kv);
    weights.addRows(prefix + "self_attn.v_proj.weight", **qkv, q + kv, kv);
    llvm::Expected<const TensorRef*> gateUp =
        weights.get(prefix + "mlp.gate_up_proj.weight", {2 * inter, config.hiddenSize});
    if (!gateUp)
      return gateUp.takeError();
    weights.addRows(prefix + "mlp.gate_proj.weight", **gateUp, 0, inter);
    weights.addRows(prefix + "mlp.up_proj.weight", **gateUp, inter, inter);
  }
  return llvm::Error::success();
}

} // namespace ninfer
