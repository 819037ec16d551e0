// AtomicFile: a target appears only whole, an uncommitted file leaves nothing behind, and
// the errors name the target.
#include "ninfer/AtomicFile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace ninfer {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "atomic_file_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int filesBeside(const std::string& path) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    count += entry.path().filename().string().rfind(fs::path(path).filename().string(), 0) == 0;
  return count;
}

TEST(AtomicFile, CommitReplacesTheTargetWhole) {
  const std::string path = scratch("whole.bin");
  ASSERT_TRUE(AtomicFile::writeWhole(path, "old", 3).isOk());
  {
    AtomicFile file(path);
    ASSERT_TRUE(file.open().isOk());
    ASSERT_TRUE(file.write("new", 3).isOk());
    ASSERT_TRUE(file.zeros(2).isOk());
    EXPECT_EQ(contents(path), "old"); // not yet
    ASSERT_TRUE(file.commit().isOk());
  }
  EXPECT_EQ(contents(path), std::string("new\0\0", 5));
  EXPECT_EQ(filesBeside(path), 1); // no temporary file left
}

TEST(AtomicFile, AnUncommittedFileLeavesNothing) {
  const std::string path = scratch("abandoned.bin");
  fs::remove(path);
  {
    AtomicFile file(path);
    ASSERT_TRUE(file.open().isOk());
    ASSERT_TRUE(file.write("partial", 7).isOk());
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(filesBeside(path), 0);
}

TEST(AtomicFile, ProbeNamesTheTargetAndLeavesNothing) {
  const std::string path = scratch("probe.bin");
  fs::remove(path);
  EXPECT_TRUE(AtomicFile::probe(path).isOk());
  EXPECT_EQ(filesBeside(path), 0);
  const std::string dir = fs::path(path).parent_path().string();
  EXPECT_EQ(AtomicFile::probe(dir).message(), "cannot write " + dir + ": it is a directory");
  EXPECT_EQ(AtomicFile::probe(dir + "/missing/x.bin").message(),
            "cannot write " + dir + "/missing/x.bin: No such file or directory");
}

} // namespace
} // namespace ninfer
