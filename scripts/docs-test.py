#!/usr/bin/env python3
"""docs-test.py: runs the command blocks of README.md (and the blocks of docs/*.md marked
<!-- runnable -->) in order, in a fresh folder, against a build; fails when a command fails or
its shown output no longer matches in the fields that matter (verdict, findings, exit code).

usage: scripts/docs-test.py [BUILD_DIR] [--keep] [--only FILE]

Rules (docs/cli.md, "The docs test"):
- a ```sh block runs line by line (a trailing backslash joins lines); a line is expected to
  exit 0, or N where its comment says "(exit N)";
- a ``` block whose first line is "$ COMMAND" runs COMMAND and compares its output with the
  lines shown: each shown line ending in PASS/WARN/FAIL must appear (same first word, same
  finding and verdict, in order), as must "verdict: X"; the exit status follows the verdict
  (PASS/WARN 0, FAIL 1); "..." lines stand for what is left out;
- <!-- docs-test: skip (why) --> before a block leaves it out (it is reported as skipped);
  <!-- docs-test: needs opencl --> runs it only where `peat list` shows OpenCL kernels;
- blocks that run scripts/ (the set-up commands) are what built the tree under test: skipped.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERDICTS = ("PASS", "WARN", "FAIL")
TIMEOUT_S = 600


def blocks(path, runnable_only):
    """(line number, fence info, lines, marker) of every fenced block of a markdown file."""
    out, marker, lines = [], "", open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"<!--\s*(docs-test:[^>]*|runnable)\s*-->", line.strip())
        if m:
            marker = m.group(1)
        elif line.startswith("```"):
            info, start, body = line[3:].strip(), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if not runnable_only or marker:
                out.append((start, info, body, marker))
            marker = ""
        elif line.strip():
            marker = "" if not line.startswith("<!--") else marker
        i += 1
    return out


def commands(body):
    """The commands of a sh block: continuation lines joined, blank lines dropped."""
    cmds, cur = [], ""
    for line in body:
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.strip().startswith("#"):
            cmds.append(cur.strip())
        cur = ""
    return cmds


def expected_exit(cmd):
    m = re.search(r"#.*\(exit (\d+)\)", cmd)
    return int(m.group(1)) if m else 0


def run(cmd, cwd, env):
    t0 = time.time()
    try:
        p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        rc, out = p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = 124, (e.stdout or b"").decode("utf-8", "replace")
    if rc < 0:
        rc = 128 - rc  # killed by a signal, as bash reports it
    return rc, out, time.time() - t0


def verdict_lines(text):
    """(first word or "" when indented, finding, verdict) of each line ending in a verdict."""
    out = []
    for line in text.split("\n"):
        w = line.split()
        if len(w) >= 2 and w[-1] in VERDICTS and "..." not in line:
            out.append(("" if line[:1].isspace() else w[0], w[-2], w[-1]))
    return out


def compare(shown, actual):
    """The differences between shown output and actual output in the fields that matter."""
    problems, got, at = [], verdict_lines(actual), 0
    for want in verdict_lines(shown):
        k = at
        while k < len(got) and got[k] != want:
            k += 1
        if k == len(got):
            problems.append("shown line %r %s %s not in the output" % want)
        else:
            at = k + 1
    for v in re.findall(r"^verdict: (\w+)", shown, re.M):
        if not re.search(r"^verdict: %s\b" % v, actual, re.M):
            problems.append("shown 'verdict: %s' not in the output" % v)
    return problems


def opencl_built(env, cwd):
    rc, out, _ = run("peat list", cwd, env)
    return rc == 0 and re.search(r"\bcandidate\s+opencl\b", out) is not None


def python_bin(work):
    """A folder whose python3 imports numpy and h5py (docs/calls.md's harness), to put first on
    PATH: the first of python3 on PATH, /usr/bin/python3 (Debian's python3-h5py) and the torch
    venv that does; None when python3 on PATH already does, or none does."""
    have = "import numpy, h5py"
    for py in (shutil.which("python3"), "/usr/bin/python3",
               os.path.expanduser("~/.cache/peat/venv/bin/python")):
        if py and os.access(py, os.X_OK) and subprocess.run(
                [py, "-c", have], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            if py == shutil.which("python3"):
                return None
            d = os.path.join(work, ".python")
            os.makedirs(d, exist_ok=True)
            os.symlink(py, os.path.join(d, "python3"))
            return d
    return None


class Runner:
    def __init__(self, build, work):
        self.work, self.fails, self.ran, self.skipped = work, [], 0, []
        path = build + os.pathsep + os.environ.get("PATH", "")
        py = python_bin(work)
        self.env = dict(os.environ, PATH=(py + os.pathsep + path) if py else path)
        self.env.setdefault("PEAT_CACHE_DIR", os.path.join(work, ".cache"))
        self.opencl = None

    def fail(self, where, what):
        self.fails.append("%s: %s" % (where, what))
        print("  FAIL %s" % what, flush=True)

    def sh_block(self, where, body):
        for cmd in commands(body):
            want = expected_exit(cmd)
            rc, out, dt = run(cmd, self.work, self.env)
            self.ran += 1
            print("  %5.1f s  exit %-3d %s" % (dt, rc, cmd[:100]), flush=True)
            if rc != want:
                tail = "\n".join(out.strip().split("\n")[-6:])
                self.fail(where, "`%s` exited %d, the docs say %d:\n%s" % (cmd, rc, want, tail))
                return

    def output_block(self, where, body):
        cmd = body[0][2:].strip()
        shown = "\n".join(body[1:])
        m = re.search(r"^verdict: (\w+)", shown, re.M)
        want = expected_exit(cmd) if "(exit" in cmd else (1 if m and m.group(1) == "FAIL" else 0)
        rc, out, dt = run(cmd, self.work, self.env)
        self.ran += 1
        print("  %5.1f s  exit %-3d %s (output compared)" % (dt, rc, cmd[:80]), flush=True)
        if rc != want:
            self.fail(where, "`%s` exited %d, the docs say %d" % (cmd, rc, want))
        for p in compare(shown, out):
            self.fail(where, "`%s`: %s" % (cmd, p))

    def block(self, doc, line, info, body, marker):
        where = "%s:%d" % (doc, line)
        text = "\n".join(body)
        is_output = info == "" and body and body[0].startswith("$ ")
        if info not in ("sh", "bash") and not is_output:
            return
        reason = None
        if marker.startswith("docs-test: skip"):
            reason = marker[len("docs-test: skip"):].strip() or "marked skip"
        elif re.search(r"(^|[\s;&(])scripts/", text):
            reason = "set-up command (it built the tree under test)"
        elif marker == "docs-test: needs opencl":
            if self.opencl is None:
                self.opencl = opencl_built(self.env, self.work)
            if not self.opencl:
                reason = "no OpenCL in this build"
        if reason:
            self.skipped.append("%s (%s)" % (where, reason))
            print("%s: skipped: %s" % (where, reason), flush=True)
            return
        print("%s:" % where, flush=True)
        if is_output:
            self.output_block(where, body)
        else:
            self.sh_block(where, body)


def main(argv):
    keep = "--keep" in argv
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    pos = [a for i, a in enumerate(argv) if not a.startswith("--") and
           (i == 0 or argv[i - 1] != "--only")]
    build = os.path.abspath(pos[0] if pos else os.path.join(ROOT, "build"))
    if not os.access(os.path.join(build, "peat"), os.X_OK):
        print("docs-test: no %s/peat: build first (scripts/build.sh)" % build, file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="peat-docs-test-")
    # the tree as the docs see it: build/, examples/, include/ and docs/ at the root
    os.symlink(build, os.path.join(work, "build"))
    for d in ("examples", "include", "docs", "tests"):
        os.symlink(os.path.join(ROOT, d), os.path.join(work, d))
    os.makedirs(os.path.join(work, "out"))
    r, t0 = Runner(build, work), time.time()
    docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(ROOT, "docs"))
                                  if f.endswith(".md"))
    for doc in docs:
        if only and doc != only:
            continue
        for line, info, body, marker in blocks(os.path.join(ROOT, doc), doc != "README.md"):
            r.block(doc, line, info, body, marker)
    print("\ndocs-test: %d commands in %.0f s, %d blocks skipped, %d failures" %
          (r.ran, time.time() - t0, len(r.skipped), len(r.fails)))
    for f in r.fails:
        print("FAIL " + f)
    if keep:
        print("docs-test: work folder kept: " + work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if r.fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
