"""capture_example.py: trains the example CNN and GPT a few steps on synthetic data under
peat_torch.capture; writes OUT/cnn.h5 and OUT/gpt.h5 (docs/pytorch.md).
usage: python examples/torch/capture_example.py OUT [steps]"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peat_torch  # noqa: E402
from models import TinyGPT, TinyResNet, train_cnn, train_gpt  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "peat-torch-out"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    for name, model, train in (("cnn", TinyResNet(), train_cnn), ("gpt", TinyGPT(), train_gpt)):
        path = os.path.join(out, name + ".h5")
        with peat_torch.capture(path, calls=160, iters=steps, model=model,
                                overwrite=True) as cap:
            train(model, steps, g, step_hook=lambda it, loss: cap.log(loss))


if __name__ == "__main__":
    main()
