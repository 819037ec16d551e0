// NINFER_HD marks functions of the headers shared by the host (compiler, CPU
// executor) and NVRTC device code: __host__ __device__ under a CUDA compiler,
// nothing otherwise. No standard header: NVRTC compiles this in memory.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define NINFER_HD __host__ __device__
#else
#define NINFER_HD
#endif
