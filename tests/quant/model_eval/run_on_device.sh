#!/usr/bin/env bash
# Quality and speed figures of the quantization core on the GPU machine:
# builds quant_model and quant_bench with g++ alone (no CMake, GoogleTest or
# MLIR needed), runs eval_model.py on a Llama checkpoint (PyTorch) and the GPTQ
# speed benchmark (QM_SPEED=0 skips it). Logs go to $OUT when set; QM_*
# variables choose the experiments (see eval_model.py).
#
#   tests/quant/model_eval/run_on_device.sh <model-dir> <dir with calib/heldout_python.txt>
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
model=$1
data=$2
work=${WORK:-/tmp/quant-eval}
out=${OUT:-$work}
mkdir -p "$work" "$out"

echo "== build"
flags=(-O3 -std=c++17 -fopenmp-simd -pthread -I"$root/passes/quant" -I"$root/runtime/include"
       -I"$root/tests/quant")
for src in "$root"/passes/quant/*.cpp; do
  g++ "${flags[@]}" -c "$src" -o "$work/$(basename "$src" .cpp).o" &
done
wait
g++ "${flags[@]}" "$work"/*.o "$root/tests/quant/model_eval/QuantModel.cpp" -o "$work/quant_model"
g++ "${flags[@]}" "$work"/*.o "$root/tests/quant/QuantBench.cpp" -o "$work/quant_bench"
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"

echo "== model quality"
PYTHONUNBUFFERED=1 python3 "$root/tests/quant/model_eval/eval_model.py" "$model" \
  "$data/calib_python.txt" "$data/heldout_python.txt" "$work" "$work/quant_model" 2>&1 |
  grep -v Warning | tee "$out/eval.log"

if [ "${QM_SPEED:-1}" = 1 ]; then
  echo "== GPTQ speed"
  "$work/quant_bench" speed 4096 | tee "$out/speed.txt"
fi
