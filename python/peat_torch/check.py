"""check.py: a Python callable judged as a candidate kernel by PEAT's full `peat run`
(peat_pyapi_main in this process, --no-isolate): the callable is registered as a kernel through
a ctypes callback (PyKernel) that hands each call's buffers to it as torch tensors in the
arguments of the torch function it stands for (one adapter per PEAT op; the table is in
docs/pytorch.md), checks what it returns and writes it into PEAT's output buffers. A callable
that raises, or returns a non-tensor or a tensor of the wrong shape or dtype, fails that call
with a one-line message (peat_error_set): PEAT reports it as a kernel failure."""
import ctypes
import inspect
import json
import math
import os
import re
import sys
import time

import numpy as np
import torch

from . import _lib

_NP = {0: np.float64, 1: np.float32, 4: np.int32}
_TORCH = {0: torch.float64, 1: torch.float32, 4: torch.int32}
PEAT_ERR_KERNEL = 11


class Args(ctypes.Structure):
    """peat_args (include/peat/plugin.h)."""
    _fields_ = [("op", ctypes.c_int), ("i", ctypes.c_int64 * _lib.PARAM_I),
                ("f", ctypes.c_double * _lib.PARAM_F), ("n_in", ctypes.c_int),
                ("n_out", ctypes.c_int), ("in_", ctypes.POINTER(_lib.Tensor) * _lib.MAX_IO),
                ("out", ctypes.POINTER(_lib.Tensor) * _lib.MAX_IO), ("dev", ctypes.c_void_p)]


KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Args), ctypes.c_void_p)


class Kernel(ctypes.Structure):
    """peat_kernel (include/peat/plugin.h), its peat_kernel_config inlined."""
    _fields_ = [("name", ctypes.c_char_p), ("op", ctypes.c_int), ("role", ctypes.c_int),
                ("backend", ctypes.c_char_p), ("in_dtype", ctypes.c_int),
                ("out_dtype", ctypes.c_int), ("acc_dtype", ctypes.c_int),
                ("cfg", ctypes.c_int * 7), ("fn", KERNEL_FN), ("desc", ctypes.c_char_p),
                ("user", ctypes.c_void_p), ("flags", ctypes.c_uint)]


class BadCall(Exception):
    """What fn did wrong on one call (the message is the one line PEAT reports)."""


# ---- one call as the adapters see it ----------------------------------------------------------

def _host(t):
    """A numpy array over a peat_tensor's host buffer (no copy)."""
    shape = tuple(t.shape[k] for k in range(t.ndim))
    dt = _NP.get(t.dtype)
    if dt is None:
        raise BadCall("a tensor of dtype %s (peat_torch hands f32, f64 and i32)" %
                      ["f64", "f32", "bf16", "f16", "i32"][t.dtype])
    n = int(np.prod(shape))
    if n == 0 or not t.data:
        return np.zeros(shape, dtype=dt)
    buf = (ctypes.c_char * (n * np.dtype(dt).itemsize)).from_address(t.data)
    return np.frombuffer(buf, dtype=dt).reshape(shape)


