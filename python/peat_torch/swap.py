"""swap.py: a PEAT kernel or error model inside the user's PyTorch training (swap), and the
golden noise band with the runtime verdict of `peat run`'s runtime stage (band), the rules being
the detector's own (libpeat.so)."""
import collections
import ctypes
import json
import math
import os
import subprocess
import tempfile
import time

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _lib
from .check import check as _check_fn, kernel_notes, kernel_of, python_kernel
from .mapping import (PEAT_OPS, INPLACE, SIDE_EFFECT, Unmapped, map_call, pre_inplace,
                      State)
from .track import Tracker

# aten ops whose one output is the one output of the PEAT op they map to (forward and backward:
# autograd's backward ops dispatch through the swap too): the result is a new tensor
_SWAPPABLE_ONE = {"mm", "addmm", "bmm", "baddbmm", "convolution", "relu", "gelu", "_softmax",
                  "silu", "threshold_backward", "gelu_backward", "silu_backward",
                  "_softmax_backward_data", "avg_pool2d", "avg_pool2d_backward",
                  "max_pool2d_with_indices_backward", "embedding", "embedding_dense_backward",
                  "sum", "mean", "_safe_softmax", "_scaled_mm"}
# aten ops with several outputs, or that update tensors in place: the PEAT op's outputs are
# written into torch's own (Mapped.dst: the aten op's outputs, batch norm's running statistics,
# an optimizer's parameters and moments; max pooling keeps torch's indices, which its backward
# does not read in PEAT's op)
_SWAPPABLE_WRITE = {"convolution_backward", "native_layer_norm", "native_layer_norm_backward",
                    "native_batch_norm", "native_batch_norm_backward", "max_pool2d_with_indices",
                    "_scaled_dot_product_flash_attention_for_cpu",
                    "_scaled_dot_product_flash_attention_for_cpu_backward", "_fused_adamw_",
                    "_fused_sgd_"}
_SWAPPABLE = _SWAPPABLE_ONE | _SWAPPABLE_WRITE
# the PEAT ops swap can route (the ops of _SWAPPABLE)
SWAP_OPS = sorted({o for n in _SWAPPABLE for o in PEAT_OPS[n]})
# aten ops that compute a swappable op's result but are not mapped to it (a zero-match message
# names them): why each is not
_NEAR = {"relu_": "relu (in place: captured, not swappable)",
         "silu_": "silu (in place: captured, not swappable)",
         "_scaled_dot_product_efficient_attention": "attention (CUDA's fused kernel; not "
                                                    "swappable)",
         "_foreach_add_": "adamw/sgd (the foreach optimizer: pass fused=True to swap it)",
         "linear": "gemm (decomposed into mm/addmm before dispatch)"}


class Shadow:
    """The shadow check of a swap: which swapped calls are compared with the trusted op's outputs
    on the same inputs (torch's own: the original op runs first), measured by libpeat against the
    exact fp64 result over the op's rounding bound as `peat run`'s runtime stage measures its
    loop calls (peat_pyapi_shadow_measure). Checked: every call of the first `first`, then every
    `every`-th, and the last `last` swapped calls (kept as copies until the swap ends)."""

    def __init__(self, first=200, every=10, last=8, self_norm=0.0):
        self.first, self.every, self.last, self.self_norm = first, every, last, self_norm
        self.checked = self.exact = self.bad = 0
        self.first_bad = None          # dict: call, eligible, iter, phase, layer, aten, cand, gold
        self.seconds = 0.0             # spent checking (copies, exact results, comparisons)
        self.pending = collections.deque(maxlen=max(last, 0) or 1)

    def due(self, k):
        return k < self.first or (self.every > 0 and (k - self.first) % self.every == 0)

    def schedule(self):
        return "every call of the first %d, then 1 in %d, and the last %d" % (
            self.first, self.every, self.last)

    def __str__(self):
        head = "shadow check: %d calls checked (%s; %d against the exact result), %.2f s" % (
            self.checked, self.schedule(), self.exact, self.seconds)
        if not self.first_bad:
            return head + ", none out of the envelope"
        b = self.first_bad
        return ("%s; %d out of the envelope, the first: swapped call %d (eligible call %d, "
                "iteration %d, %s, %s, aten.%s): max error %.3g x the bound, torch's %.3g" % (
                    head, self.bad, b["call"], b["eligible"], b["iter"], b["phase"],
                    b["layer"] or "-", b["aten"], b["cand"], b["gold"]))


