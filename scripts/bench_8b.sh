#!/usr/bin/env bash
# The speed tables of docs/performance-log.md in two halves, because the compiler and
# the GPU live on different machines:
#   scripts/bench_8b.sh compile OUT_DIR [NINFERC]   (here) compiles the plans, all from
#       examples/configs/llama-3-8b.json with --dummy-weights for the H200, context 33,000:
#       bench-8b-f16.nplan        fp16
#       bench-8b-q4.nplan         --quant q4 (q4_g64, 4.25 bpw)
#       bench-8b-q4-kv8.nplan     the same with --kv-dtype int8
#       bench-8b-q4-b8.nplan      --quant q4 --batch 8 (8 sequences), context 4096
#       bench-8b-tq1.nplan        --quant ternary (TQ1 linears), context 4096
#       bench-23m.nplan           shared/models/pycode-llama-23m's shape, dummy weights
#       trace-8b-q4.nplan, trace-8b-q4-b8.nplan   the q4 and q4 --batch 8 plans with --trace
#   scripts/bench_8b.sh run PLAN_DIR [NINFER]       (on the GPU machine) runs `ninfer bench` on
#       each plan: prompt 512 + 128 decode steps, 3 warm-ups, 5 measured runs, with --profile
#       (kernel by kernel), then NINFER_PDL=0 as an A/B, then decode at 8K context (f16, q4,
#       q4 with int8 KV) and one run at 32K (q4), then batched decode of the --batch 8 plan
#       (batch 1, 2, 4, 8; prompt 512, 128 steps; --profile: the batch-8 step kernel by
#       kernel), and the timeline of a q4 decode step and of a batch-8 step (the trace-*
#       plans: where the step's time goes as the graph runs it). Writes <plan>.bench,
#       <plan>.json, <plan>.<ctx>.txt, bench-8b-q4-b8.batch.{txt,json,png} and
#       trace-*.timeline.{txt,json} to $OUT (or PLAN_DIR) and prints the summary lines.
# Method: docs/performance.md; the tables it fills: docs/performance-log.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
dir=${2:-}
[ -n "$mode" ] && [ -n "$dir" ] || { sed -n '2,22p' "$0"; exit 2; }

case "$mode" in
compile)
  ninferc=${3:-$(command -v ninferc || echo "$root/build/bin/ninferc")}
  config="$root/examples/configs/llama-3-8b.json"
  mkdir -p "$dir"
  common=(--dummy-weights --target h200 -q)
  "$ninferc" "$config" "${common[@]}" --ctx 33000 -o "$dir/bench-8b-f16.nplan"
  "$ninferc" "$config" "${common[@]}" --ctx 33000 --quant q4 -o "$dir/bench-8b-q4.nplan"
  "$ninferc" "$config" "${common[@]}" --ctx 33000 --quant q4 --kv-dtype int8 \
    -o "$dir/bench-8b-q4-kv8.nplan"
  "$ninferc" "$config" "${common[@]}" --ctx 4096 --quant q4 --batch 8 -o "$dir/bench-8b-q4-b8.nplan"
  "$ninferc" "$config" "${common[@]}" --ctx 4096 --quant ternary -o "$dir/bench-8b-tq1.nplan"
  model="$root/../shared/models/pycode-llama-23m"
  "$ninferc" "$model" "${common[@]}" --ctx 4096 -o "$dir/bench-23m.nplan"
  "$ninferc" "$config" "${common[@]}" --ctx 4096 --quant q4 --trace -o "$dir/trace-8b-q4.nplan"
  "$ninferc" "$config" "${common[@]}" --ctx 4096 --quant q4 --batch 8 --trace \
    -o "$dir/trace-8b-q4-b8.nplan"
  ls -l "$dir"/bench-*.nplan
  ;;
run)
  ninfer=${3:-$(command -v ninfer || echo "$root/build/bin/ninfer")}
  out=${OUT:-$dir}
  for name in bench-23m bench-8b-f16 bench-8b-q4 bench-8b-tq1; do
    plan="$dir/$name.nplan"
    [ -f "$plan" ] || continue
    "$ninfer" bench "$plan" --device cuda --prompt 512 --gen 128 --warmup 3 --reps 5 --profile \
      >"$out/$name.bench"
    "$ninfer" bench "$plan" --device cuda --prompt 512 --gen 128 --warmup 3 --reps 5 --json \
      >"$out/$name.json"
    echo "== $name: $(awk '/^ +prompt/ { getline; print; exit }' "$out/$name.bench")"
    echo "   without PDL: $(NINFER_PDL=0 "$ninfer" bench "$plan" --device cuda --prompt 512 \
      --gen 128 --warmup 1 --reps 3 | tail -1)"
  done
  for name in bench-8b-f16 bench-8b-q4 bench-8b-q4-kv8; do
    plan="$dir/$name.nplan"
    [ -f "$plan" ] || continue
    "$ninfer" bench "$plan" --device cuda --prompt 8192 --gen 32 --warmup 1 --reps 3 \
      >"$out/$name.8192.txt"
    echo "== $name at 8K: $(tail -1 "$out/$name.8192.txt")"
  done
  if [ -f "$dir/bench-8b-q4.nplan" ]; then
    "$ninfer" bench "$dir/bench-8b-q4.nplan" --device cuda --prompt 32768 --gen 32 --warmup 0 \
      --reps 1 >"$out/bench-8b-q4.32768.txt"
    echo "== bench-8b-q4 at 32K: $(tail -1 "$out/bench-8b-q4.32768.txt")"
  fi
  if [ -f "$dir/bench-8b-q4-b8.nplan" ]; then
    plan="$dir/bench-8b-q4-b8.nplan"
    batch=(--device cuda --prompt 512 --gen 128 --batch 1,2,4,8 --warmup 2 --reps 5)
    "$ninfer" bench "$plan" "${batch[@]}" --profile --plot "$out/bench-8b-q4-b8.batch.png" \
      >"$out/bench-8b-q4-b8.batch.txt"
    "$ninfer" bench "$plan" "${batch[@]}" --json >"$out/bench-8b-q4-b8.batch.json"
    echo "== bench-8b-q4-b8 batched decode:"
    grep -E '^ +512 +[1248] ' "$out/bench-8b-q4-b8.batch.txt"
  fi
  for name in trace-8b-q4 trace-8b-q4-b8; do
    plan="$dir/$name.nplan"
    [ -f "$plan" ] || continue
    batch=()
    [ "$name" = trace-8b-q4-b8 ] && batch=(--batch 8)
    "$ninfer" bench "$plan" --device cuda --prompt 512 --gen 32 --warmup 1 --reps 1 "${batch[@]}" \
      --timeline "$out/$name.timeline.json" >"$out/$name.timeline.txt"
    step='s/^step: ([0-9.]+) us.*end, ([0-9]+) launches.*/\1 us, \2 launches/p'
    echo "== $name timeline: $(sed -nE "$step" "$out/$name.timeline.txt")"
  done
  ;;
*)
  sed -n '2,22p' "$0"
  exit 2
  ;;
esac
