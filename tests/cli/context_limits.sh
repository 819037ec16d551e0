#!/usr/bin/env bash
# ninferc and --ctx: it warns, on one line, where the context runs past the positions the model
# was trained for (the bundled 4M model: 2,048), and still writes the plan; at 2,048 it does
# not warn. A LongRoPE model (tests/golden's tiny-phi3-longrope: short factors up to 128 of its
# 512 positions) compiles past its original length without a word (its long factors take over
# there), and warns past 512.
#   tests/cli/context_limits.sh NINFERC MODEL_DIR LONGROPE_MODEL_DIR
set -u
ninferc=$1 model=$2 longrope=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
"$ninferc" "$model" --target sm_80 --ctx 4096 -q -o "$work/long.nplan" 2>"$work/long.err" ||
  { echo "FAIL: --ctx 4096 did not compile: $(cat "$work/long.err")"; failed=1; }
if [ "$(grep -c '^warning: --ctx 4096 is past the model'"'"'s 2048 positions' "$work/long.err")" != 1 ] ||
  [ "$(wc -l <"$work/long.err")" != 1 ]; then
  echo "FAIL: expected one warning line, got: $(cat "$work/long.err")"
  failed=1
fi
[ -s "$work/long.nplan" ] || { echo "FAIL: no plan written at --ctx 4096"; failed=1; }
"$ninferc" "$model" --target sm_80 --ctx 2048 -q -o "$work/fit.nplan" 2>"$work/fit.err" ||
  { echo "FAIL: --ctx 2048 did not compile"; failed=1; }
if [ -s "$work/fit.err" ]; then
  echo "FAIL: a warning at --ctx 2048: $(cat "$work/fit.err")"
  failed=1
fi
"$ninferc" "$longrope" --target sm_80 --ctx 256 -q -o "$work/rope.nplan" 2>"$work/rope.err" ||
  { echo "FAIL: LongRoPE at 256 positions: $(cat "$work/rope.err")"; failed=1; }
if [ -s "$work/rope.err" ] || [ ! -s "$work/rope.nplan" ]; then
  echo "FAIL: LongRoPE at 256 positions: a warning or no plan: $(cat "$work/rope.err")"
  failed=1
fi
"$ninferc" "$longrope" --target sm_80 --ctx 600 -q -o "$work/rope.nplan.2" 2>"$work/rope.err" ||
  { echo "FAIL: LongRoPE at 600 positions: $(cat "$work/rope.err")"; failed=1; }
grep -q "^warning: --ctx 600 is past the model's 512 positions" "$work/rope.err" ||
  { echo "FAIL: LongRoPE at 600 positions did not warn: $(cat "$work/rope.err")"; failed=1; }
[ $failed = 0 ] && echo "ok"
exit $failed
