// A read-only memory mapping of one file (checkpoint shards, GGUF files): tensors
// are read in place, never copied. Unmapped when the last owner lets go.
#pragma once

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace ninfer {

class MappedFile {
public:
  // An error names the path and the system's reason (missing, not a regular file).
  static llvm::Expected<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace ninfer
