#!/usr/bin/env bash
# Runs the GPU checks on a machine with a GPU but without the compiler (the
# H200 used for development): builds the runtime and the GPU tests from this
# tree, runs the end-to-end goldens on plans compiled beforehand, the op-parity
# tests (gpu_tests, and the ternary linears' parity in ternary_tests), and a
# decode/prefill timing of every bench-*.nplan.
#   scripts/device_check.sh PLAN_DIR [BUILD_DIR]
# PLAN_DIR holds <golden-model>.nplan files (compile them with `run_golden.py --device cpu
# --work PLAN_DIR`, whose default target is sm_90) and bench-*.nplan files.
# Environment:
#   GGUF_PLAN_DIR   <golden-model>.nplan files compiled from tests/golden/gguf (run_golden.py --gguf)
#   GPU_FILTER      a gtest filter for gpu_tests (default: all). Parameterized tests are named
#                   AllFormats/QuantParity.LinearWide/Q4_G64, so write '*QuantParity.LinearWide/*'
#   SHARDS          gpu_tests processes at once (default 12)
#   TEST_LIMIT      seconds each of them may run (default: no limit); a shard cut off is
#                   named with the test it was running
#   NINFER_BATCH_PLANS  plans compiled with --batch N, for BatchParity.* (skipped without)
# The goldens come first: they take about a minute. Logs go to $OUT (or BUILD_DIR) as at most
# four files, since a device call returns only a few: gpu_tests.log (every shard's log, one
# after the other), golden_cuda.log, golden_gguf_cuda.log and timing.log.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
plans=$(cd "$1" && pwd)
build=${2:-$root/build-device}
out=${OUT:-$build}
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$build/logs"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
if [ ! -x "$build/bin/ninfer" ] || [ ! -x "$build/tests/gpu/gpu_tests" ] ||
  [ ! -x "$build/tests/ternary/ternary_tests" ]; then
  start=$(date +%s)
  cmake -G Ninja -S "$root" -B "$build" -DNINFER_BUILD_COMPILER=OFF -DCMAKE_BUILD_TYPE=Release \
    >"$build/logs/configure.log" 2>&1 || { tail -20 "$build/logs/configure.log"; exit 1; }
  ninja -C "$build" -j"$(nproc)" ninfer gpu_tests ternary_tests >"$build/logs/build.log" 2>&1 ||
    { grep -E 'error|FAILED' "$build/logs/build.log" | head -40; exit 1; }
  echo "built in $(($(date +%s) - start)) s"
fi

goldens() { # PLAN_DIR LOG [run_golden.py options]
  local dir=$1 log=$2
  shift 2
  local models
  models=$(cd "$dir" && ls *.nplan 2>/dev/null | grep -v '^bench-' | sed 's/\.nplan$//' | paste -sd, -)
  [ -n "$models" ] || return 0
  python3 "$root/tests/golden/run_golden.py" --plan-dir "$dir" --ninfer "$build/bin/ninfer" \
    --device cuda --work "$build/golden" --models "$models" "$@" >"$out/$log" 2>&1
  echo "golden exit $?"
  grep -E 'FAIL' "$out/$log" | head -20
  tail -n 2 "$out/$log"
}
echo "== goldens (cuda)"
goldens "$plans" golden_cuda.log
if [ -n "${GGUF_PLAN_DIR:-}" ]; then
  echo "== goldens of the GGUF conversions (cuda)"
  goldens "$(cd "$GGUF_PLAN_DIR" && pwd)" golden_gguf_cuda.log --gguf
fi

# The GPU tests in $SHARDS processes at once (gtest sharding): one process takes over 400 s
# on the H200, most of it NVRTC on the CPU. With 8, one shard of six slow quantized-linear
# cases ran past 500 s; with 12 the suite took 404 s (16 cores).
shards=${SHARDS:-12}
limit=()
[ -n "${TEST_LIMIT:-}" ] && limit=(timeout "$TEST_LIMIT")
echo "== gpu_tests ($shards shards${TEST_LIMIT:+, $TEST_LIMIT s each}${GPU_FILTER:+, filter $GPU_FILTER})"
rm -f "$build"/logs/gpu_tests.*.log
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "${limit[@]}" "$build/tests/gpu/gpu_tests" \
    --gtest_filter="${GPU_FILTER:-*}" >"$build/logs/gpu_tests.$i.log" 2>&1 &
done
# Beside them, the ternary linears against the CPU (the rest of ternary_tests needs no GPU).
"${limit[@]}" "$build/tests/ternary/ternary_tests" --gtest_filter='TernaryKernels.*' \
  >"$build/logs/gpu_tests.ternary.log" 2>&1 &
failed=0
for job in $(jobs -p); do wait "$job" || failed=1; done
cat "$build"/logs/gpu_tests.*.log >"$out/gpu_tests.log"
echo "gpu_tests: $(grep -c '^\[       OK ]' "$out/gpu_tests.log") passed," \
  "$(grep -cE '^\[  FAILED  \].*\([0-9]+ ms\)$' "$out/gpu_tests.log") failed$([ $failed = 0 ] ||
    echo ', a shard exited non-zero')"
grep -E '^\[  FAILED  \].*\([0-9]+ ms\)$' "$out/gpu_tests.log" | head -20
grep -h -A3 ': Failure$' "$out/gpu_tests.log" | head -40
for log in "$build"/logs/gpu_tests.*.log; do
  grep -qE '^\[==========\] [0-9]+ tests? from .* ran\.' "$log" ||
    echo "cut off: $(basename "$log") in $(grep '^\[ RUN' "$log" | tail -1 | sed 's/^\[ RUN *\] //')"
done

ids=$(python3 -c "print(','.join(str(3 + (i * 7919) % 4000) for i in range(512)))")
for plan in "$plans"/bench-*.nplan; do
  [ -f "$plan" ] || continue
  echo "== timing of $(basename "$plan") (the last 5 of 7 runs; prompt 512 ids, 128 new tokens)"
  for run in 1 2 3 4 5 6 7; do
    "$build/bin/ninfer" "$plan" --device cuda --prompt-ids "$ids" -n 128 --ignore-eos --print-ids \
      2>&1 >/dev/null | grep "decode" | tail -1
  done | tee -a "$out/timing.log" | tail -n 5
done
