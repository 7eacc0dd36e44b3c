"""torch.utils.checkpoint around FlexSN neurons and fused blocks.

A checkpointed call is run again in the backward pass to recompute what it
did not save. A stateful neuron is then already at the state the first run
left, so the recompute would start from there and give other spikes and
wrong gradients without a word (SpikingJelly's neurons do so). FlexSN
raises instead (on torch >= 2, where the autograd engine says it is in a
backward pass); a checkpointed function that resets its neurons first
recomputes the same forward and gives the gradients of the call without
checkpointing.
"""

import copy

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from flexsn.torch import LIFNode, fuse
from flexsn.torch._state import in_backward_pass

from devices import DEVICES
from test_fuse import MultiStepBatchNorm2d

DETECTS = hasattr(torch._C, "_current_graph_task_id")
REENTRANT = [True, False] if DETECTS else [True]


class Chain(nn.Module):
    """batch norm -> LIF: a chain fuse makes one block."""

    def __init__(self):
        super().__init__()
        self.bn = MultiStepBatchNorm2d(3)
        self.sn = LIFNode(tau=2.0, v_threshold=0.3, step_mode="m")

    def forward(self, x):
        return self.sn(self.bn(x))


def _reset(model):
    for m in model.modules():
        if hasattr(m, "reset") and m is not model:
            m.reset()


def _step(model, x, how, reentrant=True):
    """(output, input gradient, parameter gradients) of one training call
    from reset neurons: plain, checkpointed, or checkpointed around a
    function that resets the neurons first."""
    _reset(model)
    for p in model.parameters():
        p.grad = None
    x = x.clone().requires_grad_()

    def resetting(x):
        _reset(model)
        return model(x)

    if how == "plain":
        y = model(x)
    else:
        function = resetting if how == "resetting" else model
        kwargs = {"use_reentrant": reentrant} if DETECTS else {}
        y = checkpoint(function, x, **kwargs)
    weights = torch.linspace(-1.0, 1.0, y.numel()).view(y.shape).to(y)
    (y * weights).sum().backward()
    return y.detach(), x.grad, [p.grad.clone() for p in model.parameters()]


def _models(device):
    torch.manual_seed(0)
    unfused = Chain().to(device)
    with torch.no_grad():
        unfused.bn.weight.uniform_(0.5, 2.0)
        unfused.bn.bias.uniform_(-0.2, 0.5)
    return {"unfused": unfused, "fused": fuse(copy.deepcopy(unfused))}


def _input(device):
    gen = torch.Generator().manual_seed(1)
    return torch.randn(4, 2, 3, 5, 5, generator=gen).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["unfused", "fused"])
@pytest.mark.parametrize("reentrant", REENTRANT)
def test_checkpoint_that_resets_gives_the_plain_gradients(
    device, which, reentrant
):
    model = _models(device)[which]
    x = _input(device)
    y, gx, gp = _step(model, x, "plain")
    assert float(y.sum()) > 0, "no spike: the check would be vacuous"
    y2, gx2, gp2 = _step(model, x, "resetting", reentrant)
    assert torch.equal(y2, y)
    torch.testing.assert_close(gx2, gx, rtol=1e-5, atol=1e-6)
    for a, b in zip(gp2, gp):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not DETECTS, reason="torch 1.x: no graph task to read")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["unfused", "fused"])
@pytest.mark.parametrize("reentrant", REENTRANT)
def test_recompute_from_the_left_state_raises(device, which, reentrant):
    model = _models(device)[which]
    with pytest.raises(RuntimeError, match="inside a backward pass"):
        _step(model, _input(device), "checkpointed", reentrant)


def test_outside_a_backward_pass():
    assert not in_backward_pass()
    seen = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            seen.append(in_backward_pass())
            return grad

    Probe.apply(torch.ones(2, requires_grad=True)).sum().backward()
    assert seen == [DETECTS]
