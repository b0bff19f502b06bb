"""bench_torch_check.py: what judging a Python callable costs (docs/pytorch.md, "check").
`peat_torch.check` on a torch GEMM against `peat run --plugin` with the equivalent C plugin
(examples/plugin_gemm.c: example_gemm_rev), both `peat run --no-isolate` in this process
(peat_pyapi_main), on the same built-in flow, size and seed: total seconds and the stages'
(playback includes the across-call sequences) and the ratio of the totals (median of the
repetitions), the built-in gemm_new beside (a C kernel closer to torch's speed than the
example's plain loop); and per call, what the bridge adds beside the callable's own time.
usage (from the repository root, libpeat.so and the example plugin built):
  PYTHONPATH=python PEAT_LIB=build/libpeat.so $(scripts/torch-venv.sh) \\
      bench/bench_torch_check.py [reps] [flow ...]      (default 3 mlp gpt)
  the plugin: $PEAT_EXAMPLE_GEMM, else libpeat_example_gemm.so beside libpeat.so"""
import json
import os
import statistics
import sys
import tempfile
import time

import torch

from peat_torch import _lib
from peat_torch.check import kernel_of, run_main


def stages(out):
    with open(os.path.join(out, "signature.json")) as f:
        sig = json.load(f)
    t = sig.get("timing_s", {})
    return sig["verdict"], t.get("total", 0.0), t.get("playback", 0.0), t.get("probes", 0.0), \
        t.get("runtime", 0.0)


def run(argv, out):
    """peat run in this process, its output kept out of the table; (status, stage times)."""
    sys.stdout.flush()
    saved = os.dup(1), os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            st = run_main(argv + ["--out", out, "--force", "--quiet"])
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
    return st, stages(out)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    flows = sys.argv[2:] or ["mlp", "gpt"]
    torch.set_num_threads(1)
    L = _lib.lib()
    plugin = os.environ.get("PEAT_EXAMPLE_GEMM") or os.path.join(
        os.path.dirname(os.path.abspath(L._name)), "libpeat_example_gemm.so")
    _lib.plugin_load(plugin)           # once: registered for every run below
    in_fn = [0.0]

    def matmul(a, b):                  # torch.matmul, its own time counted apart
        t0 = time.perf_counter()
        d = torch.matmul(a, b)
        in_fn[0] += time.perf_counter() - t0
        return d
    k = kernel_of(matmul, "gemm")
    tmp = tempfile.mkdtemp(prefix="peat-bench-check-")
    kernels = [("example_gemm_rev", "example_gemm_rev (C plugin)"),
               ("gemm_new", "gemm_new (built-in C)"), (k.name, "check(torch.matmul)")]
    print("%d repetitions (median), --size tiny --seed 1 --no-isolate, in this process "
          "(peat_pyapi_main), torch on one thread" % reps)
    print("| flow | candidate | verdict | total | playback | probes | runtime FI | "
          "ratio to the C plugin | ratio to gemm_new |")
    print("|---|---|---|---|---|---|---|---|---|")
    notes = []
    for flow in flows:
        common = ["run", "--no-isolate", "--flow", flow, "--size", "tiny", "--seed", "1"]
        runs = {name: [] for name, _ in kernels}
        bridge = []
        for r in range(reps):
            for name, _ in kernels:
                k.calls, k.seconds, in_fn[0] = 0, 0.0, 0.0
                st, t = run(common + ["--kernel", name], os.path.join(tmp, "r"))
                runs[name].append(t)
            bridge.append((k.seconds - in_fn[0]) / max(k.calls, 1))
        med = {n: [statistics.median(x[i] for x in runs[n]) for i in range(1, 5)]
               for n in runs}
        for name, label in kernels:
            t = med[name]
            ratio = lambda ref: "" if name == ref else "%.2fx" % (t[0] / med[ref][0])
            print("| %s | %s | %s | %.2f s | %.2f s | %.2f s | %.2f s | %s | %s |" % (
                flow, label, runs[name][0][0], t[0], t[1], t[2], t[3],
                ratio("example_gemm_rev"), ratio("gemm_new")))
        notes.append("%s: %d calls of the callable a run; the bridge (peat_args to torch "
                     "tensors, checks, the copy into PEAT's outputs) %.0f us a call beside "
                     "torch.matmul's own time" % (flow, k.calls, 1e6 * statistics.median(bridge)))
    print("\n".join(notes))

if __name__ == "__main__":
    main()
