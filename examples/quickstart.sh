#!/usr/bin/env bash
# The main job in one command: build ninfer if needed, compile the bundled
# 4M-parameter Python-code model into a plan, and generate from it.
# Runs on the GPU when there is one, else on the CPU executor.
#   examples/quickstart.sh ["prompt"] [--target T]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prompt=${1:-"def fibonacci(n):"}
target=${2:-h200}
[ -x "$root/build/bin/ninferc" ] && [ -x "$root/build/bin/ninfer" ] || bash "$root/scripts/setup.sh"

plan="$root/build/pycode-llama-3m.nplan"
"$root/build/bin/ninferc" "$root/examples/pycode-llama-3m" --target "$target" --ctx 2048 -o "$plan"
"$root/build/bin/ninfer" inspect "$plan" | head -n 20
echo
printf '%s' "$prompt"   # ninfer prints only the continuation
"$root/build/bin/ninfer" "$plan" -p "$prompt" -n 128 --temp 0.7 --top-p 0.9 --top-k 40 --seed 1
echo
