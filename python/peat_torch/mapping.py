"""mapping.py: the op-mapping table: one aten call (arguments and torch's outputs) -> the PEAT op
calls it is (op kind, params in PEAT's slots, inputs and golden outputs in PEAT's layout), or the
reason it is not one. include/peat/plugin.h documents each op's slots; docs/pytorch.md the table."""
import math

import torch

from . import _lib

DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
          torch.int32: "i32", torch.int64: "i32"}


class Mapped:
    """One PEAT call: op name, params i and f, inputs and golden outputs (contiguous tensors)."""

    def __init__(self, op, i, f, ins, outs, dst=None):
        self.op, self.i, self.f, self.ins, self.outs = op, list(i), list(f), ins, outs
        # torch's own tensors the outputs are (for an op with several outputs or updated in
        # place: where swap writes PEAT's results), in the order of outs
        self.dst = dst

    @property
    def dtype(self):
        return DTYPES.get(self.ins[0].dtype, str(self.ins[0].dtype))

    def key(self):
        return (self.op, tuple(tuple(t.shape) for t in self.ins), self.dtype)


class Unmapped(Exception):
    """An aten call of a listed kind that PEAT's op cannot express (the reason is the message)."""


class UnmappedThisCall(Unmapped):
    """This call cannot be mapped, later calls of the same kind may be (SGD's first step)."""


def _c(t):
    if t.dtype == torch.int64:
        if t.numel() and (t.max() >= 2**31 or t.min() < -2**31):
            raise Unmapped("indices beyond int32")
        t = t.to(torch.int32)
    if t.dtype not in DTYPES:
        raise Unmapped("dtype %s" % t.dtype)
    return t.detach().contiguous()


def _operand(x):
    """A GEMM operand as PEAT stores it: (buffer, trans) with trans = 1 when x is the transpose
    of a contiguous matrix (per batch): then the buffer is that matrix, as the caller holds it."""
    if x.is_contiguous():
        return _c(x), 0
    if x.transpose(-1, -2).is_contiguous():
        return _c(x.transpose(-1, -2)), 1
    return _c(x), 0


def _gemm(A, B, C, alpha, beta, out, batched):
    if not batched and (A.dim() != 2 or B.dim() != 2):
        raise Unmapped("mm of %d-D x %d-D" % (A.dim(), B.dim()))
    if batched and (A.dim() != 3 or B.dim() != 3):
        raise Unmapped("bmm of %d-D x %d-D" % (A.dim(), B.dim()))
    batch = A.shape[0] if batched else 1
    M, K = A.shape[-2], A.shape[-1]
    N = B.shape[-1]
    a, ta = _operand(A)
    b, tb = _operand(B)
    ins = [a, b]
    if beta != 0:
        shape = (batch, M, N) if batched else (M, N)
        ins.append(_c(C.expand(shape)))
    return [Mapped("gemm", [ta, tb, M, N, K, batch], [alpha, beta], ins, [_c(out)])]


def _scalar(x):
    return float(x.item()) if isinstance(x, torch.Tensor) else float(x)


def map_mm(args, kw, out, st):
    return _gemm(args[0], args[1], None, 1.0, 0.0, out, False)


def map_addmm(args, kw, out, st):
    beta, alpha = _scalar(kw.get("beta", 1)), _scalar(kw.get("alpha", 1))
    return _gemm(args[1], args[2], args[0], alpha, beta, out, False)


def map_bmm(args, kw, out, st):
    return _gemm(args[0], args[1], None, 1.0, 0.0, out, True)


def map_baddbmm(args, kw, out, st):
    beta, alpha = _scalar(kw.get("beta", 1)), _scalar(kw.get("alpha", 1))
    return _gemm(args[1], args[2], args[0], alpha, beta, out, True)


# torch's fp8 dtypes and PEAT's format numbers (PEAT_FP8_E4M3, PEAT_FP8_E5M2)
_FP8 = {getattr(torch, n): k for n, k in (("float8_e4m3fn", 0), ("float8_e5m2", 1))
        if hasattr(torch, n)}


