// The GPUs ninfer knows by name, in one table for both tools: ninferc's --target names
// (architecture, memory budget, spec-sheet bandwidth) and `ninfer bench`'s bandwidth for its
// MBU figures, found by the device name the CUDA driver reports.
#pragma once

#include <string>

namespace ninfer {

struct Card {
  // ninferc's --target name; nullptr for a variant `ninfer bench` knows by device name only.
  const char* target;
  // Found in the driver's device name ("NVIDIA H100 80GB HBM3"): the first row whose needle
  // the name contains, so a variant's row (H100 NVL, RTX 3060 Laptop) comes before its
  // family's, and needles end where another card's name would go on ("A100-", not "A100":
  // the RTX A1000).
  const char* device;
  const char* arch;              // the compute capability ninferc compiles for
  double gib;                    // total memory as the driver reports it (targets only)
  double specBytesPerSecond;     // memory bandwidth, spec sheet; 0: none
  double measuredBytesPerSecond; // device-to-device copy, bytes read + written; 0: not measured
};

// Measured with scripts/probes/copy_bandwidth.cu (docs/performance.md's Method).
inline constexpr Card kCards[] = {
    {"h200", "H200", "sm_90a", 140.4, 4.8e12, 4.29e12},
    {"h100", "H100 80GB HBM3", "sm_90a", 79.6, 3.35e12, 3.01e12},
    {nullptr, "H100 PCIe", "sm_90a", 0, 2.0e12, 0},
    {nullptr, "H100 NVL", "sm_90a", 0, 3.9e12, 0},
    {nullptr, "H100", "sm_90a", 0, 3.35e12, 0},
    {"a100-80g", "A100-SXM4-80GB", "sm_80", 79.2, 2.039e12, 0},
    {nullptr, "A100 80GB", "sm_80", 0, 1.935e12, 0},
    {"a100-40g", "A100-", "sm_80", 39.4, 1.555e12, 0},
    {"l40s", "L40", "sm_89", 44.4, 0.864e12, 0},
    {"l4", "L4", "sm_89", 22.0, 0.30e12, 0},
    {"rtx5090", "RTX 5090", "sm_120", 31.4, 1.792e12, 0},
    {"rtx3060-laptop", "RTX 3060 Laptop", "sm_86", 5.8, 0.336e12, 0},
    // Other laptop parts share their desktop namesake's name but not its bandwidth: none.
    {nullptr, "Laptop", "", 0, 0, 0},
    {"rtx4090", "RTX 4090", "sm_89", 23.6, 1.008e12, 0},
    {"rtx4080-16g", "RTX 4080", "sm_89", 15.6, 0.717e12, 0},
    {"rtx4070-12g", "RTX 4070", "sm_89", 11.6, 0.504e12, 0},
    {"rtx4060-8g", "RTX 4060", "sm_89", 7.6, 0.272e12, 0},
    {"rtx3090", "RTX 3090", "sm_86", 23.6, 0.936e12, 0},
    {"rtx3080-10g", "RTX 3080", "sm_86", 9.8, 0.760e12, 0},
    {"rtx3060-12g", "RTX 3060", "sm_86", 11.6, 0.360e12, 0},
    {"t4", "T4", "sm_75", 14.6, 0.32e12, 0},
};

// The card whose row the device name `name` picks, or nullptr.
inline const Card* cardForDevice(const std::string& name) {
  for (const Card& card : kCards)
    if (name.find(card.device) != std::string::npos)
      return &card;
  return nullptr;
}

// The bandwidth `ninfer bench` measures MBU against: the card's measured copy bandwidth,
// else its spec sheet's; 0 where the card is not known (`--bandwidth` gives it then).
// `source` (if given) says which it was.
inline double benchBandwidth(const std::string& name, const char** source = nullptr) {
  const Card* card = cardForDevice(name);
  const double measured = card ? card->measuredBytesPerSecond : 0.0;
  if (source)
    *source = measured > 0                           ? "measured copy bandwidth"
              : card && card->specBytesPerSecond > 0 ? "spec sheet"
                                                     : "unknown";
  return measured > 0 ? measured : card ? card->specBytesPerSecond : 0.0;
}

} // namespace ninfer
