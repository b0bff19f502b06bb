"""optim.py: the default optimizers, reconstructed per parameter. torch's AdamW and SGD run as
a loop of elementwise aten ops per parameter (single-tensor, CPU's default) or as foreach ops
(CUDA's default): no aten call is the update. Around `optimizer.step()` (the global step hooks)
each parameter's update is recovered as PEAT's own call: its parameter, gradient and state
before the step, its parameter and state after, the group's hyperparameters. The fused
optimizers (`fused=True`) are one aten call each and are mapped as such (mapping.py)."""
import torch

from .mapping import Mapped, Unmapped, _c, _scalar


def _kind(opt):
    """'adamw', 'sgd', or None (an optimizer PEAT has no op for)."""
    if isinstance(opt, torch.optim.AdamW):
        return "adamw"
    if isinstance(opt, torch.optim.Adam):
        return "adam"
    if isinstance(opt, torch.optim.SGD):
        return "sgd"
    return None


def step_name(opt):
    return "%s.step" % type(opt).__name__


def group_why(opt, group):
    """Why the group's steps are not PEAT's adamw or sgd (None when they are)."""
    kind = _kind(opt)
    if kind is None:
        return "no PEAT op for %s" % type(opt).__name__
    if group.get("fused"):
        return None  # its aten call is mapped (_fused_adamw_, _fused_sgd_)
    if group.get("maximize") or group.get("differentiable"):
        return "maximize or differentiable"
    if kind in ("adamw", "adam"):
        if group.get("amsgrad"):
            return "amsgrad (PEAT's adamw has no max of second moments)"
        if kind == "adam" and group.get("weight_decay", 0) != 0 and \
                not group.get("decoupled_weight_decay", False):
            return "Adam's weight decay is L2 in the gradient (PEAT's adamw decouples it)"
        return None
    if group.get("dampening", 0) != 0:
        return "SGD with dampening"
    if group.get("momentum", 0) == 0:
        return "SGD without momentum (PEAT's sgd keeps a momentum buffer)"
    return None


def reconstructable(opt):
    """The groups to reconstruct ([(group, None)]), or the reason for each group that is not."""
    return [(g, group_why(opt, g)) for g in opt.param_groups if not g.get("fused")]


def snapshot(opt, group, p):
    """What the update of p reads: (param, grad, state tensors) before the step."""
    st = opt.state.get(p, {})
    kind = _kind(opt)
    if kind == "sgd":
        buf = st.get("momentum_buffer")
        mom = torch.zeros_like(p) if buf is None else buf.detach().clone()
        return (p.detach().clone(), p.grad.detach().clone(), mom)
    m, v = st.get("exp_avg"), st.get("exp_avg_sq")
    return (p.detach().clone(), p.grad.detach().clone(),
            torch.zeros_like(p) if m is None else m.detach().clone(),
            torch.zeros_like(p) if v is None else v.detach().clone())


def mapped(opt, group, p, pre):
    """PEAT's call of p's update, from its snapshot and its state after the step."""
    st = opt.state[p]
    if _kind(opt) == "sgd":
        f = [_scalar(group["lr"]), group["momentum"], group.get("weight_decay", 0.0)]
        mp = Mapped("sgd", [p.numel(), 1 if group.get("nesterov") else 0], f,
                    [_c(pre[0]), _c(pre[1]), _c(pre[2])], [_c(p), _c(st["momentum_buffer"])])
    else:
        b1, b2 = group["betas"]
        t = int(_scalar(st["step"]))
        if t < 1:
            raise Unmapped("step count %d" % t)
        f = [_scalar(group["lr"]), _scalar(b1), _scalar(b2), group["eps"],
             group.get("weight_decay", 0.0)]
        mp = Mapped("adamw", [p.numel(), t], f, [_c(x) for x in pre],
                    [_c(p), _c(st["exp_avg"]), _c(st["exp_avg_sq"])])
    if any(x.dtype != torch.float32 for x in mp.ins):
        raise Unmapped("%s parameters (PEAT's optimizer ops are fp32)" % pre[0].dtype)
    mp.param = p
    return mp
