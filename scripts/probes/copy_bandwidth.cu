// Probe (not part of the build): a GPU's device-to-device copy bandwidth as shared/docs/
// PERFORMANCE.md defines it for MBU, bytes read + bytes written per second. Copies 2 GiB
// with cudaMemcpy 23 times and prints the median and best of the last 20. The measured
// bandwidths of the card table (runtime/include/ninfer/Cards.h), which `ninfer bench` takes
// for MBU, come from it (H100 80GB HBM3: docs/performance-log.md, forty-fifth session).
//
//   nvcc -O3 -o copy_bandwidth scripts/probes/copy_bandwidth.cu && ./copy_bandwidth
#include "cuda_check.h"

#include <algorithm>
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>

int main() {
  const size_t bytes = size_t(2) << 30;
  void *from = nullptr, *to = nullptr;
  CHECK(cudaMalloc(&from, bytes));
  CHECK(cudaMalloc(&to, bytes));
  CHECK(cudaMemset(from, 1, bytes));
  CHECK(cudaMemset(to, 0, bytes));
  cudaEvent_t start, end;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&end));
  const int warmups = 3, runs = 20;
  std::vector<float> ms;
  for (int i = 0; i < warmups + runs; ++i) {
    CHECK(cudaEventRecord(start));
    CHECK(cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(end));
    CHECK(cudaEventSynchronize(end));
    float t = 0.0f;
    CHECK(cudaEventElapsedTime(&t, start, end));
    if (i >= warmups)
      ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double moved = 2.0 * double(bytes); // read + written
  std::printf("device-to-device copy of %zu MiB: median %.3f ms, %.4g B/s; best %.4g B/s\n",
              bytes >> 20, ms[ms.size() / 2], moved / (ms[ms.size() / 2] * 1e-3),
              moved / (ms.front() * 1e-3));
  return 0;
}
