// Hugging Face BitNet checkpoints (config.json quantization_config.quant_method
// = "bitnet", transformers' integrations/bitnet.py): each converted linear
// stores its ternary weight packed in a uint8 tensor "X.weight" of shape
// [out / 4, in] plus a one-element "X.weight_scale". Packed row p holds, in
// bits 2i..2i+1 (i = 0..3), the code t + 1 of row i * (out / 4) + p, same
// column. The weight that multiplies the activations is
//   bitlinear (default):  t / weight_scale  (BitLinear divides its outputs)
//   autobitlinear:        t * weight_scale  (AutoBitLinear multiplies them)
// This import replaces every such pair in the weight store by that effective
// weight as an ordinary float tensor {-s, 0, +s} (BF16 when s is a bf16 value,
// else F32, so s is exact), which ternary detection then packs losslessly into
// TQ1/TQ2 like any ternary-trained checkpoint. Weights left unconverted
// (modules_to_not_convert, lm_head) are ordinary float tensors already.
//
// Not reproduced, hence refused with one line: quantization_mode "online"
// (full-precision weights ternarized at run time) and use_rms_norm (an extra
// RMSNorm inside each linear). Also not reproduced, and said by the caller:
// BitLinear quantizes its input activations to int8 per token; ninfer's linear
// keeps them in f32, so logits are close to, not equal to, transformers'.
#pragma once

#include "WeightStore.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer {

struct BitNetImport {
  bool bitnet = false;     // config.json declares quant_method "bitnet"
  bool divideScale = true; // bitlinear (t / scale); false: autobitlinear (t * scale)
  int unpacked = 0;        // linear weights replaced
};

// Values t in {-1, 0, +1} of a packed [packedRows, cols] uint8 tensor, as the
// row-major [4 * packedRows, cols] matrix. Codes 3 (never written) are refused
// by importBitNetWeights; here they read as +2 so the caller can tell.
std::vector<signed char> unpackBitNetRows(const uint8_t* packed, int64_t packedRows, int64_t cols);

// Reads modelDir/config.json; for a BitNet checkpoint replaces the packed
// weights in `weights` as described above. Nothing happens for other
// checkpoints (config errors are left to the config loader).
llvm::Expected<BitNetImport> importBitNetWeights(const std::string& modelDir, WeightStore& weights);

} // namespace ninfer
