#!/usr/bin/env bash
# The main job in one command: build ninfer if needed, compile the bundled
# 4M-parameter Python-code model into a plan, and generate from it.
# Runs on the GPU when there is one, else on the CPU executor.
#   examples/quickstart.sh ["prompt"] [--target T]    (T: a ninferc --target, default h200)
# NINFER_BUILD_DIR: a build folder that has bin/ninferc and bin/ninfer (default: build/,
# which scripts/setup.sh sets up first where it has none).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build=${NINFER_BUILD_DIR:-$root/build}
prompt="def fibonacci(n):"
target=h200
while [ $# -gt 0 ]; do
  case "$1" in
  --target)
    [ $# -ge 2 ] || { echo "quickstart: --target needs a value (e.g. h200, sm_89)" >&2; exit 2; }
    target=$2
    shift 2
    ;;
  -h | --help)
    sed -n '2,7p' "$0"
    exit 0
    ;;
  *)
    prompt=$1
    shift
    ;;
  esac
done
if [ ! -x "$build/bin/ninferc" ] || [ ! -x "$build/bin/ninfer" ]; then
  [ -z "${NINFER_BUILD_DIR:-}" ] ||
    { echo "quickstart: $build has no bin/ninferc and bin/ninfer" >&2; exit 1; }
  bash "$root/scripts/setup.sh"
fi

plan="$build/pycode-llama-3m.nplan"
"$build/bin/ninferc" "$root/examples/pycode-llama-3m" --target "$target" --ctx 2048 -o "$plan"
# sed, not head: head would stop reading early, and under pipefail the writer's SIGPIPE
# would end the script before it generates.
"$build/bin/ninfer" inspect "$plan" | sed -n '1,20p'
echo
printf '%s' "$prompt"   # ninfer prints only the continuation
"$build/bin/ninfer" "$plan" -p "$prompt" -n 128 --temp 0.7 --top-p 0.9 --top-k 40 --seed 1
echo
