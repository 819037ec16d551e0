// `ninfer bench`'s bandwidth by device name: the names the CUDA driver reports pick their
// card's entry, a variant's before its family's, and unknown names none.
#include "BenchBandwidth.h"

#include <gtest/gtest.h>

#include <string>

namespace ninfer {
namespace {

TEST(BenchBandwidth, DeviceNamesPickTheirCard) {
  // Names as the CUDA executor gives them: "CUDA (<device>, <arch>[, graphs][, pdl])".
  const auto on = [](const std::string& device) {
    return bandwidthFor("CUDA (NVIDIA " + device + ", sm_90a, graphs, pdl)");
  };
  // Measured copy bandwidth (docs/performance.md).
  EXPECT_DOUBLE_EQ(on("H200"), 4.29e12);
  EXPECT_DOUBLE_EQ(on("H100 80GB HBM3"), 3.01e12);
  // Spec sheets; a variant is not taken for its family, nor a card for another whose name
  // starts the same.
  EXPECT_DOUBLE_EQ(on("H100 NVL"), 3.9e12);
  EXPECT_DOUBLE_EQ(on("H100 PCIe"), 2.0e12);
  EXPECT_DOUBLE_EQ(on("A100-SXM4-80GB"), 2.04e12);
  EXPECT_DOUBLE_EQ(on("A100 80GB PCIe"), 1.94e12);
  EXPECT_DOUBLE_EQ(on("A100-SXM4-40GB"), 1.555e12);
  EXPECT_DOUBLE_EQ(on("RTX A1000 Laptop GPU"), 0.0);
  EXPECT_DOUBLE_EQ(on("GeForce RTX 3060 Laptop GPU"), 0.336e12);
  EXPECT_DOUBLE_EQ(on("GeForce RTX 3060"), 0.360e12);
  EXPECT_DOUBLE_EQ(on("L40S"), 0.864e12);
  EXPECT_DOUBLE_EQ(on("L40"), 0.864e12);
  EXPECT_DOUBLE_EQ(on("L4"), 0.30e12);
  EXPECT_DOUBLE_EQ(bandwidthFor("CUDA (Tesla V100-SXM2-16GB, sm_70)"), 0.0);
  EXPECT_DOUBLE_EQ(bandwidthFor("cpu (2 threads)"), 0.0);
}

} // namespace
} // namespace ninfer
