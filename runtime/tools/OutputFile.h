// Output files of the ninfer CLI written whole or not at all: to a temporary name beside the
// target, then renamed over it, so a failure leaves no half-written file.
#pragma once

#include "ninfer/Status.h"

#include <string>

namespace ninfer {
namespace cli {

Status writeWholeFile(const std::string& path, const std::string& bytes);

} // namespace cli
} // namespace ninfer