class swap(TorchDispatchMode):
    """with swap(model, kernel="gemm_new", freq="1/10"): <training steps>

    Every eligible call (an aten op mapping to the kernel's PEAT op, inside `model` when a module
    is given, or among the aten op names given in a list) is counted; the n-th is computed by
    PEAT instead of torch when the frequency says so ("1": all, "1/10": every 10th, "p=0.01": each
    with that probability, seeded): by `kernel` (built-in or from `plugin`), or by PEAT's golden
    kernel with the error model `model` applied ("bitflip(bit=30)"). `self.swapped` and
    `self.eligible` count them; a swap that ran the kernel on no call raises NoCallsSwapped when
    it ends. A kernel's swapped calls get the shadow check (Shadow; shadow=False turns it off,
    shadow=(first, every, last) changes its schedule, shadow_self the kernel's own largest error
    over the bound on fresh calls when it is beyond the bound by design); `str(sw)` says what
    ran and what the check found. `fn` (a Python callable, with `adapter` as in check()) is
    registered as a kernel (peat_torch.check.PyKernel) and swapped in as `kernel` is."""

    def __init__(self, model_or_ops, kernel=None, plugin=None, model=None, freq="1", op="gemm",
                 seed=0, shadow=True, shadow_self=0.0, fn=None, adapter=None):
        super().__init__()
        L = _lib.lib()
        if fn is not None:
            if kernel is not None or model is not None:
                raise _lib.PeatError("swap: give fn=, kernel= or model=, one of them")
            kernel = kernel_of(fn, op, adapter).name
        if plugin:
            _lib.plugin_load(plugin)
        if (kernel is None) == (model is None):
            raise _lib.PeatError("swap: give kernel= or model=, one of them")
        if op not in SWAP_OPS:
            raise _lib.PeatError("swap: op %r cannot be swapped (swap routes %s)" %
                                 (op, ", ".join(SWAP_OPS)))
        self.kernel, self.model, self.op, self.seed = kernel, model, op, seed
        fs = _lib.freqs(freq, "freq")
        if len(fs) != 1:
            raise _lib.PeatError("swap: freq %r: one frequency, got %d (band takes a list)" %
                                 (freq, len(fs)))
        self.every, self.prob, self.freq = fs[0][0], fs[0][1], fs[0][2]
        self.rng = np.random.default_rng(seed)
        self.aten = None
        module = model_or_ops if isinstance(model_or_ops, torch.nn.Module) else None
        if module is None and model_or_ops is not None:
            self.aten = set(model_or_ops)
        self.tracker = Tracker(module)
        self.module = module
        self.eligible = self.swapped = 0
        self.seen = collections.Counter()   # aten ops seen (named when none matched)
        self.kernel_s = 0.0                 # seconds in PEAT's kernel or model
        self.state = State()
        self.shadow = None
        if kernel and shadow:
            self.shadow = Shadow(*(shadow if isinstance(shadow, tuple) else ()),
                                 self_norm=shadow_self)

    def __enter__(self):
        self.tracker.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        r = super().__exit__(*exc)
        self.tracker.__exit__(*exc)
        if self.shadow:
            while self.shadow.pending:
                self._check(*self.shadow.pending.popleft())
        if exc[0] is None and self.swapped == 0:
            raise _lib.NoCallsSwapped(self.none_swapped())
        return r

    def none_swapped(self):
        """The one line a swap that ran its kernel on no call raises."""
        what = self.kernel or self.model
        if self.eligible:
            return ("swap %s: %d %s calls matched, the frequency %s picked none: the kernel never "
                    "ran" % (what, self.eligible, self.op, self.freq))
        near = ["%s x%d: %s" % (n, c, _NEAR[n]) for n, c in self.seen.items() if n in _NEAR]
        maps = [n for n in sorted(_SWAPPABLE) if self.op in PEAT_OPS[n]]
        where = "inside %s" % type(self.module).__name__ if self.module is not None else (
            "among %s" % sorted(self.aten) if self.aten is not None else "")
        return ("swap %s: no call matched op %r %s (it swaps aten %s; %d aten calls seen%s): "
                "the kernel never ran" % (what, self.op, where, "/".join(maps),
                                          sum(self.seen.values()),
                                          "; " + "; ".join(near) if near else ""))

    def __str__(self):
        line = "%s @ %s on %s: %d of %d eligible calls swapped (%.2f s in PEAT)" % (
            self.kernel or self.model, self.freq, self.op, self.swapped, self.eligible,
            self.kernel_s)
        notes = kernel_notes(self.kernel) if self.kernel else []
        return line + "".join("\nnote: " + n for n in notes) + (
            "\n" + str(self.shadow) if self.shadow else "")

    def _due(self):
        n = self.eligible
        self.eligible += 1
        if self.prob > 0:
            return self.rng.random() < self.prob
        return self.every > 0 and n % self.every == 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        kwargs = kwargs or {}
        phase, layer = self.tracker.where()
        wanted = name in _SWAPPABLE and self.op in PEAT_OPS.get(name, ()) and (
            self.aten is None or name in self.aten)
        pre = pre_inplace(name, args) if wanted and (
            name in INPLACE or name in SIDE_EFFECT) else None
        out = func(*args, **kwargs)
        self.seen[name] += 1
        if not wanted:
            return out
        if self.module is not None and layer is None and name not in INPLACE:
            return out  # not a call of the module's layers (an optimizer step is outside them)
        try:
            ms = map_call(name, args, kwargs, out, self.state, pre) or []
        except Unmapped:
            return out
        where = {"iter": self.tracker.iter, "phase": phase, "layer": layer, "aten": name}
        if name in _SWAPPABLE_ONE:
            m = ms[0]
            if m.op != self.op:
                return out  # a sum over leading dims is a bias gradient, not a reduce
            if not self._due():
                return out
            y = self._swap_one(m, where, [out])
            return torch.from_numpy(y[0]).reshape(out.shape).to(out.dtype)
        for m in ms:  # one per parameter for an optimizer step
            if m.op != self.op or not self._due():
                continue
            # torch's outputs as they were, for the shadow check, before PEAT's overwrite them
            gold = [t.detach().float().clone() for t in m.outs] if self.shadow else None
            y = self._swap_one(m, where, gold)
            with torch.no_grad():
                for t, v in zip(m.dst, y):
                    t.copy_(torch.from_numpy(v).reshape(t.shape).to(t.dtype))
        return out

    def _swap_one(self, m, where, gold):
        """Runs the kernel (or model) on one mapped call, shadow-checks it against torch's
        outputs (gold: one tensor per output), and returns PEAT's outputs."""
        c, ins = self._call(m)
        t0 = time.perf_counter()
        y = self._run(c, ins, m)
        self.kernel_s += time.perf_counter() - t0
        if self.shadow:
            where = dict(where, call=self.swapped, eligible=self.eligible - 1)
            self._shadow(c, ins, y, gold, where)
        self.swapped += 1
        return y

    @staticmethod
    def _call(m):
        c = _lib.Call()
        c.op = _lib.op_id(m.op)
        for k, v in enumerate(m.i):
            c.i[k] = int(v)
        for k, v in enumerate(m.f):
            c.f[k] = float(v)
        c.n_in, c.n_out = len(m.ins), len(m.outs)
        ins = [t.float().numpy() if t.is_floating_point() else t.numpy() for t in m.ins]
        return c, [np.ascontiguousarray(a) for a in ins]

    def _run(self, c, ins, m):
        """PEAT's outputs of one call, one f32 array per output of the op."""
        L = _lib.lib()
        ys = [np.zeros(tuple(t.shape), dtype=np.float32) for t in m.outs]
        ts = [_lib.tensor_of(a, "f32" if a.dtype == np.float32 else "i32") for a in ins]
        to = [_lib.tensor_of(y, "f32") for y in ys]
        if self.kernel:
            st = L.peat_pyapi_kernel_run(self.kernel.encode(), ctypes.byref(c),
                                         _lib.ptr_array(ts), _lib.ptr_array(to))
        else:
            st = L.peat_pyapi_model_run(self.model.encode(), self.seed + self.swapped,
                                        ctypes.byref(c), _lib.ptr_array(ts), _lib.ptr_array(to))
        _lib.check(st, "swap: %s" % (self.kernel or self.model))
        return ys

    def _shadow(self, c, ins, y, out, where):
        """Checks the call now when the schedule says so, else keeps a copy among the last."""
        sh = self.shadow
        t0 = time.perf_counter()
        gold = [np.ascontiguousarray(g.detach().float().numpy()).reshape(v.shape)
                for g, v in zip(out, y)]
        if sh.due(where["call"]):
            self._check(c, ins, y, gold, where, t0)
        elif sh.last > 0:
            sh.pending.append((c, [a.copy() for a in ins], [v.copy() for v in y],
                               [g.copy() for g in gold], where))
            sh.seconds += time.perf_counter() - t0

    def _check(self, c, ins, y, gold, where, t0=None):
        sh = self.shadow
        t0 = time.perf_counter() if t0 is None else t0
        L = _lib.lib()
        ts = [_lib.tensor_of(a, "f32" if a.dtype == np.float32 else "i32") for a in ins]
        to = [_lib.tensor_of(v, "f32") for v in y]
        tg = [_lib.tensor_of(g, "f32") for g in gold]
        cand, g, bad = ctypes.c_double(), ctypes.c_double(), ctypes.c_int()
        _lib.check(L.peat_pyapi_shadow_measure(ctypes.byref(c), _lib.ptr_array(ts),
                                               _lib.ptr_array(to), _lib.ptr_array(tg),
                                               sh.self_norm, ctypes.byref(cand), ctypes.byref(g),
                                               ctypes.byref(bad)), "shadow check")
        sh.checked += 1
        sh.exact += cand.value >= 0
        if bad.value:
            sh.bad += 1
            if sh.first_bad is None or where["call"] < sh.first_bad["call"]:
                sh.first_bad = dict(where, cand=cand.value, gold=g.value)
        sh.seconds += time.perf_counter() - t0


