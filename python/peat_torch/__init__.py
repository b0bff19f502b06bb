"""peat_torch: PEAT's PyTorch bridge (docs/pytorch.md).

capture(path, ops, calls, iters, model)  records real op calls of your training into a PEAT
                                         campaign file; replay it with
                                         `peat run --kernel K --capture path`
swap(model_or_ops, kernel=..., model=..., freq=...)
                                         routes chosen aten ops to a PEAT kernel or error model
band(train, kernel=..., freq=...)        golden reruns and the runtime verdict of your own loop
check(fn, op=..., flow=... | capture=...) judges a Python callable as a candidate kernel with
                                         `peat run` itself (swap and band take fn= too)
"""
from ._lib import NoCallsSwapped, PeatError, lib
from .capture import capture
from .check import check
from .swap import band, swap

__all__ = ["capture", "swap", "band", "check", "PeatError", "NoCallsSwapped", "lib"]
