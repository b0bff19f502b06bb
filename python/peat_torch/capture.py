"""capture.py: records real op calls of the user's PyTorch training (forward, backward,
optimizer) into a PEAT campaign file, written by PEAT's own store through libpeat.so."""
import ctypes
import math
import os
import sys
from collections import Counter, OrderedDict

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _lib, optim
from .mapping import PEAT_OPS, INPLACE, INPLACE_ELEMENTWISE, SIDE_EFFECT, Unmapped, UnmappedThisCall, map_call, pre_inplace, State
from .track import PHASES, Tracker

# aten ops that only change a tensor's view or metadata, or allocate: listed as unmapped with
# this reason (they hold no arithmetic a kernel could get wrong)
_NO_MATH = {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "reshape", "detach",
            "alias", "as_strided", "unsqueeze", "squeeze", "slice", "select", "split", "clone",
            "contiguous", "empty", "empty_like", "empty_strided", "new_empty_strided", "zeros",
            "zeros_like", "ones", "ones_like", "full", "full_like", "copy_", "_to_copy",
            "_record_function_enter_new", "_record_function_exit", "lift_fresh", "arange",
            "scalar_tensor", "fill_", "zero_", "new_zeros", "new_ones", "new_empty", "_local_scalar_dense"}


# aten ops that draw random numbers (data, dropout masks): no reference result to compare with
_RANDOM = {"randn", "randint", "rand", "randperm", "normal_", "uniform_", "bernoulli_",
           "bernoulli", "random_", "native_dropout", "exponential_"}


def _np(t):
    t = t.detach().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _select(ops):
    """The PEAT op names chosen by ops ("all", or names; a name also selects its backward).
    A name that is no PEAT op capture can record is refused, with the valid ones: an aten name
    ("mm") or a typo ("gemmm") would otherwise record nothing and say nothing."""
    if ops is None or ops == "all" or ops == ["all"]:
        return None
    if isinstance(ops, str):
        ops = [o.strip() for o in ops.split(",")]
    valid = sorted({p for ps in PEAT_OPS.values() for p in ps})
    bad = [o for o in ops if o not in valid]
    if bad:
        raise _lib.PeatError("capture: ops=%s: %s no PEAT op capture records (PEAT op names, "
                             "not aten's); valid: %s" % (
                                 ",".join(ops), ", ".join("'%s' is" % b for b in bad),
                                 ", ".join(valid)))
    return set(ops)


def _wanted(sel, peat_op):
    return sel is None or peat_op in sel or any(peat_op.startswith(s + "_bwd") for s in sel)


class _Stratum:
    def __init__(self):
        self.per_iter = 0      # occurrences in iteration 0
        self.seen = 0          # occurrences in the current iteration
        self.quota = 0
        self.recorded = 0
        self.targets = Counter()
        self.pick = set()      # occurrence indices recorded in the current iteration
        self.why = None        # the mapping's reason when the call cannot be mapped
        self.cost = 1          # PEAT calls one recorded call gives (conv backward: 2)


