// Integer option values of the ninfer commands, parsed and reported alike.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <string>

namespace ninfer {
namespace cli {

// `text` as an integer in [lo, hi] into `value` and an empty string, or where it is not one
// (empty, trailing characters, out of range) the usage error that names `option`.
inline std::string parseIntegerOption(const std::string& option, const std::string& text,
                                      long long lo, long long hi, long long& value) {
  errno = 0;
  char* end = nullptr;
  value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < lo || value > hi)
    return option + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
           "], got '" + text + "'";
  return std::string();
}

} // namespace cli
} // namespace ninfer
