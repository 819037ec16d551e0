#!/usr/bin/env bash
# A/B of plans on the GPU machine, as docs/performance.md's comparisons are made: plans of
# the same model compiled from two trees (or with a switch), run by one ninfer.
#   scripts/ab_plans.sh bench PLAN...   ROUNDS rounds (default 3); each round benches every
#       plan once, in the order given (alternating, so drift hits all alike), and prints its
#       summary line. BENCH_ARGS: the bench options (default: prompt 512, 128 steps, 3
#       warm-ups, 5 runs); with --batch in them, the lines of each batch size.
#   scripts/ab_plans.sh same PLAN...    whether each plan after the first gives the first's
#       logits (one-token prompt: the one-token kernels) and greedy ids (a 200-token prompt,
#       48 steps), byte for byte; the files go to $OUT (or a temporary folder). Stops at
#       the first plan that does not run.
# NINFER: the runtime (default build/bin/ninfer); DEVICE: its --device (default cuda).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ninfer=${NINFER:-$root/build/bin/ninfer}
device=${DEVICE:-cuda}
mode=${1:-}
shift || true
[ $# -ge 1 ] || { sed -n '2,11p' "$0"; exit 2; }

case "$mode" in
bench)
  args=${BENCH_ARGS:---prompt 512 --gen 128 --warmup 3 --reps 5}
  for r in $(seq 1 "${ROUNDS:-3}"); do
    for plan in "$@"; do
      # shellcheck disable=SC2086 # the options are words
      "$ninfer" bench "$plan" --device "$device" $args 2>&1 | grep -E '^ +[0-9]+ ' |
        sed "s|^|round $r $(basename "$plan"): |"
    done
  done
  ;;
same)
  out=${OUT:-$(mktemp -d)}
  mkdir -p "$out" || exit 1
  ids=$(seq -s, 1 200)
  # Plan i's outputs go to $out/i.logits and $out/i.ids (plans may share a name).
  i=0
  for plan in "$@"; do
    "$ninfer" "$plan" --device "$device" --prompt-ids 7 -n 1 --dump-logits "$out/$i.logits" \
      >/dev/null 2>&1 || { echo "$plan: the one-token run failed"; exit 1; }
    "$ninfer" "$plan" --device "$device" --prompt-ids "$ids" -n 48 --print-ids --ignore-eos \
      2>/dev/null >"$out/$i.ids" || { echo "$plan: the greedy run failed"; exit 1; }
    i=$((i + 1))
  done
  for i in $(seq 1 $(($# - 1))); do
    cmp -s "$out/0.logits" "$out/$i.logits" && logits=same || logits=DIFFERENT
    cmp -s "$out/0.ids" "$out/$i.ids" && greedy=same || greedy=DIFFERENT
    echo "plan $((i + 1)) against plan 1: logits $logits, greedy ids $greedy"
  done
  ;;
*)
  sed -n '2,11p' "$0"
  exit 2
  ;;
esac
