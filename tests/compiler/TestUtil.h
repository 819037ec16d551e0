// Helpers shared by the compiler tests: scratch directories, file writing and
// turning llvm::Error into a string gtest can print and match.
#pragma once

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace ninfer::test {

inline std::string sharedDir() { return NINFER_SHARED_DIR; }
inline std::string testDir() { return NINFER_COMPILER_TEST_DIR; }

// A fresh directory removed (with its files) at the end of the test.
class ScratchDir {
public:
  ScratchDir() {
    llvm::SmallString<128> path;
    if (llvm::sys::fs::createUniqueDirectory("ninfer-compiler-test", path))
      ADD_FAILURE() << "cannot create a temporary directory";
    path_ = path.str().str();
  }
  ~ScratchDir() { llvm::sys::fs::remove_directories(path_); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const {
    llvm::SmallString<256> joined(path_);
    llvm::sys::path::append(joined, name);
    return joined.str().str();
  }
  std::string write(const std::string& name, const std::string& contents) const {
    std::string target = file(name);
    std::ofstream out(target, std::ios::binary);
    out << contents;
    return target;
  }

private:
  std::string path_;
};

// The message of a failed Expected (consumes the error); "" when it succeeded.
template <typename T> std::string errorText(llvm::Expected<T>& value) {
  if (value)
    return "";
  return llvm::toString(value.takeError());
}

// A tensor entry of a hand-made safetensors file.
struct TensorSpec {
  std::string name;
  std::string dtype; // "F32", "BF16", ...
  std::vector<int64_t> shape;
};

inline size_t specDTypeSize(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32")
    return 4;
  if (dtype == "F16" || dtype == "BF16")
    return 2;
  return 1;
}

// The safetensors JSON header for `tensors`, packed back to back.
inline std::string safetensorsHeader(const std::vector<TensorSpec>& tensors,
                                     uint64_t* dataBytes = nullptr) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    uint64_t bytes = specDTypeSize(t.dtype);
    std::string shape;
    for (int64_t d : t.shape) {
      bytes *= static_cast<uint64_t>(d);
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    }
    header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  if (dataBytes)
    *dataBytes = offset;
  return header + "}";
}

// A whole safetensors file: 8-byte little-endian header length, the header,
// then `dataBytes` bytes of data (byte i holds i mod 251, a recognizable pattern).
inline std::string safetensorsBytes(const std::string& header, uint64_t dataBytes) {
  std::string file(8, '\0');
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    file[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  file += header;
  for (uint64_t i = 0; i < dataBytes; ++i)
    file.push_back(static_cast<char>(i % 251));
  return file;
}

inline std::string safetensorsBytes(const std::vector<TensorSpec>& tensors) {
  uint64_t dataBytes = 0;
  std::string header = safetensorsHeader(tensors, &dataBytes);
  return safetensorsBytes(header, dataBytes);
}

} // namespace ninfer::test
