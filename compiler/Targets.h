// GPU targets ninferc compiles for: a card name (which fixes the architecture
// and the memory budget) or a bare architecture `sm_XX` (no memory budget).
#pragma once

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer {

struct Target {
  std::string name;       // as the user wrote it
  std::string arch;       // "sm_90"
  uint64_t vramBytes = 0; // 0: unknown (bare sm_XX)
  double bandwidth = 0.0; // memory bandwidth, bytes/s (spec sheet); 0: unknown
};

// Parses one --target value; a comma-separated list gives several targets.
llvm::Expected<std::vector<Target>> parseTargets(const std::string& spec);

// Whether every target's memory streams at least `bytesPerSecond` (false where a bare
// architecture's is unknown).
bool everyTargetStreams(const std::vector<Target>& targets, double bytesPerSecond);

// One line per known card, for --help and error messages.
std::string knownTargetsHelp();

} // namespace ninfer
