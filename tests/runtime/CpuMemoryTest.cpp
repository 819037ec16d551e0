// The CPU executor's memory check: what it allocates for a plan (16-bit weights grow to f32,
// f32 weights are used in place) and the one-line refusal when the machine has less.
#include "CpuMemory.h"
#include "TestModel.h"

#include "plan_generated.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace test {
namespace {

std::unique_ptr<PlanFile> openPlan(TinyModel& model, const std::string& name) {
  auto file = PlanFile::open(model.maker.write(name));
  EXPECT_TRUE(file.isOk()) << file.status().message();
  return file.isOk() ? std::move(file.value()) : nullptr;
}

TEST(CpuMemory, SixteenBitWeightsCountAsF32AndF32OnesAreUsedInPlace) {
  TinyModelSpec spec;
  spec.weightDtype = plan::DType::F16;
  TinyModel f16 = buildTinyModel(spec);
  std::unique_ptr<PlanFile> file = openPlan(f16, "cpu_memory_f16.nplan");
  ASSERT_TRUE(file);
  uint64_t f16Bytes = 0, f32Bytes = 0;
  for (const plan::Buffer* b : *file->plan().buffers())
    if (b->kind() == plan::BufferKind::Weight)
      (b->dtype() == plan::DType::F16 ? f16Bytes : f32Bytes) += b->size_bytes();
  ASSERT_GT(f16Bytes, 0u);
  const CpuMemoryNeed need = cpuExecutorMemory(*file);
  EXPECT_EQ(need.weightBytes, 2 * f16Bytes); // each 2-byte value as 4, the f32 ones mapped
  const plan::MemoryPlan& memory = *file->plan().memory();
  EXPECT_GE(need.totalBytes, need.weightBytes + memory.activation_bytes() + memory.kv_bytes());

  spec.weightDtype = plan::DType::F32;
  TinyModel f32 = buildTinyModel(spec);
  std::unique_ptr<PlanFile> mapped = openPlan(f32, "cpu_memory_f32.nplan");
  ASSERT_TRUE(mapped);
  EXPECT_EQ(cpuExecutorMemory(*mapped).weightBytes, 0u);
}

TEST(CpuMemory, RefusesWithOneLineWhereTheMachineHasLess) {
  CpuMemoryNeed need;
  need.weightBytes = uint64_t(32) << 30;
  need.totalBytes = uint64_t(34) << 30;
  EXPECT_TRUE(checkCpuMemory(need, uint64_t(40) << 30).isOk());
  EXPECT_TRUE(checkCpuMemory(need, 0).isOk()); // unknown: no check
  const Status refused = checkCpuMemory(need, uint64_t(21) << 30);
  ASSERT_FALSE(refused.isOk());
  EXPECT_EQ(refused.message(), "the CPU executor needs 34.0 GiB for this plan (its weights as "
                               "f32: 32.0 GiB) and the machine has 21.0 GiB available");
  EXPECT_GT(availableHostMemory(), 0u); // Linux: /proc/meminfo
}

} // namespace
} // namespace test
} // namespace ninfer
