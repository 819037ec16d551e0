// `ninfer bench --timeline`: where the time of one decode step goes on the GPU, from the
// events a plan compiled with `ninferc --trace` records (ninfer/TraceAbi.h) while the step
// runs as generation runs it (CUDA graph, programmatic dependent launch). Unlike --profile,
// which times each launch alone, this shows the launches as they overlap and wait for each
// other inside the real step.
#pragma once

#include "ninfer/Executor.h"
#include "ninfer/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer {
namespace plan {
struct Plan;
}

// One launch of a traced step; times in microseconds from the step's first block start.
struct LaunchSpan {
  std::string kernel, what; // the kernel's name; what its op is (describeOp)
  uint32_t blocks = 0;      // blocks that started
  double start = 0;         // the first block started
  double waitDone = -1;     // the first block's wait for the previous kernel returned (-1: none)
  double end = 0;           // the last warp left
  // Per block (by linear block index order of the events): SM, start and end.
  struct Block {
    uint32_t index = 0, sm = 0;
    double start = 0, end = 0;
  };
  std::vector<Block> blockSpans;
};

// The trace's launches in launch order: events grouped by grid, grids ordered by their first
// block's start (a launch's blocks all start before the next launch's first block under
// programmatic dependent launch and in stream order). Fails when the grids that started
// blocks are not the step's launches one to one, or when events were lost.
Result<std::vector<LaunchSpan>> launchSpans(const plan::Plan& p, const StepTrace& trace);

// The per-kernel account of the step. Each launch's share is its end minus the previous
// launch's end (its time on the step's critical path; the shares add up to the step);
// hand-over is from the previous launch's end to this launch's first wait returning, after
// is from there to its end, early from its first block's start to that wait (means per
// call, over the calls that waited). Rows by kernel and op, largest share first.
struct TimelineRow {
  std::string kernel, what;
  int calls = 0, waited = 0;
  double blocks = 0; // per call
  double share = 0;  // us per step
  double handOver = 0, afterWait = 0, early = 0;
};
struct TimelineAccount {
  std::vector<TimelineRow> rows;
  double stepUs = 0; // from the first block's start to the last warp's end
};
TimelineAccount timelineAccount(const std::vector<LaunchSpan>& spans);
void printTimeline(const std::vector<LaunchSpan>& spans, const std::string& title);

// The spans as a Chrome trace (JSON; chrome://tracing, Perfetto): the launches on two
// alternating tracks (they overlap), the part after each launch's wait on a third, and
// every block on a track of its SM.
std::string chromeTraceJson(const std::vector<LaunchSpan>& spans);

// Traces one decode step at position `context` (batch > 1: a batch step of sequences
// 0..batch-1, each there), prints the account and writes the Chrome trace to `jsonPath`.
Status traceAndReport(Executor& executor, const plan::Plan& p, int context, int batch,
                      const std::string& jsonPath);

} // namespace ninfer
