#!/usr/bin/env bash
# check-backend-names.sh: no code outside core/ tells backends apart by name. A backend says what
# it can do (include/peat/backend.h: peat_backend_caps, peat_backend_on_host,
# peat_backend_can_fork; PEAT_BACKEND_HOST names the host's reference kernels, PEAT_BACKEND_NAMES
# lists the backends for a help text), so a C source outside core/ and include/ (core's public
# headers) that holds the string literal "cpu", "cuda", "hip" or "opencl" in code (comments
# aside) compares or spells a backend's name where a capability is meant. tests/, bench/ and
# examples/ name backends as user input and are not checked. Exits 1 naming each file:line; run by
# ctest (test backend_names).
set -euo pipefail
cd "$(dirname "$0")/.."
# Lines that may keep a backend name, as "path:text the line holds", each with its reason. None
# today: help texts take their backend lists from core (PEAT_BACKEND_NAMES, peat_backend_list).
allow=""
mapfile -t files < <(find . -mindepth 2 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) \
  -not -path './.*' -not -path './build*' -not -path './core/*' -not -path './include/*' \
  -not -path './tests/*' -not -path './bench/*' -not -path './examples/*' | sed 's|^\./||' | sort)
ALLOW="$allow" python3 - "${files[@]}" <<'PYEOF'
import os, re, sys
files = sys.argv[1:]
allow = [a.split(':', 1) for a in os.environ['ALLOW'].split('\n') if ':' in a]
lit = re.compile(r'"(cpu|cuda|hip|opencl)"')
bad = 0
for f in files:
    text = open(f, encoding='utf-8', errors='replace').read()
    # comments out, line numbers kept
    code = re.sub(r'/\*.*?\*/', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)
    code = re.sub(r'//[^\n]*', '', code)
    for i, line in enumerate(code.split('\n'), 1):
        if lit.search(line) and not any(f == p and t in line for p, t in allow):
            print('check-backend-names: %s:%d names a backend: %s' % (f, i, line.strip()),
                  file=sys.stderr)
            bad += 1
if bad:
    print('check-backend-names: ask what the backend can do instead (peat_backend_caps, '
          'PEAT_BACKEND_HOST; docs/devices.md)', file=sys.stderr)
    sys.exit(1)
print('check-backend-names: %d sources outside core/ name no backend (capabilities instead)'
      % len(files))
PYEOF
