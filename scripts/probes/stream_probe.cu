// Probe (not part of the build): how fast 129 dependent launches can stream the 8B q4 decode
// step's linear weights (3.99 GB) through shared-memory rings, and what slows them down. Each
// launch has the shape of the tree's one-token bulk GEMV (codegen/kernels/gemv_quant_bulk.cuh):
// 264 blocks of 110 KB, a producer warp that copies 16-row tiles chunk by chunk into a ring of
// four 16 KB stages (cp.async.bulk, evict-first) before the launch's dependency wait, and eight
// consumer warps that wait for the previous launch, trigger the next, and then only wait for
// each stage and free it. The launches run as one CUDA graph with programmatic dependent launch.
//
//   nvcc -O3 -arch=sm_90a -std=c++17 -Icodegen/kernels -Iruntime/include/ninfer \
//     -o stream_probe scripts/probes/stream_probe.cu
//   ./stream_probe [--layout rows|tile|tile4] [--hold CYCLES] [--grid BLOCKS]
//                  [--chain LOADS] [--attn NS]
//
// --layout: rows (a stage is 16 copies of 1 KB from 16 weight rows, as plans lay weights out),
//   tile (tiles stored contiguously: one 16 KB copy per stage) or tile4 (four 4 KB copies);
// --hold: consumers keep each stage this many cycles before freeing it (math stand-in);
// --grid: blocks per launch; --chain: dependent L2 loads by each consumer after its wait
// (x staging stand-in); --attn: a kernel of 256 blocks of 70 KB that spins this many ns after
// each layer's first launch (attention stand-in). Prints the step's p50 and min over 30 graph
// replays, and for scale one kernel's plain 16-byte loads over the same bytes.
// Figures: docs/performance-log.md, thirty-fourth session.
#include "bulk_copy.cuh" // the tree's mbarriers and bulk copies
#include "cuda_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <string>
#include <vector>

constexpr int kSlots = 4, kChunk = 1024, kTileRows = 16, kStage = kTileRows * kChunk;
constexpr int kConsumers = 8, kThreads = (kConsumers + 1) * 32;
constexpr int kShared = 110 * 1024, kScaleBuffer = 8192;
enum Layout { kRows = 0, kTile = 1, kTile4 = 2 };

__device__ unsigned int chainTable[1 << 16];

// One linear: `tiles` tiles of 16 rows of `rowBytes` code bytes, each tile's scales (rowBytes
// bytes: 16 rows x K / 32) at `scales`.
__global__ void __launch_bounds__(kThreads)
    streamLinear(const unsigned char* codes, const unsigned char* scales, int rowBytes, int tiles,
                 int layout, int hold, int chain) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 // bulk_copy.cuh's helpers
  using namespace ninfer::dev;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned base = sharedAddress(smem);
  const unsigned ring = base + 1024, scaleBuffers = ring + kSlots * kStage;
  auto full = [&](int slot) { return base + 8 * slot; };
  auto empty = [&](int slot) { return base + 8 * (kSlots + slot); };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSlots; ++i) {
      barrierInit(full(i), 1);
      barrierInit(empty(i), kConsumers);
    }
    barrierInitFence();
  }
  __syncthreads();
  const int chunks = rowBytes / kChunk, scaleBytes = rowBytes;
  if (warp == kConsumers) { // the producer: starts before the dependency wait
    int stage = 0, n = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, ++n)
      for (int j = 0; j < chunks; ++j, ++stage) {
        const int slot = stage % kSlots, round = stage / kSlots;
        if (lane == 0) {
          if (round >= 1)
            barrierWait(empty(slot), (round - 1) & 1);
          barrierExpectBytes(full(slot), kStage + (j == 0 ? scaleBytes : 0));
          if (j == 0)
            bulkCopyEvictFirst(scaleBuffers + (n % 2) * kScaleBuffer,
                               scales + static_cast<long long>(t) * scaleBytes, scaleBytes,
                               full(slot));
        }
        __syncwarp();
        const unsigned dst = ring + slot * kStage;
        const unsigned char* tile = codes + static_cast<long long>(t) * kTileRows * rowBytes;
        if (layout == kRows && lane < kTileRows)
          bulkCopyEvictFirst(dst + lane * kChunk,
                             tile + static_cast<long long>(lane) * rowBytes + j * kChunk, kChunk,
                             full(slot));
        else if (layout == kTile && lane == 0)
          bulkCopyEvictFirst(dst, tile + static_cast<long long>(j) * kStage, kStage, full(slot));
        else if (layout == kTile4 && lane < 4)
          bulkCopyEvictFirst(dst + lane * 4096,
                             tile + static_cast<long long>(j) * kStage + lane * 4096, 4096,
                             full(slot));
      }
    gridDependencyWait();
    return;
  }
  gridDependencyWait();
  gridDependencyTrigger(true);
  unsigned index = threadIdx.x, sum = 0;
  for (int i = 0; i < chain; ++i) {
    unsigned v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(chainTable + (index & 0xFFFF)));
    index = v + threadIdx.x;
  }
  sum += index;
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers * 32) : "memory");
  int stage = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x)
    for (int j = 0; j < chunks; ++j, ++stage) {
      const int slot = stage % kSlots, round = stage / kSlots;
      barrierWait(full(slot), round & 1);
      sum += smem[1024 + slot * kStage + warp * 2048 + lane * 16];
      const long long t0 = clock64();
      while (clock64() - t0 < hold) {
      }
      __syncwarp();
      if (lane == 0)
        barrierArrive(empty(slot));
    }
  if (sum == 0xFFFFFFFFu) // keeps the reads
    chainTable[0] = sum;
