// --target parsing: cards fix the architecture (Hopper cards compile sm_90a, whose wgmma the
// prefill GEMM uses) and the memory budget; bare architectures have none; unknown names are
// refused with the list of known ones.
#include "compiler/Targets.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace {

TEST(Targets, CardsFixArchitectureAndMemory) {
  auto targets = parseTargets("h200,RTX4090, sm_90a ,sm_86");
  ASSERT_TRUE(bool(targets)) << llvm::toString(targets.takeError());
  ASSERT_EQ(targets->size(), 4u);
  EXPECT_EQ((*targets)[0].arch, "sm_90a");
  EXPECT_EQ((*targets)[0].vramBytes, static_cast<uint64_t>(140.4 * (1ull << 30)));
  EXPECT_EQ((*targets)[1].name, "rtx4090");
  EXPECT_EQ((*targets)[1].arch, "sm_89");
  EXPECT_EQ((*targets)[2].arch, "sm_90a");
  EXPECT_EQ((*targets)[2].vramBytes, 0u);
  EXPECT_EQ((*targets)[3].arch, "sm_86");
  auto hopper = parseTargets("h100");
  ASSERT_TRUE(bool(hopper)) << llvm::toString(hopper.takeError());
  EXPECT_EQ((*hopper)[0].arch, "sm_90a");
}

// Cards carry their spec-sheet memory bandwidth (bare architectures none): the kernel
// emitter's deep ring is for plans whose every card streams 4 TB/s or more (the H200).
TEST(Targets, CardsCarryTheirBandwidth) {
  auto targets = parseTargets("h200,h100,sm_90a");
  ASSERT_TRUE(bool(targets)) << llvm::toString(targets.takeError());
  EXPECT_DOUBLE_EQ((*targets)[0].bandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ((*targets)[1].bandwidth, 3.35e12);
  EXPECT_DOUBLE_EQ((*targets)[2].bandwidth, 0.0);
  auto h200 = parseTargets("h200");
  ASSERT_TRUE(bool(h200));
  EXPECT_TRUE(everyTargetStreams(*h200, 4.0e12));
  EXPECT_FALSE(everyTargetStreams(*targets, 4.0e12)); // the H100 and sm_90a do not
  EXPECT_TRUE(everyTargetStreams(*targets, 0.0));
  EXPECT_FALSE(everyTargetStreams({}, 0.0));
  EXPECT_NE(knownTargetsHelp().find("4800 GB/s"), std::string::npos);
}

TEST(Targets, UnknownNamesAreRefusedWithTheKnownOnes) {
  auto targets = parseTargets("sm_91");
  ASSERT_FALSE(bool(targets));
  const std::string message = llvm::toString(targets.takeError());
  EXPECT_NE(message.find("unknown target 'sm_91'"), std::string::npos) << message;
  EXPECT_NE(message.find("h200"), std::string::npos) << message;
  auto empty = parseTargets("");
  ASSERT_FALSE(bool(empty));
  EXPECT_NE(llvm::toString(empty.takeError()).find("--target is empty"), std::string::npos);
  EXPECT_NE(knownTargetsHelp().find("h200             sm_90a"), std::string::npos);
}

} // namespace
} // namespace ninfer