class Recorder:
    """What band's train function reports each iteration: rec.step(model, loss, accuracy)."""

    def __init__(self, golden=None):
        self.loss, self.acc, self.wdist, self.nonfinite = [], [], [], []
        self.weights = []
        self.golden = golden

    def step(self, model, loss, accuracy=None):
        w = [p.detach().float().clone() for p in model.parameters()]
        self.loss.append(float(loss))
        self.acc.append(float("nan") if accuracy is None else float(accuracy))
        self.nonfinite.append(int(sum((~torch.isfinite(p)).sum().item() for p in w)))
        if self.golden is None:
            self.weights.append(w)
            self.wdist.append(0.0)
        else:
            g = self.golden.weights[len(self.loss) - 1]
            d = 0.0
            for a, b in zip(w, g):
                nb = float(b.norm())
                if nb > 0:
                    d = max(d, float((a - b).norm()) / nb)
            self.wdist.append(d)


class BandResult:
    """band's answer: per faulty run (one per frequency) the loop's verdict by the detector, the
    swapped / eligible counts, the shadow check and, when given, the replay's verdict."""

    def __init__(self, runs, verdicts, replay=None):
        self.runs, self.verdicts, self.replay = runs, verdicts, replay

    @property
    def verdict(self):
        """The first run's verdict: the loop's class, or OUT_OF_BOUND when the loop stayed
        equivalent and the shadow check found a call out of its envelope."""
        return self.verdicts[0]["verdict"]

    @property
    def accept(self):
        """PASS, WARN or FAIL: the worst over the runs, the replay's included."""
        order = ["PASS", "WARN", "FAIL"]
        worst = max((order.index(v["accept"]) for v in self.verdicts), default=0)
        if self.replay and self.replay.get("verdict") in order:
            worst = max(worst, order.index(self.replay["verdict"]))
        return order[worst]

    def __str__(self):
        lines = []
        for v in self.verdicts:
            lines.append("%-28s %-20s %-4s swapped %d/%d: %s" % (
                v["run"], v["loop"], v["loop_accept"], v["swapped"], v["eligible"],
                v["evidence"]))
            if v.get("shadow"):
                lines.append("%-28s %-20s %-4s %s" % ("", "OUT_OF_BOUND" if v["shadow_bad"]
                                                      else "", "FAIL" if v["shadow_bad"] else "",
                                                      v["shadow"]))
        if self.replay:
            r = self.replay
            lines.append("%-28s %-20s %-4s %s" % ("replay (peat run)", r.get("finding", ""),
                                                 r.get("verdict", "?"), r.get("evidence", "")))
            loop_ok = all(v["loop_accept"] == "PASS" for v in self.verdicts)
            if loop_ok and r.get("verdict") == "FAIL":
                lines.append("the loop stays in the band but the replay FAILs: the training "
                             "tolerates the defect here; the kernel is still wrong on these calls")
        return "\n".join(lines)


