// The table behind bandwidthFor: the first entry whose needle the name contains, so a
// variant's entry (H100 NVL, RTX 3060 Laptop) comes before its family's, and needles end
// where another card's name would go on ("A100-", not "A100": the RTX A1000).
#include "BenchBandwidth.h"

namespace ninfer {

double bandwidthFor(const std::string& name) {
  struct Entry {
    const char* needle;
    double bytesPerSecond;
  };
  static const Entry table[] = {
      {"H200", 4.29e12},
      {"H100 80GB HBM3", 3.01e12},
      {"H100 PCIe", 2.0e12},
      {"H100 NVL", 3.9e12},
      {"H100", 3.35e12},
      {"A100-SXM4-80GB", 2.04e12},
      {"A100 80GB", 1.94e12},
      {"A100-", 1.555e12},
      {"L40", 0.864e12},
      {"L4", 0.30e12},
      {"RTX 5090", 1.792e12},
      {"RTX 4090", 1.008e12},
      {"RTX 4080", 0.717e12},
      {"RTX 3090", 0.936e12},
      {"RTX 3060 Laptop", 0.336e12},
      {"RTX 3060", 0.360e12},
      {"T4", 0.32e12},
  };
  for (const Entry& e : table)
    if (name.find(e.needle) != std::string::npos)
      return e.bytesPerSecond;
  return 0.0;
}

} // namespace ninfer
