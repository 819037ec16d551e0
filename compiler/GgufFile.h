// Reader for GGUF files (llama.cpp's single-file checkpoints, versions 2 and 3): the
// metadata key/values and the tensor table, validated against the file's size. Only
// parses; the bytes stay where they are (see GgufImport.h for what they become).
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count; the metadata
// (key string, u32 type, value); the tensor infos (name, u32 dimension count, u64
// dimensions innermost first, u32 ggml type, u64 offset); padding to the alignment
// (general.alignment, default 32); the tensor data, each tensor at its offset.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ninfer {

// A metadata value. Numbers of every width are kept as int64 (integers, bools) or
// double (floats); arrays of numbers or strings as lists.
struct GgufValue {
  enum class Kind { Integer, Float, Bool, String, IntegerArray, FloatArray, StringArray, Other };
  Kind kind = Kind::Other;
  int64_t integer = 0;
  double number = 0.0;
  std::string text;
  std::vector<int64_t> integers;
  std::vector<double> numbers;
  std::vector<std::string> strings;
};

// ggml's tensor element types, numbered as ggml.h numbers them.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39
};

// Values per block and bytes per block of a ggml type (blockValues 0: unknown type).
struct GgmlTypeTraits {
  const char* name;
  int blockValues;
  int blockBytes;
};
GgmlTypeTraits ggmlTypeTraits(uint32_t type);

struct GgufTensor {
  std::string name;
  uint32_t type = 0;         // GgmlType
  std::vector<int64_t> dims; // innermost (contiguous) first, as ggml's ne[]
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
  // Rows of dims[0] values, outermost first: the PyTorch-order shape.
  std::vector<int64_t> shape() const { return {dims.rbegin(), dims.rend()}; }
};

struct GgufFile {
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensors;

  const GgufValue* find(const std::string& key) const;
};

// Parses the GGUF file whose bytes are `data` (`size` bytes); tensors point into it.
// Every error names `file` and what is wrong (and where: the key or the tensor).
llvm::Expected<GgufFile> parseGguf(llvm::StringRef file, const uint8_t* data, uint64_t size);

// Whether the bytes start with GGUF's magic.
bool hasGgufMagic(const uint8_t* data, uint64_t size);

} // namespace ninfer
