// ggml's Q8_0, Q4_0 and Q5_0 blocks are ninfer's q8_g32, q4_g32 and q5_g32 groups in
// another order: 32 values, one f16 scale, value = scale * (code - 2^(bits-1)). So a
// GGUF tensor of those types becomes a packed ninfer tensor without changing a value
// (runtime/include/ninfer/QuantFormats.h has the layout).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace ninfer {

// The QuantFormatId that holds ggml type `type` exactly, or -1.
int exactQuantFormatOf(uint32_t type);

// Repacks `rows` rows of `cols` values (a multiple of 128) of a type with an exact format;
// rowData(r) gives the ggml bytes of row r. Returns the packed tensor's bytes.
std::vector<uint8_t> repackGgmlRows(uint32_t type, int64_t rows, int64_t cols,
                                    const std::function<const uint8_t*(int64_t)>& rowData);

} // namespace ninfer
