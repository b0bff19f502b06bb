"""bench_torch.py: what the PyTorch bridge costs (docs/pytorch.md has the numbers).
  1. capture overhead: ms per training step of the example CNN and GPT, plain and under
     peat_torch.capture (default 96 calls), and the ratio;
  2. replay: seconds of `peat run --kernel gemm_new`'s playback per replayed call, on the
     captured calls and on the built-in flows (mlp, cnn, gpt);
  3. swap's shadow check: ms per training step with every GEMM swapped to gemm_new, without and
     with the shadow check (its default schedule, and every call), and the cost ratio.
usage (from the repository root, libpeat.so and peat built in build/):
  PYTHONPATH=python $(scripts/torch-venv.sh) bench/bench_torch.py [steps] [shadow]
  (`shadow`: the third table alone)"""
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
import peat_torch  # noqa: E402
from models import TinyGPT, TinyResNet, train_cnn, train_gpt  # noqa: E402

PEAT = os.environ.get("PEAT_BIN", os.path.join(ROOT, "build", "peat"))


def step_ms(make, train, steps, cap_path=None):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    model = make()
    train(model, 1, g)  # warm-up (allocations, first-call dispatch)
    t0 = time.perf_counter()
    if cap_path:
        with peat_torch.capture(cap_path, calls=96, iters=steps, model=model, overwrite=True,
                                quiet=True):
            train(model, steps, g)
    else:
        train(model, steps, g)
    return 1e3 * (time.perf_counter() - t0) / steps


def swap_ms(make, train, steps, shadow):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    model = make()
    train(model, 1, g)
    t0 = time.perf_counter()
    with peat_torch.swap(model, kernel="gemm_new", freq="1", shadow=shadow) as sw:
        train(model, steps, g)
    return 1e3 * (time.perf_counter() - t0) / steps, sw


def shadow_table(steps):
    print("| model | swapped step | + shadow (first 200, 1/10, last 8) | + shadow (every call) "
          "| checked | ratio (default) | ratio (every) |")
    print("|---|---|---|---|---|---|---|")
    for name, make, train in (("cnn", TinyResNet, train_cnn), ("gpt", TinyGPT, train_gpt)):
        off, sw = swap_ms(make, train, steps, False)
        on, sd = swap_ms(make, train, steps, True)
        full, sf = swap_ms(make, train, steps, (0, 1, 0))
        print("| %s | %.1f ms | %.1f ms | %.1f ms | %d / %d of %d | %.2fx | %.2fx |" % (
            name, off, on, full, sd.shadow.checked, sf.shadow.checked, sw.swapped, on / off,
            full / off))


def playback(args, out):
    subprocess.run([PEAT, "run", "--kernel", "gemm_new", "--no-probes", "--no-runtime",
                    "--out", out, "--json"] + args, check=True, capture_output=True)
    s = json.load(open(os.path.join(out, "signature.json")))
    return s["timing_s"]["playback"], s["records"]


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    only_shadow = len(sys.argv) > 2 and sys.argv[2] == "shadow"
    # one intra-op thread: on a shared 2-core machine torch's OpenMP threads spin against the
    # load (a CNN step took 0.41 s with 2 threads at load 17, 0.023 s with 1)
    torch.set_num_threads(int(os.environ.get("PEAT_BENCH_TORCH_THREADS", "1")))
    tmp = tempfile.mkdtemp()
    shadow_table(steps)
    print()
    if only_shadow:
        return
    print("| model | plain step | captured step | x slower |")
    print("|---|---|---|---|")
    caps = {}
    for name, make, train in (("cnn", TinyResNet, train_cnn), ("gpt", TinyGPT, train_gpt)):
        plain = step_ms(make, train, steps)
        caps[name] = os.path.join(tmp, name + ".h5")
        capd = step_ms(make, train, steps, caps[name])
        print("| %s (torch) | %.1f ms | %.1f ms | %.1fx |" % (name, plain, capd, capd / plain))
    print()
    print("| calls from | gemm calls replayed | playback | per call |")
    print("|---|---|---|---|")
    runs = [("torch cnn capture", ["--capture", caps["cnn"]]),
            ("torch gpt capture", ["--capture", caps["gpt"]])]
    runs += [("built-in " + f, ["--flow", f]) for f in ("mlp", "cnn", "gpt")]
    for label, args in runs:
        t, n = playback(args, os.path.join(tmp, label.replace(" ", "_")))
        print("| %s | %d | %.2f s | %.1f ms |" % (label, n, t, 1e3 * t / max(n, 1)))


if __name__ == "__main__":
    main()
