// The kernel ABI shared by generated device code and the CUDA executor.
// Every generated kernel has the signature
//   extern "C" __global__ void fn(const ninfer::StepState* state, ninfer::KernelArgs args)
// where args.buffers[k] is the device address of the plan buffer named by the
// launch's args[k] (resolved once when the plan is loaded) and state lives in
// device memory, written once per step. Because buffer addresses are
// arguments, ops of the same shape (every layer of a model) share one kernel.
// Nothing here may include a standard header: NVRTC compiles this file as an
// in-memory header.
#pragma once

namespace ninfer {

struct StepState {
  int pos;      // position of the step's first token
  int nTokens;  // tokens in this step (1 for decode)
};

constexpr int kMaxKernelArgs = 16;

struct KernelArgs {
  void* buffers[kMaxKernelArgs];
};

} // namespace ninfer
