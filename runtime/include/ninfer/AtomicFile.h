// A file written whole or not at all: the bytes go to a temporary name beside the target
// ("<path>.tmp-<pid>"), which commit() flushes to disk and renames over the target; a file
// never committed is removed. So a failure (a full disk, a refused plan, an interrupted
// command) leaves no half-written output. Errors name the target: "cannot write PATH: why".
#pragma once

#include "ninfer/Status.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace ninfer {

class AtomicFile {
public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Whether `path` could be written so: not a directory, and its temporary file can be
  // created (and is removed again). Commands ask before their work, not after it.
  static Status probe(const std::string& path);
  // The whole file in one call.
  static Status writeWhole(const std::string& path, const void* data, size_t size);

  Status open();
  Status write(const void* data, size_t size);
  Status zeros(uint64_t count);
  // Flushes, closes and renames the temporary file over the target.
  Status commit();

private:
  Status failure() const; // "cannot write PATH: strerror(errno)"

  std::string path_;
  std::string temp_;
  std::FILE* file_ = nullptr;
};

} // namespace ninfer
