// Output files of the ninfer CLI written whole or not at all: to a temporary name beside the
// target, then renamed over it, so a failure leaves no half-written file.
#pragma once

#include "ninfer/Status.h"

#include <string>

namespace ninfer {
namespace cli {

Status writeWholeFile(const std::string& path, const std::string& bytes);

// Whether writeWholeFile could write `path` (not a directory; its temporary file can be created,
// and is removed again): commands check their output paths before their work, not after it.
Status checkWritable(const std::string& path);

} // namespace cli
} // namespace ninfer