class PyCall:
    """One PEAT call for an adapter: op (name), i and f (the params, plugin.h's slots), ins
    (the inputs as torch tensors in PEAT's shapes: zero-copy views of PEAT's host buffers on
    "cpu", copies on `device` otherwise), out_shapes and outs (PEAT's output buffers as torch
    tensors, host memory: an adapter that returns None has written them)."""

    def __init__(self, a, device):
        self.op = _lib.op_name(a.op)
        self.i, self.f = list(a.i), list(a.f)
        self.device = device
        self._host = [_host(a.in_[k].contents) for k in range(a.n_in)]
        self.outs = [torch.from_numpy(_host(a.out[k].contents)) for k in range(a.n_out)]
        self.out_shapes = [tuple(o.shape) for o in self.outs]
        self._copies = []     # (host array, the tensor fn got): compared after the call
        self._ins = {}

    @property
    def ins(self):
        return [self.input(k) for k in range(len(self._host))]

    def input(self, k, dtype=None):
        """Input k as fn receives it: on the device, in dtype (default its own). A copy (another
        device or dtype) is compared with PEAT's buffer after the call, and a change is written
        back into it, so that PEAT sees the write into its input (INPUT_MUTATION)."""
        key = (k, dtype)
        if key in self._ins:
            return self._ins[key]
        h = torch.from_numpy(self._host[k])
        if self.device == "cpu" and (dtype is None or dtype == h.dtype):
            t = h
        else:
            t = h.to(device=self.device, dtype=dtype or h.dtype, copy=True)
            self._copies.append((k, t))
        self._ins[key] = t
        return t

    def state(self, k, n):
        """Input k as a fresh copy of n elements on the device (optimizer state that fn may
        step in place: PEAT's optimizer outputs may alias their inputs)."""
        return torch.from_numpy(self._host[k]).reshape(n).to(self.device, copy=True)

    def written_back(self):
        """Writes every copy fn changed back into PEAT's input buffer (PEAT then sees it)."""
        for k, t in self._copies:
            h = torch.from_numpy(self._host[k])
            back = t.detach().to("cpu", h.dtype).reshape(h.shape)
            bits = torch.int64 if h.dtype == torch.float64 else torch.int32
            changed = back.view(bits) != h.view(bits)      # bit for bit (NaN included)
            if bool(changed.any()):
                h[changed] = back[changed]                 # the changed elements alone


# ---- the adapters: fn called as the torch function it stands for ------------------------------

def _takes(fn, n):
    """Whether fn accepts n positional arguments."""
    try:
        inspect.signature(fn).bind(*range(n))
        return True
    except (TypeError, ValueError):
        return False


def _outs(r, n, what):
    """fn's result as a tuple of n (a single tensor when n == 1)."""
    if n == 1:
        return (r,)
    if not isinstance(r, (tuple, list)) or len(r) != n:
        raise BadCall("fn returned %s, not %d tensors (%s)" % (_kind(r), n, what))
    return tuple(r)


def _kind(r):
    if isinstance(r, torch.Tensor):
        return "a tensor of shape %s" % list(r.shape)
    if isinstance(r, (tuple, list)):
        return "a %s of %d" % (type(r).__name__, len(r))
    return "a %s" % type(r).__name__


def _gemm(c, fn, k):
    ta, tb, M, N, K, B = c.i[:6]
    alpha, beta = c.f[0], c.f[1]
    lead = (B,) if B > 1 else ()
    A = c.input(0).reshape(lead + ((K, M) if ta else (M, K)))
    Bm = c.input(1).reshape(lead + ((N, K) if tb else (K, N)))
    a = A.transpose(-1, -2) if ta else A
    b = Bm.transpose(-1, -2) if tb else Bm
    C = c.input(2).reshape(lead + (M, N)) if beta != 0 and len(c._host) > 2 else None
    if k.full:
        return [(fn(a, b, C, alpha, beta), lead + (M, N), "D")]
    r = fn(a, b)
    if (alpha, beta) != (1.0, 0.0):
        k.note("gemm", "fn takes (a, b): alpha, beta and C applied by peat_torch around it "
               "(torch, fp32): D = alpha*fn(a, b) + beta*C")
        _check(r, lead + (M, N), "D = a @ b")
        r = alpha * r if C is None else torch.add(alpha * r, C, alpha=beta)
    return [(r, lead + (M, N), "D")]


def _conv_p(c):
    N, C, H, W, O, KH, KW, s, p = c.i[:9]
    OH, OW = (H + 2 * p - KH) // s + 1, (W + 2 * p - KW) // s + 1
    return N, C, H, W, O, KH, KW, s, p, OH, OW


def _conv2d(c, fn, k):
    N, C, H, W, O, KH, KW, s, p, OH, OW = _conv_p(c)
    x, w = c.input(0).reshape(N, C, H, W), c.input(1).reshape(O, C, KH, KW)
    return [(fn(x, w, stride=s, padding=p), (N, O, OH, OW), "Y")]


