"""_lib.py: libpeat.so through ctypes: the host API's structs mirrored, and the pyapi entry points."""
import ctypes
import os

import numpy as np

PARAM_I, PARAM_F, MAX_DIMS, MAX_IO = 12, 8, 4, 8
DTYPE = {"f64": 0, "f32": 1, "bf16": 2, "f16": 3, "i32": 4}


class Tensor(ctypes.Structure):
    """peat_tensor (include/peat/plugin.h)."""
    _fields_ = [("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("data", ctypes.c_void_p)]


class Call(ctypes.Structure):
    """peat_pyapi_call (harness/pyapi/pyapi.h)."""
    _fields_ = [("id", ctypes.c_uint64), ("op", ctypes.c_int32), ("phase", ctypes.c_int32),
                ("i", ctypes.c_int64 * PARAM_I), ("f", ctypes.c_double * PARAM_F),
                ("n_in", ctypes.c_int32), ("n_out", ctypes.c_int32),
                ("iter", ctypes.c_int64), ("call_index", ctypes.c_int64),
                ("op_call_index", ctypes.c_int64), ("seed", ctypes.c_uint64),
                ("flow", ctypes.c_char * 32), ("layer", ctypes.c_char * 64),
                ("golden_kernel", ctypes.c_char * 64)]


class Verdict(ctypes.Structure):
    """peat_pyapi_verdict (harness/pyapi/pyapi.h)."""
    _fields_ = [("cls", ctypes.c_int32), ("accept", ctypes.c_int32), ("iter", ctypes.c_int64),
                ("final_loss", ctypes.c_double), ("band_lo", ctypes.c_double),
                ("band_hi", ctypes.c_double), ("end_mean", ctypes.c_double),
                ("end_bound", ctypes.c_double), ("wdist_ratio", ctypes.c_double),
                ("drift_end", ctypes.c_double), ("metric", ctypes.c_char * 16),
                ("evidence", ctypes.c_char * 256)]


class Freqs(ctypes.Structure):
    """peat_pyapi_freqs (harness/pyapi/pyapi.h)."""
    _fields_ = [("n", ctypes.c_int32), ("every", ctypes.c_int64 * 4),
                ("prob", ctypes.c_double * 4), ("label", (ctypes.c_char * 64) * 4)]


class PeatError(RuntimeError):
    """A libpeat call failed; the message is PEAT's own (peat_error_last)."""


class NoCallsSwapped(PeatError):
    """swap / band: no call of the op ran through the kernel (none matched, or the frequency
    picked none): a kernel that never ran gets no verdict."""


_lib = None


def _candidates():
    env = os.environ.get("PEAT_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for base in (os.getcwd(), os.path.join(here, "..", ".."), here):
        out.append(os.path.join(base, "build", "libpeat.so"))
    out.append(os.path.join(here, "libpeat.so"))
    return out


def lib():
    """Loads libpeat.so once ($PEAT_LIB, else build/libpeat.so of the working directory or of
    the source tree this package sits in)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = _candidates()
    path = next((p for p in tried if os.path.exists(p)), None)
    if path is None:
        raise PeatError("libpeat.so not found (tried %s); build it (cmake --build build "
                        "--target peat_shared) or set PEAT_LIB" % ", ".join(tried))
    L = ctypes.CDLL(os.path.abspath(path))
    P, I64, U64, D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_double
    sig = {
        "peat_pyapi_init": ([], ctypes.c_int),
        "peat_pyapi_struct_size": ([ctypes.c_int], I64),
        "peat_pyapi_store_create": ([ctypes.c_char_p, ctypes.c_char_p, U64, I64, ctypes.c_char_p,
                                     ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(P)],
                                    ctypes.c_int),
        "peat_pyapi_call_write": ([P, ctypes.POINTER(Call), P, P], ctypes.c_int),
        "peat_pyapi_call_check": ([ctypes.POINTER(Call), P], ctypes.c_int),
        "peat_pyapi_metrics_append": ([P, I64, D, D], ctypes.c_int),
        "peat_pyapi_unmapped_write": ([P, ctypes.c_int, P, P, P], ctypes.c_int),
        "peat_pyapi_store_close": ([P], ctypes.c_int),
        "peat_pyapi_kernel_run": ([ctypes.c_char_p, ctypes.POINTER(Call), P, P], ctypes.c_int),
        "peat_pyapi_model_run": ([ctypes.c_char_p, U64, ctypes.POINTER(Call), P, P],
                                 ctypes.c_int),
        "peat_pyapi_freqs_parse": ([ctypes.c_char_p, ctypes.POINTER(Freqs)], ctypes.c_int),
        "peat_pyapi_band_spec": ([ctypes.c_int], ctypes.c_char_p),
        "peat_pyapi_runtime_judge": ([ctypes.c_int, I64, P, P, I64, P, P, P, P, P, P,
                                      ctypes.c_char_p, P], ctypes.c_int),
        "peat_pyapi_accept_name": ([ctypes.c_int], ctypes.c_char_p),
        "peat_pyapi_shadow_measure": ([ctypes.POINTER(Call), P, P, P, D, ctypes.POINTER(D),
                                       ctypes.POINTER(D), ctypes.POINTER(ctypes.c_int)],
                                      ctypes.c_int),
        "peat_pyapi_runtime_class_name": ([ctypes.c_int], ctypes.c_char_p),
        "peat_error_last": ([], ctypes.c_char_p),
        "peat_op_parse": ([ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)], ctypes.c_int),
        "peat_op_name": ([ctypes.c_int], ctypes.c_char_p),
        "peat_op_aten": ([ctypes.c_int], ctypes.c_char_p),
        "peat_plugin_load": ([ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)], ctypes.c_int),
    }
    for name, (args, res) in sig.items():
        fn = getattr(L, name)
        fn.argtypes, fn.restype = args, res
    for which, cls in ((0, Call), (1, Tensor), (2, Verdict), (3, Freqs)):
        if L.peat_pyapi_struct_size(which) != ctypes.sizeof(cls):
            raise PeatError("libpeat.so at %s does not match peat_torch (%s is %d bytes there, "
                            "%d here): rebuild one or the other" %
                            (path, cls.__name__, L.peat_pyapi_struct_size(which),
                             ctypes.sizeof(cls)))
    _lib = L
    check(L.peat_pyapi_init(), "init")
    return L


def check(status, what):
    if status != 0:
        raise PeatError("%s: %s" % (what, _lib.peat_error_last().decode(errors="replace")))


def freqs(text, what):
    """A frequency list ("1", "1/10,p=0.01") parsed by `peat run`'s own parser: a list of
    (every, prob, label), one per frequency."""
    f = Freqs()
    check(lib().peat_pyapi_freqs_parse(text.encode(), ctypes.byref(f)), what)
    return [(f.every[i], f.prob[i], f.label[i].value.decode()) for i in range(f.n)]


_ops = {}
_plugins = set()


def plugin_load(path):
    """Loads a kernel plugin into libpeat once per process (a second load would clash)."""
    key = os.path.realpath(path)
    if key in _plugins:
        return
    n = ctypes.c_int()
    check(lib().peat_plugin_load(path.encode(), ctypes.byref(n)), "plugin " + path)
    _plugins.add(key)


def op_id(name):
    """PEAT's op kind of a name ("gemm", "conv2d_bwd_data", ...)."""
    if name not in _ops:
        v = ctypes.c_int()
        check(lib().peat_op_parse(name.encode(), ctypes.byref(v)), "op " + name)
        _ops[name] = v.value
    return _ops[name]


def op_name(op):
    return lib().peat_op_name(op).decode()


def tensor_of(arr, dtype_name):
    """A peat_tensor over a C-contiguous numpy array (kept alive by the caller)."""
    t = Tensor()
    t.dtype = DTYPE[dtype_name]
    shape = arr.shape if arr.ndim else (1,)
    if len(shape) > MAX_DIMS:
        raise PeatError("tensor of %d dimensions (PEAT holds at most %d)" % (len(shape), MAX_DIMS))
    t.ndim = len(shape)
    for k, s in enumerate(shape):
        t.shape[k] = s
    t.data = arr.ctypes.data
    return t


def ptr_array(tensors):
    """A (peat_tensor *)[n] over the given Tensor structs."""
    arr = (ctypes.c_void_p * MAX_IO)()
    for k, t in enumerate(tensors):
        arr[k] = ctypes.addressof(t)
    return arr


def aten_map():
    """{aten op name: [PEAT op names]} from the op descriptors (core/ops/<op>.c, .aten)."""
    L = lib()
    out, k = {}, 0
    while True:
        names = L.peat_op_aten(k)
        if names is None:
            return out
        op = L.peat_op_name(k).decode()
        for a in filter(None, names.decode().split(",")):
            out.setdefault(a, []).append(op)
        k += 1