#endif
}

__global__ void attentionStandIn(int ns) {
  extern __shared__ unsigned char smem[];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < static_cast<unsigned long long>(ns));
  if (threadIdx.x == 0)
    smem[0] = 1;
}

__global__ void plainRead(const uint4* p, long long n, unsigned* out) {
  unsigned a = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(p + i);
    a ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (a == 0x12345u)
    *out = a;
}

struct Linear {
  int k, n;
  long long codes, scales; // byte offsets
};

void launchDependent(const void* kernel, int grid, int block, int shared, cudaStream_t stream,
                     void** args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  CHECK(cudaLaunchKernelExC(&config, kernel, args));
}

int main(int argc, char** argv) {
  int layout = kRows, hold = 0, grid = 264, chain = 0, attnNs = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i], value = argv[i + 1];
    if (option == "--layout")
      layout = value == "tile" ? kTile : value == "tile4" ? kTile4 : kRows;
    else if (option == "--hold")
      hold = std::atoi(value.c_str());
    else if (option == "--grid")
      grid = std::atoi(value.c_str());
    else if (option == "--chain")
      chain = std::atoi(value.c_str());
    else if (option == "--attn")
      attnNs = std::atoi(value.c_str());
  }
  std::vector<Linear> step;
  long long bytes = 0;
  auto add = [&](int k, int n) {
    Linear l{k, n, bytes, 0};
    bytes += static_cast<long long>(k) / 2 * n;
    l.scales = bytes;
    bytes = (bytes + static_cast<long long>(k) / 32 * n + 4095) / 4096 * 4096;
    step.push_back(l);
  };
  for (int layer = 0; layer < 32; ++layer) {
    add(4096, 6144);  // q/k/v
    add(4096, 4096);  // o
    add(4096, 28672); // gate/up
    add(14336, 4096); // down
  }
  add(4096, 128256); // lm_head
  unsigned char* buffer;
  unsigned* sink;
  CHECK(cudaMalloc(&buffer, bytes));
  CHECK(cudaMemset(buffer, 1, bytes));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaFuncSetAttribute(streamLinear, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  CHECK(cudaFuncSetAttribute(attentionStandIn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             70 * 1024));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  auto timed = [&](auto&& work) {
    CHECK(cudaEventRecord(begin, stream));
    work();
    CHECK(cudaEventRecord(end, stream));
    CHECK(cudaEventSynchronize(end));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, begin, end));
    return ms;
  };
  float plain = 1e9f;
  for (int r = 0; r < 3; ++r)
    plain = std::min(plain, timed([&] {
                       plainRead<<<132 * 8, 512, 0, stream>>>(
                           reinterpret_cast<const uint4*>(buffer), bytes / 16, sink);
                     }));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (size_t i = 0; i < step.size(); ++i) {
    if (attnNs > 0 && i % 4 == 1) { // after each layer's q/k/v
      void* args[] = {&attnNs};
      launchDependent(reinterpret_cast<const void*>(attentionStandIn), 256, 128, 70 * 1024, stream,
                      args);
    }
    const unsigned char *codes = buffer + step[i].codes, *scales = buffer + step[i].scales;
    int rowBytes = step[i].k / 2, tiles = step[i].n / kTileRows;
    void* args[] = {&codes, &scales, &rowBytes, &tiles, &layout, &hold, &chain};
    launchDependent(reinterpret_cast<const void*>(streamLinear), grid, kThreads, kShared, stream,
                    args);
  }
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 5; ++i)
    CHECK(cudaGraphLaunch(exec, stream));
  std::vector<float> ms;
  for (int i = 0; i < 30; ++i)
    ms.push_back(timed([&] { CHECK(cudaGraphLaunch(exec, stream)); }));
  std::sort(ms.begin(), ms.end());
  const char* names[] = {"rows", "tile", "tile4"};
  std::printf("%.3f GB, %zu launches, layout %s, hold %d, grid %d, chain %d, attn %d ns: "
              "step p50 %.4f ms (%.2f TB/s), min %.4f; one kernel's plain loads %.4f ms "
              "(%.2f TB/s)\n",
              bytes / 1e9, step.size(), names[layout], hold, grid, chain, attnNs, ms[15],
              bytes / ms[15] / 1e9, ms[0], plain, bytes / plain / 1e9);
  return 0;
}
