// Reader for the safetensors container: an 8-byte little-endian header length,
// a JSON header describing each tensor, then the raw tensor bytes. Only parses;
// mapping the file is WeightStore's job.
#pragma once

#include "WeightStore.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace ninfer {

// Reads the tensor table of one safetensors file whose bytes are at `data`
// (`size` bytes). The returned TensorRefs point into `data`. Every error names
// `file` and, where there is one, the tensor.
llvm::Expected<std::vector<TensorRef>> parseSafetensors(llvm::StringRef file, const uint8_t* data,
                                                        uint64_t size);

} // namespace ninfer
