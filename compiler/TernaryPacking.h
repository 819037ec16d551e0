// Ternary weights end to end, compiler side: decides which linear weights of an
// imported module become ternary, packs them losslessly into the weight store
// as TQ1 (base 3, 1.6 bits per weight, ninfer/Tq1Format.h; the default) or TQ2
// (2-bit codes, ninfer/TernaryFormat.h), and marks their ninfer.weight ops with
// `ninfer.storage = "tq1"` or "tq2" (the IR type stays the logical
// tensor<NxKxbf16>; the plan builder reads the storage format from the
// attribute and the store).
//
// Modes (ninferc --quant):
//  * auto:    every linear weight that is exactly ternary with one scale per
//             tensor is packed; everything else keeps its checkpoint dtype.
//  * ternary: every linear weight must be packable, else compiling fails
//             naming the first tensor that is not (refuses to ternarize a model
//             that was not trained ternary). With --dummy-weights, the linear
//             weights are declared ternary and filled with random ternary codes.
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

// The packing (ninferc --ternary-format): TQ1 needs cols % 16 == 0, TQ2 cols %
// 64 == 0; both hold one f32 scale per tensor.
enum class TernaryFormat { TQ1, TQ2 };

// "tq1" | "tq2".
llvm::Expected<TernaryFormat> parseTernaryFormat(llvm::StringRef text);
// "TQ1" | "TQ2".
const char* ternaryFormatName(TernaryFormat format);

struct TernaryReport {
  int packed = 0;                // tensors now TQ1 / TQ2
  std::vector<std::string> kept; // "name: why" for linear weights left as they were
  uint64_t bytesBefore = 0;      // of the packed tensors, in their checkpoint dtype
  uint64_t bytesAfter = 0;       // the same tensors packed
  uint64_t values = 0;           // weights in the packed tensors
};

// Applies `mode` to the linear weights of `module` (after importModel, before
// the pass pipeline), packing as `format`. `report` may be null.
llvm::Error applyTernary(WeightStore& weights, mlir::ModuleOp module, QuantMode mode,
                         TernaryFormat format, TernaryReport* report = nullptr);

// Packs a 2-D F32/F16/BF16 tensor whose values are exactly {-scale, 0, +scale}
// (detectTernary said PerTensor) into `format` bytes. Fails, naming the tensor,
// if a value is anything else or the columns do not fit the format.
llvm::Expected<std::vector<uint8_t>> packTernary(const TensorRef& tensor, float scale,
                                                 TernaryFormat format);

} // namespace ninfer
