// NVRTC driver: compiles one CUDA C++ source, with the embedded device headers
// (codegen/kernels/*.cuh, StepAbi.h, DummyFill.h) available to #include, to a
// cubin for a real architecture ("sm_90") or to PTX for a virtual one
// ("compute_80"). Results are cached in memory by (source, arch, options), so
// identical modules (e.g. in tests) compile once per process. Thread-safe.
#pragma once

#include "ninfer/Status.h"

#include <string>
#include <vector>

namespace ninfer {
namespace nvrtc {

// `arch` is "sm_XX[a]" (returns cubin bytes) or "compute_XX[a]" (returns PTX
// text, NUL not included). `programName` appears in error messages. On failure
// the message holds NVRTC's log.
Result<std::string> compile(const std::string &source, const std::string &programName,
                            const std::string &arch,
                            const std::vector<std::string> &extraOptions = {});

// The numeric part of "sm_90a" / "compute_86" (90, 86), or -1 if malformed.
int archNumber(const std::string &arch);

// NVRTC's version as "major.minor", for messages.
std::string version();

} // namespace nvrtc
} // namespace ninfer
