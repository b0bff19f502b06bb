#!/usr/bin/env bash
# check-prefixes.sh BUILD_DIR: every function (and global variable) a module exports carries its
# folder's prefix (docs/architecture.md, "Conventions"): peat_<folder>_ for every room, peat_ for
# core/ (whose names are the host API's, include/peat/: peat_tensor_alloc, peat_backend_create).
# Reads the symbols each module library defines (nm), so a static function is never counted and
# one under #ifdef is checked in the builds that compile it. Exits 1 naming each symbol that does
# not carry its prefix; run by ctest (test prefixes).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
rooms=$(scripts/rooms.sh | tr '
' ' ')
# Names that may keep another prefix, each with its reason (none today; keep this list short).
allow=""
fail=0
checked=0
for r in $rooms; do
  # a room of harness/ is named by its own folder: harness/isolate -> peat_isolate_, libpeat_isolate.a
  name=${r#harness/}
  prefix="peat_${name}_"
  [ "$r" = core ] && prefix="peat_"
  libs="$build/libpeat_$name.a"
  # core's device backends and device kernels are libraries of their own (core/gpu, core/opencl,
  # core/device)
  [ "$r" = core ] && libs="$libs $(ls "$build"/libpeat_gpu.a "$build"/libpeat_opencl.a "$build"/libpeat_device.a 2>/dev/null || true)"
  for lib in $libs; do
    if [ ! -f "$lib" ]; then
      echo "check-prefixes: $lib is missing (build first)" >&2
      fail=1
      continue
    fi
    while read -r sym; do
      checked=$((checked + 1))
      case "$sym" in "$prefix"*) continue ;; esac
      # the sanitizers' own names (ODR indicators of a global under ASan: __odr_asan.NAME)
      case "$sym" in __odr_asan* | __asan* | __ubsan* | __sanitizer*) continue ;; esac
      case " $allow " in *" $sym "*) continue ;; esac
      echo "check-prefixes: $r/ exports $sym, which does not start with $prefix" >&2
      fail=1
    done < <(nm -g --defined-only "$lib" | awk 'NF == 3 && $2 ~ /^[TDRBi]$/ {print $3}' | sort -u)
  done
done
if [ "$fail" = 0 ]; then
  echo "check-prefixes: $checked exported names in $(echo $rooms | wc -w) folders, each with its folder's prefix"
fi
exit "$fail"
