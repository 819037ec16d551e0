// The kernel ABI shared by generated device code and the CUDA executor.
// Every generated kernel has the signature
//   extern "C" __global__ void fn(void* const* buffers, const ninfer::StepState* state)
// where buffers[i] is the device address of plan buffer i and state lives in
// device memory, written once per step. Nothing here may include a standard
// header: NVRTC compiles this file as an in-memory header.
#pragma once

namespace ninfer {

struct StepState {
  int pos;      // position of the step's first token
  int nTokens;  // tokens in this step (1 for decode)
};

} // namespace ninfer
