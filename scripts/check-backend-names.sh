#!/usr/bin/env bash
# check-backend-names.sh: no code outside core/ tells backends apart by name. A backend says what
# it can do (include/peat/backend.h: peat_backend_caps, peat_backend_on_host, PEAT_BACKEND_HOST),
# so a C source outside core/ and include/ that holds the string literal "cpu", "cuda", "hip" or
# "opencl" in code (comments aside) compares or spells a backend's name where a capability is
# meant. tests/, bench/ and examples/ name backends as user input and are not checked. Exits 1
# naming each file:line; run by ctest (test backend_names).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PYEOF'
import re, subprocess, sys
files = [f for f in subprocess.check_output(['git', 'ls-files', '--', '*.c', '*.h', '*.cu'],
                                            text=True).split()
         if not f.startswith(('core/', 'include/', 'tests/', 'bench/', 'examples/'))]
lit = re.compile(r'"(cpu|cuda|hip|opencl)"')
bad = 0
for f in files:
    text = open(f, encoding='utf-8', errors='replace').read()
    # comments out, line numbers kept
    code = re.sub(r'/\*.*?\*/', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)
    code = re.sub(r'//[^\n]*', '', code)
    for i, line in enumerate(code.split('\n'), 1):
        if lit.search(line):
            print('check-backend-names: %s:%d names a backend: %s' % (f, i, line.strip()),
                  file=sys.stderr)
            bad += 1
if bad:
    sys.exit(1)
print('check-backend-names: %d sources outside core/ name no backend (capabilities instead)'
      % len(files))
PYEOF
