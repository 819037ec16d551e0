#!/usr/bin/env bash
# Runs the GPU checks on a machine with a GPU but without the compiler (the
# H200 used for development): builds the runtime and the GPU tests from this
# tree, runs the op-parity tests (gpu_tests, and the ternary linears' parity in
# ternary_tests), the end-to-end goldens on plans compiled beforehand, and a
# decode/prefill timing of every bench-*.nplan.
#   scripts/device_check.sh PLAN_DIR [BUILD_DIR]
# PLAN_DIR holds <golden-model>.nplan files and bench-*.nplan files.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
plans=$(cd "$1" && pwd)
build=${2:-$root/build-device}
out=${OUT:-$build}
export PATH=/usr/local/cuda/bin:$PATH

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
if [ ! -x "$build/bin/ninfer" ] || [ ! -x "$build/tests/gpu/gpu_tests" ] ||
  [ ! -x "$build/tests/ternary/ternary_tests" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DNINFER_BUILD_COMPILER=OFF -DCMAKE_BUILD_TYPE=Release \
    >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
  ninja -C "$build" -j"$(nproc)" ninfer gpu_tests ternary_tests >"$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log"; exit 1; }
fi

# The GPU tests in $SHARDS processes at once (default 12; gtest sharding): one process
# takes over 400 s on the H200, most of it NVRTC on the CPU. With 8, one shard of six
# slow quantized-linear cases ran past 500 s; with 12 the suite took 404 s (16 cores).
shards=${SHARDS:-12}
echo "== gpu_tests ($shards shards)"
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$build/tests/gpu/gpu_tests" \
    >"$out/gpu_tests.$i.log" 2>&1 &
done
# Beside them, the ternary linears against the CPU (the rest of ternary_tests needs no GPU).
"$build/tests/ternary/ternary_tests" --gtest_filter='TernaryKernels.*' \
  >"$out/gpu_tests.ternary.log" 2>&1 &
failed=0
for job in $(jobs -p); do wait "$job" || failed=1; done
echo "gpu_tests: $(cat "$out"/gpu_tests.*.log | grep -c '^\[       OK ]') passed, $(cat "$out"/gpu_tests.*.log | grep -cE '^\[  FAILED  \].*\([0-9]+ ms\)$') failed$([ $failed = 0 ] || echo ', a shard exited non-zero')"
cat "$out"/gpu_tests.*.log | grep -E '^\[  FAILED  \].*\([0-9]+ ms\)$' | head -20
# The failures' messages too: the shards' logs may not all come back from the device.
grep -h -A3 ': Failure$' "$out"/gpu_tests.*.log | head -40

echo "== goldens (cuda)"
models=$(cd "$plans" && ls *.nplan 2>/dev/null | grep -v '^bench-' | sed 's/\.nplan$//' | paste -sd, -)
if [ -n "$models" ]; then
  python3 "$root/tests/golden/run_golden.py" --plan-dir "$plans" --ninfer "$build/bin/ninfer" \
    --device cuda --work "$build/golden" --models "$models" >"$out/golden_cuda.log" 2>&1
  echo "golden exit $?"; tail -n 25 "$out/golden_cuda.log"
fi

echo "== timing (median of 5 runs after 2 warm-ups; prompt 512 ids, 128 new tokens)"
ids=$(python3 -c "print(','.join(str(3 + (i * 7919) % 4000) for i in range(512)))")
for plan in "$plans"/bench-*.nplan; do
  [ -f "$plan" ] || continue
  for run in 1 2 3 4 5 6 7; do
    "$build/bin/ninfer" "$plan" --device cuda --prompt-ids "$ids" -n 128 --ignore-eos --print-ids \
      2>&1 >/dev/null | grep "decode" | tail -1
  done >"$out/$(basename "$plan").timing"
  echo "$(basename "$plan"):"; tail -n 5 "$out/$(basename "$plan").timing"
done
