#!/usr/bin/env python3
"""calls_harness.py: a harness of PEAT's file protocol in numpy (docs/calls.md shows it whole).

    python3 calls_harness.py CALLS OUTS [VARIANT]

Reads every call of CALLS (`peat calls export`), runs the kernel on it and writes its outputs
into OUTS for `peat judge CALLS OUTS`. The kernel is a GEMM, softmax or layer norm in numpy;
VARIANT picks how it computes (a user's harness calls its own kernel here instead):
  kloop  GEMM summed over k in order in float32 (honest); softmax, layer norm in float32
  dropk  the same GEMM that forgets the last k term (a defect)
  bf16   the GEMM with its inputs rounded to bfloat16 first (reduced precision)
  cache  the kloop GEMM that keeps its result per input array and returns it again when the
         same arrays come back (a kernel with state: a cache keyed by address)
Calls marked in_order run in file order in this one process, the same buffer id being the same
array: a kernel that keeps state across calls (a cache keyed by address) shows it to PEAT. A call
the kernel cannot run gets the attribute "error" instead of outputs (a kernel failure).
"""
import sys

import h5py
import numpy as np


def bf16(x):
    """x rounded to the nearest bfloat16 (ties to even), kept in float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (u & 0x7F800000) != 0x7F800000
    u = np.where(finite, u + 0x7FFF + ((u >> 16) & 1), u) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


CACHE = {}  # the "cache" variant's results by the identity of its input arrays


def gemm(i, f, ins, variant):
    """D = alpha op(A) op(B) + beta C, op() transposing when i[0] / i[1] say (plugin.h)."""
    if variant == "cache":
        key = tuple(id(x) for x in ins)
        if key not in CACHE:  # the arrays are kept with the result: an id is never reused
            CACHE[key] = (list(ins), gemm(i, f, ins, "kloop"))
        return CACHE[key][1]
    trans_a, trans_b, m, n, k, batch = (int(v) for v in i[:6])
    alpha, beta = np.float32(f[0]), np.float32(f[1])
    a = ins[0].reshape(batch, k, m) if trans_a else ins[0].reshape(batch, m, k)
    b = ins[1].reshape(batch, n, k) if trans_b else ins[1].reshape(batch, k, n)
    if variant == "bf16":
        a, b = bf16(a), bf16(b)
    d = np.empty((batch, m, n), dtype=np.float32)
    last = k - 1 if variant == "dropk" else k
    for s in range(batch):
        oa = a[s].T if trans_a else a[s]
        ob = b[s].T if trans_b else b[s]
        acc = np.zeros((m, n), dtype=np.float32)
        for p in range(last):
            acc += oa[:, p:p + 1] * ob[p:p + 1, :]
        d[s] = alpha * acc
        if beta != 0:
            d[s] += beta * ins[2].reshape(batch, m, n)[s]
    return [d.reshape(ins[2].shape if beta != 0 else (batch, m, n) if batch > 1 else (m, n))]


def softmax(i, f, ins, variant):
    x = ins[0].reshape(int(i[0]), int(i[1]))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return [(e / e.sum(axis=1, keepdims=True)).astype(np.float32)]


def layernorm(i, f, ins, variant):
    x, gamma, beta = ins[0].reshape(int(i[0]), int(i[1])), ins[1], ins[2]
    mean = x.mean(axis=1, dtype=np.float32)
    var = ((x - mean[:, None]) ** 2).mean(axis=1, dtype=np.float32)
    rstd = (1 / np.sqrt(var + np.float32(f[0]))).astype(np.float32)
    y = (x - mean[:, None]) * rstd[:, None] * gamma + beta
    return [y.astype(np.float32), mean, rstd]


KERNELS = {"gemm": gemm, "softmax": softmax, "layernorm": layernorm}


def main(calls_path, outs_path, variant="kloop"):
    buffers = {}  # buffer id -> the array the in-order calls share
    with h5py.File(calls_path, "r") as calls, h5py.File(outs_path, "w") as outs:
        if calls.attrs["peat"] != b"calls" or int(calls.attrs["version"][0]) != 1:
            sys.exit("%s is not a calls.h5 of version 1" % calls_path)
        outs.attrs["peat"] = np.bytes_("outs")
        outs.attrs["version"] = np.int32(1)
        outs.attrs["kernel"] = np.bytes_("numpy_" + variant)
        for name in sorted(calls["calls"]):
            call, out = calls["calls"][name], outs.create_group("calls/" + name)
            op = call.attrs["op"].decode()
            ins = [call["in%d" % k][()] for k in range(len(call.attrs["in_buffer"]))
                   if "in%d" % k in call]
            if call.attrs["in_order"][0]:
                for k, bid in enumerate(call.attrs["in_buffer"]):
                    held = buffers.get(int(bid))
                    if held is None or held.shape != ins[k].shape:
                        buffers[int(bid)] = held = ins[k].copy()
                    held[...] = ins[k]  # the same array, this call's contents
                    ins[k] = held
            try:
                results = KERNELS[op](call.attrs["i"], call.attrs["f"], ins, variant)
            except Exception as e:  # the kernel failed on this call: PEAT counts a failure
                out.attrs["error"] = np.bytes_("%s: %s" % (type(e).__name__, e))
                continue
            for k, r in enumerate(results):
                out.create_dataset("out%d" % k, data=np.asarray(r, dtype=np.float32).reshape(
                    call["out%d" % k].shape))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(*sys.argv[1:])
