"""Sequences in dense layouts other than row-major (channels-last, as a
convolution in torch.channels_last gives them) run in place: the same
results as the row-major call, outputs and states in the input's layout.

The row-major calls these tests compare with are checked against formula
references in test_torch_neurons.py, test_per_channel_params.py and
test_block_module.py; here the property is that the layout changes
nothing but the strides."""

import pytest
import torch

from flexsn.torch import Block, FlexSN, LIFNode, Residual, fuse
from flexsn.torch import _fuse as fuse_module
from flexsn.torch._layout import IN_PLACE, Layout, call_layout, memory_order

from devices import DEVICES

T, B, C, H, W = 4, 2, 3, 5, 6


def channels_last(x):
    """x `[T, B, C, H, W]` laid out `[T, B, H, W, C]` (what a channels-last
    convolution of `[T·B, C, H, W]` gives, viewed as a sequence)."""
    return x.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


def sequence(device, seed, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(T, B, C, H, W, generator=g) * scale).to(device)


def test_memory_order():
    x = torch.empty(T, B, C, H, W)
    assert memory_order(x.shape, x.stride()) is None  # row-major
    cl = channels_last(x)
    assert memory_order(cl.shape, cl.stride()) == (0, 1, 3, 4, 2)
    # Not dense: a slice, and time steps apart.
    s = cl[:, :, :2]
    assert memory_order(s.shape, s.stride()) is None
    apart = torch.empty(2 * T, B, H, W, C).permute(0, 1, 4, 2, 3)[::2]
    assert memory_order(apart.shape, apart.stride()) is None
    # T inside: the kernels read time outermost.
    inner = torch.empty(B, C, H, W, T).permute(4, 0, 1, 2, 3)
    assert memory_order(inner.shape, inner.stride()) is None
    # A size-1 dimension's stride does not matter.
    one = torch.empty(T, 1, H, W, C).permute(0, 1, 4, 2, 3)
    assert memory_order(one.shape, one.stride()) == (0, 1, 3, 4, 2)


@pytest.mark.parametrize("device", DEVICES)
def test_lif_runs_channels_last_in_place(device):
    x = sequence(device, 1)
    xc = channels_last(x)
    a, b = (LIFNode(tau=2.0, step_mode="m").to(device) for _ in range(2))
    with torch.no_grad():
        ya, yb = a(xc), b(x)
    assert ya.stride() == xc.stride()
    assert a.v.stride() == xc[0].stride()
    assert torch.equal(ya, yb) and torch.equal(a.v, b.v)
    # Training, carrying the channels-last state into the next call.
    xa = xc.clone().requires_grad_()
    xb = x.clone().requires_grad_()
    ya, yb = a(xa), b(xb)
    assert ya.stride() == xc.stride()
    grad = sequence(device, 2)
    (ya * channels_last(grad)).sum().backward()
    (yb * grad).sum().backward()
    assert torch.equal(ya, yb)
    assert torch.equal(xa.grad, xb.grad)
    assert xa.grad.stride() == xc.stride()