def map_scaled_mm(args, kw, out, st):
    """torch._scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum):
    PEAT's gemm_fp8 with per-tensor scales; the fp8 values as f32 (exact)."""
    a, b, sa, sb = args[:4]
    extra = dict(zip(("bias", "scale_result", "out_dtype", "use_fast_accum"), args[4:]))
    extra.update(kw)
    if extra.get("bias") is not None or extra.get("scale_result") is not None:
        raise Unmapped("_scaled_mm with a bias or an output scale")
    if a.dtype not in _FP8 or b.dtype not in _FP8:
        raise Unmapped("_scaled_mm of %s x %s (float8_e4m3fn and float8_e5m2 only)"
                       % (a.dtype, b.dtype))
    if out.dtype != torch.float32:
        raise Unmapped("_scaled_mm into %s: PEAT's fp8 GEMM writes fp32" % out.dtype)
    if sa.numel() != 1 or sb.numel() != 1:
        raise Unmapped("_scaled_mm with row-wise or block scales (per-tensor only)")
    if a.dim() != 2 or b.dim() != 2:
        raise Unmapped("_scaled_mm of %d-D x %d-D" % (a.dim(), b.dim()))
    (M, K), N = a.shape, b.shape[1]
    A, ta = _operand(a.float())  # fp8 -> f32 is exact; the strides are kept
    B, tb = _operand(b.float())
    return [Mapped("gemm_fp8", [ta, tb, M, N, K, 1, _FP8[a.dtype], _FP8[b.dtype]],
                   [_scalar(sa), 0.0, _scalar(sb)], [A, B], [_c(out)])]


def _reduced_dims(args, kw):
    """The dims a sum or mean reduces (all when none are given), sorted and non-negative."""
    x = args[0]
    dims = args[1] if len(args) > 1 else kw.get("dim")
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.dim()))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % max(1, x.dim()) for d in dims)


def _reduction(args, kw, out, mean):
    """sum or mean over the trailing dims of a contiguous tensor: PEAT's reduce (R rows of C);
    a sum over its leading dims: bias_add_bwd (a bias gradient, R x C summed over R)."""
    x = args[0]
    if x.dtype != torch.float32 or out.dtype != torch.float32:
        raise Unmapped("%s of %s into %s (f32 only)" % ("mean" if mean else "sum", x.dtype,
                                                          out.dtype))
    dims, n = _reduced_dims(args, kw), x.dim()
    if n == 0 or not x.is_contiguous():
        raise Unmapped("reduction of a 0-D or non-contiguous tensor")
    size = lambda ds: int(math.prod(x.shape[d] for d in ds))
    if dims == list(range(n - len(dims), n)):
        R, C = size(range(n - len(dims))), size(dims)
        return [Mapped("reduce", [R, C, 1 if mean else 0], [], [_c(x).reshape(R, C)],
                       [_c(out).reshape(R)])]
    if not mean and dims == list(range(len(dims))):
        R, C = size(dims), size(range(len(dims), n))
        return [Mapped("bias_add_bwd", [R, C, 1], [], [_c(x).reshape(R, C, 1)],
                       [_c(out).reshape(C)])]
    raise Unmapped("%s over dims %s of a %d-D tensor (neither trailing nor, for a sum, "
                   "leading)" % ("mean" if mean else "sum", dims, n))


def map_sum(args, kw, out, st):
    return _reduction(args, kw, out, False)


def map_mean(args, kw, out, st):
    return _reduction(args, kw, out, True)


def _conv_params(x, w, stride, padding, dilation, transposed, groups):
    if x.dim() != 4 or transposed or groups != 1 or any(d != 1 for d in dilation):
        raise Unmapped("conv: only 2-D, groups 1, dilation 1, not transposed")
    if len(set(stride)) != 1 or len(set(padding)) != 1:
        raise Unmapped("conv: stride %s / padding %s differ per axis" % (stride, padding))
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    return [N, C, H, W, O, KH, KW, stride[0], padding[0]]