def _conv2d_bwd_data(c, fn, k):
    N, C, H, W, O, KH, KW, s, p, OH, OW = _conv_p(c)
    dy, w = c.input(0).reshape(N, O, OH, OW), c.input(1).reshape(O, C, KH, KW)
    return [(fn((N, C, H, W), w, dy, stride=s, padding=p), (N, C, H, W), "dX")]


def _conv2d_bwd_filter(c, fn, k):
    N, C, H, W, O, KH, KW, s, p, OH, OW = _conv_p(c)
    x, dy = c.input(0).reshape(N, C, H, W), c.input(1).reshape(N, O, OH, OW)
    return [(fn(x, (O, C, KH, KW), dy, stride=s, padding=p), (O, C, KH, KW), "dW")]


def _bias_add(c, fn, k):
    R, C, S = c.i[:3]
    return [(fn(c.input(0).reshape(R, C, S), c.input(1).reshape(C, 1)), (R, C, S), "Y")]


def _bias_add_bwd(c, fn, k):
    R, C, S = c.i[:3]
    return [(fn(c.input(0).reshape(R, C, S)), (C,), "db")]


def _unary(c, fn, k):
    n = c.i[0]
    return [(fn(c.input(0).reshape(n)), (n,), "Y")]


def _relu_bwd(c, fn, k):
    n = c.i[0]
    return [(fn(c.input(1).reshape(n), c.input(0).reshape(n), 0.0), (n,), "dX")]


def _gelu_bwd(c, fn, k):
    n = c.i[0]
    return [(fn(c.input(1).reshape(n), c.input(0).reshape(n)), (n,), "dX")]


def _softmax(c, fn, k):
    R, C = c.i[:2]
    return [(fn(c.input(0).reshape(R, C), -1), (R, C), "Y")]


def _softmax_bwd(c, fn, k):
    R, C = c.i[:2]
    y, dy = c.input(0).reshape(R, C), c.input(1).reshape(R, C)
    return [(fn(dy, y, -1, torch.float32), (R, C), "dX")]


def _layernorm(c, fn, k):
    R, C = c.i[:2]
    eps = c.f[0]
    x = c.input(0).reshape(R, C)
    r = fn(x, (C,), c.input(1).reshape(C), c.input(2).reshape(C), eps)
    if isinstance(r, torch.Tensor):
        k.note("layernorm", "fn returns Y alone: mean and rstd filled by peat_torch in fp64 "
               "from the inputs (two-pass, biased variance)")
        xd = x.detach().to("cpu", torch.float64)
        mean = xd.mean(1)
        rstd = 1.0 / torch.sqrt(((xd - mean[:, None]) ** 2).mean(1) + eps)
        return [(r, (R, C), "Y"), (mean.float(), (R,), "mean"), (rstd.float(), (R,), "rstd")]
    y, mean, rstd = _outs(r, 3, "Y, mean, rstd")
    return [(y, (R, C), "Y"), (_rows(mean, R), (R,), "mean"), (_rows(rstd, R), (R,), "rstd")]


def _rows(t, R):
    """mean / rstd as [R] (native_layer_norm gives [R, 1])."""
    return t.reshape(R) if isinstance(t, torch.Tensor) and tuple(t.shape) == (R, 1) else t


def _layernorm_bwd(c, fn, k):
    R, C = c.i[:2]
    x, g = c.input(0).reshape(R, C), c.input(1).reshape(C)
    mean, rstd, dy = c.input(2).reshape(R, 1), c.input(3).reshape(R, 1), c.input(4).reshape(R, C)
    r = _outs(fn(dy, x, (C,), mean, rstd, g, torch.zeros_like(g), [True, True, True]), 3,
              "dX, dgamma, dbeta")
    return [(r[0], (R, C), "dX"), (r[1], (C,), "dgamma"), (r[2], (C,), "dbeta")]