def band(train, kernel=None, model=None, plugin=None, freq="1/10", op="gemm", runs=3,
         target=None, seed=0, shadow=True, replay=None, fn=None, adapter=None):
    """Trains `train(rec)` R times as the golden band (run 0 as it is, runs 1..R-1 with each
    call of `op` through PEAT's golden kernel under the runtime stage's honest reorderings), then
    once per frequency with the kernel or model swapped in, and judges each faulty run with the
    detector's TRAINING_EQUIVALENT / DEGRADES / DIVERGES rules, a candidate kernel also with the
    candidate's (weights far off the honest trajectories DEGRADE; an unexplained DEGRADES is
    FAIL) and the shadow check of swap. train must be deterministic (seed inside it) and call
    rec.step(model, loss, accuracy=None) once per iteration; `target` (a module or aten op names)
    limits the swap as in swap(). `replay`: the same kernel's `peat run` verdict shown beside
    the loop's (a campaign output folder or its signature.json, a capture file to replay with
    `peat run --kernel K --capture`, or a dict with "verdict"). `fn` (with `adapter`): a Python
    callable as the kernel (as in swap)."""
    L = _lib.lib()
    if op not in SWAP_OPS:
        raise _lib.PeatError("band: op %r cannot be swapped (swap routes %s)" %
                             (op, ", ".join(SWAP_OPS)))
    if fn is not None:
        kernel = kernel_of(fn, op, adapter).name
    golden = Recorder()
    train(golden)
    members = [golden]
    try:
        for r in range(1, runs):
            spec = L.peat_pyapi_band_spec(r)
            if spec is None:
                raise _lib.PeatError("band: at most %d runs" % r)
            rec = Recorder(golden)
            with swap(target, model=spec.decode(), freq="1", op=op, seed=seed + r):
                train(rec)
            members.append(rec)
        verdicts = [_faulty(members, train, target, kernel, plugin, model, fq, op, seed, shadow)
                    for _, _, fq in _lib.freqs(freq, "band: freq")]
    except _lib.NoCallsSwapped as e:
        raise _lib.NoCallsSwapped("band: " + str(e)) from None
    return BandResult(members, verdicts, _replay(replay, kernel, plugin) if replay else None)


