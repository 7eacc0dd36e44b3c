"""The CPU kernels run on torch.get_num_threads() threads, with results
bitwise the same for any count: forward outputs, input and initial-state
gradients, and parameter gradients, which sum over every neuron (over
several 4096-neuron chunks here, the last one ragged), for a scalar and a
per-channel trainable parameter. The comparisons are exact: a sum whose
order followed the threads would differ in its last bits."""

import pytest
import torch

from flexsn.torch import ParametricLIFNode

T, N = 6, 3 * 4096 + 37          # three whole chunks and a ragged one
B, C, S = 2, 3, 6000             # per channel: S spans two chunks


def train_step(node, x, grad):
    node.reset()
    x = x.detach().requires_grad_(True)
    spikes = node(x)
    params = [p for p in node.parameters() if p.requires_grad]
    grads = torch.autograd.grad(spikes, [x] + params, grad)
    return [spikes.detach()] + list(grads)


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("shape, node", [
    ((T, N), lambda: ParametricLIFNode(step_mode="m")),
    ((T, B, C, S), lambda: ParametricLIFNode(step_mode="m", num_channels=C)),
], ids=["scalar-w", "per-channel-w"])
def test_bitwise_the_same_for_any_thread_count(shape, node, restore_threads):
    g = torch.Generator().manual_seed(3)
    x = torch.rand(shape, generator=g) * 2.5 - 0.5
    grad = torch.randn(shape, generator=g)
    module = node()
    with torch.no_grad():
        for p in module.parameters():
            p.uniform_(-1.0, 1.0, generator=g)
    runs = {}
    for threads in (1, 2, 3):
        torch.set_num_threads(threads)
        runs[threads] = train_step(module, x, grad)
    # Not trivially equal: spikes fire, and w's gradient is not zero.
    assert 0 < runs[1][0].mean() < 1
    assert runs[1][-1].abs().sum() > 0
    for threads in (2, 3):
        for ours, theirs in zip(runs[threads], runs[1]):
            assert torch.equal(ours, theirs), threads
