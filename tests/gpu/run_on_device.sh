#!/usr/bin/env bash
# Builds the runtime, codegen (NVRTC) and the gpu_tests binary on the GPU
# machine from this tree alone (-DNINFER_BUILD_COMPILER=OFF: no MLIR, vendored
# flatbuffers) and runs the GPU tests: NVRTC/plan-writer tests plus the
# CUDA-vs-CPU op parity sweep. Prints the parity table and a short summary.
#
#   tests/gpu/run_on_device.sh [build-dir [gtest args...]]
#
# GoogleTest: used from the system when installed; otherwise built from source
# found at $GTEST_SOURCE (default: third_party/googletest, build-h4-googletest,
# /usr/src/googletest) into <build-dir>/_gtest. Full logs go to $OUT when set.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
shift || true
jobs=${JOBS:-$(nproc)}
log_dir=${OUT:-$build}
mkdir -p "$build" "$log_dir"
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo "(nvidia-smi unavailable)"

prefix_args=()
have_gtest=0
for dir in /usr/lib/*/cmake/GTest /usr/lib/cmake/GTest /usr/local/lib/cmake/GTest \
           /usr/local/lib64/cmake/GTest /usr/lib64/cmake/GTest; do
  [ -f "$dir/GTestConfig.cmake" ] && have_gtest=1
done
if [ "$have_gtest" = 0 ]; then
  src=${GTEST_SOURCE:-}
  for candidate in "$root/third_party/googletest" "$root/build-h4-googletest" /usr/src/googletest; do
    [ -z "$src" ] && [ -f "$candidate/CMakeLists.txt" ] && src=$candidate
  done
  if [ -z "$src" ]; then
    echo "GoogleTest is not installed and no source was found (set GTEST_SOURCE)." >&2
    exit 2
  fi
  echo "== building GoogleTest from $src"
  cmake -G Ninja -S "$src" -B "$build/_gtest-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$build/_gtest" -DBUILD_GMOCK=OFF >"$log_dir/gtest.log" 2>&1
  ninja -C "$build/_gtest-build" -j"$jobs" install >>"$log_dir/gtest.log" 2>&1
  prefix_args=(-DCMAKE_PREFIX_PATH="$build/_gtest")
fi

echo "== configure + build (gpu_tests, ninfer) with -j$jobs"
cmake -G Ninja -S "$root" -B "$build" -DNINFER_BUILD_COMPILER=OFF -DCMAKE_BUILD_TYPE=Release \
  "${prefix_args[@]}" >"$log_dir/configure.log" 2>&1 || { tail -30 "$log_dir/configure.log"; exit 1; }
ninja -C "$build" -j"$jobs" gpu_tests ninfer >"$log_dir/build.log" 2>&1 || {
  grep -E "error|FAILED" "$log_dir/build.log" | head -40; exit 1; }

echo "== gpu_tests"
set +e
"$build/tests/gpu/gpu_tests" "$@" >"$log_dir/gpu_tests.log" 2>&1
rc=$?
set -e
grep -E "^\[parity\]" "$log_dir/gpu_tests.log" || true
echo "== failures"
grep -E -B3 -A6 "Failure$" "$log_dir/gpu_tests.log" | head -80 || true
echo "== summary"
grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests? from .* ran" "$log_dir/gpu_tests.log" | tail -20
echo "gpu_tests exit code: $rc"
exit $rc
