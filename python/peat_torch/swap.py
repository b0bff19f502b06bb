"""swap.py: a PEAT kernel or error model inside the user's PyTorch training (swap), and the
golden noise band with the runtime verdict of `peat run`'s runtime stage (band), the rules being
the detector's own (libpeat.so)."""
import ctypes
import math

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _lib
from .mapping import PEAT_OPS, Unmapped, map_call, State
from .track import Tracker

# aten ops whose one output is the one output of the PEAT op they map to
_SWAPPABLE = {"mm", "addmm", "bmm", "baddbmm", "convolution", "relu", "gelu", "_softmax"}


class swap(TorchDispatchMode):
    """with swap(model, kernel="gemm_new", freq="1/10"): <training steps>

    Every eligible call (an aten op mapping to the kernel's PEAT op, inside `model` when a module
    is given, or among the aten op names given in a list) is counted; the n-th is computed by
    PEAT instead of torch when the frequency says so ("1": all, "1/10": every 10th, "p=0.01": each
    with that probability, seeded): by `kernel` (built-in or from `plugin`), or by PEAT's golden
    kernel with the error model `model` applied ("bitflip(bit=30)"). `self.swapped` counts them."""

    def __init__(self, model_or_ops, kernel=None, plugin=None, model=None, freq="1", op="gemm",
                 seed=0):
        super().__init__()
        L = _lib.lib()
        if plugin:
            _lib.plugin_load(plugin)
        if (kernel is None) == (model is None):
            raise _lib.PeatError("swap: give kernel= or model=, one of them")
        self.kernel, self.model, self.op, self.seed = kernel, model, op, seed
        every, prob = ctypes.c_int64(), ctypes.c_double()
        _lib.check(L.peat_pyapi_freq_parse(freq.encode(), ctypes.byref(every),
                                           ctypes.byref(prob)), "freq")
        self.every, self.prob, self.freq = every.value, prob.value, freq
        self.rng = np.random.default_rng(seed)
        self.aten = None
        module = model_or_ops if isinstance(model_or_ops, torch.nn.Module) else None
        if module is None and model_or_ops is not None:
            self.aten = set(model_or_ops)
        self.tracker = Tracker(module)
        self.module = module
        self.eligible = self.swapped = 0
        self.state = State()

    def __enter__(self):
        self.tracker.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        r = super().__exit__(*exc)
        self.tracker.__exit__(*exc)
        return r

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
        out = func(*args, **kwargs)
        if name not in _SWAPPABLE or self.op not in PEAT_OPS.get(name, ()):
            return out
        if self.aten is not None and name not in self.aten:
            return out
        if self.module is not None and layer is None:
            return out  # not a call of the module's layers
        if not self._due():
            return out
        try:
            m = map_call(name, args, kwargs, out, self.state)[0]
        except Unmapped:
            return out
        y = self._run(m)
        self.swapped += 1
        return y.reshape(out.shape).to(out.dtype)

    def _run(self, m):
        L = _lib.lib()
        c = _lib.Call()
        c.op = _lib.op_id(m.op)
        for k, v in enumerate(m.i):
            c.i[k] = int(v)
        for k, v in enumerate(m.f):
            c.f[k] = float(v)
        c.n_in, c.n_out = len(m.ins), 1
        ins = [t.float().numpy() if t.is_floating_point() else t.numpy() for t in m.ins]
        ins = [np.ascontiguousarray(a) for a in ins]
        y = np.zeros(tuple(m.outs[0].shape), dtype=np.float32)
        ts = [_lib.tensor_of(a, "f32" if a.dtype == np.float32 else "i32") for a in ins]
        to = [_lib.tensor_of(y, "f32")]
        if self.kernel:
            st = L.peat_pyapi_kernel_run(self.kernel.encode(), ctypes.byref(c),
                                         _lib.ptr_array(ts), _lib.ptr_array(to))
        else:
            st = L.peat_pyapi_model_run(self.model.encode(), self.seed + self.swapped,
                                        ctypes.byref(c), _lib.ptr_array(ts), _lib.ptr_array(to))
        _lib.check(st, "swap: %s" % (self.kernel or self.model))
        return torch.from_numpy(y)


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
    def __init__(self, runs, verdicts):
        self.runs, self.verdicts = runs, verdicts

    @property
    def verdict(self):
        return self.verdicts[0]["verdict"]

    def __str__(self):
        return "\n".join("%-28s %-20s %s" % (v["run"], v["verdict"], v["evidence"])
                         for v in self.verdicts)


def band(train, kernel=None, model=None, plugin=None, freq="1/10", op="gemm", runs=3,
         target=None, seed=0):
    """Trains `train(rec)` R times as the golden band (run 0 as it is, runs 1..R-1 with each
    call of `op` through PEAT's golden kernel under the runtime stage's honest reorderings), then
    once per frequency with the kernel or model swapped in, and judges each faulty run with the
    detector's TRAINING_EQUIVALENT / DEGRADES / DIVERGES rules. train must be deterministic
    (seed inside it) and call rec.step(model, loss, accuracy=None) once per iteration;
    `target` (a module or aten op names) limits the swap as in swap()."""
    L = _lib.lib()
    golden = Recorder()
    train(golden)
    members = [golden]
    for r in range(1, runs):
        spec = L.peat_pyapi_band_spec(r)
        if spec is None:
            raise _lib.PeatError("band: at most %d runs" % r)
        rec = Recorder(golden)
        with swap(target, model=spec.decode(), freq="1", op=op, seed=seed + r):
            train(rec)
        members.append(rec)
    verdicts = []
    for fq in freq.split(","):
        rec = Recorder(golden)
        with swap(target, kernel=kernel, plugin=plugin, model=model, freq=fq, op=op,
                  seed=seed) as sw:
            train(rec)
        v = _judge(members, rec)
        v["run"] = "%s @ %s" % (kernel or model, fq)
        v["swapped"] = sw.swapped
        verdicts.append(v)
    return BandResult(members, verdicts)


def _judge(members, rec):
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
                                          ctypes.byref(v)),
               "band: judge")
    return {"verdict": L.peat_pyapi_runtime_class_name(v.cls).decode(), "iter": v.iter,
            "metric": v.metric.decode(), "evidence": v.evidence.decode(),
            "final_loss": v.final_loss, "band": (v.band_lo, v.band_hi)}
