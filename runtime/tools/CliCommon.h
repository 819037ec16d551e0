// Shared by the ninfer CLI's files: the two kinds of failure main() reports
// (usage errors exit 2, everything else 1) and a helper to unwrap Results.
#pragma once

#include "IntegerOption.h"
#include "ninfer/Status.h"

#include <string>
#include <utility>

namespace ninfer {
namespace cli {

// Thrown by the argument parser; main() turns it into exit code 2.
struct UsageError {
  std::string message;
};
// Any other failure; main() turns it into exit code 1.
struct Failure {
  std::string message;
};

[[noreturn]] inline void usage(const std::string& message) { throw UsageError{message}; }
[[noreturn]] inline void failWith(const std::string& message) { throw Failure{message}; }

// The integer option's value in [lo, hi] (parseIntegerOption), or its usage error.
inline long long integerOption(const std::string& option, const std::string& text, long long lo,
                               long long hi) {
  long long value = 0;
  const std::string error = parseIntegerOption(option, text, lo, hi, value);
  if (!error.empty())
    usage(error);
  return value;
}

template <typename T> T take(Result<T> result) {
  if (!result.isOk())
    failWith(result.status().message());
  return std::move(result.value());
}

// `ninfer inspect PLAN [--json]` (argv[1] is "inspect").
int runInspect(int argc, char** argv);

} // namespace cli
} // namespace ninfer