def _faulty(members, train, target, kernel, plugin, model, fq, op, seed, shadow):
    """One faulty run: trained with the kernel or model swapped in, judged."""
    rec = Recorder(members[0])
    with swap(target, kernel=kernel, plugin=plugin, model=model, freq=fq, op=op, seed=seed,
              shadow=shadow) as sw:
        train(rec)
    v = _judge(members, rec, kernel)
    v["run"] = "%s @ %s" % (kernel or model, fq)
    v["swapped"], v["eligible"] = sw.swapped, sw.eligible
    v["loop"], v["loop_accept"] = v["verdict"], v["accept"]
    sh = sw.shadow
    v["shadow"], v["shadow_bad"] = (str(sh) if sh else ""), bool(sh and sh.bad)
    v["first_bad_call"] = sh.first_bad["call"] if sh and sh.first_bad else None
    if v["shadow_bad"]:
        v["accept"] = "FAIL"
        if v["verdict"] == "TRAINING_EQUIVALENT":
            v["verdict"] = "OUT_OF_BOUND"
    return v


def _replay(replay, kernel, plugin):
    """The replay's verdict: {"verdict", "finding", "evidence", "source"}."""
    if isinstance(replay, dict):
        return replay
    path = os.fspath(replay)
    if os.path.isdir(path):
        path = os.path.join(path, "signature.json")
    if path.endswith(".json"):
        with open(path) as f:
            sig = json.load(f)
    elif python_kernel(kernel):         # a Python callable: peat run in this process (check)
        k = python_kernel(kernel)
        r = _check_fn(k.fn, k.op, capture=path, adapter=k.adapter, args=["--quiet"])
        sig = r.signature or {"verdict": r.verdict}
    else:
        if not kernel:
            raise _lib.PeatError("band: replay of a capture needs kernel=")
        peat = os.environ.get("PEAT_BIN") or os.path.join(
            os.path.dirname(os.path.abspath(_lib.lib()._name)), "peat")
        out = tempfile.mkdtemp(prefix="peat-replay-")
        cmd = [peat, "run", "--kernel", kernel, "--capture", path, "--out",
               os.path.join(out, "r"), "--json"] + (["--plugin", plugin] if plugin else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not p.stdout.strip():
            raise _lib.PeatError("band: replay %s failed: %s" % (
                " ".join(cmd), (p.stderr.strip().splitlines() or ["?"])[-1]))
        sig = json.loads(p.stdout)
    f = (sig.get("findings") or [{}])[0]
    ev = f.get("evidence") or ""
    if isinstance(ev, list):
        ev = ev[0] if ev else ""
    return {"verdict": sig.get("verdict", "?"), "finding": f.get("class", ""),
            "evidence": ev, "source": path}


def _judge(members, rec, kernel=None):
    L = _lib.lib()
    n = len(members[0].loss)
    if any(len(m.loss) != n for m in members + [rec]):
        raise _lib.PeatError("band: runs trained different numbers of iterations")
    evals = [t for t, a in enumerate(members[0].acc) if not math.isnan(a)]

    def arr(x, dt=np.float64):
        return np.ascontiguousarray(np.array(x, dtype=dt))
    bl = arr([m.loss for m in members])
    bw = arr([m.wdist for m in members])
    ba = arr([[m.acc[t] for t in evals] for m in members]) if evals else arr([0.0])
    loss, wd, nf = arr(rec.loss), arr(rec.wdist), arr(rec.nonfinite, np.int64)
    acc = arr([rec.acc[t] for t in evals]) if evals else arr([0.0])
    ev = arr(evals if evals else [0], np.int64)
    v = _lib.Verdict()
    P = lambda a: a.ctypes.data
    _lib.check(L.peat_pyapi_runtime_judge(len(members), n, P(bl), P(bw), len(evals), P(ev),
                                          P(ba), P(loss), P(wd), P(nf), P(acc),
                                          kernel.encode() if kernel else None, ctypes.byref(v)),
               "band: judge")
    return {"verdict": L.peat_pyapi_runtime_class_name(v.cls).decode(),
            "accept": L.peat_pyapi_accept_name(v.accept).decode(), "iter": v.iter,
            "metric": v.metric.decode(), "evidence": v.evidence.decode(),
            "final_loss": v.final_loss, "band": (v.band_lo, v.band_hi),
            "drift_end": v.drift_end}