def _attention(c, fn, k):
    B, H, T, D, causal = c.i[:5]
    scale = c.f[0]
    q, kk, v = (c.input(j).reshape(B, H, T, D) for j in range(3))
    r = fn(q, kk, v, is_causal=bool(causal), scale=scale)
    if isinstance(r, torch.Tensor):
        k.note("attention", "fn returns O alone: L (the rows' logsumexp) filled by peat_torch in "
               "fp64 from Q and K")
        s = scale * torch.matmul(q.detach().to("cpu", torch.float64),
                                 kk.detach().to("cpu", torch.float64).transpose(-1, -2))
        if causal:
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
        return [(r, (B, H, T, D), "O"), (torch.logsumexp(s, -1).float(), (B, H, T), "L")]
    o, lse = _outs(r, 2, "O, L")[:2]
    return [(o, (B, H, T, D), "O"), (lse, (B, H, T), "L")]


def _attention_bwd(c, fn, k):
    B, H, T, D, causal = c.i[:5]
    scale = c.f[0]
    q, kk, v, o = (c.input(j).reshape(B, H, T, D) for j in range(4))
    lse, do = c.input(4).reshape(B, H, T), c.input(5).reshape(B, H, T, D)
    r = _outs(fn(do, q, kk, v, o, lse, 0.0, bool(causal), scale=scale), 3, "dQ, dK, dV")
    return [(r[j], (B, H, T, D), n) for j, n in enumerate(("dQ", "dK", "dV"))]


def _embedding(c, fn, k):
    N, V, D = c.i[:3]
    return [(fn(c.input(1).reshape(N), c.input(0).reshape(V, D)), (N, D), "Y")]


def _embedding_bwd(c, fn, k):
    N, V, D = c.i[:3]
    return [(fn(c.input(1).reshape(N, D), c.input(0).reshape(N), V, -1, False), (V, D),
             "dtable")]


def _cross_entropy(c, fn, k):
    R, C = c.i[:2]
    tgt = c.input(1, torch.int64).reshape(R)
    return [(fn(c.input(0).reshape(R, C), tgt, reduction="none"), (R,), "loss")]


def _cross_entropy_bwd(c, fn, k):
    R, C = c.i[:2]
    tgt = c.input(1, torch.int64).reshape(R)
    return [(fn(c.input(2).reshape(R), c.input(0).reshape(R, C), tgt), (R, C), "dlogits")]


def _stepped(r, states, names, shape):
    """An optimizer step's outputs: fn's tuple, or (None) the states it stepped in place."""
    if r is None:
        r = states
    r = _outs(r, len(states), ", ".join(names))
    return [(t, shape, n) for t, n in zip(r, names)]


def _adamw(c, fn, k):
    n, t = c.i[:2]
    lr, b1, b2, eps, wd = c.f[:5]
    p, m, v = c.state(0, n), c.state(2, n), c.state(3, n)
    r = fn(p, c.input(1).reshape(n), m, v, int(t), lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd)
    return _stepped(r, (p, m, v), ("param", "m", "v"), (n,))


def _sgd(c, fn, k):
    n, nesterov = c.i[:2]
    lr, mom, wd = c.f[:3]
    p, mb = c.state(0, n), c.state(2, n)
    r = fn(p, c.input(1).reshape(n), mb, lr=lr, momentum=mom, weight_decay=wd, nesterov=bool(nesterov))
    return _stepped(r, (p, mb), ("param", "mom"), (n,))


def _reduce(c, fn, k):
    R, C, mode = c.i[:3]
    return [(fn(c.input(0).reshape(R, C), -1, "mean" if mode else "sum"), (R,), "Y")]