class capture:
    """with capture("cap.h5", ops=["gemm"], calls=96, iters=20, model=model): <training steps>

    Records up to `calls` op calls of the chosen PEAT ops (default every op it can map): in the
    first iteration the first call of each stratum (PEAT op, module path, phase, shapes, dtype),
    then the rest of the budget split evenly over the strata and spread evenly over the
    `iters` iterations (consecutive iterations when iters is not given). A forward op after an
    optimizer step starts the next iteration. Unmapped aten ops are counted and listed
    (`self.unmapped`, and the table /capture/unmapped in the file)."""

    def __init__(self, path, ops="all", calls=96, iters=None, model=None, seed=0,
                 overwrite=False, name=None, quiet=False):
        self.path, self.calls, self.iters, self.seed = path, int(calls), iters, seed
        self.sel = _select(ops)
        self.overwrite, self.quiet = overwrite, quiet
        self.tracker = Tracker(model)
        if name:
            self.tracker.model_name = name
        self.flow = ("torch:" + self.tracker.model_name)[:31]
        self.strata = OrderedDict()
        self.unmapped = Counter()
        self.unmapped_why = {}
        self.recorded = Counter()          # (peat op, phase) -> records written
        self.n_records = 0
        self.op_calls = Counter()
        self.state = State()
        self.logsm_seen = 0
        self.logsm_consumed = 0
        self.planned = False
        self.store = None
        self.metrics_iters = set()
        self.opt_jobs = []   # optimizer steps in progress: the updates to reconstruct
        self.quiet_ops = 0   # inside a reconstructed step: its elementwise aten ops are its parts

    # ---- context ----
    def __enter__(self):
        L = _lib.lib()
        if os.path.exists(self.path):
            if not self.overwrite:
                raise _lib.PeatError("%s exists (pass overwrite=True to replace it)" % self.path)
            os.unlink(self.path)
        h = ctypes.c_void_p()
        policy = "capture ops=%s calls=%d iters=%s" % (
            ",".join(sorted(self.sel)) if self.sel else "all", self.calls, self.iters)
        _lib.check(L.peat_pyapi_store_create(
            self.path.encode(), self.flow.encode(), self.seed, int(self.iters or 0),
            " ".join(sys.argv).encode()[:500], policy.encode(),
            b"captured from PyTorch: tensors in their torch dtypes (f32, bf16, f16; indices i32)",
            ctypes.byref(h)), "capture " + self.path)
        self.store = h
        self.tracker.on_new_iter = self._new_iter
        self.tracker.on_opt_pre, self.tracker.on_opt_post = self._opt_begin, self._opt_end
        self.tracker.__enter__()
        self.mode = _Mode(self)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)
        self.tracker.__exit__(*exc)
        L = _lib.lib()
        n_unconsumed = self.logsm_seen - self.logsm_consumed
        if n_unconsumed > 0:
            self._unmapped("_log_softmax", "PEAT has no log_softmax op (only within cross "
                           "entropy: log_softmax + nll_loss)", n_unconsumed)
        names = list(self.unmapped)
        ops = (ctypes.c_char_p * max(1, len(names)))(*[n.encode() for n in names])
        cnt = (ctypes.c_int64 * max(1, len(names)))(*[self.unmapped[n] for n in names])
        why = (ctypes.c_char_p * max(1, len(names)))(
            *[self.unmapped_why[n].encode() for n in names])
        st = L.peat_pyapi_unmapped_write(self.store, len(names), ops, cnt, why)
        st2 = L.peat_pyapi_store_close(self.store)
        self.store = None
        _lib.check(st, "capture: unmapped table")
        _lib.check(st2, "capture: closing " + self.path)
        if not self.quiet:
            print(self.summary())
        return False

    def log(self, loss, accuracy=float("nan")):
        """Records the loss (and accuracy) of the iteration in progress as PEAT's metrics."""
        it = self.tracker.iter
        if self.store is None or it in self.metrics_iters:
            return
        self.metrics_iters.add(it)
        _lib.check(_lib.lib().peat_pyapi_metrics_append(self.store, it, float(loss),
                                                        float(accuracy)), "capture: metrics")

    def summary(self):
        lines = ["peat_torch.capture: %d calls recorded into %s (%s)" % (
            self.n_records, self.path, self.flow)]
        for (op, ph), n in sorted(self.recorded.items()):
            lines.append("  %-20s %-3s %5d" % (op, ph, n))
        if self.unmapped:
            lines.append("  not mapped (aten op: calls, why):")
            for n, c in self.unmapped.most_common():
                lines.append("    %-40s %7d  %s" % (n, c, self.unmapped_why[n]))
        return "\n".join(lines)

    # ---- sampling ----
    def _new_iter(self, it):
        self.state.clear()
        if not self.planned:
            self._plan()
        for s in self.strata.values():
            s.seen = 0
            c = s.targets.get(it, 0)
            s.pick = {(s.recorded + j) % max(1, s.per_iter) for j in range(c)}

    def _plan(self):
        """After iteration 0: the rest of the budget split over the strata, spread over the run."""
        self.planned = True
        left = self.calls - self.n_records
        live = [s for s in self.strata.values() if s.why is None]
        span = (self.iters - 1) if self.iters else None
        cap = {id(s): (s.per_iter * span if span else 10**9) for s in live}
        while left > 0 and live:
            grew = False
            for s in live:
                if left >= s.cost and s.quota < cap[id(s)]:
                    s.quota += 1
                    left -= s.cost
                    grew = True
            if not grew:
                break
        for s in live:
            for j in range(s.quota):
                s.targets[1 + (int((j + 0.5) * span / s.quota) if span else j // max(1, s.per_iter))] += 1

    def _unmapped(self, name, why, n=1):
        self.unmapped[name] += n
        self.unmapped_why.setdefault(name, why)

    # ---- optimizers that are loops of elementwise ops (optim.py) ----
    def _opt_begin(self, opt):
        """Before a step: the updates due for recording, with what they read; the step's own
        aten ops are then its parts, not calls of their own (unless a group is fused: its
        aten call is the update)."""
        groups = [g for g in opt.param_groups if not g.get("fused")]
        quiet = bool(groups) and len(groups) == len(opt.param_groups) and \
            optim._kind(opt) is not None
        self.quiet_ops += quiet
        name, job = optim.step_name(opt), []
        for g in groups:
            why = optim.group_why(opt, g)
            ps = [p for p in g["params"] if p.grad is not None]
            if why is not None:
                if optim._kind(opt) is not None:
                    self._unmapped(name, why, len(ps))
                continue
            for p in ps:
                pname = self.tracker.param_name(p)
                if not _wanted(self.sel, "adamw" if optim._kind(opt) != "sgd" else "sgd"):
                    continue
                key = (name, pname, "opt", tuple(p.shape), str(p.dtype))
                s, due = self._due(name, key)
                if due:
                    job.append((g, p, optim.snapshot(opt, g, p), s))
        self.opt_jobs.append((quiet, job))

    def _opt_end(self, opt):
        quiet, job = self.opt_jobs.pop() if self.opt_jobs else (False, [])
        name = optim.step_name(opt)
        try:
            for g, p, pre, s in job:
                try:
                    m = optim.mapped(opt, g, p, pre)
                except Unmapped as e:
                    s.why = str(e)
                    self._unmapped(name, str(e))
                    continue
                self._write(m, name, "opt", self.tracker.param_name(p))
                s.recorded += 1
        finally:
            self.quiet_ops -= quiet

    def dispatch(self, func, args, kwargs):
        if self.quiet_ops:
            self.tracker.where()  # the optimizer phase, for the iteration count
            return func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        peat_ops = PEAT_OPS.get(name)
        wanted = peat_ops is not None and any(_wanted(self.sel, p) for p in peat_ops)
        phase, layer = self.tracker.where()
        layer = layer or self.tracker.model_name
        pre = pre_inplace(name, args) if wanted and (name in INPLACE or name in SIDE_EFFECT) else None
        # an in-place elementwise op (relu_) overwrites its input: the call as the kernel saw it
        # is (its input before, its output after)
        before = args[0].detach().clone() if wanted and name in INPLACE_ELEMENTWISE else None
        out = func(*args, **(kwargs or {}))
        if before is not None:
            args = (before,) + tuple(args[1:])
        if peat_ops is None:
            self._unmapped(name, "view or allocation (no arithmetic)" if name in _NO_MATH
                           else "random numbers (no reference result)" if name in _RANDOM
                           else "no PEAT op")
            return out
        self._remember(name, args, out)
        if not wanted:
            self._unmapped(name, "not among the ops chosen (ops=...)")
            return out
        if name in ("_log_softmax", "nll_loss_backward"):
            return out  # consumed by the cross entropy they are part of
        if name in INPLACE:
            return self._dispatch_params(name, args, kwargs, out, pre, phase)
        key = (name, layer, phase, tuple(tuple(a.shape) for a in args
                                          if isinstance(a, torch.Tensor)),
               str(next((a.dtype for a in args if isinstance(a, torch.Tensor)), "")))
        s, due = self._due(name, key)
        if due:
            self._record(name, args, kwargs, out, pre, [s], phase, layer)
        return out

    def _dispatch_params(self, name, args, kwargs, out, pre, phase):
        """A fused optimizer step updates every parameter in one aten call: each parameter is
        its own stratum (its name is the layer), so the budget is spent on a spread of them."""
        due = {}
        for k, p in enumerate(args[0]):
            key = (name, self.tracker.param_name(p), phase, tuple(p.shape), str(p.dtype))
            s, d = self._due(name, key)
            if d:
                due[k] = s
        if due:
            self._record(name, args, kwargs, out, pre, due, phase, "optimizer")
        return out

    def _due(self, name, key):
        """The call's stratum, and whether this call of it is recorded."""
        s = self.strata.get(key)
        first = s is None
        if first:
            s = self.strata[key] = _Stratum()
        occ = s.seen
        s.seen += 1
        if not self.planned:
            s.per_iter += 1
        if s.why is not None:
            self._unmapped(name, s.why)
            return s, False
        return s, (first and self.n_records < self.calls) or (self.planned and occ in s.pick)

    def _remember(self, name, args, out):
        st = self.state
        if name == "_log_softmax":
            self.logsm_seen += 1
            st.logsm[out.data_ptr()] = (args[0], out)
        elif name == "nll_loss_forward" and args[0].data_ptr() in st.logsm:
            self.logsm_consumed += 1
        elif name == "nll_loss_backward":
            st.nll_bwd[out.data_ptr()] = (args[0], args[2], args[4], out)
        elif name == "native_layer_norm":
            st.ln_eps[out[1].data_ptr()] = (args[4], out[1])

    def _record(self, name, args, kwargs, out, pre, strata, phase, layer):
        """Maps the call and writes its PEAT calls; strata: [stratum], or {param index:
        stratum} for a fused optimizer step (only those parameters are written)."""
        try:
            maps = map_call(name, args, kwargs, out, self.state, pre)
        except UnmappedThisCall as e:
            self._unmapped(name + " (some calls)", str(e))
            return
        except Unmapped as e:
            for s in (strata.values() if isinstance(strata, dict) else strata):
                s.why = str(e)
            self._unmapped(name, str(e))
            return
        if isinstance(strata, dict):
            pairs = [(maps[k], s) for k, s in strata.items()]
        else:
            pairs = [(m, strata[0]) for m in maps or []]
        written = {}
        for m, s in pairs:
            if not _wanted(self.sel, m.op):
                continue
            lay = self.tracker.param_name(m.param) if hasattr(m, "param") else layer
            self._write(m, name, phase, lay)
            written[id(s)] = written.get(id(s), 0) + 1
        for s in {id(s): s for _, s in pairs}.values():
            s.recorded += 1
            s.cost = max(s.cost, written.get(id(s), 0))

    def _write(self, m, name, phase, layer):
        L = _lib.lib()
        c = _lib.Call()
        c.id = c.call_index = self.n_records
        c.op = _lib.op_id(m.op)
        c.phase = PHASES[phase]
        for k, v in enumerate(m.i):
            c.i[k] = int(v)
        for k, v in enumerate(m.f):
            c.f[k] = float(v)
        c.n_in, c.n_out = len(m.ins), len(m.outs)
        c.iter = self.tracker.iter
        c.op_call_index = self.op_calls[m.op]
        c.seed = self.seed
        c.flow = self.flow.encode()[:31]
        c.layer = layer.encode()[:63]
        c.golden_kernel = ("torch:aten.%s[%s]" % (name, m.dtype)).encode()[:63]
        keep = [_np(t) for t in m.ins + m.outs]
        ts = [_lib.tensor_of(a, m_dtype(t)) for a, t in zip(keep, m.ins + m.outs)]
        ins = _lib.ptr_array(ts[:len(m.ins)])
        outs = _lib.ptr_array(ts[len(m.ins):])
        _lib.check(L.peat_pyapi_call_write(self.store, ctypes.byref(c), ins, outs),
                   "capture: %s call of %s" % (m.op, layer))
        self.n_records += 1
        self.op_calls[m.op] += 1
        self.recorded[(m.op, phase)] += 1


def m_dtype(t):
    from .mapping import DTYPES
    return DTYPES[t.dtype]


class _Mode(TorchDispatchMode):
    def __init__(self, cap):
        super().__init__()
        self.cap = cap

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.cap.dispatch(func, args, kwargs)
