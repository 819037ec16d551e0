#include "ninfer/AtomicFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ninfer {

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), temp_(path_ + ".tmp-" + std::to_string(getpid())) {}

AtomicFile::~AtomicFile() {
  if (file_)
    std::fclose(file_);
  if (!temp_.empty())
    std::remove(temp_.c_str());
}

Status AtomicFile::failure() const {
  return Status::error("cannot write " + path_ + ": " + std::strerror(errno));
}

Status AtomicFile::probe(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::error("cannot write " + path + ": it is a directory");
  AtomicFile file(path); // never committed: the temporary file is removed again
  return file.open();
}

Status AtomicFile::writeWhole(const std::string& path, const void* data, size_t size) {
  AtomicFile file(path);
  NINFER_RETURN_IF_ERROR(file.open());
  NINFER_RETURN_IF_ERROR(file.write(data, size));
  return file.commit();
}

Status AtomicFile::open() {
  file_ = std::fopen(temp_.c_str(), "wb");
  return file_ ? Status::ok() : failure();
}

Status AtomicFile::write(const void* data, size_t size) {
  if (size && std::fwrite(data, 1, size, file_) != size)
    return failure();
  return Status::ok();
}

Status AtomicFile::zeros(uint64_t count) {
  static const std::vector<uint8_t> block(1 << 16, 0);
  while (count > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(count, block.size()));
    NINFER_RETURN_IF_ERROR(write(block.data(), chunk));
    count -= chunk;
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  const bool flushed = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed || std::rename(temp_.c_str(), path_.c_str()) != 0)
    return failure();
  temp_.clear();
  return Status::ok();
}

} // namespace ninfer
