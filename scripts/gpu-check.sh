#!/usr/bin/env bash
# gpu-check.sh: on a machine with a GPU: builds the CUDA (or HIP) backend, runs the gpu tests,
# validates gemm_new on the device, runs whole flows on the device, runs bench_device and the
# predictor benchmark when there is one, and prints a table last. Under 8 minutes. Usage: scripts/gpu-check.sh [cuda|hip]
set -uo pipefail
cd "$(dirname "$0")/.."
vendor="${1:-cuda}"
case "$vendor" in cuda) opt=-DPEAT_CUDA=ON ;; hip) opt=-DPEAT_HIP=ON ;; *) echo "usage: $0 [cuda|hip]" >&2; exit 2 ;; esac
export PATH="$PATH:/usr/local/cuda/bin"
build=build-gpu-$vendor
rows=()
row() { rows+=("$(printf '%-34s %-6s %8s  %s' "$1" "$2" "$3" "$4")"); }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

device=$( { command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | head -1; } ||
          { command -v rocm-smi >/dev/null && rocm-smi --showproductname | grep -m1 -i 'card series'; } || echo "no device query tool")

t=$(now)
if cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$opt" >"$build.log" 2>&1 && cmake --build "$build" -j"$(nproc)" >>"$build.log" 2>&1; then
  row "build ($vendor)" ok "$(secs "$t")" "$(grep -o 'building for .*\|cannot target .*' "$build.log" | head -1)"
else
  row "build ($vendor)" FAIL "$(secs "$t")" "see $build.log"
  printf '\n%-34s %-6s %8s  %s\n' check result seconds detail; printf '%s\n' "${rows[@]}"; exit 2
fi

t=$(now)
(cd "$build" && timeout 300 ctest -L gpu --output-on-failure) >"$build/gpu-tests.log" 2>&1; rc=$?
skipped=$(grep -c '\*\*\*Skipped' "$build/gpu-tests.log" || true)
row "ctest -L gpu" "$([ $rc = 0 ] && echo ok || echo FAIL)" "$(secs "$t")" "$(grep -m1 'tests passed' "$build/gpu-tests.log") (ctest Skipped: $skipped)"

run() { # name, args...
  local name=$1; shift
  local out; out=$(mktemp -d)
  t=$(now)
  timeout 120 "$build/peat" run "$@" --out "$out/run" --quiet >"$out/log" 2>&1; local rc=$?
  local verdict; verdict=$(grep -o 'verdict: [A-Z]*' "$out/log" | head -1)
  row "$name" "$rc" "$(secs "$t")" "${verdict:-$(tail -1 "$out/log")}"
}
run "gemm_new on $vendor (mlp)" --kernel gemm_new --backend "$vendor" --flow mlp --iters 20 --calls 24
run "attention_flash on $vendor (gpt)" --kernel attention_flash --backend "$vendor" --flow gpt --iters 4 --calls 12
run "softmax_online on $vendor (gpt)" --kernel softmax_online --backend "$vendor" --flow gpt --iters 4 --calls 12
plugin="$build/libpeat_example_gemm_$vendor.so"
[ -f "$plugin" ] && run "example $vendor plugin (mlp)" --plugin "$plugin" --kernel "example_gemm_$vendor" --backend "$vendor" --flow mlp --iters 8 --calls 12 --width 20 --batch 12

t=$(now)
timeout 120 "$build/bench_device" >"$build/bench_device.log" 2>&1; rc=$?
row "bench_device" "$rc" "$(secs "$t")" "device vs cpu golden, staging cost: table above"

if [ -x "$build/bench_predictor" ]; then
  # the latency predictor on the device's kernels, and on this machine's (quieter) CPU, where it
  # also runs the per-stage and --budget tables of every flow (one run each)
  for be in "$vendor" cpu; do
    t=$(now)
    timeout 300 "$build/bench_predictor" --backend "$be" --repeats 5 --stage-repeats 1 \
      >"$build/bench_predictor_$be.log" 2>&1; rc=$?
    row "bench_predictor ($be)" "$rc" "$(secs "$t")" "$(grep -m1 'kernels within' "$build/bench_predictor_$be.log")"
  done
else
  row "bench_predictor" "-" 0 "not in this tree"
fi

[ -f "$build/bench_device.log" ] && { echo; cat "$build/bench_device.log"; }
for be in "$vendor" cpu; do
  [ -f "$build/bench_predictor_$be.log" ] && { echo; echo "bench_predictor --backend $be:"; cat "$build/bench_predictor_$be.log"; }
done
echo
echo "device: $device"
printf '%-34s %-6s %8s  %s\n' check result seconds detail
printf '%s\n' "${rows[@]}"
exit 0
