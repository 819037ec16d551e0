// `ninfer bench`'s memory bandwidth of a device, by name, for its MBU figures.
#pragma once

#include <string>

namespace ninfer {

// The memory bandwidth `ninfer bench` assumes for the device `name` (the executor's name,
// which holds the device's, e.g. "NVIDIA H100 80GB HBM3"), bytes/s; 0 where the name is
// not known (`--bandwidth` gives it then). The H200 and the H100 80GB HBM3 (SXM): measured
// device-to-device copy bandwidth, bytes read + written (scripts/probes/copy_bandwidth.cu,
// docs/performance.md's Method); the others: spec sheets.
double bandwidthFor(const std::string& name);

} // namespace ninfer
