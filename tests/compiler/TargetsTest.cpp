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
