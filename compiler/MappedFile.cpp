#include "MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ninfer {

MappedFile::~MappedFile() {
  if (data_ && size_)
    munmap(const_cast<uint8_t*>(data_), size_);
}

llvm::Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  auto fail = [&](const std::string& what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open " + path + ": " + std::strerror(errno));
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return fail("cannot read " + path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  if (info.st_size > 0) {
    void* address = mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      int error = errno;
      ::close(fd);
      return fail("cannot map " + path + ": " + std::strerror(error));
    }
    file->data_ = static_cast<const uint8_t*>(address);
    file->size_ = static_cast<uint64_t>(info.st_size);
  }
  ::close(fd); // the mapping stays valid without the descriptor
  return std::shared_ptr<const MappedFile>(std::move(file));
}

} // namespace ninfer
