#include "OutputFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

namespace ninfer {
namespace cli {

namespace {

// The name a file is written under before it is renamed over `path`.
std::string tempName(const std::string& path) { return path + ".tmp"; }

} // namespace

Status checkWritable(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::error("cannot write " + path + ": it is a directory");
  const std::string temp = tempName(path);
  std::FILE* probe = std::fopen(temp.c_str(), "wb");
  if (!probe)
    return Status::error("cannot write " + path + ": " + std::strerror(errno));
  std::fclose(probe);
  std::remove(temp.c_str());
  return Status::ok();
}

Status writeWholeFile(const std::string& path, const std::string& bytes) {
  const std::string temp = tempName(path);
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
