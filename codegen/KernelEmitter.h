// Generates one specialized CUDA C++ kernel per plan op (shapes, dtypes and
// buffer indices as compile-time constants), compiles the module with NVRTC to
// a cubin per architecture plus PTX, and records each op's launches.
#pragma once

#include "ninfer/Status.h"
#include "plan_generated.h"

#include <functional>
#include <string>
#include <vector>

namespace ninfer {

// What emission chose, for the compiler's summary.
struct KernelReport {
  bool deepBulkRing = false; // some one-token GEMV launch took the deep ring's layout
};

struct KernelOptions {
  std::vector<std::string> archs; // "sm_90", "sm_89", ...
  bool embedPtx = true;
  // Launches shared by several ops for short steps (LaunchFusion.h): consecutive linear
  // ops with one input (q/k/v, gate/up) in one GEMV grid, and the SwiGLU after gate/up in
  // their GEMV (single-sequence plans); RoPE of q and k with the KV-cache append (f16
  // caches); RMSNorms computed by the GEMVs that read them. ninferc --no-fusion turns it
  // off.
  bool fuseLaunches = true;
  // Every block of every kernel records when it starts, when its wait for the previous
  // kernel returns and when its warps end (ninfer/TraceAbi.h), for `ninfer bench
  // --timeline`. ninferc --trace turns it on; the events slow a decode step by 2-12% (H200).
  bool trace = false;
  // Every target card streams at least gemv::kDeepRingBandwidth (an H200): the wide
  // one-token GEMVs keep more bytes in flight (GemvShapes.h bulkLayout's deepRing).
  // ninferc sets it from --target (unless NINFER_NO_DEEP_RING=1); sm_90+ targets only.
  bool deepBulkRing = false;
  // Called once every launch is emitted, before NVRTC runs.
  std::function<void(const KernelReport &)> report;
  // Called with (done, total) while compiling, for progress display.
  std::function<void(int, int)> progress;
  // Called once every launch and the memory plan are final (emission may grow the workspace:
  // the sm_90a GEMMs' 16-bit copies of x), before NVRTC runs; an error stops there.
  std::function<Status(const plan::PlanT &)> beforeCompile;
};

// Whether the compile-time A/B switch `name` (NINFER_NO_TENSOR_CORES, ...; docs/performance.md)
// is set in the environment, to anything but "0".
bool abSwitchSet(const char* name);

// Builds without LLVM/MLIR: the GPU op tests use it on the GPU machine.
Status emitKernels(plan::PlanT& plan, const KernelOptions& options);

// Most sequence splits of the decode attention kernel for a KV cache of
// `context` positions (baked into its launch grid; the kernel uses fewer at
// short lengths).
int attentionDecodeSplits(int context);

// Bytes of the Workspace buffer an Attention op needs for its split partials
// (layout in codegen/kernels/attention.cuh).
uint64_t attentionWorkspaceBytes(int heads, int kvHeads, int headDim, int context);

} // namespace ninfer