ADAPTERS = {"gemm": _gemm, "conv2d": _conv2d, "conv2d_bwd_data": _conv2d_bwd_data,
            "conv2d_bwd_filter": _conv2d_bwd_filter, "bias_add": _bias_add,
            "bias_add_bwd": _bias_add_bwd, "relu": _unary, "relu_bwd": _relu_bwd,
            "gelu": _unary, "gelu_bwd": _gelu_bwd, "softmax": _softmax,
            "softmax_bwd": _softmax_bwd, "layernorm": _layernorm,
            "layernorm_bwd": _layernorm_bwd, "attention": _attention,
            "attention_bwd": _attention_bwd, "embedding": _embedding,
            "embedding_bwd": _embedding_bwd, "cross_entropy": _cross_entropy,
            "cross_entropy_bwd": _cross_entropy_bwd, "adamw": _adamw, "sgd": _sgd,
            "reduce": _reduce}


def _check(r, shape, what, dtype=torch.float32):
    if not isinstance(r, torch.Tensor):
        raise BadCall("fn returned %s, not a tensor (%s)" % (_kind(r), what))
    if tuple(r.shape) != tuple(shape):
        raise BadCall("fn returned shape %s for %s, the call gives %s" % (
            list(r.shape), what, list(shape)))
    if r.dtype != dtype:
        raise BadCall("fn returned %s for %s, the call is %s" % (
            str(r.dtype).replace("torch.", ""), what, str(dtype).replace("torch.", "")))


# ---- the kernel: registration and the callback ------------------------------------------------

_keep = []          # every object handed to C: the registry keeps pointers for the process


class PyKernel:
    """A Python callable registered in libpeat's registry as a candidate kernel of `op` (name
    "torch:<fn name>", a counter appended when taken). Its calls convert PEAT's buffers to torch
    tensors on `device`, call fn through the op's adapter (or `adapter(call, fn)`), check the
    result and write it into PEAT's outputs. `notes` says what peat_torch computed itself;
    `calls`, `failed` and `seconds` count."""

    def __init__(self, fn, op, device="cpu", adapter=None, name=None, in_dtype="f32",
                 acc_dtype="f32"):
        L = _lib.lib()
        if not callable(fn):
            raise _lib.PeatError("check: fn is not callable")
        self.op_id = _lib.op_id(op)
        if adapter is None and op not in ADAPTERS:
            raise _lib.PeatError("check: no adapter for op %r: give adapter=" % op)
        for d in (in_dtype, acc_dtype):
            if d not in _lib.DTYPE:
                raise _lib.PeatError("check: dtype %r (one of %s)" % (d, ", ".join(_lib.DTYPE)))
        self.fn, self.op, self.device, self.adapter = fn, op, str(device), adapter
        self.full = op == "gemm" and adapter is None and _takes(fn, 5)
        self.notes = {}
        self.calls = self.failed = 0
        self.seconds = 0.0
        self.name = self._unique(name or "torch:" + _clean(getattr(fn, "__name__", "fn")))
        if self.device != "cpu":
            torch.empty(1, device=self.device)   # a device torch cannot reach: refused now
        k = Kernel()
        self._strings = [s.encode() for s in (self.name, "cpu", self._desc())]
        k.name, k.backend, k.desc = self._strings
        k.op, k.role = self.op_id, 2
        k.in_dtype, k.out_dtype, k.acc_dtype = (_lib.DTYPE[in_dtype], _lib.DTYPE["f32"],
                                                _lib.DTYPE[acc_dtype])
        self._fn = KERNEL_FN(self._call)
        k.fn = self._fn
        k.flags = 0     # not reentrant: PEAT serializes the calls
        self.kernel = k
        L.peat_registry_add.argtypes = [ctypes.POINTER(Kernel)]
        L.peat_registry_add.restype = ctypes.c_int
        _lib.check(L.peat_registry_add(ctypes.byref(k)), "check: register " + self.name)
        _keep.append(self)

    @staticmethod
    def _unique(base):
        L = _lib.lib()
        L.peat_registry_find.argtypes, L.peat_registry_find.restype = [ctypes.c_char_p], \
            ctypes.c_void_p
        name, n = base, 1
        while L.peat_registry_find(name.encode()):
            n += 1
            name = "%s_%d" % (base, n)
        return name

    def _desc(self):
        fn = self.fn
        where = getattr(fn, "__module__", None) or "?"
        return "Python callable %s.%s on torch %s (peat_torch)" % (
            where, getattr(fn, "__qualname__", getattr(fn, "__name__", "fn")), self.device)

    def note(self, key, text):
        n = self.notes.get(key, (text, 0))[1]
        self.notes[key] = (text, n + 1)

    def note_lines(self):
        return ["%s: %s (%d calls)" % (k, t, n) for k, (t, n) in sorted(self.notes.items())]

    def _call(self, ap, selfp):
        t0 = time.perf_counter()
        self.calls += 1
        try:
            with torch.no_grad():
                self._run(ap.contents)
            return 0
        except BaseException as e:          # never a traceback through ctypes
            self.failed += 1
            msg = str(e).strip().splitlines()
            msg = msg[0] if msg else ""
            if not isinstance(e, BadCall):
                msg = "fn raised %s%s" % (type(e).__name__, ": " + msg if msg else "")
            _error(msg[:400])
            return PEAT_ERR_KERNEL
        finally:
            self.seconds += time.perf_counter() - t0

    def _run(self, a):
        c = PyCall(a, self.device)
        if self.adapter is not None:
            r = self.adapter(c, self.fn)
            if r is None:
                res = []
            else:
                r = _outs(r, len(c.outs), "the op's %d outputs" % len(c.outs))
                res = [(t, s, "output %d" % j) for j, (t, s) in enumerate(zip(r, c.out_shapes))]
        else:
            res = ADAPTERS[c.op](c, self.fn, self)
        for t, shape, what in res:
            _check(t, shape, what)
        c.written_back()
        for (t, shape, what), o in zip(res, c.outs):
            o.copy_(t.detach().reshape(o.shape))


