#!/usr/bin/env bash
# check-call-circles.sh BUILD_DIR [ROOM...]: no call circle of more than two files inside a room of
# harness/ (or the rooms named). A call circle is a set of source files each of which reaches every
# other through calls (a strongly connected component of the graph "a.c calls a function b.c
# defines"). Two files that call each other are a pair that reads together; three or more are a
# knot nobody can read alone, the sign that a file holds what belongs in another.
#
# The graph is read from the objects the build made (nm: the symbols each object defines and the
# ones it leaves undefined), not from the sources: a call through a macro or under #ifdef counts
# exactly as it was compiled, and a static function or a local name never makes an edge. Exits 1
# naming each circle with the calls that close it; run by ctest (test call_circles).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
shift || true
cd "$(dirname "$0")/.."
if [ "$#" -gt 0 ]; then rooms="$*"; else rooms=$(scripts/rooms.sh | grep '^harness/' | tr '\n' ' '); fi
python3 - "$build" $rooms <<'EOF'
import collections, os, subprocess, sys

build, rooms = sys.argv[1], sys.argv[2:]
defs, uses = {}, collections.defaultdict(set)
for room in rooms:
    lib = 'peat_' + room.split('/')[-1]
    objdir = os.path.join(build, 'CMakeFiles', lib + '.dir', room)
    if not os.path.isdir(objdir):
        sys.exit(f'check-call-circles: {objdir} is missing (build first)')
    for name in sorted(os.listdir(objdir)):
        src = os.path.join(room, name[:-2])
        if not name.endswith('.c.o') or not os.path.exists(src):
            continue  # an object whose source was moved or removed
        out = subprocess.check_output(['nm', os.path.join(objdir, name)], text=True)
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in 'TDBR':
                defs[f[2]] = src
            elif len(f) == 2 and f[0] == 'U':
                uses[src].add(f[1])
edges = {s: {defs[u] for u in us if u in defs and defs[u] != s} for s, us in uses.items()}

# Tarjan's strongly connected components, iteratively
index, low, stack, on, circles, counter = {}, {}, [], set(), [], 0
for root in sorted(edges):
    if root in index:
        continue
    work = [(root, iter(sorted(edges.get(root, ()))))]
    index[root] = low[root] = counter; counter += 1; stack.append(root); on.add(root)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is not None:
            if w not in index:
                index[w] = low[w] = counter; counter += 1; stack.append(w); on.add(w)
                work.append((w, iter(sorted(edges.get(w, ())))))
            elif w in on:
                low[v] = min(low[v], index[w])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop(); on.discard(w); c.append(w)
                if w == v:
                    break
            if len(c) > 2:
                circles.append(sorted(c))
for c in circles:
    print(f'check-call-circles: a call circle of {len(c)} files: {" ".join(c)}', file=sys.stderr)
    for a in c:
        for b in sorted(edges[a] & set(c)):
            calls = sorted(u for u in uses[a] if defs.get(u) == b)
            print(f'  {a} -> {b}: {" ".join(calls)}', file=sys.stderr)
if circles:
    sys.exit(1)
n_edges = sum(len(e) for e in edges.values())
print(f'check-call-circles: {len(uses)} files in {len(rooms)} rooms, {n_edges} calls between files, '
      'no circle of more than 2 files')
EOF
