// Loading a .nplan file: map it, verify the flatbuffer and its semantics once,
// then hand out trusted views. Owns the mapping.
#pragma once

#include "ninfer/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ninfer {
namespace plan {
struct Plan;
struct Buffer;
} // namespace plan

class PlanFile {
public:
  // Maps `path`, verifies the container (size prefix, identifier, format
  // version, flatbuffers Verifier) and the semantics (buffer indices in range,
  // weight segments inside the file, op arities). Errors name the bad index.
  static Result<std::unique_ptr<PlanFile>> open(const std::string& path);
  ~PlanFile();
  PlanFile(const PlanFile&) = delete;
  PlanFile& operator=(const PlanFile&) = delete;

  const plan::Plan& plan() const { return *plan_; }
  const std::string& path() const { return path_; }
  // Bytes of weight buffer `index` inside the mapping; nullptr for dummy weights.
  const uint8_t* weightData(uint32_t index) const;
  uint64_t fileSize() const { return size_; }

private:
  PlanFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  const plan::Plan* plan_ = nullptr;
};

} // namespace ninfer
