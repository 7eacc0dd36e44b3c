"""The CPU kernels run on torch.get_num_threads() threads, with results
bitwise the same for any count: forward outputs, input and initial-state
gradients, and parameter gradients, which sum over every neuron (over
several 4096-neuron chunks here, the last one ragged), for a scalar and a
per-channel trainable parameter. The comparisons are exact: a sum whose
order followed the threads would differ in its last bits."""

import pytest
import torch

from flexsn.torch import ParametricLIFNode

T, N = 6, 3 * 4096 + 37  # three whole chunks and a ragged one
B, C, S = 2, 3, 6000  # per channel: S spans two chunks


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


@pytest.mark.parametrize(
    "shape, node",
    [
        ((T, N), lambda: ParametricLIFNode(step_mode="m")),
        (
            (T, B, C, S),
            lambda: ParametricLIFNode(step_mode="m", num_channels=C),
        ),
    ],
    ids=["scalar-w", "per-channel-w"],
)
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


def test_python_threads_calling_one_kernel_keep_their_own_sizes(
    restore_threads,
):
    """The same CPU kernels called from several Python threads at once (the
    call lets go of the GIL), each thread with a module of its own and
    sizes of its own, switching between two: every result is the one
    computed alone first. The kernels' argument descriptors are kept per
    thread and sizes; shared, one thread's call would read another's sizes
    or buffers."""
    import concurrent.futures
    from flexsn.torch._kernels import NeuronKernels

    torch.set_num_threads(1)
    shapes = [(4, 999), (4, 4096), (5, 4096), (4, 40000)]
    modules = [ParametricLIFNode(step_mode="m") for _ in shapes]
    # One compile: every module runs the same kernel objects.
    kernels = {
        id(
            NeuronKernels.kernel(
                m.handle.kernels(torch.device("cpu")), "forward", "f32"
            )
        )
        for m in modules
    }
    assert len(kernels) == 1
    g = torch.Generator().manual_seed(5)
    inputs = [torch.rand(s, generator=g) * 2.5 - 0.5 for s in shapes]
    grads = [torch.randn(s, generator=g) for s in shapes]
    alone = [train_step(modules[0], x, grad) for x, grad in zip(inputs, grads)]

    def work(i):
        # Alternate between this thread's sizes and the next one's.
        for k in range(40):
            j = i if k % 2 else (i + 1) % len(shapes)
            got = train_step(modules[i], inputs[j], grads[j])
            if not all(torch.equal(a, b) for a, b in zip(got, alone[j])):
                return False
        return True

    with concurrent.futures.ThreadPoolExecutor(len(shapes)) as pool:
        assert all(pool.map(work, range(len(shapes))))
