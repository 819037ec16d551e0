#!/usr/bin/env bash
# ninferc's per-card choice of the deep ring (GemvShapes.h bulkLayout's deepRing): an `h200`
# plan of the 8B shape (its gate/up pair and lm_head are wide one-token launches) is compiled
# with it and says so in its summary line; NINFER_NO_DEEP_RING=1 gives another plan without
# it, and an `h100` plan (3.35e12 B/s) never takes it. An fp16 `h200` plan has no quantized
# one-token launch, so its summary must not claim the deep ring (it did before the emitter
# reported which launches took it). Compiling the same plan twice gives the same bytes, so a
# difference is the switch's. That the option reaches the wide launches'
# kernels and shared memory is Nvrtc.DeepBulkRingReachesKernelAndLaunch's part.
#   tests/cli/deep_ring.sh NINFERC CONFIG_JSON
set -u
ninferc=$1 config=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
compile() { # name target [env...]; QUANT: ninferc's --quant (default q4, none: fp16)
  local name=$1 target=$2 quant=(--quant "${QUANT:-q4}")
  shift 2
  [ "${QUANT:-}" = none ] && quant=()
  env "$@" "$ninferc" "$config" --dummy-weights "${quant[@]}" --ctx 256 --target "$target" \
    -o "$work/$name.nplan" 2>"$work/$name.err" >/dev/null ||
    { echo "FAIL: $name did not compile: $(tail -1 "$work/$name.err")"; failed=1; }
}
said_deep() { grep -q '^wrote .*(deep ring)' "$work/$1.err"; }
compile h200 h200
compile h200-again h200
compile h200-shallow h200 NINFER_NO_DEEP_RING=1
compile h100 h100
compile h100-switch h100 NINFER_NO_DEEP_RING=1
QUANT=none compile h200-f16 h200
said_deep h200 || { echo "FAIL: the h200 plan did not take the deep ring"; failed=1; }
cmp -s "$work/h200.nplan" "$work/h200-again.nplan" ||
  { echo "FAIL: two compiles of the h200 plan differ"; failed=1; }
if said_deep h200-shallow || cmp -s "$work/h200.nplan" "$work/h200-shallow.nplan"; then
  echo "FAIL: NINFER_NO_DEEP_RING=1 did not keep the h200 plan off the deep ring"
  failed=1
fi
said_deep h100 && { echo "FAIL: the h100 plan took the deep ring"; failed=1; }
said_deep h200-f16 && { echo "FAIL: the fp16 h200 plan says it took the deep ring"; failed=1; }
cmp -s "$work/h100.nplan" "$work/h100-switch.nplan" ||
  { echo "FAIL: NINFER_NO_DEEP_RING=1 changed the h100 plan"; failed=1; }
[ $failed = 0 ] && echo "deep ring: h200 takes it, NINFER_NO_DEEP_RING=1, h100 and fp16 do not"
exit $failed
