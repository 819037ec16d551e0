// The card table by device name: the names the CUDA driver reports pick their card's row, a
// variant's before its family's, and `ninfer bench` takes the measured copy bandwidth where
// there is one, else the spec sheet's; unknown names (and laptop parts without a row) none.
#include "ninfer/Cards.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace ninfer {
namespace {

// Names as the CUDA executor gives them: "CUDA (<device>, <arch>[, graphs][, pdl])".
std::string executorName(const std::string& device) {
  return "CUDA (NVIDIA " + device + ", sm_90a, graphs, pdl)";
}

TEST(Cards, DeviceNamesPickTheirBenchBandwidth) {
  const auto on = [](const std::string& device) { return benchBandwidth(executorName(device)); };
  // Measured copy bandwidth (docs/performance.md).
  EXPECT_DOUBLE_EQ(on("H200"), 4.29e12);
  EXPECT_DOUBLE_EQ(on("H100 80GB HBM3"), 3.01e12);
  // Spec sheets; a variant is not taken for its family, nor a card for another whose name
  // starts the same.
  EXPECT_DOUBLE_EQ(on("H100 NVL"), 3.9e12);
  EXPECT_DOUBLE_EQ(on("H100 PCIe"), 2.0e12);
  EXPECT_DOUBLE_EQ(on("A100-SXM4-80GB"), 2.039e12);
  EXPECT_DOUBLE_EQ(on("A100 80GB PCIe"), 1.935e12);
  EXPECT_DOUBLE_EQ(on("A100-SXM4-40GB"), 1.555e12);
  EXPECT_DOUBLE_EQ(on("RTX A1000 Laptop GPU"), 0.0);
  EXPECT_DOUBLE_EQ(on("GeForce RTX 3060 Laptop GPU"), 0.336e12);
  EXPECT_DOUBLE_EQ(on("GeForce RTX 4070 Laptop GPU"), 0.0);
  EXPECT_DOUBLE_EQ(on("GeForce RTX 4070"), 0.504e12);
  EXPECT_DOUBLE_EQ(on("GeForce RTX 3060"), 0.360e12);
  EXPECT_DOUBLE_EQ(on("L40S"), 0.864e12);
  EXPECT_DOUBLE_EQ(on("L40"), 0.864e12);
  EXPECT_DOUBLE_EQ(on("L4"), 0.30e12);
  EXPECT_DOUBLE_EQ(benchBandwidth("CUDA (Tesla V100-SXM2-16GB, sm_70)"), 0.0);
  EXPECT_DOUBLE_EQ(benchBandwidth("cpu (2 threads)"), 0.0);
}

TEST(Cards, BenchSaysWhereItsBandwidthCameFrom) {
  const char* source = nullptr;
  benchBandwidth(executorName("H200"), &source);
  EXPECT_STREQ(source, "measured copy bandwidth");
  benchBandwidth(executorName("H100 PCIe"), &source);
  EXPECT_STREQ(source, "spec sheet");
  benchBandwidth(executorName("RTX A1000 Laptop GPU"), &source);
  EXPECT_STREQ(source, "unknown");
  benchBandwidth("cpu (2 threads)", &source);
  EXPECT_STREQ(source, "unknown");
}

// Every --target card is found again by its own device name (its row is not shadowed by an
// earlier needle), and has what ninferc needs of it.
TEST(Cards, EveryTargetRowIsReachableAndComplete) {
  int targets = 0;
  for (const Card& card : kCards) {
    if (!card.target)
      continue;
    ++targets;
    EXPECT_EQ(cardForDevice(executorName(card.device)), &card) << card.target;
    EXPECT_EQ(std::strncmp(card.arch, "sm_", 3), 0) << card.target;
    EXPECT_GT(card.gib, 0.0) << card.target;
    EXPECT_GT(card.specBytesPerSecond, 0.0) << card.target;
  }
  EXPECT_GE(targets, 16);
}

} // namespace
} // namespace ninfer
