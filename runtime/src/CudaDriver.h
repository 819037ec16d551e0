// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1") into one
// table of function pointers, so every binary starts (and CPU-only CI runs) on
// machines without a GPU. Types come from <cuda.h> (header only; nothing links
// against libcuda). The versioned entry points (_v2) are looked up by their
// exported names, which is what <cuda.h>'s macros map the plain names to.
#pragma once

#include "ninfer/Status.h"

#include <cuda.h>

#include <string>

namespace ninfer {

struct CudaDriver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuDeviceGetName) deviceGetName = nullptr;
  decltype(&::cuDeviceTotalMem) deviceTotalMem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuMemGetInfo) memGetInfo = nullptr;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuModuleGetGlobal) moduleGetGlobal = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemAllocHost) memAllocHost = nullptr;
  decltype(&::cuMemFreeHost) memFreeHost = nullptr;
  decltype(&::cuMemcpyHtoD) memcpyHtoD = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync) memcpyDtoHAsync = nullptr;
  decltype(&::cuMemsetD8) memsetD8 = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuStreamCreate) streamCreate = nullptr;
  decltype(&::cuStreamDestroy) streamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) streamSynchronize = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  // CUDA graphs (stream capture). Optional: null when the driver lacks them, and
  // the executor then launches kernels one by one.
  decltype(&::cuStreamBeginCapture) streamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) streamEndCapture = nullptr;
  decltype(&::cuGraphInstantiate) graphInstantiate = nullptr;
  decltype(&::cuGraphLaunch) graphLaunch = nullptr;
  decltype(&::cuGraphExecDestroy) graphExecDestroy = nullptr;
  decltype(&::cuGraphDestroy) graphDestroy = nullptr;
  // Programmatic dependent launch (CUDA 12+ drivers). Optional.
  decltype(&::cuLaunchKernelEx) launchKernelEx = nullptr;
  // Events (kernel timing for profiling). Optional like the graph entry points.
  decltype(&::cuEventCreate) eventCreate = nullptr;
  decltype(&::cuEventDestroy) eventDestroy = nullptr;
  decltype(&::cuEventRecord) eventRecord = nullptr;
  decltype(&::cuEventSynchronize) eventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) eventElapsedTime = nullptr;
  // A kernel's parameters (CUDA 12.4+ drivers; top-p on the device needs it). Optional.
  decltype(&::cuFuncGetParamInfo) funcGetParamInfo = nullptr;
  // Cooperative launches (top-p's draw over a whole row: every block resident). Optional.
  decltype(&::cuLaunchCooperativeKernel) launchCooperativeKernel = nullptr;
  // TMA tensor maps (CUDA 12+ drivers; sm_90a plans' GEMMs need them). Optional.
  decltype(&::cuTensorMapEncodeTiled) tensorMapEncodeTiled = nullptr;

  // Loads libcuda.so.1 once per process and resolves every entry point. Fails
  // with one line when the library or a symbol is missing. The table lives
  // until the process exits.
  static Result<const CudaDriver *> get();

  // Every graph entry point resolved.
  bool hasGraphs() const {
    return streamBeginCapture && streamEndCapture && graphInstantiate && graphLaunch &&
           graphExecDestroy && graphDestroy;
  }

  bool hasEvents() const {
    return eventCreate && eventDestroy && eventRecord && eventSynchronize && eventElapsedTime;
  }

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for `result`.
  std::string errorText(CUresult result) const;
  // Status::ok() on CUDA_SUCCESS, else "<what>: <errorText>".
  Status check(CUresult result, const std::string &what) const;
};

} // namespace ninfer
