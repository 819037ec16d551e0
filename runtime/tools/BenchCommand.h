// `ninfer bench`: prefill and decode speed of a plan, with per-token latency
// percentiles, achieved bandwidth and MBU (model bandwidth utilization), as a
// table or JSON, optionally a PNG chart of decode speed against context length;
// with --batch, batched decode (several sequences per step) against batch size.
#pragma once

namespace ninfer {

// ninfer bench PLAN [--prompt N[,N...]] [--gen N] [--batch B[,B...]] [--reps N] [--warmup N]
//                   [--device cuda|cpu|auto] [--threads N] [--bandwidth BYTES_PER_S]
//                   [--json] [--plot OUT.png]
// argv[1] is "bench". Prints its own `ninfer: error: ...` line and returns the
// exit code (0 ok, 1 failure, 2 bad usage); never throws.
int runBenchCommand(int argc, char** argv);

} // namespace ninfer
