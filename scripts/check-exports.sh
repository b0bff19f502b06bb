#!/usr/bin/env bash
# check-exports.sh BINARY INCLUDE_DIR: the dynamic symbols BINARY defines are the host API alone:
# each is peat_-prefixed and declared PEAT_API in a header of INCLUDE_DIR (include/peat). The
# linker's own symbols, libc data copied into the executable (name@GLIBC...) and, in a sanitizer
# build, the sanitizer runtime's interface (__asan_*, __ubsan_*, ...) are not ours.
set -euo pipefail
bin=$1 inc=$2
api=$(grep -ho 'PEAT_API [^(]*[^a-z0-9_(]\(peat_[a-z0-9_]*\)(' "$inc"/*.h |
  sed 's/.*\(peat_[a-z0-9_]*\)($/\1/' | sort -u)
bad=0 n=0
while read -r sym; do
  case "$sym" in
    _start | _init | _fini | _edata | _end | __bss_start | _IO_stdin_used | data_start | __data_start | *@*) continue ;;
    __asan_* | __ubsan_* | __lsan_* | __sanitizer_* | __sancov_*) continue ;;
  esac
  n=$((n + 1))
  if ! grep -qx "$sym" <<<"$api"; then
    echo "check-exports: $bin exports $sym, which is not PEAT_API in $inc" >&2
    bad=1
  fi
done < <(nm -D --defined-only "$bin" | awk '{print $3}')
if [ "$n" = 0 ]; then
  echo "check-exports: $bin exports no host API at all (plugins could not call it)" >&2
  bad=1
fi
[ "$bad" = 0 ] && echo "check-exports: $bin exports $n symbols, all of them PEAT_API in $inc"
exit "$bad"
