// The device sources (codegen/kernels/*.cuh and the shared ABI headers),
// embedded in the binary at build time by cmake/Stringify.cmake so that the
// compiler needs no source tree at run time.
#pragma once

namespace ninfer {

struct DeviceSource {
  const char* name; // include name, e.g. "linear.cuh"
  const char* text;
};

extern const DeviceSource kDeviceSources[];
extern const int kDeviceSourceCount;

} // namespace ninfer