def map_convolution(args, kw, out, st):
    x, w, bias, stride, padding, dilation, transposed, _, groups = args[:9]
    p = _conv_params(x, w, stride, padding, dilation, transposed, groups)
    if bias is not None:
        # PEAT's conv2d has no bias: the golden is torch's own convolution without it
        out = torch.ops.aten.convolution.default(x, w, None, stride, padding, dilation,
                                                 transposed, args[7], groups)
    return [Mapped("conv2d", p, [], [_c(x), _c(w)], [_c(out)])]


def map_convolution_backward(args, kw, out, st):
    dy, x, w, _, stride, padding, dilation, transposed, _, groups, mask = args[:11]
    p = _conv_params(x, w, stride, padding, dilation, transposed, groups)
    res = []
    if mask[0]:
        res.append(Mapped("conv2d_bwd_data", p, [], [_c(dy), _c(w)], [_c(out[0])],
                          dst=[out[0]]))
    if mask[1]:
        res.append(Mapped("conv2d_bwd_filter", p, [], [_c(x), _c(dy)], [_c(out[1])],
                          dst=[out[1]]))
    return res


def map_relu(args, kw, out, st):
    return [Mapped("relu", [args[0].numel()], [], [_c(args[0])], [_c(out)])]


def map_threshold_backward(args, kw, out, st):
    if _scalar(args[2]) != 0:
        raise Unmapped("threshold_backward with threshold %g" % _scalar(args[2]))
    return [Mapped("relu_bwd", [out.numel()], [], [_c(args[1]), _c(args[0])], [_c(out)])]


def _approx(args, kw, k):
    a = kw.get("approximate", args[k] if len(args) > k else "none")
    if a != "none":
        raise Unmapped("gelu(approximate='%s'): PEAT's gelu is the exact erf form" % a)


def map_gelu(args, kw, out, st):
    _approx(args, kw, 1)
    return [Mapped("gelu", [out.numel()], [], [_c(args[0])], [_c(out)])]


def map_gelu_backward(args, kw, out, st):
    _approx(args, kw, 2)
    return [Mapped("gelu_bwd", [out.numel()], [], [_c(args[1]), _c(args[0])], [_c(out)])]


def map_silu(args, kw, out, st):
    return [Mapped("silu", [args[0].numel()], [], [_c(args[0])], [_c(out)])]


def map_silu_backward(args, kw, out, st):
    # silu_backward(grad_output, self)
    return [Mapped("silu_bwd", [out.numel()], [], [_c(args[1]), _c(args[0])], [_c(out)])]


def map_native_batch_norm(args, kw, out, st, pre):
    # native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    # the running statistics are updated in place (pre: their values before the call)
    x, w, b, rm, rv, training, momentum, eps = args[:8]
    if not training or rm is None or rv is None:
        raise Unmapped("batch_norm in eval mode or without running statistics: PEAT's batchnorm "
                       "is training mode with them")
    N, C = x.shape[0], x.shape[1]
    S = x.numel() // (N * C)
    w = w if w is not None else torch.ones(C, dtype=x.dtype)
    b = b if b is not None else torch.zeros(C, dtype=x.dtype)
    return [Mapped("batchnorm", [N, C, S], [eps, momentum],
                   [_c(x).reshape(N, C, S), _c(w), _c(b), _c(pre[0]), _c(pre[1])],
                   [_c(out[0]).reshape(N, C, S), _c(out[1]), _c(out[2]), _c(rm), _c(rv)],
                   dst=[out[0], out[1], out[2], rm, rv])]


def map_native_batch_norm_backward(args, kw, out, st):
    # (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
    #  output_mask)
    dy, x, w, rm, rv, mean, invstd, train, eps, mask = args[:10]
    if not train or w is None or not all(mask):
        raise Unmapped("batch_norm backward in eval mode, without weight or with an output masked")
    N, C = x.shape[0], x.shape[1]
    S = x.numel() // (N * C)
    return [Mapped("batchnorm_bwd", [N, C, S], [eps, 0.1],
                   [_c(x).reshape(N, C, S), _c(w), _c(mean), _c(invstd), _c(dy).reshape(N, C, S)],
                   [_c(out[0]).reshape(N, C, S), _c(out[1]), _c(out[2])], dst=list(out[:3]))]


