#!/usr/bin/env bash
# One-command set-up on a fresh Debian 12 / Ubuntu 24.04 machine: installs the
# packages ninfer builds with, then configures and builds everything into build/.
# The CUDA toolkit (nvcc, NVRTC, headers) must already be installed (/usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ ccache python3
          llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
          flatbuffers-compiler libflatbuffers-dev libgtest-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ] && ! command -v nvcc >/dev/null; then
  echo "setup: error: the CUDA toolkit was not found at $cuda (install it from NVIDIA's repository)" >&2
  exit 1
fi
export PATH="$cuda/bin:$PATH"

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$cuda" >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: done. Tools are in build/bin (ninferc, ninfer). Tests: ctest --test-dir build --output-on-failure"
