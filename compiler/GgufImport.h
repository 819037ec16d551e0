// A model from one GGUF file (llama.cpp's format): the architecture from the metadata,
// the weights under the Hugging Face names the importer reads, and the tokenizer.
//
// * Architectures: llama (also Mistral's GGUFs), qwen2, qwen3. llama.cpp's converter
//   reorders the rows of llama's q and k projections for its interleaved RoPE; they
//   are put back in Hugging Face's order here.
// * Weights: F32, F16 and BF16 tensors are read in place (q and k: reordered copies);
//   Q8_0, Q4_0 and Q5_0 matrices with rows of whole 128-value units become q8_g32,
//   q4_g32 and q5_g32 without changing a value (GgufRepack.h), unless the caller asks
//   for floats; the other quantized ones (Q4_1, Q5_1, Q2_K..Q6_K) are decoded to F16
//   (vectors to F32), for ninferc's own quantization (--quant) to pack again.
// * Tokenizer: tokenizer.ggml.model "llama" (SentencePiece BPE) or "gpt2" (byte-level
//   BPE with a known tokenizer.ggml.pre), the BOS/EOS ids and the chat template.
#pragma once

#include "ModelSource.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>

namespace ninfer {

// The model, and what became of its tensors.
struct GgufModel : ModelSource {
  size_t decodedTensors = 0; // quantized tensors decoded to F16/F32
  size_t exactTensors = 0;   // Q8_0/Q4_0/Q5_0 tensors kept as q8_g32/q4_g32/q5_g32
  // What the file is: "GGUF v3, llama, Q4_K x193, Q6_K x33, F32 x65" (tensors by ggml type).
  std::string summary;
};

struct GgufReadOptions {
  // Q8_0/Q4_0/Q5_0 matrices as ninfer's formats; false: decoded like the rest (for
  // --quant, which packs float weights).
  bool keepExactFormats = true;
  // Hears the tensor bytes read so far and their total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// Whether `path` names a GGUF file (by its first bytes; a missing file is not one).
bool isGgufFile(const std::string& path);

// Reads `path`; an error names the file and what is wrong or not supported.
llvm::Expected<GgufModel> importGguf(const std::string& path,
                                     const GgufReadOptions& options = GgufReadOptions());

} // namespace ninfer
