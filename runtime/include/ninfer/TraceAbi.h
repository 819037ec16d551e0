// The device-side timeline of plans compiled with `ninferc --trace`, shared by the kernels
// (codegen/kernels/trace.cuh) and the CUDA executor, which reads it after a traced step.
// Every block of every launch appends events to the module's global array
// `ninfer_trace_events` (counts in `ninfer_trace_count`): when the block starts and when its
// thread 0's wait for the previous kernel (griddepcontrol.wait) returns, and when each warp
// leaves the kernel (the array is cut into one region per SM; codegen/kernels/trace.cuh). Times are
// the GPU's global timer (ns). Events are grouped into launches by the launch's grid id (PTX
// %gridid). Nothing here may include a standard header: NVRTC compiles this file as an in-memory
// header.
#pragma once

#include "HostDevice.h"

namespace ninfer {
namespace trace {

enum EventKind : unsigned short {
  kUnused = 0,     // a reserved slot left empty (a block that never waited)
  kBlockStart = 1, // thread 0 entered the kernel
  kWaitDone = 2,   // thread 0's griddepcontrol.wait returned
  kWarpEnd = 3,    // a warp's lane 0 left the kernel
};

struct Event {
  unsigned long long grid; // %gridid: one value per launch
  unsigned long long ns;   // %globaltimer
  unsigned int block;      // linear block index
  unsigned short sm;       // %smid
  unsigned short kind;     // EventKind
};

// Each SM appends to its own region of the event array (kEventsPerSm events; its count in
// ninfer_trace_count[sm]), so that the events' atomic adds do not queue on one address: with
// one count for all, the 8B q4 step took 1.84 instead of 1.66 ms. A step records about
// 150,000 events (8B q4) to 1.3 million (8B fp16: blocks of many warps).
constexpr unsigned int kMaxSms = 256;
constexpr unsigned int kEventsPerSm = 1u << 14;

// The module globals' names (extern "C", so unmangled).
#define NINFER_TRACE_COUNT_SYMBOL "ninfer_trace_count"
#define NINFER_TRACE_EVENTS_SYMBOL "ninfer_trace_events"

} // namespace trace
} // namespace ninfer
