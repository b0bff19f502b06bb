#!/usr/bin/env bash
# check-layout.sh [MAX_PERCENT]: the house rules of docs/architecture.md, checked on the sources.
#   1. no room holds more than MAX_PERCENT (default 12) of the code (lines of .c, .h and .cu);
#   2. every folder of code is a module of CMakeLists.txt (peat_module: its own static library
#      and its <lib>_links_alone target, which links it with its declared dependencies alone);
#   3. no include circle crosses folders: the graph "folder A includes a header of folder B" has
#      no cycle (a circle of files inside one folder is that folder's business);
#   4. docs/architecture.md maps every source file of the rooms and include/ (a "- `path`:" line);
#   5. every room has its section there, "**ROOM/** (N files)", with N its files today;
#   6. doc -> file: every repository path README.md, docs/ and the code's comments name exists.
# The rooms are CMakeLists.txt's modules (scripts/rooms.sh).
# Exits 1 with what broke the rule; run by ctest (test layout) and so by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-12}
rooms=$(scripts/rooms.sh | tr '
' ' ')
fail=0

sources() { find "$@" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort; }
lines() { if [ -n "$(sources "$@")" ]; then sources "$@" | xargs cat | wc -l; else echo 0; fi; }

# 1. shares (core's device backends, core/gpu and core/opencl, and the host side of the device
# kernels, core/device, are libraries of their own, peat_gpu, peat_opencl and peat_device: each
# is its own share, not core's; the op table, core/ops, one descriptor file per op kind, grows by
# one file with every op and is its own share too)
own="core/gpu core/opencl core/device core/ops"
room_lines() {
  if [ "$1" = core ]; then
    echo $(($(lines core) - $(lines $own)))
  else
    lines "$1"
  fi
}
total=$(lines $rooms include)
for r in $rooms include $own; do
  n=$(room_lines "$r")
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

# 5. every room has its section in docs/architecture.md, "**ROOM/** (N files)", N its files today
for r in $rooms include; do
  n=$(($(sources "$r" | wc -l) + $(find "$r" -type f -name '*.cl' | wc -l)))
  if ! grep -q "^\*\*$r/\*\* ($n files)" docs/architecture.md; then
    echo "check-layout: docs/architecture.md has no section \"**$r/** ($n files)\" (the room holds $n files: its section is missing or its count is stale)" >&2
    fail=1
  fi
done

# 6. doc -> file: every path of this repository that README.md, docs/ and the code's comments name
# exists (a path whose first folder is not one of the repository's, such as sys/stat.h or an
# output folder, is checked only when a file of that name is in the repository; a path relative
# to the naming file's folder or to include/ counts)
if ! python3 - <<'EOF'; then
import os, re, subprocess, sys
files = subprocess.check_output(['git', 'ls-files', '--', 'README.md', 'docs/*.md', '*.c', '*.h', '*.cu',
                                 '*.cl', '*.sh', '*.py', 'CMakeLists.txt', 'cmake/*'], text=True).split()
names = {os.path.basename(f) for f in subprocess.check_output(['git', 'ls-files'], text=True).split()}
tops = {d for d in os.listdir('.') if os.path.isdir(d)}
pat = re.compile(r'(?<![A-Za-z0-9_./$~-])([a-z][a-z0-9_-]*(?:/[A-Za-z0-9_.-]+)*/[A-Za-z0-9_-]+'
                 r'\.(?:c|h|cu|cl|sh|py|cmake|md))(?![A-Za-z0-9_])')
bad = 0
for f in files:
    if not os.path.exists(f):
        continue
    here = os.path.dirname(f)
    for i, line in enumerate(open(f, encoding='utf-8', errors='replace'), 1):
        for m in pat.finditer(line):
            p = m.group(1)
            if p.split('/')[0] not in tops and os.path.basename(p) not in names:
                continue
            if any(os.path.exists(os.path.join(r, p)) for r in ('', 'include', here)):
                continue
            print(f'check-layout: {f}:{i} names {p}, which does not exist', file=sys.stderr)
            bad += 1
sys.exit(1 if bad else 0)
EOF
  fail=1
fi

if [ "$fail" = 0 ]; then
  echo "check-layout: $(echo $rooms | wc -w) rooms, none over ${max}% of $total lines, no include circle across rooms, every file mapped in docs/architecture.md under its room's section with the right count, every path the docs and comments name exists"
fi
exit "$fail"
