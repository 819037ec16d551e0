// Plan writer round trip without a GPU: header, identifier, alignment, weight
// bytes at weights_file_offset + offset, PlanFile accepts the result; failures
// leave neither the target nor a temporary file behind.
#include "TestPlan.h"
#include "ninfer/Plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>

namespace ninfer {
namespace {

using plan::DType;
using test::TestPlan;

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool fileExists(const std::string &path) { return std::ifstream(path).good(); }

int tempFilesFor(const std::string &path) {
  const size_t slash = path.rfind('/');
  const std::string dir = path.substr(0, slash), base = path.substr(slash + 1) + ".tmp-";
  int count = 0;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::string(e->d_name).rfind(base, 0) == 0)
        ++count;
    closedir(d);
  }
  return count;
}

TestPlan planWithWeights() {
  std::mt19937 rng(3);
  TestPlan t(4, 16);
  const uint32_t table =
      t.addWeight("embed", DType::BF16, {10, 24}, test::randomValues(240, 1.0f, rng));
  t.addWeight("big", DType::F32, {1500}, test::randomValues(1500, 1.0f, rng)); // > 4096 bytes
  t.addDummyWeight("dummy", DType::F16, {24, 24}, 42, 0.5f, 0.0f);
  const uint32_t x = t.addActivation("x", 24);
  plan::EmbeddingAttrsT embed;
  embed.dim = 24;
  embed.vocab = 10;
  t.addOp("embed", embed, {t.tokens, table}, {x});
  t.addReadout(x, 24);
  return t;
}

TEST(PlanWriter, RoundTrip) {
  TestPlan t = planWithWeights();
  const std::string path = test::tempPlanPath("writer");
  Status status = t.write(path);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_EQ(tempFilesFor(path), 0);

  const std::vector<uint8_t> bytes = readFile(path);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_TRUE(plan::SizePrefixedPlanBufferHasIdentifier(bytes.data()));
  // The verifier sees the flatbuffer only (size prefix + plan), as the loader does.
  flatbuffers::Verifier verifier(bytes.data(), flatbuffers::GetPrefixedSize(bytes.data()) + 4);
  ASSERT_TRUE(plan::VerifySizePrefixedPlanBuffer(verifier));
  const plan::Plan *p = plan::GetSizePrefixedPlan(bytes.data());
  // A plan of one sequence: the oldest version (batched plans are 2, below).
  EXPECT_EQ(p->format_version(), kOldestFormatVersion);
  EXPECT_EQ(p->weights_file_offset() % kWeightAlignment, 0u);
  EXPECT_GE(p->weights_file_offset(), flatbuffers::GetPrefixedSize(bytes.data()) + 4);
  EXPECT_EQ(p->weights_file_offset() + p->weights_size(), bytes.size());
  EXPECT_EQ(t.plan.weights_file_offset, p->weights_file_offset());
  for (const auto &[index, data] : t.data) {
    const plan::Buffer *b = p->buffers()->Get(index);
    ASSERT_EQ(b->size_bytes(), data.size());
    EXPECT_EQ(b->offset() % kWeightAlignment, 0u);
    EXPECT_EQ(std::memcmp(bytes.data() + p->weights_file_offset() + b->offset(), data.data(),
                          data.size()),
              0)
        << b->name()->str();
  }
  // Padding between header and weights is zero.
  for (uint64_t i = flatbuffers::GetPrefixedSize(bytes.data()) + 4; i < p->weights_file_offset();
       ++i)
    ASSERT_EQ(bytes[i], 0) << "at " << i;

  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(path);
  ASSERT_TRUE(file.isOk()) << file.status().message();
  EXPECT_EQ(std::memcmp((*file)->weightData(1), t.data[1].data(), t.data[1].size()), 0);
  std::remove(path.c_str());
}

// The writer stamps the oldest format version that describes the plan: 2 for a
// plan of several sequences, whatever the caller set.
TEST(PlanWriter, StampsTheFormatVersionOfBatchedPlans) {
  for (int maxBatch : {1, 2}) {
    TestPlan t(8, 16, maxBatch);
    t.plan.format_version = 99;
    t.addLmHeadLogits(10);
    const std::string path = test::tempPlanPath("writer_version");
    ASSERT_TRUE(t.write(path).isOk());
    const std::vector<uint8_t> bytes = readFile(path);
    std::remove(path.c_str());
    ASSERT_GT(bytes.size(), 8u);
    const plan::Plan *p = plan::GetSizePrefixedPlan(bytes.data());
    EXPECT_EQ(p->format_version(), formatVersionFor(maxBatch));
    EXPECT_EQ(p->max_batch(), maxBatch);
  }
}

TEST(PlanWriter, MissingWeightLeavesNoFile) {
  TestPlan t = planWithWeights();
  t.data.erase(2); // 'big'
  const std::string path = test::tempPlanPath("missing");
  Status status = t.write(path);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("big"), std::string::npos) << status.message();
  EXPECT_FALSE(fileExists(path));
  EXPECT_EQ(tempFilesFor(path), 0);
}

TEST(PlanWriter, UnwritableDirectoryFails) {
  TestPlan t = planWithWeights();
  Status status = t.write("/nonexistent-dir-for-ninfer/x.nplan");
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("/nonexistent-dir-for-ninfer/x.nplan"), std::string::npos)
      << status.message();
}

TEST(PlanWriter, MisalignedWeightRefused) {
  TestPlan t = planWithWeights();
  t.plan.buffers[2]->offset += 16;
  const std::string path = test::tempPlanPath("misaligned");
  Status status = t.write(path);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("not a multiple of 4096"), std::string::npos) << status.message();
  EXPECT_FALSE(fileExists(path));
}

TEST(PlanWriter, ReplacesExistingFileAtomically) {
  TestPlan t = planWithWeights();
  const std::string path = test::tempPlanPath("replace");
  { std::ofstream(path) << "old contents"; }
  ASSERT_TRUE(t.write(path).isOk());
  const std::vector<uint8_t> bytes = readFile(path);
  EXPECT_TRUE(plan::SizePrefixedPlanBufferHasIdentifier(bytes.data()));
  std::remove(path.c_str());
}

} // namespace
} // namespace ninfer