def _pool(x, k, stride, pad, dilation=(1, 1), ceil_mode=False):
    k, pad = list(k) * (2 // len(k)), list(pad) * (2 // len(pad))
    stride = list(stride) * (2 // len(stride)) if len(stride) else k
    if k[0] != k[1] or stride[0] != stride[1] or pad[0] != pad[1]:
        raise Unmapped("pooling with a non-square window, stride or padding")
    if list(dilation) not in ([1], [1, 1]) or ceil_mode:
        raise Unmapped("pooling with dilation or ceil_mode")
    N = x.shape[0] if x.dim() == 4 else 1
    C, H, W = x.shape[-3], x.shape[-2], x.shape[-1]
    return [N, C, H, W, k[0], stride[0], pad[0]]


def map_max_pool2d(args, kw, out, st):
    x = args[0]
    i = _pool(x, args[1], args[2] if len(args) > 2 else [], args[3] if len(args) > 3 else [0],
              args[4] if len(args) > 4 else [1], args[5] if len(args) > 5 else False)
    return [Mapped("maxpool2d", i, [], [_c(x)], [_c(out[0])], dst=[out[0]])]


def map_max_pool2d_backward(args, kw, out, st):
    dy, x = args[0], args[1]
    i = _pool(x, args[2], args[3], args[4], args[5], args[6])
    return [Mapped("maxpool2d_bwd", i, [], [_c(x), _c(dy)], [_c(out)])]


def _avg_args(args, first):
    ceil_mode = args[first + 3] if len(args) > first + 3 else False
    include = args[first + 4] if len(args) > first + 4 else True
    divisor = args[first + 5] if len(args) > first + 5 else None
    if not include or divisor is not None:
        raise Unmapped("avg_pool2d without count_include_pad or with a divisor_override")
    return ceil_mode


def map_avg_pool2d(args, kw, out, st):
    x = args[0]
    ceil_mode = _avg_args(args, 1)
    i = _pool(x, args[1], args[2] if len(args) > 2 else [], args[3] if len(args) > 3 else [0],
              [1], ceil_mode)
    return [Mapped("avgpool2d", i, [], [_c(x)], [_c(out)])]


def map_avg_pool2d_backward(args, kw, out, st):
    dy, x = args[0], args[1]
    ceil_mode = _avg_args(args, 2)
    i = _pool(x, args[2], args[3], args[4], [1], ceil_mode)
    return [Mapped("avgpool2d_bwd", i, [], [_c(dy)], [_c(out)])]


def _rows(x, dim):
    if dim % x.dim() != x.dim() - 1:
        raise Unmapped("softmax over dim %d, not the last" % dim)
    C = x.shape[-1]
    return x.numel() // C, C


def map_softmax(args, kw, out, st):
    R, C = _rows(args[0], args[1])
    return [Mapped("softmax", [R, C], [], [_c(args[0]).reshape(R, C)], [_c(out).reshape(R, C)])]


def map_safe_softmax(args, kw, out, st):
    # torch's masked softmax (nn.MultiheadAttention, TransformerEncoderLayer): softmax, except
    # that a row of -inf gives zeros where softmax gives NaN
    x = args[0]
    dtype = kw.get("dtype", args[2] if len(args) > 2 else None)
    if dtype is not None and dtype != x.dtype:
        raise Unmapped("_safe_softmax into %s: PEAT's softmax keeps its input's dtype" % dtype)
    R, C = _rows(x, args[1])
    if torch.isneginf(x.reshape(R, C)).all(dim=1).any():
        raise UnmappedThisCall("_safe_softmax with a fully masked row (zeros there, where PEAT's "
                               "softmax is NaN)")
    return [Mapped("softmax", [R, C], [], [_c(x).reshape(R, C)], [_c(out).reshape(R, C)])]


def map_softmax_backward(args, kw, out, st):
    R, C = _rows(args[1], args[2])
    return [Mapped("softmax_bwd", [R, C], [], [_c(args[1]).reshape(R, C),
                                                _c(args[0]).reshape(R, C)],
                   [_c(out).reshape(R, C)])]


def map_log_softmax(args, kw, out, st):
    # PEAT has no log_softmax op: kept for the cross entropy it starts (nll_loss_forward next)
    _rows(args[0], args[1])
    st.logsm[out.data_ptr()] = (args[0], out)
    return None


def map_nll_loss_forward(args, kw, out, st):
    logsm, target, weight, reduction, ignore = args[:5]
    src = st.logsm.get(logsm.data_ptr())
    if src is None or src[1] is not logsm and not torch.equal(src[1], logsm):
        raise Unmapped("nll_loss not on a log_softmax's output")
    if weight is not None or logsm.dim() != 2 or bool((target == ignore).any()):
        raise Unmapped("nll_loss with class weights or ignored targets")
    R, C = logsm.shape
    st.logsm_used += 1
    loss = -logsm.gather(1, target.reshape(R, 1)).reshape(R)
    return [Mapped("cross_entropy", [R, C], [], [_c(src[0]), _c(target)], [_c(loss)])]


def map_nll_loss_backward(args, kw, out, st):
    g, logsm, target, weight, reduction = args[:5]
    st.nll_bwd[out.data_ptr()] = (g, target, reduction, out)
    return None


def map_log_softmax_backward(args, kw, out, st):
    grad, logsm, dim = args[:3]
    nb = st.nll_bwd.get(grad.data_ptr())
    src = st.logsm.get(logsm.data_ptr())
    if nb is None or src is None or logsm.dim() != 2:
        raise Unmapped("log_softmax backward not of a cross entropy")
    g, target, reduction, _ = nb
    R, C = logsm.shape
    scale = 1.0 / R if reduction == 1 else 1.0
    if reduction not in (1, 2) and reduction != 0:
        raise Unmapped("nll_loss reduction %s" % reduction)
    if reduction == 0:
        dloss = g.reshape(R).float()
    else:
        dloss = torch.full((R,), float(g.item()) * scale, dtype=torch.float32)
    return [Mapped("cross_entropy_bwd", [R, C], [], [_c(src[0]), _c(target), _c(dloss)],
                   [_c(out)])]


def map_layer_norm(args, kw, out, st):
    x, shape, w, b, eps = args[:5]
    C = math.prod(shape)
    R = x.numel() // C
    w = w if w is not None else torch.ones(C, dtype=x.dtype)
    b = b if b is not None else torch.zeros(C, dtype=x.dtype)
    st.ln_eps[out[1].data_ptr()] = (eps, out[1])
    return [Mapped("layernorm", [R, C], [eps], [_c(x).reshape(R, C), _c(w).reshape(C),
                                               _c(b).reshape(C)],
                   [_c(out[0]).reshape(R, C), _c(out[1]).reshape(R), _c(out[2]).reshape(R)],
                   dst=list(out[:3]))]


def map_layer_norm_backward(args, kw, out, st):
    dy, x, shape, mean, rstd, w, b, mask = args[:8]
    if w is None or not all(mask):
        raise Unmapped("layer_norm backward without weight or with an output masked")
    C = math.prod(shape)
    R = x.numel() // C
    eps = st.ln_eps.get(mean.data_ptr(), (1e-5, None))[0]
    ins = [_c(x).reshape(R, C), _c(w).reshape(C), _c(mean).reshape(R), _c(rstd).reshape(R),
           _c(dy).reshape(R, C)]
    return [Mapped("layernorm_bwd", [R, C], [eps], ins,
                   [_c(out[0]).reshape(R, C), _c(out[1]).reshape(C), _c(out[2]).reshape(C)],
                   dst=list(out[:3]))]


def map_embedding(args, kw, out, st):
    table, idx = args[0], args[1]
    V, D = table.shape
    N = idx.numel()
    return [Mapped("embedding", [N, V, D], [], [_c(table), _c(idx).reshape(N)],
                   [_c(out).reshape(N, D)])]


def map_embedding_backward(args, kw, out, st):
    dy, idx, V, padding_idx, by_freq = args[:5]
    if padding_idx != -1 or by_freq:
        raise Unmapped("embedding backward with padding_idx or scale_grad_by_freq")
    N, D = idx.numel(), out.shape[1]
    return [Mapped("embedding_bwd", [N, V, D], [], [_c(idx).reshape(N), _c(dy).reshape(N, D)],
                   [_c(out)])]


def _attn(q, k, v, dropout, causal, kw):
    if kw.get("attn_mask") is not None or dropout != 0:
        raise Unmapped("attention with a mask or dropout")
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise Unmapped("attention of shapes %s %s %s" % (tuple(q.shape), tuple(k.shape),
                                                          tuple(v.shape)))
    B, H, T, D = q.shape
    scale = kw.get("scale")
    return [B, H, T, D, int(bool(causal))], [scale if scale is not None else 1 / math.sqrt(D)]


def map_attention(args, kw, out, st):
    q, k, v = args[:3]
    dropout = args[3] if len(args) > 3 else kw.get("dropout_p", 0.0)
    causal = args[4] if len(args) > 4 else kw.get("is_causal", False)
    i, f = _attn(q, k, v, dropout, causal, kw)
    return [Mapped("attention", i, f, [_c(q), _c(k), _c(v)], [_c(out[0]), _c(out[1])],
                   dst=[out[0], out[1]])]


def map_attention_backward(args, kw, out, st):
    do, q, k, v, o, lse, dropout, causal = args[:8]
    i, f = _attn(q, k, v, dropout, causal, kw)
    return [Mapped("attention_bwd", i, f, [_c(q), _c(k), _c(v), _c(o), _c(lse), _c(do)],
                   [_c(out[0]), _c(out[1]), _c(out[2])], dst=list(out[:3]))]


def map_fused_adamw(args, kw, out, st, pre):
    if kw.get("amsgrad") or kw.get("maximize") or kw.get("grad_scale") is not None:
        raise Unmapped("fused adamw with amsgrad, maximize or a grad scaler")
    params, grads, m, v, _, steps = args[:6]
    f = [_scalar(kw["lr"]), kw["beta1"], kw["beta2"], kw["eps"], kw["weight_decay"]]
    res = []
    for k, p in enumerate(params):
        t = int(_scalar(steps[k]))
        pb, mb, vb = pre[0][k], pre[1][k], pre[2][k]
        mp = Mapped("adamw", [p.numel(), t], f, [_c(pb), _c(grads[k]), _c(mb), _c(vb)],
                    [_c(p), _c(m[k]), _c(v[k])], dst=[p, m[k], v[k]])
        mp.param = p
        res.append(mp)
    return res


def map_fused_sgd(args, kw, out, st, pre):
    if kw.get("nesterov") or kw.get("maximize") or kw.get("dampening", 0) != 0 or \
            kw.get("momentum", 0) == 0:
        raise Unmapped("fused sgd: only momentum > 0 without dampening or nesterov")
    if kw.get("is_first_step"):
        raise UnmappedThisCall("fused sgd's first step (the momentum buffer starts as the "
                               "gradient, not PEAT's sgd)")
    params, grads, mom = args[:3]
    f = [_scalar(kw["lr"]), kw["momentum"], kw["weight_decay"]]
    res = []
    for k, p in enumerate(params):
        mp = Mapped("sgd", [p.numel()], f, [_c(pre[0][k]), _c(grads[k]), _c(pre[2][k])],
                    [_c(p), _c(mom[k])], dst=[p, mom[k]])
        mp.param = p
        res.append(mp)
    return res


TABLE = {
    "mm": map_mm, "addmm": map_addmm, "bmm": map_bmm, "baddbmm": map_baddbmm,
    "_scaled_mm": map_scaled_mm, "sum": map_sum, "mean": map_mean,
    "convolution": map_convolution, "convolution_backward": map_convolution_backward,
    "relu": map_relu, "threshold_backward": map_threshold_backward,
    "gelu": map_gelu, "gelu_backward": map_gelu_backward,
    "_softmax": map_softmax, "_safe_softmax": map_safe_softmax,
    "_softmax_backward_data": map_softmax_backward, "relu_": map_relu,
    "silu": map_silu, "silu_": map_silu, "silu_backward": map_silu_backward,
    "native_batch_norm_backward": map_native_batch_norm_backward,
    "max_pool2d_with_indices": map_max_pool2d,
    "max_pool2d_with_indices_backward": map_max_pool2d_backward,
    "avg_pool2d": map_avg_pool2d, "avg_pool2d_backward": map_avg_pool2d_backward,
    "_log_softmax": map_log_softmax, "nll_loss_forward": map_nll_loss_forward,
    "nll_loss_backward": map_nll_loss_backward,
    "_log_softmax_backward_data": map_log_softmax_backward,
    "native_layer_norm": map_layer_norm, "native_layer_norm_backward": map_layer_norm_backward,
    "embedding": map_embedding, "embedding_dense_backward": map_embedding_backward,
    "_scaled_dot_product_flash_attention_for_cpu": map_attention,
    "_scaled_dot_product_flash_attention_for_cpu_backward": map_attention_backward,
}
# in-place optimizer steps: their inputs are copied before the call (pre)
INPLACE = {"_fused_adamw_": map_fused_adamw, "_fused_sgd_": map_fused_sgd}
# ops that update some of their inputs in place as a side effect (batch norm's running
# statistics): mapped from copies taken before the call (pre), one call each
SIDE_EFFECT = {"native_batch_norm": map_native_batch_norm}
# in-place elementwise ops: capture copies the input before the call and maps the call as the
# out-of-place op on that copy
INPLACE_ELEMENTWISE = {"relu_", "silu_"}
# the PEAT ops each aten op maps to (for choosing what to capture or swap): the op descriptors'
# aten names (core/ops/<op>.c); every aten op translated here must be one of them
PEAT_OPS = _lib.aten_map()
_untranslated = sorted(set(PEAT_OPS) - set(TABLE) - set(INPLACE) - set(SIDE_EFFECT))
_undeclared = sorted((set(TABLE) | set(INPLACE) | set(SIDE_EFFECT)) - set(PEAT_OPS))
if _untranslated or _undeclared:
    raise _lib.PeatError("peat_torch and libpeat.so disagree on the aten ops: no translation for "
                         "%s, no op descriptor for %s (rebuild one or the other)"
                         % (_untranslated or "none", _undeclared or "none"))


class State:
    """What the stateful mappings remember within one iteration (cross entropy's pair of ops,
    layer norm's eps for its backward)."""

    def __init__(self):
        self.clear()
        self.logsm_used = 0

    def clear(self):
        self.logsm, self.nll_bwd, self.ln_eps = {}, {}, {}


def pre_inplace(name, args):
    """Copies of the state an in-place optimizer step overwrites (params, and m/v or momentum)."""
    if name == "_fused_adamw_":
        return [[t.detach().clone() for t in args[k]] for k in (0, 2, 3)]
    if name == "native_batch_norm":
        return [None if args[k] is None else args[k].detach().clone() for k in (3, 4)]
    if name == "_fused_sgd_":
        return [[t.detach().clone() for t in args[0]], None,
                [t.detach().clone() for t in args[2]]]
    return None


def map_call(name, args, kwargs, out, state, pre=None):
    """The PEAT calls of one aten call (name: the overload packet's name): a list of Mapped,
    None when the op is consumed by a later one (log_softmax, nll_loss backward), or raises
    Unmapped with the reason; KeyError-free: unknown names raise Unmapped too."""
    kwargs = kwargs or {}
    if name in INPLACE:
        return INPLACE[name](args, kwargs, out, state, pre)
    if name in SIDE_EFFECT:
        return SIDE_EFFECT[name](args, kwargs, out, state, pre)
    fn = TABLE.get(name)
    if fn is None:
        raise Unmapped("no PEAT op")
    return fn(args, kwargs, out, state)