def test_which_calls_run_on_their_tensors_as_given():
    """IN_PLACE when every tensor of the call shares the input's memory
    order and the neuron has no per-channel parameter (its kernels then
    index neurons in memory order); a Layout of views otherwise."""
    lif = LIFNode(tau=2.0, step_mode="m").info
    xc = channels_last(torch.empty(T, B, C, H, W))
    step = xc[0]
    assert call_layout(lif, False, [xc], [None], [], []) is IN_PLACE
    assert (
        call_layout(lif, False, [xc], [torch.empty_like(step)], [], [])
        is IN_PLACE
    )
    # A row-major initial state: viewed in memory order instead.
    assert isinstance(
        call_layout(lif, False, [xc], [torch.empty(B, C, H, W)], [], []),
        Layout,
    )
    # Row-major inputs, and bits (logical order), run as given.
    assert call_layout(lif, False, [xc.contiguous()], [None], [], []) is None
    assert call_layout(lif, True, [xc], [None], [], []) is None
    per_channel = FlexSN(
        "plif", shapes={"w": "per_channel"}, num_channels=C
    ).info
    assert isinstance(
        call_layout(per_channel, False, [xc], [None], [torch.empty(C)], []),
        Layout,
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("incoming", ["same layout", "row-major", "expanded"])
def test_gradients_arriving_in_another_layout(device, incoming):
    """An in-place call's results are new tensors in the input's layout;
    gradients of the outputs and of the final state that arrive laid out
    otherwise (row-major, or expanded by a sum) are brought into it."""
    x = sequence(device, 21)
    a, b = (LIFNode(tau=2.0, step_mode="m").to(device) for _ in range(2))
    xa = channels_last(x).requires_grad_()
    xb = x.clone().requires_grad_()
    ya, yb = a(xa), b(xb)
    assert ya._base is None and ya.stride() == xa.stride()
    assert a.v.stride() == xa[0].stride()
    grad_y, grad_v = sequence(device, 22), sequence(device, 23)[0]
    if incoming == "expanded":
        (ya.sum() + a.v.sum()).backward()
        (yb.sum() + b.v.sum()).backward()
    else:
        if incoming == "same layout":
            grad_y = channels_last(grad_y)
            grad_v = channels_last(grad_v[None])[0]
        torch.autograd.backward([ya, a.v], [grad_y, grad_v])
        torch.autograd.backward(
            [yb, b.v], [grad_y.contiguous(), grad_v.contiguous()]
        )
    assert torch.equal(ya, yb) and torch.equal(a.v, b.v)
    assert torch.equal(xa.grad, xb.grad)
    assert xa.grad.stride() == xa.stride()


@pytest.mark.parametrize("device", DEVICES)
def test_per_neuron_parameter_in_the_inputs_order(device):
    """A per-neuron parameter laid out like the inputs' steps keeps the
    call in place; its gradient comes back in that layout."""

    def make():
        return FlexSN(
            "plif",
            kinds={"v_threshold": "trainable"},
            shapes={"v_threshold": "per_neuron"},
            neuron_shape=(B, C, H, W),
        ).to(device)

    a, b = make(), make()
    g = torch.Generator().manual_seed(24)
    threshold = (torch.rand(B, C, H, W, generator=g) + 0.5).to(device)
    with torch.no_grad():
        b.v_threshold.copy_(threshold)
    a.v_threshold.data = threshold.contiguous(
        memory_format=torch.channels_last
    )
    x = sequence(device, 25) + 0.8
    xa = channels_last(x).requires_grad_()
    xb = x.clone().requires_grad_()
    assert (
        call_layout(a.info, False, [xa], [None], [a.w, a.v_threshold], [])
        is IN_PLACE
    )
    ya, yb = a(xa), b(xb)
    grad = sequence(device, 26)
    (ya * grad).sum().backward()
    (yb * grad).sum().backward()
    assert torch.equal(ya, yb)
    assert torch.equal(xa.grad, xb.grad)
    assert torch.equal(a.v_threshold.grad, b.v_threshold.grad)
    assert a.v_threshold.grad.stride() == a.v_threshold.stride()
    # Summed over the neurons in another order.
    assert torch.allclose(a.w.grad, b.w.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_single_step_channels_last(device):
    x = sequence(device, 13)[0]
    xc = x.contiguous(memory_format=torch.channels_last)
    a, b = (LIFNode(tau=2.0).to(device) for _ in range(2))
    for _ in range(2):  # the second step starts from the first's state
        ya, yb = a(xc), b(x)
        assert ya.stride() == xc.stride()
        assert torch.equal(ya, yb) and torch.equal(a.v, b.v)


@pytest.mark.parametrize("device", DEVICES)
def test_per_channel_and_per_neuron_parameters(device):
    """A per-channel w (trainable), a per-neuron v_threshold (trainable)
    and a per-channel v_reset: the kernels see channels-last steps as
    [B·H·W, C, 1]."""

    def make():
        return FlexSN(
            "plif",
            kinds={"v_threshold": "trainable", "v_reset": "runtime"},
            shapes={
                "w": "per_channel",
                "v_threshold": "per_neuron",
                "v_reset": "per_channel",
            },
            neuron_shape=(B, C, H, W),
            store_state_seqs=True,
        ).to(device)

    a = make()
    b = make()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for m in (a, b):
            m.w.copy_(torch.tensor([-1.0, 0.3, 1.5]))
            m.v_threshold.copy_(
                torch.rand(B, C, H, W, generator=g) + 0.5
                if m is a
                else a.v_threshold
            )
            m.v_reset.copy_(torch.tensor([-0.2, 0.0, 0.1]))
    v0 = sequence(device, 4, 0.5)[0]
    a.states[0], b.states[0] = channels_last(v0[None])[0], v0.clone()
    x = sequence(device, 5) + 0.8
    xa = channels_last(x).requires_grad_()
    xb = x.clone().requires_grad_()
    ya, yb = a(xa), b(xb)
    assert ya.stride() == xa.stride()
    assert a.state_seqs[0].stride() == xa.stride()
    assert torch.equal(ya, yb)
    assert torch.equal(a.state_seqs[0], b.state_seqs[0])
    grad_y, grad_v = sequence(device, 6), sequence(device, 7)
    ((ya * grad_y).sum() + (a.state_seqs[0] * grad_v).sum()).backward()
    ((yb * grad_y).sum() + (b.state_seqs[0] * grad_v).sum()).backward()
    assert torch.equal(xa.grad, xb.grad)
    assert torch.equal(a.v_threshold.grad, b.v_threshold.grad)
    # Summed over neurons in another order.
    assert torch.allclose(a.w.grad, b.w.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_block_with_batch_norm_and_skip_channels_last(device):
    def make():
        torch.manual_seed(0)
        neuron = LIFNode(tau=2.0, step_mode="m")
        bn = torch.nn.BatchNorm2d(C)
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
        return Block(neuron, pre=bn, post=Residual("add", skip=True)).to(
            device
        )

    a, b = make(), make()
    x, skip = sequence(device, 8), sequence(device, 9)
    xa = channels_last(x).requires_grad_()
    xb = x.clone().requires_grad_()
    ya = a(xa, channels_last(skip))
    yb = b(xb, skip)
    assert ya.stride() == xa.stride()
    # The batch statistics reduce in another order: float tolerance.
    assert torch.allclose(ya, yb, rtol=1e-5, atol=1e-5)
    grad = sequence(device, 10)
    (ya * grad).sum().backward()
    (yb * grad).sum().backward()
    assert torch.allclose(xa.grad, xb.grad, rtol=1e-4, atol=1e-5)
    for p, q in zip(a.pre.parameters(), b.pre.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    assert torch.allclose(a.pre.running_var, b.pre.running_var)


class _Net(torch.nn.Module):
    """conv → bn → LIF (+ the input: SEW's ADD), multi-step, flattening T
    and B around the convolution and batch norm as SpikingJelly's layers
    do."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(C, C, 3, padding=1, bias=False)
        self.bn = _MultiStepBatchNorm(C)
        self.sn = LIFNode(tau=2.0, step_mode="m")

    def forward(self, x):
        y = self.conv(x.flatten(0, 1)).view(x.shape)
        return self.sn(self.bn(y)) + x


class _MultiStepBatchNorm(torch.nn.BatchNorm2d):
    step_mode = "m"

    def forward(self, x):
        return super().forward(x.flatten(0, 1)).view(x.shape)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("apart", [False, True])
def test_fused_model_in_channels_last(device, apart, monkeypatch):
    """Both ways a fused chain trains: the block's batch statistics, or
    the batch norm as its own module before a block of the neuron and the
    connection (what CUDA takes in channels-last, forced here)."""
    monkeypatch.setattr(
        fuse_module, "_normalizes_apart", lambda bn, x: apart and bn.training
    )
    torch.manual_seed(11)
    net = _Net().to(device).to(memory_format=torch.channels_last)
    fused = fuse(net)
    x = channels_last(sequence(device, 12).abs())
    with torch.no_grad():
        want = net(x)
    net.sn.reset()
    # One training step of each, from the same modules: the fused model
    # first (its batch statistics update the shared running ones).
    got = fused(x)
    assert got.stride() == x.stride()
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    net.eval()
    net.sn.reset()
    with torch.no_grad():
        eval_fused = fused(x)
        net.sn.reset()
        eval_net = net(x)
    assert eval_fused.stride() == x.stride()
    assert torch.equal(eval_fused, eval_net)
