#!/usr/bin/env bash
# gpu-check.sh: on a machine with a GPU: builds the CUDA (or HIP) backend, runs the gpu tests and
# a small campaign per GPU kernel, and prints a table. Usage: scripts/gpu-check.sh [cuda|hip]
set -uo pipefail
cd "$(dirname "$0")/.."
vendor="${1:-cuda}"
export PATH="$PATH:/usr/local/cuda/bin"
opt=-DPEAT_CUDA=ON
[ "$vendor" = hip ] && opt=-DPEAT_HIP=ON
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.sm,memory.total --format=csv,noheader
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "$opt" >/dev/null && cmake --build build-gpu -j"$(nproc)" >/dev/null \
  || { echo "gpu-check: build failed"; exit 2; }
(cd build-gpu && ctest -L gpu --output-on-failure) ; tests_rc=$?
build-gpu/peat list | sed -n '/^backends/p'
printf '\n%-18s %-5s %-6s %-20s %-7s %s\n' kernel flow exit finding verdict "max err/bound"
for k in gemm_gpu_tiled gemm_gpu_blas; do
  out="$(mktemp -d)/run"
  build-gpu/peat run --kernel "$k" --flow mlp --calls 24 --out "$out" --quiet >"$out.log" 2>&1; rc=$?
  line=$(grep -E "^$k " "$out.log" | head -1)
  finding=$(echo "$line" | awk '{print $(NF-1)}'); verdict=$(echo "$line" | awk '{print $NF}')
  maxb=$(echo "$line" | awk '{print $4}')
  printf '%-18s %-5s %-6s %-20s %-7s %s\n' "$k" mlp "$rc" "${finding:-?}" "${verdict:-?}" "${maxb:-?}"
  [ -z "$line" ] && tail -3 "$out.log"
done
exit $tests_rc
