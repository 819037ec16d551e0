// Probe (not part of the build): what a dependent launch's hand-over costs, and whether a
// counter in global memory hands over faster than programmatic dependent launch's
// griddepcontrol.wait. A CUDA graph of `--launches` launches, each `--grid` blocks of 288
// threads with `--smem` KB of shared memory (100 KB: two blocks fill an SM, as the tree's
// one-token GEMVs do; 64 KB: a third block fits beside them). Each block waits for the launch
// before it, lets the next launch be scheduled (griddepcontrol.launch_dependents), spins
// `--work` ns, and writes 64 bytes that the next launch's blocks read after their wait.
//
//   nvcc -O3 -arch=sm_90a -std=c++17 -o handover_probe scripts/probes/handover_probe.cu
//   ./handover_probe [--mode plain|pdl|flag] [--launches N] [--grid B] [--smem KB] [--work NS]
//
// --mode plain: stream order (no programmatic launch); pdl: the tree's way (every block waits
// with griddepcontrol.wait); flag: launches are programmatic, but a block waits by spinning on
// the previous launch's counter (ld.acquire.gpu, thread 0, then __syncthreads) until all its
// blocks have arrived, and arrives on its own launch's counter when done (__syncthreads, then
// red.release.gpu.add by thread 0); warps: as flag, but lane 0 of every warp spins (then
// __syncwarp), so nine pollers a block.
// A launch clears the counter of the launch two before it once its wait has returned (every
// block of that launch has finished, and every reader of its counter has passed its wait).
// Prints the step's p50 over 50 graph replays and the hand-over per launch: (step - launches
// x work) / launches. Figures: docs/performance-log.md, forty-third session.
#include "cuda_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <string>
#include <vector>

enum Mode { kPlain = 0, kPdl = 1, kFlag = 2, kFlagWarps = 3 };
constexpr int kThreads = 288;

__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Launch `index` of `launches`: waits for launch index - 1 (none for 0), works, arrives.
__global__ void __launch_bounds__(kThreads)
    link(unsigned* counters, float* data, int index, int launches, int mode, int work) {
  extern __shared__ float smem[];
  const int prev = index - 1;
  if (mode == kFlag) {
    if (prev >= 0 && threadIdx.x == 0) {
      const unsigned want = gridDim.x;
      unsigned seen;
      do
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counters + prev));
      while (seen < want);
    }
    __syncthreads();
  } else if (mode == kFlagWarps) {
    if (prev >= 0 && threadIdx.x % 32 == 0) {
      const unsigned want = gridDim.x;
      unsigned seen;
      do
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counters + prev));
      while (seen < want);
    }
    __syncwarp();
  } else if (mode == kPdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (mode >= kFlag && blockIdx.x == 0 && threadIdx.x == 0)
    counters[(index + launches - 2) % launches] = 0;
  // Read what the previous launch wrote (its block blockIdx.x's 64 bytes).
  float v = 0.0f;
  if (threadIdx.x < 16)
    asm volatile("ld.global.f32 %0, [%1];"
                 : "=f"(v)
                 : "l"(data + (static_cast<size_t>(prev < 0 ? 0 : prev) % 2) * 16 * gridDim.x +
                       blockIdx.x * 16 + threadIdx.x));
  const unsigned long long t0 = now();
  while (now() - t0 < static_cast<unsigned long long>(work)) {
  }
  smem[threadIdx.x] = v;
  if (threadIdx.x < 16)
    data[(index % 2) * 16 * gridDim.x + blockIdx.x * 16 + threadIdx.x] = smem[threadIdx.x] + 1.0f;
  if (mode >= kFlag) {
    __syncthreads();
    if (threadIdx.x == 0)
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counters + index) : "memory");
  }
}

int main(int argc, char** argv) {
  int mode = kPdl, launches = 160, grid = 264, smemKb = 100, work = 3000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i], value = argv[i + 1];
    if (option == "--mode")
      mode = value == "plain"  ? kPlain
             : value == "flag" ? kFlag
             : value == "warps" ? kFlagWarps
                                : kPdl;
    else if (option == "--launches")
      launches = std::atoi(value.c_str());
    else if (option == "--grid")
      grid = std::atoi(value.c_str());
    else if (option == "--smem")
      smemKb = std::atoi(value.c_str());
    else if (option == "--work")
      work = std::atoi(value.c_str());
  }
  unsigned* counters;
  float* data;
  CHECK(cudaMalloc(&counters, launches * sizeof(unsigned)));
  CHECK(cudaMemset(counters, 0, launches * sizeof(unsigned)));
  CHECK(cudaMalloc(&data, 2 * 16 * grid * sizeof(float)));
  CHECK(cudaMemset(data, 0, 2 * 16 * grid * sizeof(float)));
  const int smem = smemKb * 1024;
  CHECK(cudaFuncSetAttribute(link, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < launches; ++i) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = kThreads;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = mode == kPlain ? 0 : 1;
    void* args[] = {&counters, &data, &i, &launches, &mode, &work};
    CHECK(cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(link), args));
  }
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  for (int i = 0; i < 5; ++i)
    CHECK(cudaGraphLaunch(exec, stream));
  std::vector<float> ms;
  for (int i = 0; i < 50; ++i) {
    CHECK(cudaEventRecord(begin, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(end, stream));
    CHECK(cudaEventSynchronize(end));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, begin, end));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const char* names[] = {"plain", "pdl", "flag", "warps"};
  const double step = ms[ms.size() / 2] * 1e3; // us
  std::printf("mode %-5s launches %d grid %d smem %d KB work %d ns: step p50 %.1f us, min %.1f, "
              "hand-over %.3f us per launch\n",
              names[mode], launches, grid, smemKb, work, step, ms[0] * 1e3,
              (step - launches * work * 1e-3) / launches);
  return 0;
}
