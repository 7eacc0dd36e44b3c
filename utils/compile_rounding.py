"""How far torch.compile moves a spiking model's float32 training call
from the eager one: SpikingJelly's Spikformer-Ti (32x32, T = 2, B = 2)
with its own torch LIF neurons, and the same model converted to FlexSN's
(the kernels for every call under torch.compile), each run eagerly and
compiled (torch.compile's defaults) from one seed on one batch. Prints,
per model, the relative difference in norm (whole tensors) of the
output, the input's gradient and the worst parameter gradient, and how
many spikes of the first neuron differ.

    PYTHONPATH=python:<spikingjelly> python3 utils/compile_rounding.py

Needs CUDA, torch >= 2.4 and SpikingJelly. A run on an H200 is in
docs/perf/fusion/h200_2026-12-04.md: the size of the difference the
fusion harness's compiled Spikformer case has to allow.
"""

import copy
import sys

import torch


def relative(got, want):
    got, want = got.detach().double(), want.detach().double()
    scale = torch.linalg.vector_norm(want).item()
    return torch.linalg.vector_norm(got - want).item() / (scale or 1.0)


def one_call(model, run, x, weights):
    from spikingjelly.activation_based import functional

    functional.reset_net(model)
    for p in model.parameters():
        p.grad = None
    first = next(
        m for m in model.modules() if hasattr(m, "v") or hasattr(m, "states")
    )
    spikes = {}

    def keep(module, args, y):  # returns None: the output stays y
        spikes.setdefault("s", y.detach().clone())

    hook = first.register_forward_hook(keep)
    x = x.clone().requires_grad_(True)
    y = run(x)
    hook.remove()
    (y * weights).sum().backward()
    grads = {
        n: p.grad.clone()
        for n, p in model.named_parameters()
        if p.grad is not None
    }
    return y.detach(), x.grad.clone(), grads, spikes["s"]


def compare(name, model, policy=None):
    from flexsn.torch import set_compile_policy

    gen = torch.Generator().manual_seed(0)
    x = torch.rand(2, 2, 3, 32, 32, generator=gen).cuda()
    weights = torch.randn(2, 10, generator=gen).cuda()
    twin = copy.deepcopy(model)
    eager = one_call(model, model, x, weights)
    if policy:
        set_compile_policy(policy)
    compiled = one_call(twin, torch.compile(twin), x, weights)
    worst = max(
        (relative(compiled[2][n], g), n)
        for n, g in eager[2].items()
        if n in compiled[2]
    )
    flips = int((compiled[3] != eager[3]).sum())
    print(
        f"{name}: output {relative(compiled[0], eager[0]):.3g}, "
        f"input gradient {relative(compiled[1], eager[1]):.3g}, worst "
        f"parameter gradient {worst[0]:.3g} ({worst[1]}), first neuron's "
        f"spikes differing {flips} of {eager[3].numel()}"
    )


def main():
    from spikingjelly.activation_based.model import spikformer

    from flexsn.torch import convert

    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    torch.manual_seed(0)
    net = spikformer.spikformer_ti(
        T=2, img_size_h=32, img_size_w=32, num_classes=10
    ).cuda()
    flex = convert(copy.deepcopy(net))
    compare("SpikingJelly's torch LIF", net)
    compare("FlexSN LIF (kernels)", flex, "kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
