// Writes a .nplan: size-prefixed flatbuffer, padding, then the 4096-aligned
// weight segments copied from the weight store. Writes to a temporary name in
// the same directory and renames when complete, so no half-written plan exists.
#pragma once

#include "ninfer/Status.h"
#include "plan_generated.h"

#include <cstdint>
#include <functional>
#include <string>

namespace ninfer {

// Returns the bytes of a weight buffer (size_bytes of them), or nullptr for a
// dummy weight. Lets the compiler's weight store and tests feed the writer.
using WeightSource = std::function<const uint8_t*(const plan::BufferT& buffer)>;

// Sets format_version (the oldest that describes the plan, ninfer/Format.h),
// weights_file_offset and weights_size, then writes.
Status writePlan(const std::string& path, plan::PlanT& plan, const WeightSource& weights);

} // namespace ninfer