def _clean(s):
    s = re.sub(r"[^A-Za-z0-9_.]+", "", s)
    return s or "fn"


def _error(msg):
    L = _lib.lib()
    L.peat_error_set(PEAT_ERR_KERNEL, b"python/peat_torch/check.py", 0, b"%s",
                     msg.encode("utf-8", "replace"))


_by_fn, _by_name = {}, {}


def kernel_of(fn, op, adapter=None, device="cpu", name=None, in_dtype="f32", acc_dtype="f32"):
    """The PyKernel of fn for op, registered once per process (swap, band and check of the same
    callable share it)."""
    key = (id(fn), op, id(adapter), str(device), name, in_dtype, acc_dtype)
    k = _by_fn.get(key)
    if k is None or k.fn is not fn or k.adapter is not adapter:
        k = PyKernel(fn, op, device, adapter, name, in_dtype, acc_dtype)
        _by_fn[key] = _by_name[k.name] = k
    return k


def python_kernel(name):
    """The PyKernel registered under name, None for any other kernel."""
    return _by_name.get(name)


def kernel_notes(name):
    """What peat_torch computed itself for the Python kernel `name` (lines; [] for others)."""
    k = _by_name.get(name)
    return k.note_lines() if k else []


# ---- check: peat run on the callable ----------------------------------------------------------

class CheckResult:
    """check's answer: verdict ("PASS", "WARN", "FAIL"), status (peat run's exit status: 0
    pass or warnings, 1 fail, 2 usage or input error), findings (class, acceptance, evidence,
    from OUT/signature.json), out (the report folder), kernel (the registered name), notes
    (what peat_torch computed itself), calls / failed (the callable's calls, those that
    failed), signature (signature.json as a dict; None when peat wrote none)."""

    def __init__(self, kernel, status, out, signature, seconds):
        self.kernel, self.status, self.out, self.signature = kernel.name, status, out, signature
        self.notes = kernel.note_lines()
        self.calls, self.failed, self.seconds = kernel.calls, kernel.failed, seconds
        self.fn_seconds = kernel.seconds
        sig = signature or {}
        self.verdict = sig.get("verdict") or ("FAIL" if status == 1 else "ERROR")
        self.findings = []
        for f in sig.get("findings", []):
            ev = f.get("evidence") or []
            self.findings.append({"class": f.get("class", ""),
                                  "acceptance": f.get("acceptance", ""),
                                  "evidence": ev if isinstance(ev, list) else [ev]})

    def classes(self):
        return [f["class"] for f in self.findings]

    def finding(self, cls):
        return next((f for f in self.findings if f["class"] == cls), None)

    def __str__(self):
        lines = ["%s: %s (exit %d; %d calls of the callable, %d failed; %.1f s) report %s" % (
            self.kernel, self.verdict, self.status, self.calls, self.failed, self.seconds,
            self.out)]
        for f in self.findings:
            lines.append("  %-22s %-4s %s" % (f["class"], f["acceptance"],
                                              f["evidence"][0] if f["evidence"] else ""))
        lines += ["  note: " + n for n in self.notes]
        return "\n".join(lines)


