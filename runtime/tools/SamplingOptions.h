// The sampling options of the commands that decode (generation, `ninfer chat`, `ninfer
// bench`), parsed alike: --temp, --top-k, --top-p and --seed.
#pragma once

#include "IntegerOption.h"
#include "ninfer/Sampler.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ninfer {
namespace cli {

inline bool isSamplingOption(const std::string& option) {
  return option == "--temp" || option == "--top-k" || option == "--top-p" || option == "--seed";
}

// Sets the field of `params` that `option` (isSamplingOption) names from `text`; returns the
// usage error where text is not a valid value, else an empty string.
inline std::string setSamplingOption(const std::string& option, const std::string& text,
                                     SamplingParams& params) {
  errno = 0;
  char* end = nullptr;
  if (option == "--top-k") {
    long long k = 0;
    const std::string error = parseIntegerOption(option, text, 0, INT32_MAX, k);
    if (!error.empty())
      return error;
    params.topK = int(k);
  } else if (option == "--seed") {
    const unsigned long long seed = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE)
      return "--seed expects a non-negative integer, got '" + text + "'";
    params.seed = seed;
  } else {
    const bool temperature = option == "--temp";
    const float value = std::strtof(text.c_str(), &end);
    const float hi = temperature ? 1000.0f : 1.0f;
    if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value) ||
        value < 0.0f || value > hi)
      return option + " expects a number in [0, " + (temperature ? "1000" : "1") + "], got '" +
             text + "'";
    (temperature ? params.temperature : params.topP) = value;
  }
  return std::string();
}

} // namespace cli
} // namespace ninfer
