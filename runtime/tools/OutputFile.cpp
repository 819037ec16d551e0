#include "OutputFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ninfer {
namespace cli {

Status writeWholeFile(const std::string& path, const std::string& bytes) {
  const std::string temp = path + ".tmp";
  std::FILE* out = std::fopen(temp.c_str(), "wb");
  if (!out)
    return Status::error("cannot write " + path + ": " + std::strerror(errno));
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size();
  const bool closed = std::fclose(out) == 0;
  if (!written || !closed || std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temp.c_str());
    return Status::error("cannot write " + path + ": " + std::strerror(error));
  }
  return Status::ok();
}

} // namespace cli
} // namespace ninfer