def _out_dir(name, flow, capture):
    what = flow or ("torch_" + os.path.splitext(os.path.basename(capture))[0] if capture
                    else "auto")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    safe = lambda s: re.sub(r"[^A-Za-z0-9_.-]", "_", s)
    out = base = os.path.join("peat-out", "%s-%s-cpu-%s" % (safe(name), safe(what), stamp))
    n = 1
    while os.path.exists(out):         # two checks of one callable within a second
        n += 1
        out = "%s-%d" % (base, n)
    return out


def run_main(argv):
    """peat_pyapi_main: a `peat` command in this process (argv without "peat"); its status."""
    L = _lib.lib()
    L.peat_pyapi_main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    L.peat_pyapi_main.restype = ctypes.c_int
    words = [b"peat"] + [str(w).encode() for w in argv]
    arr = (ctypes.c_char_p * (len(words) + 1))(*words, None)
    sys.stdout.flush()
    sys.stderr.flush()
    return L.peat_pyapi_main(len(words), arr)


def check(fn, op="gemm", flow=None, capture=None, device="cpu", adapter=None, out=None,
          size=None, seed=None, args=(), name=None, in_dtype="f32", acc_dtype="f32"):
    """Judges the callable fn as a candidate kernel of `op` with `peat run`: on the calls of a
    built-in flow (`flow`, default the first that calls the op) or of a capture (`capture`, a
    peat_torch.capture file), with probes, the across-call sequences and runtime FI, the
    candidate in-process (--no-isolate). fn is called as the torch function it stands for
    (docs/pytorch.md, the table), with tensors on `device`; `adapter(call, fn)` replaces that
    for a custom signature (PyCall). `in_dtype` / `acc_dtype` declare a narrower format (the
    detector's WARN instead of FAIL for the precision it explains). `out` is the report folder
    (default peat-out/<kernel>-<flow>-cpu-<UTC time>); `size`, `seed` and `args` (more `peat
    run` words) go to peat run. Prints what peat run prints; returns a CheckResult."""
    if flow and capture:
        raise _lib.PeatError("check: give flow= or capture=, not both")
    k = kernel_of(fn, op, adapter, device, name, in_dtype, acc_dtype)
    k.notes, k.calls, k.failed, k.seconds = {}, 0, 0, 0.0
    out = out or _out_dir(k.name, flow, capture)
    argv = ["run", "--kernel", k.name, "--no-isolate", "--out", out]
    argv += ["--flow", flow] if flow else []
    argv += ["--capture", capture] if capture else []
    argv += ["--size", size] if size else []
    argv += ["--seed", seed] if seed is not None else []
    argv += [str(x) for x in args]
    t0, t_start = time.perf_counter(), time.time() - 1.0
    status = run_main(argv)
    seconds = time.perf_counter() - t0
    sig = None
    path = os.path.join(out, "signature.json")
    if os.path.exists(path) and os.path.getmtime(path) >= t_start:
        with open(path) as f:
            sig = json.load(f)
    r = CheckResult(k, status, out, sig, seconds)
    for n in r.notes:
        print("peat_torch: " + n)
    sys.stdout.flush()
    return r
