#!/usr/bin/env bash
# Speed benchmark of the CUDA path in two halves, because the compiler and the
# GPU live on different machines:
#   scripts/bench_8b.sh compile OUT_DIR [NINFERC]   (here) compiles the plans:
#       bench-llama3-8b-f16.nplan         Llama-3-8B shape, dummy fp16 weights, sm_90, ctx 4096
#       bench-llama3-8b-f16-nomma.nplan   the same with prefill on CUDA cores (A/B)
#       bench-pycode-23m.nplan            shared/models/pycode-llama-23m (real weights)
#   scripts/bench_8b.sh run PLAN_DIR [NINFER]       (on the GPU machine) runs `ninfer bench` on
#       each plan: prompt 512 + 128 decode steps, 3 warm-ups, 5 measured runs, with CUDA graphs
#       and without (NINFER_CUDA_GRAPHS=0), a context sweep with a chart, and writes
#       <plan>.json, <plan>.nographs.json, <plan>.sweep.json and <plan>.png to $OUT (or PLAN_DIR).
# Method and the table to fill: docs/performance.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
dir=${2:-}
[ -n "$mode" ] && [ -n "$dir" ] || { sed -n '2,13p' "$0"; exit 2; }

case "$mode" in
compile)
  ninferc=${3:-$(command -v ninferc || echo "$root/build-lead/bin/ninferc")}
  mkdir -p "$dir"
  "$ninferc" "$root/examples/configs/llama-3-8b.json" --dummy-weights --target h200 --ctx 4096 \
    -o "$dir/bench-llama3-8b-f16.nplan"
  NINFER_NO_TENSOR_CORES=1 "$ninferc" "$root/examples/configs/llama-3-8b.json" --dummy-weights \
    --target h200 --ctx 4096 -o "$dir/bench-llama3-8b-f16-nomma.nplan"
  model="$root/../shared/models/pycode-llama-23m"
  [ -d "$model" ] || model=/work/shared/models/pycode-llama-23m
  if [ -d "$model" ]; then
    "$ninferc" "$model" --target h200 --ctx 4096 -o "$dir/bench-pycode-23m.nplan"
  fi
  ls -l "$dir"/bench-*.nplan
  ;;
run)
  ninfer=${3:-$(command -v ninfer || echo "$root/build-device/bin/ninfer")}
  out=${OUT:-$dir}
  for plan in "$dir"/bench-*.nplan; do
    [ -f "$plan" ] || continue
    name=$(basename "$plan" .nplan)
    echo "== $name"
    "$ninfer" bench "$plan" --device cuda --prompt 512 --gen 128 --warmup 3 --reps 5 \
      --json >"$out/$name.json"
    "$ninfer" bench "$plan" --device cuda --prompt 512 --gen 128 --warmup 3 --reps 5
    echo "-- without CUDA graphs"
    NINFER_CUDA_GRAPHS=0 "$ninfer" bench "$plan" --device cuda --prompt 512 --gen 128 --warmup 3 \
      --reps 5 --json >"$out/$name.nographs.json"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; \
print('decode tok/s', r['decode_tok_s'], 'prefill tok/s', r['prefill_tok_s'])" \
      "$out/$name.nographs.json" || true
    echo "-- context sweep"
    "$ninfer" bench "$plan" --device cuda --prompt 128,512,1024,2048,3840 --gen 128 --warmup 1 \
      --reps 3 --json --plot "$out/$name.png" >"$out/$name.sweep.json"
    cat "$out/$name.sweep.json"
  done
  ;;
*)
  sed -n '2,13p' "$0"
  exit 2
  ;;
esac
