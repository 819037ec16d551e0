// Loads the CUDA driver with dlopen and resolves the entry points ninfer uses;
// see CudaDriver.h.
#include "CudaDriver.h"

#include <dlfcn.h>

#include <mutex>

namespace ninfer {
namespace {

template <typename Fn> bool resolve(void *library, const char *name, Fn &slot) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  return slot != nullptr;
}

Result<const CudaDriver *> loadDriver() {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = dlerror();
    return Status::error(std::string("cannot load the CUDA driver (libcuda.so.1): ") +
                         (why ? why : "unknown error") + "; is an NVIDIA driver installed?");
  }
  static CudaDriver driver;
  CudaDriver &d = driver;
  const char *missing = nullptr;
#define NINFER_RESOLVE(slot, symbol)                                                               \
  if (!missing && !resolve(library, symbol, d.slot))                                               \
    missing = symbol;
  NINFER_RESOLVE(init, "cuInit")
  NINFER_RESOLVE(driverGetVersion, "cuDriverGetVersion")
  NINFER_RESOLVE(deviceGetCount, "cuDeviceGetCount")
  NINFER_RESOLVE(deviceGet, "cuDeviceGet")
  NINFER_RESOLVE(deviceGetAttribute, "cuDeviceGetAttribute")
  NINFER_RESOLVE(deviceGetName, "cuDeviceGetName")
  NINFER_RESOLVE(deviceTotalMem, "cuDeviceTotalMem_v2")
  NINFER_RESOLVE(primaryCtxRetain, "cuDevicePrimaryCtxRetain")
  NINFER_RESOLVE(primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
  NINFER_RESOLVE(ctxSetCurrent, "cuCtxSetCurrent")
  NINFER_RESOLVE(ctxSynchronize, "cuCtxSynchronize")
  NINFER_RESOLVE(memGetInfo, "cuMemGetInfo_v2")
  NINFER_RESOLVE(moduleLoadDataEx, "cuModuleLoadDataEx")
  NINFER_RESOLVE(moduleUnload, "cuModuleUnload")
  NINFER_RESOLVE(moduleGetFunction, "cuModuleGetFunction")
  NINFER_RESOLVE(moduleGetGlobal, "cuModuleGetGlobal_v2")
  NINFER_RESOLVE(funcSetAttribute, "cuFuncSetAttribute")
  NINFER_RESOLVE(memAlloc, "cuMemAlloc_v2")
  NINFER_RESOLVE(memFree, "cuMemFree_v2")
  NINFER_RESOLVE(memAllocHost, "cuMemAllocHost_v2")
  NINFER_RESOLVE(memFreeHost, "cuMemFreeHost")
  NINFER_RESOLVE(memcpyHtoD, "cuMemcpyHtoD_v2")
  NINFER_RESOLVE(memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
  NINFER_RESOLVE(memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
  NINFER_RESOLVE(memsetD8, "cuMemsetD8_v2")
  NINFER_RESOLVE(launchKernel, "cuLaunchKernel")
  NINFER_RESOLVE(streamCreate, "cuStreamCreate")
  NINFER_RESOLVE(streamDestroy, "cuStreamDestroy_v2")
  NINFER_RESOLVE(streamSynchronize, "cuStreamSynchronize")
  NINFER_RESOLVE(getErrorString, "cuGetErrorString")
  NINFER_RESOLVE(getErrorName, "cuGetErrorName")
#undef NINFER_RESOLVE
  // Optional entry points: a driver without them still runs every plan.
  resolve(library, "cuStreamBeginCapture_v2", d.streamBeginCapture);
  resolve(library, "cuStreamEndCapture", d.streamEndCapture);
  resolve(library, "cuGraphInstantiateWithFlags", d.graphInstantiate);
  resolve(library, "cuGraphLaunch", d.graphLaunch);
  resolve(library, "cuGraphExecDestroy", d.graphExecDestroy);
  resolve(library, "cuGraphDestroy", d.graphDestroy);
  resolve(library, "cuLaunchKernelEx", d.launchKernelEx);
  resolve(library, "cuEventCreate", d.eventCreate);
  resolve(library, "cuEventDestroy_v2", d.eventDestroy);
  resolve(library, "cuEventRecord", d.eventRecord);
  resolve(library, "cuEventSynchronize", d.eventSynchronize);
  if (!resolve(library, "cuEventElapsedTime_v2", d.eventElapsedTime))
    resolve(library, "cuEventElapsedTime", d.eventElapsedTime); // drivers before 12.8
  resolve(library, "cuFuncGetParamInfo", d.funcGetParamInfo);
  resolve(library, "cuLaunchCooperativeKernel", d.launchCooperativeKernel);
  resolve(library, "cuTensorMapEncodeTiled", d.tensorMapEncodeTiled);
  if (missing) {
    dlclose(library);
    return Status::error(std::string("the CUDA driver (libcuda.so.1) lacks ") + missing +
                         "; the driver is too old");
  }
  const CUresult rc = d.init(0);
  if (rc != CUDA_SUCCESS)
    return Status::error("cannot initialize the CUDA driver: " + d.errorText(rc));
  return static_cast<const CudaDriver *>(&driver);
}

} // namespace

Result<const CudaDriver *> CudaDriver::get() {
  static std::once_flag once;
  static Result<const CudaDriver *> result(Status::error("not loaded"));
  std::call_once(once, [] { result = loadDriver(); });
  return result;
}

std::string CudaDriver::errorText(CUresult result) const {
  const char *name = nullptr;
  const char *text = nullptr;
  if (getErrorName)
    getErrorName(result, &name);
  if (getErrorString)
    getErrorString(result, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(result));
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

Status CudaDriver::check(CUresult result, const std::string &what) const {
  if (result == CUDA_SUCCESS)
    return Status::ok();
  return Status::error(what + ": " + errorText(result));
}

} // namespace ninfer
