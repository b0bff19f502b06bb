"""swap_example.py: a PEAT kernel and a PEAT error model inside the example CNN's own PyTorch
training, judged against the golden band by the runtime stage's rules, with the shadow check of
the kernel's calls (docs/pytorch.md); and, when the defect zoo is built ($PEAT_ZOO, else
build/tests/zoo/libpeat_zoo.so), a GEMM that drops the last K term.
usage: python examples/torch/swap_example.py [steps]"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peat_torch  # noqa: E402
from models import TinyResNet, train_cnn  # noqa: E402


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12

    def train(rec):
        torch.manual_seed(0)                      # every run starts from the same weights
        g = torch.Generator().manual_seed(1)      # and sees the same batches
        model = TinyResNet()
        train_cnn(model, steps, g, step_hook=lambda it, loss: rec.step(model, loss))

    runs = [{"kernel": "gemm_new", "freq": "1/10"}, {"model": "bitflip(bit=30)", "freq": "1/10"}]
    zoo = os.environ.get("PEAT_ZOO", os.path.join("build", "tests", "zoo", "libpeat_zoo.so"))
    if os.path.exists(zoo):
        runs.append({"kernel": "zoo_gemm_k_off_by_one", "plugin": zoo, "freq": "1/10"})
    for kw in runs:
        r = peat_torch.band(train, op="gemm", **kw)
        print(r)


if __name__ == "__main__":
    main()
