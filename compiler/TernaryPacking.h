// Ternary weights end to end, compiler side: decides which linear weights of an
// imported module become TQ2 (ninfer/TernaryFormat.h), packs them losslessly
// into the weight store, and marks their ninfer.weight ops with
// `ninfer.storage = "tq2"` (the IR type stays the logical tensor<NxKxbf16>; the
// plan builder reads the storage format from the attribute and the store).
//
// Modes (ninferc --quant):
//  * auto:    every linear weight that is exactly ternary with one scale per
//             tensor is packed; everything else keeps its checkpoint dtype.
//  * ternary: every linear weight must be packable, else compiling fails
//             naming the first tensor that is not (refuses to ternarize a model
//             that was not trained ternary). With --dummy-weights, the linear
//             weights are declared TQ2 and filled with random ternary codes.
//  * none:    nothing changes.
// Only weights used solely as the weight operand of ninfer.linear are
// considered (q/k/v/o/gate/up/down), never embeddings or lm_head.
#pragma once

#include "WeightStore.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer {

enum class QuantMode { Auto, None, Ternary };

// "auto" | "none" | "ternary".
llvm::Expected<QuantMode> parseQuantMode(llvm::StringRef text);

struct TernaryReport {
  int packed = 0;                // tensors now TQ2
  std::vector<std::string> kept; // "name: why" for linear weights left as they were
  uint64_t bytesBefore = 0;      // of the packed tensors, in their checkpoint dtype
  uint64_t bytesAfter = 0;       // the same tensors as TQ2
  uint64_t values = 0;           // weights in the packed tensors
};

// Refuses checkpoint layouts this compiler cannot read correctly yet: the
// Hugging Face BitNet layout (config.json quantization_config.quant_method =
// "bitnet": uint8-packed weights + weight_scale). Call before importing;
// success for checkpoints without a quantization_config. `modelDir` holds
// config.json.
llvm::Error checkCheckpointQuantization(const std::string& modelDir);

// Applies `mode` to the linear weights of `module` (after importModel, before
// the pass pipeline). `report` may be null.
llvm::Error applyTernary(WeightStore& weights, mlir::ModuleOp module, QuantMode mode,
                         TernaryReport* report = nullptr);

// Packs a 2-D F32/F16/BF16 tensor whose values are exactly {-scale, 0, +scale}
// (detectTernary said PerTensor) into TQ2 bytes. Fails, naming the tensor, if a
// value is anything else or cols is not a multiple of 64.
llvm::Expected<std::vector<uint8_t>> packTernary(const TensorRef& tensor, float scale);

} // namespace ninfer
