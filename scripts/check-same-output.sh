#!/usr/bin/env bash
# check-same-output.sh BUILD_DIR [--update]: a moved or reorganised harness changes no verdict and
# no output. Runs a fixed set of campaigns on fixed seeds (a passing GEMM, a reduced-precision one,
# an attention and a layer norm on the gpt flow, a stateful plugin, a playback fault-injection
# campaign) and compares what they print and write (the terminal tables, signature.json,
# `peat inspect`'s tables) with tests/expected/same-output.txt, every timing, date, path and
# device name taken out. --update writes that file again (after a change meant to alter output;
# say so in the commit). Run by ctest (test same_output).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
update=${2:-}
cd "$(dirname "$0")/.."
root=$(pwd)
expected=$root/tests/expected/same-output.txt
peat=$build/peat
zoo=$build/tests/zoo/libpeat_zoo.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PEAT_GOLDEN_CACHE=off OPENBLAS_NUM_THREADS=1

# the text of one campaign without what differs between two runs of it: clocks, the date, the
# output folder, the host's device and library names
normalise() {
  sed -E -e '/done in [0-9.]+ s$/d' -e '/^report: /d' \
    -e 's/\(flow ([a-z0-9_:-]+) on ([a-z]+): [^;]*;/(flow \1 on \2: DEVICE;/' \
    -e 's/(profile|playback|probes|runtime FI|total|injections|golden) [0-9.]+ s/\1 T s/g' \
    -e 's/"timing_s": \{[^}]*\}/"timing_s": {}/' -e 's/"seconds": [0-9.]+/"seconds": T/' -e 's/\([0-9]+\.[0-9]+ s\)/(T s)/g' -e 's/"(device|command|blas)": "[^"]*"/"\1": ""/' \
    -e "s#$work/##g" -e "s#$build/##g" -e 's/[0-9]+(\.[0-9]+)? (ms|s|min) per/T per/g' -e 's/[0-9]+ trials\/s/N trials\/s/' -e 's/[0-9]+ thread\(s\)/N thread(s)/g'
}

run() { # name, then the peat arguments
  local name=$1 rc=0
  shift
  echo "=== $name: peat $*" | normalise
  (cd "$work" && "$peat" "$@" >"$name.out" 2>"$name.err") || rc=$?
  echo "exit $rc"
  normalise <"$work/$name.out"
  if [ -f "$work/$name/signature.json" ]; then
    echo "--- signature.json"
    normalise <"$work/$name/signature.json"
  fi
  if [ -f "$work/$name/campaign.h5" ]; then
    echo "--- inspect"
    "$peat" inspect "$work/$name/campaign.h5" |
      grep -E '^(  (campaign|policy|storage) |stages present|op calls|  [a-z_0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ |metrics|  iterations covered)' |
      normalise
  fi
}

{
  run gemm_pass run --kernel gemm_new --seed 7 --out gemm_pass
  run gemm_bf16 run --kernel gemm_bf16 --seed 3 --out gemm_bf16
  run attention run --kernel attention_flash --flow gpt --seed 5 --out attention
  run layernorm run --kernel layernorm_welford --flow gpt --seed 9 --no-runtime --out layernorm
  run stateful run --plugin "$zoo" --kernel zoo_state_ptr_cache --seed 11 --no-runtime --out stateful
  run inject inject --campaign gemm_pass --model 'bitflip(bit=30);stuck(bit=3,value=1)' --trials 40
} >"$work/now.txt"

if [ "$update" = --update ]; then
  mkdir -p "$(dirname "$expected")"
  cp "$work/now.txt" "$expected"
  echo "check-same-output: wrote $expected ($(wc -l <"$expected") lines)"
  exit 0
fi
if ! diff -u "$expected" "$work/now.txt" >"$work/diff.txt"; then
  echo "check-same-output: the campaigns' output differs from tests/expected/same-output.txt:" >&2
  head -60 "$work/diff.txt" >&2
  exit 1
fi
echo "check-same-output: $(grep -c '^=== ' "$expected") campaigns on fixed seeds print and write what they did before"
