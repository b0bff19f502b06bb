#!/usr/bin/env bash
# check-layout.sh [MAX_PERCENT]: the house rules of docs/architecture.md, checked on the sources.
#   1. no folder holds more than MAX_PERCENT (default 20) of the code (lines of .c, .h and .cu);
#   2. every folder of code is a module of CMakeLists.txt (peat_module: its own static library
#      and its <lib>_links_alone target, which links it with its declared dependencies alone);
#   3. no include circle crosses folders: the graph "folder A includes a header of folder B" has
#      no cycle (a circle of files inside one folder is that folder's business);
#   4. docs/architecture.md maps every source file of the rooms and include/ (a "- `path`:" line).
# Exits 1 with what broke the rule; run by ctest (test layout) and so by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-20}
rooms=$(scripts/rooms.sh | tr '
' ' ')
fail=0

sources() { find "$@" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort; }
lines() { if [ -n "$(sources "$@")" ]; then sources "$@" | xargs cat | wc -l; else echo 0; fi; }

# 1. shares
total=$(lines $rooms include)
for r in $rooms include; do
  n=$(lines "$r")
  if [ $((n * 100)) -gt $((max * total)) ]; then
    echo "check-layout: $r/ holds $n of $total lines ($((n * 100 / total))%), over the ${max}% a folder may hold" >&2
    fail=1
  fi
done

# 2. a module each (a folder of C sources that CMake does not build as a module)
for d in */; do
  d=${d%/}
  case " $(echo $rooms) harness include cmake tests bench examples build docs scripts " in
    *" $d "*) continue ;;
  esac
  if [ -n "$(find "$d" -maxdepth 1 -name '*.c' -print -quit)" ]; then
    echo "check-layout: $d/ holds C sources but is not one of the rooms this script knows" >&2
    fail=1
  fi
done
for r in $rooms; do
  if ! grep -Eq "^peat_module\(peat_[a-z]+ $r( |\))" CMakeLists.txt; then
    echo "check-layout: $r/ is not a peat_module of CMakeLists.txt (no library, no links-alone check)" >&2
    fail=1
  fi
done

# 3. the folders' include graph has no cycle
edges=$(mktemp)
trap 'rm -f "$edges" "$edges.err"' EXIT
for r in $rooms; do
  # a room of harness/ is a node of its own (harness/isolate), not harness/
  sources "$r" | xargs grep -ho '^#include "\(harness/\)\?[a-z_]*/' 2>/dev/null |
    sed -e 's/^#include "//' -e 's,/$,,' | sort -u | while read -r t; do
      if [ "$t" != "$r" ] && [ "$t" != peat ] && [ -d "$t" ]; then echo "$r $t"; fi
    done
done | sort -u >"$edges"
if ! tsort "$edges" >/dev/null 2>"$edges.err"; then
  echo "check-layout: an include circle crosses folders (tsort: $(tr '\n' ' ' <"$edges.err"))" >&2
  while read -r a b; do
    if grep -q "^$b $a\$" "$edges"; then
      echo "  $a includes $b: $(grep -l "#include \"$b/" $(sources "$a") | tr '\n' ' ')" >&2
    fi
  done <"$edges"
  fail=1
fi

# 4. every file mapped in docs/architecture.md
while read -r f; do
  if ! grep -q "^- \`$f\`:" docs/architecture.md; then
    echo "check-layout: $f is not mapped in docs/architecture.md (a line \"- \`$f\`: what it holds\")" >&2
    fail=1
  fi
done < <(sources $rooms include; find $rooms include -type f -name '*.cl' | sort)

if [ "$fail" = 0 ]; then
  echo "check-layout: $(echo $rooms | wc -w) folders, none over ${max}% of $total lines, no include circle across folders, every file mapped in docs/architecture.md"
fi
exit "$fail"
