"""flexsn.torch.Block: batch-norm's apply step, a neuron and a residual as
one fused kernel with autograd, on the CPU and (`cuda` marker) the GPU.

References are float64 eager PyTorch from the formulas (`reference.py`'s
neurons, which share no code with the package, and the pre- and post-ops
written out here), differentiated by autograd; and the same block run
unfused, as a FlexSN neuron module between torch ops, whose forward the
fused kernel must match bit for bit (same operations, same order).
"""

import copy
import itertools
import re
import subprocess

import pytest
import torch

import flexsn
from flexsn._dialect import (
    BLOCK_CONNECTION_OPERANDS,
    BLOCK_CONNECTIONS,
    BLOCK_PRES,
    BLOCK_READOUTS,
)
from flexsn._tools import tool_command
from flexsn.torch import Affine, Block, LIFNode, ParametricLIFNode, Residual
from flexsn.torch._block import BlockShape, block_declaration, block_module

from devices import DEVICES
import reference

CONNECT = {
    "add": lambda s, x: s + x,
    "and": lambda s, x: s * x,
    "iand": lambda s, x: (1 - s) * x,
}


def block_ref(x, scale, shift, op, neuron=reference.lif_ref, **params):
    """(y, final states) of the block in x's dtype: p = x·scale[c] +
    shift[c] (scalars when scale is 0-d), the neuron on p, y = op(s, x)."""
    if scale.dim():
        view = (1, 1, -1) + (1,) * (x.dim() - 3)
        p = x * scale.view(view) + shift.view(view)
    else:
        p = x * scale + shift
    s, v_seq = neuron(p, **params)
    y = CONNECT[op](s, x) if op else s
    return y, v_seq[-1]


def inputs(shape, device, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen) * 1.5 + 0.5
    C = shape[2]
    scale = torch.rand(C, generator=gen) + 0.5
    shift = torch.randn(C, generator=gen) * 0.25
    return x.to(device), scale.to(device), shift.to(device)


def bn_lif(
    C,
    device,
    post="add",
    scale=None,
    shift=None,
    readout=None,
    storage_types=("f32",),
):
    """The BN-apply + LIF block with `scale` and `shift` (default: ones
    and zeros); blocks of one post-op, readout and storage types share a
    compile."""
    name = (
        f"bn_lif_{post or 'spikes'}"
        + ("_sum" if readout else "")
        + "".join(f"_{t}" for t in storage_types if t != "f32")
    )
    block = Block(
        LIFNode(step_mode="m", tau=2.0),
        pre=Affine(num_channels=C),
        post=post and Residual(post),
        readout=readout,
        name=name,
        storage_types=storage_types,
    ).to(device)
    if scale is not None:
        with torch.no_grad():
            block.scale.copy_(scale)
            block.shift.copy_(shift)
    return block


def grads_ref(x, scale, shift, op, grad_y, grad_v, **kw):
    """Gradients of <y, grad_y> + <v_T, grad_v> by float64 autograd."""
    x, scale, shift = (
        t.detach().double().requires_grad_() for t in (x, scale, shift)
    )
    y, v = block_ref(x, scale, shift, op, **kw)
    torch.autograd.backward([y, v], [grad_y.double(), grad_v.double()])
    return y, v, x.grad, scale.grad, shift.grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["add", "and", "iand"])
def test_block_against_formulas(device, op):
    T, B, C, H, W = 6, 2, 3, 4, 5
    x, scale, shift = inputs((T, B, C, H, W), device, seed=len(op))
    block = bn_lif(C, device, op, scale, shift)
    x.requires_grad_()
    y = block(x)
    v = block.states[0]
    gen = torch.Generator().manual_seed(7)
    grad_y = torch.randn(y.shape, generator=gen).to(device)
    grad_v = torch.randn(v.shape, generator=gen).to(device)
    torch.autograd.backward([y, v], [grad_y, grad_v])

    want_y, want_v, gx, gscale, gshift = grads_ref(
        x, scale, shift, op, grad_y, grad_v
    )
    assert y.shape == x.shape and v.shape == x.shape[1:]
    torch.testing.assert_close(y.double(), want_y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v.double(), want_v, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad.double(), gx, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        block.scale.grad.double(), gscale, rtol=1e-4, atol=1e-3
    )
    torch.testing.assert_close(
        block.shift.grad.double(), gshift, rtol=1e-4, atol=1e-3
    )


@pytest.mark.parametrize("device", DEVICES)
def test_block_equals_unfused_modules(device):
    """The fused kernel against the same block unfused (torch ops around a
    FlexSN LIF module): the same bits forward, close gradients (sums over
    channels in another order)."""
    T, B, C, S = 5, 3, 4, 7
    x, scale, shift = inputs((T, B, C, S), device, seed=11)
    block = bn_lif(C, device, "add", scale, shift)
    lif = LIFNode(step_mode="m", tau=2.0)
    a = scale.clone().requires_grad_()
    b = shift.clone().requires_grad_()
    x1 = x.clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    y1 = block(x1)
    p = x2 * a.view(1, 1, C, 1) + b.view(1, 1, C, 1)
    y2 = lif(p) + x2
    assert torch.equal(y1, y2)
    assert torch.equal(block.states[0], lif.v)
    grad = torch.randn(y1.shape, generator=torch.Generator().manual_seed(3))
    y1.backward(grad.to(device))
    y2.backward(grad.to(device))
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(block.scale.grad, a.grad, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(block.shift.grad, b.grad, rtol=1e-5, atol=1e-4)


def backward_with_skip(block, x, skip, gen):
    """(y, grad): y = block(x, skip), backpropagated from a random grad."""
    x.requires_grad_()
    skip.requires_grad_()
    y = block(x, skip)
    grad = torch.randn(y.shape, generator=gen).to(y.device)
    y.backward(grad)
    return y, grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["add", "and", "iand"])
def test_skip_input_against_formulas(device, op):
    """Residual(op, skip=True): the connection reads a second input (SEW's
    identity path), y = op(s, skip), and skip gets its gradient."""
    T, B, C, S = 5, 2, 3, 6
    x, scale, shift = inputs((T, B, C, S), device, seed=31 + len(op))
    gen = torch.Generator().manual_seed(8)
    skip = (torch.rand(T, B, C, S, generator=gen) < 0.5).float().to(device)
    block = Block(
        LIFNode(step_mode="m", tau=2.0),
        pre=Affine(num_channels=C),
        post=Residual(op, skip=True),
        name=f"sew_{op}",
    ).to(device)
    assert block.info.inputs == ("x", "skip")
    with torch.no_grad():
        block.scale.copy_(scale)
        block.shift.copy_(shift)
    y, grad = backward_with_skip(block, x, skip, gen)

    xd, sd, a, b = (
        t.detach().double().requires_grad_() for t in (x, skip, scale, shift)
    )
    view = (1, 1, C, 1)
    spikes, _ = reference.lif_ref(xd * a.view(view) + b.view(view))
    want = CONNECT[op](spikes, sd)
    want.backward(grad.double())
    torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)
    for got, ref in (
        (x.grad, xd.grad),
        (skip.grad, sd.grad),
        (block.scale.grad, a.grad),
        (block.shift.grad, b.grad),
    ):
        torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-3)
    with pytest.raises(TypeError, match="second input"):
        block(x)
    with pytest.raises(ValueError, match="skip has the output's shape"):
        block(x, skip[:, :1])
    with pytest.raises(TypeError, match="one input"):
        bn_lif(C, device, op)(x, skip)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "pre,post",
    [
        (None, None),
        ("affine", None),
        ("channel_affine", "iand"),
        ("batch_norm", None),
    ],
)
def test_added_input_against_formulas(device, pre, post):
    """add_skip=True: the block adds a second input to the pre-op's output
    before the neuron (Spiking-ResNet's sn(bn(x) + identity)), y =
    post(neuron(pre(x) + skip), x); gradients reach x, skip, the pre-op's
    parameters (a training batch norm's through its statistics)."""
    T, B, C, S = 5, 2, 3, 6
    x, scale, shift = inputs((T, B, C, S), device, seed=61 + len(pre or ""))
    gen = torch.Generator().manual_seed(9)
    skip = (torch.rand(T, B, C, S, generator=gen) < 0.5).float().to(device)
    modules = {
        None: None,
        "affine": Affine(scale=0.75, shift=0.125),
        "channel_affine": Affine(num_channels=C),
        "batch_norm": torch.nn.BatchNorm1d(C),
    }
    block = Block(
        LIFNode(step_mode="m", tau=2.0),
        pre=modules[pre],
        post=post and Residual(post),
        add_skip=True,
        name=f"added_{pre}_{post}",
    ).to(device)
    assert block.info.inputs == ("x", "skip")
    assert block.shape.pre == (
        "add"
        if pre is None
        else "channel_affine_add"
        if pre != "affine"
        else "affine_add"
    )
    if pre == "channel_affine":
        with torch.no_grad():
            block.scale.copy_(scale)
            block.shift.copy_(shift)
    y, grad = backward_with_skip(block, x, skip, gen)

    xd, sd = (t.detach().double().requires_grad_() for t in (x, skip))
    view = (1, 1, C, 1)
    if pre is None:
        p = xd
    elif pre == "batch_norm":
        w, b = (
            t.detach().double().requires_grad_()
            for t in (block.pre.weight, block.pre.bias)
        )
        p = batch_norm_ref(
            xd,
            w,
            b,
            xd.mean((0, 1, 3)),
            xd.var((0, 1, 3), unbiased=False),
            block.pre.eps,
        )
    else:
        a, b = (
            t.detach().double().requires_grad_()
            for t in (block.scale, block.shift)
        )
        p = xd * (a.view(view) if a.dim() else a) + (
            b.view(view) if b.dim() else b
        )
    spikes, _ = reference.lif_ref(p + sd)
    want = CONNECT[post](spikes, xd) if post else spikes
    want.backward(grad.double())
    torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)
    pairs = [(x.grad, xd.grad), (skip.grad, sd.grad)]
    if pre == "batch_norm":
        pairs += [
            (block.pre.weight.grad, w.grad),
            (block.pre.bias.grad, b.grad),
        ]
    elif pre is not None:
        pairs += [(block.scale.grad, a.grad), (block.shift.grad, b.grad)]
    for got, ref in pairs:
        torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-3)
    with pytest.raises(TypeError, match="second input"):
        block(x)
    with pytest.raises(ValueError, match="one skip input"):
        Block(
            LIFNode(step_mode="m"),
            post=Residual("add", skip=True),
            add_skip=True,
        )


def batch_norm_ref(x, weight, bias, mean, var, eps):
    """nn.BatchNorm's formula over x [T, B, C, ...] in float64."""
    view = (1, 1, -1) + (1,) * (x.dim() - 3)
    return (x - mean.view(view)) / torch.sqrt(
        var.view(view) + eps
    ) * weight.view(view) + bias.view(view)


def autograd_nodes(y):
    """The names of the autograd nodes behind y."""
    seen, names, todo = set(), [], [y.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(node.name())
        todo += [n for n, _ in node.next_functions]
    return names


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "momentum,layout",
    [(0.1, "row_major"), (None, "row_major"), (0.1, "channels_last")],
)
def test_batch_norm_pre_in_training(device, momentum, layout):
    """A batch norm in training as the pre-op: the batch statistics over
    T·B and the spatial dims, the running statistics and batch count
    updated as nn.BatchNorm2d updates them, and exact gradients through
    the statistics to x, the weight and the bias (float64 autograd). In
    row-major the statistics' backward runs in the block's own autograd
    node (one node, not two); a layout the scan converts gets a node of
    its own for them, with the same results."""
    T, B, C, H, W = 4, 3, 5, 2, 3
    gen = torch.Generator().manual_seed(41)
    x = (torch.randn(T, B, C, H, W, generator=gen) * 2 + 0.3).to(device)
    if layout == "channels_last":
        x = x.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
    skip = torch.randn(T, B, C, H, W, generator=gen).to(device)
    bn = torch.nn.BatchNorm2d(C, momentum=momentum)
    twin = torch.nn.BatchNorm2d(C, momentum=momentum)
    with torch.no_grad():
        for m in (bn, twin):
            m.weight.copy_(torch.linspace(0.5, 1.5, C))
            m.bias.copy_(torch.linspace(-0.2, 0.4, C))
            m.running_mean.fill_(0.25)
            m.running_var.fill_(2.0)
    block = Block(
        LIFNode(step_mode="m", tau=2.0),
        pre=bn,
        post=Residual("add", skip=True),
        name="bn_train",
    ).to(device)
    twin.to(device)
    x.requires_grad_()
    y = block(x, skip)
    nodes = autograd_nodes(y)
    assert ("_BatchNormAffineBackward" in nodes) == (layout != "row_major")
    assert nodes.count("_ScanFunctionBackward") == 1
    grad = torch.randn(y.shape, generator=gen).to(device)
    y.backward(grad)

    # nn.BatchNorm2d updates its running statistics on the same batch.
    twin(x.detach().flatten(0, 1))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(
            getattr(bn, name), getattr(twin, name), rtol=1e-5, atol=1e-6
        )
    assert int(bn.num_batches_tracked) == 1

    xd = x.detach().double().requires_grad_()
    w = bn.weight.detach().double().requires_grad_()
    b = bn.bias.detach().double().requires_grad_()
    dims = (0, 1, 3, 4)
    p = batch_norm_ref(
        xd, w, b, xd.mean(dims), xd.var(dims, unbiased=False), bn.eps
    )
    spikes, _ = reference.lif_ref(p)
    want = spikes + skip.double()
    want.backward(grad.double())
    torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x.grad.double(), xd.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        bn.weight.grad.double(), w.grad, rtol=1e-4, atol=1e-3
    )
    torch.testing.assert_close(
        bn.bias.grad.double(), b.grad, rtol=1e-4, atol=1e-3
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "affine,track", [(False, True), (True, False), (False, False)]
)
@pytest.mark.parametrize("layout", ["row_major", "channels_last"])
def test_batch_norm_pre_without_affine_or_running_stats(
    device, affine, track, layout
):
    """Batch norms without weight and bias, or without running statistics
    (batch statistics in eval too), train as nn.BatchNorm2d followed by
    the neuron: spikes, the gradient of x and (with affine) of the weight
    and bias, and the running statistics."""
    T, B, C, H, W = 3, 2, 4, 3, 2
    gen = torch.Generator().manual_seed(47)
    x = (torch.randn(T, B, C, H, W, generator=gen) * 2 + 0.3).to(device)
    if layout == "channels_last":
        x = x.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
    bn = torch.nn.BatchNorm2d(C, affine=affine, track_running_stats=track)
    twin = copy.deepcopy(bn).to(device)
    if affine:
        with torch.no_grad():
            for m in (bn, twin):
                m.weight.copy_(torch.linspace(0.5, 1.5, C))
                m.bias.copy_(torch.linspace(-0.2, 0.4, C))
    block = Block(LIFNode(step_mode="m", tau=2.0), pre=bn, name="bn_plain").to(
        device
    )
    lif = LIFNode(step_mode="m", tau=2.0).to(device)
    grad = torch.randn(x.shape, generator=gen).to(device)
    for mode in ("train", "eval"):
        block.train(mode == "train")
        twin.train(mode == "train")
        block.reset()
        lif.reset()
        xs = [x.detach().clone().requires_grad_() for _ in range(2)]
        y = block(xs[0])
        want = lif(twin(xs[1].flatten(0, 1)).view(x.shape))
        (y * grad).sum().backward()
        (want * grad).sum().backward()
        # Spikes may differ where a membrane potential rounds across the
        # threshold: a few, at most.
        assert (y != want).float().mean() < 0.02
        torch.testing.assert_close(
            xs[0].grad, xs[1].grad, rtol=1e-3, atol=1e-3
        )
    pairs = (
        [(bn.weight.grad, twin.weight.grad), (bn.bias.grad, twin.bias.grad)]
        if affine
        else []
    )
    if track:
        pairs += [
            (bn.running_mean, twin.running_mean),
            (bn.running_var, twin.running_var),
        ]
    for got, ref in pairs:
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_batch_norm_pre_in_eval_equals_unfused(device):
    """In eval the running statistics are folded into one scale and shift
    per channel, as PyTorch's CPU kernel folds them: the fused block's
    spikes equal nn.BatchNorm1d followed by the neuron module."""
    T, B, C, L = 5, 4, 6, 7
    gen = torch.Generator().manual_seed(43)
    x = (torch.randn(T, B, C, L, generator=gen) * 2).to(device)
    bn = torch.nn.BatchNorm1d(C)
    with torch.no_grad():
        bn.weight.copy_(torch.rand(C, generator=gen) + 0.5)
        bn.bias.copy_(torch.randn(C, generator=gen) * 0.2)
        bn.running_mean.copy_(torch.randn(C, generator=gen) * 0.3)
        bn.running_var.copy_(torch.rand(C, generator=gen) + 0.5)
    bn.eval()
    block = Block(
        LIFNode(step_mode="m", tau=2.0), pre=bn, name="bn1d_eval"
    ).to(device)
    lif = LIFNode(step_mode="m", tau=2.0).to(device)
    with torch.no_grad():
        y = block(x)
        want = lif(bn(x.flatten(0, 1)).view(x.shape))
    assert (
        torch.equal(y, want)
        if device == "cpu"
        else (y != want).float().mean() < 1e-3
    )
    assert int(bn.num_batches_tracked) == 0
    with pytest.raises(ValueError, match=r"BatchNorm1d\(6\) takes"):
        block(x[:, :, :3])


@pytest.mark.parametrize("device", DEVICES)
def test_scalar_affine_trainable_neuron_parameter(device):
    """Scalar scale and shift over [T, N], no post-op (the block returns
    spikes), and a neuron with a trainable parameter (PLIF's w), trained
    through the block."""
    T, N = 7, 33
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn(T, N, generator=gen) + 0.8).to(device)
    neuron = ParametricLIFNode(step_mode="m", init_tau=3.0)
    block = Block(
        neuron, pre=Affine(scale=1.25, shift=0.125), name="plif_block"
    ).to(device)
    assert block.scale.shape == () and block.shift.shape == ()
    x.requires_grad_()
    s = block(x)
    v = block.states[0]
    grad_s = torch.randn(s.shape, generator=gen).to(device)
    torch.autograd.backward([s, v], [grad_s, torch.ones_like(v)])

    xd = x.detach().double().requires_grad_()
    w = neuron.w.detach().double().requires_grad_()
    a, b = (
        torch.tensor(v, dtype=torch.float64, device=device, requires_grad=True)
        for v in (1.25, 0.125)
    )
    want_s, want_v = block_ref(xd, a, b, None, neuron=reference.plif_ref, w=w)
    torch.autograd.backward(
        [want_s, want_v], [grad_s.double(), torch.ones_like(want_v)]
    )
    assert torch.equal(s.double(), want_s)
    torch.testing.assert_close(v.double(), want_v, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad.double(), xd.grad, rtol=1e-4, atol=1e-4)
    for got, want in (
        (block.scale.grad, a.grad),
        (block.shift.grad, b.grad),
        (neuron.w.grad, w.grad),
    ):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_initial_state_gets_a_gradient(device):
    T, B, C, S = 4, 2, 3, 6
    x, scale, shift = inputs((T, B, C, S), device, seed=13)
    block = bn_lif(C, device, "add", scale, shift)
    v0 = (
        (torch.rand(B, C, S, generator=torch.Generator().manual_seed(1)) * 0.9)
        .to(device)
        .requires_grad_()
    )
    block.states[0] = v0
    y = block(x)
    (y.sum() + 2 * block.states[0].sum()).backward()

    v0d = v0.detach().double().requires_grad_()
    want_y, want_v = block_ref(
        x.double(), scale.double(), shift.double(), "add", v0=v0d
    )
    (want_y.sum() + 2 * want_v.sum()).backward()
    torch.testing.assert_close(y.double(), want_y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        v0.grad.double(), v0d.grad, rtol=1e-4, atol=1e-4
    )

    # No steps: no output, the final state is the initial one, and its
    # gradient passes straight back.
    block.states[0] = v0
    v0.grad = None
    empty = x[:0].clone().requires_grad_()
    y = block(empty)
    assert y.shape == empty.shape
    assert torch.equal(block.states[0], v0.detach())
    block.states[0].sum().backward()
    assert torch.equal(v0.grad, torch.ones_like(v0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("post", [None, "add"])
def test_readout_sum(device, post):
    """readout="sum": the output's sum over time per neuron (the spike
    count for post=None), the sequence never stored; its gradient reaches
    x, scale and shift."""
    T, B, C, S = 6, 2, 3, 5
    x, scale, shift = inputs((T, B, C, S), device, seed=17)
    block = bn_lif(C, device, post, scale, shift, readout="sum")
    spec = block.kernels.kernel("cpu", f"{block.info.name}_forward_f32").spec
    assert not spec.buffers_with_role("output_sequence")
    x.requires_grad_()
    total = block(x)
    assert total.shape == x.shape[1:]
    grad = torch.randn(
        total.shape, generator=torch.Generator().manual_seed(2)
    ).to(device)
    total.backward(grad)

    xd, a, b = (
        t.detach().double().requires_grad_() for t in (x, scale, shift)
    )
    y, v = block_ref(xd, a, b, post)
    want = y.sum(0)
    want.backward(grad.double())
    if post is None:
        assert torch.equal(total.double(), want)  # counts of 0/1 spikes
    torch.testing.assert_close(total.double(), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        block.states[0].double(), v, rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(x.grad.double(), xd.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        block.scale.grad.double(), a.grad, rtol=1e-4, atol=1e-3
    )
    torch.testing.assert_close(
        block.shift.grad.double(), b.grad, rtol=1e-4, atol=1e-3
    )
    # Each call sums its own steps; the neuron's state carries.
    with torch.no_grad():
        block.reset()
        first, second = block(x[:2]), block(x[2:])
    torch.testing.assert_close(
        first + second, total.detach(), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_storage(device, dtype):
    """f16 and bf16 blocks: x, y and the state stored in the dtype, the
    step in f32 (one rounding of y = s + x), scale and shift float32."""
    T, B, C, S = 5, 2, 3, 4
    x, scale, shift = inputs((T, B, C, S), device, seed=23)
    x = x.to(dtype).requires_grad_()
    block = bn_lif(
        C, device, "add", scale, shift, storage_types=("f16", "bf16")
    )
    y = block(x)
    v = block.states[0]
    assert y.dtype == dtype and v.dtype == dtype
    grad = torch.randn(y.shape, generator=torch.Generator().manual_seed(4))
    y.backward(grad.to(device, dtype))

    xd, a, b = (
        t.detach().double().requires_grad_() for t in (x, scale, shift)
    )
    want_y, want_v = block_ref(xd, a, b, "add")
    want_y.backward(grad.to(device, dtype).double())
    # s + x is exact in f32 for a half x and s in {0, 1}: one rounding.
    assert torch.equal(y, want_y.to(dtype))
    tol = dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(v.double(), want_v, **tol)
    torch.testing.assert_close(x.grad.double(), xd.grad, **tol)
    torch.testing.assert_close(block.scale.grad.double(), a.grad, **tol)
    torch.testing.assert_close(block.shift.grad.double(), b.grad, **tol)
    with pytest.raises(TypeError, match="storage_types"):
        block(x.detach().float())  # f32 was not compiled


def test_state_carries_between_calls():
    T, B, C, S = 6, 2, 3, 4
    x, scale, shift = inputs((T, B, C, S), "cpu", seed=2)
    block = bn_lif(C, "cpu")
    whole = block(x)
    v_whole = block.states[0]
    block.reset()
    halves = torch.cat([block(x[:3]), block(x[3:])])
    assert torch.equal(halves, whole)
    assert torch.equal(block.states[0], v_whole)


@pytest.mark.parametrize("device", DEVICES)
def test_neuron_alone_is_a_block(device):
    """A block of the neuron alone (no pre-op, connection or readout) is
    the neuron: the same spikes and states as the neuron's own module, and
    the same gradients (its kernels differentiate an inline body of the
    neuron, as a fused block's do)."""
    T, N = 6, 11
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn(T, N, generator=gen) * 1.5 + 0.5).to(device)
    block = Block(LIFNode(step_mode="m", tau=2.0), name="lif_alone").to(device)
    lif = LIFNode(step_mode="m", tau=2.0).to(device)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    s1, s2 = block(x1), lif(x2)
    assert torch.equal(s1, s2)
    assert torch.equal(block.states[0], lif.v)
    grad = torch.randn(s1.shape, generator=gen).to(device)
    s1.backward(grad)
    s2.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-6, atol=1e-6)
    want, _ = reference.lif_ref(x.double(), tau=2.0)
    torch.testing.assert_close(s1.double(), want)


def test_every_declaration_is_read_and_expanded(tmp_path):
    """Every pre-op, connection (with each operand) and readout the dialect
    declares, as the Python layer writes it, is read back by flexsn-opt
    and expanded into a block function of the inputs it declares (the
    emitter's output checked by the parser)."""
    if not flexsn._tools.tools_available():
        pytest.skip("the FlexSN tools are not installed (a cache-only run)")
    tool = tool_command("flexsn-opt")
    neuron = LIFNode(step_mode="m")
    info = neuron.compiled.info
    declarations, names = [], {}
    for pre, connection, operand, readout in itertools.product(
        BLOCK_PRES,
        BLOCK_CONNECTIONS,
        BLOCK_CONNECTION_OPERANDS,
        BLOCK_READOUTS,
    ):
        adds = pre == "add" or pre.endswith("_add")
        # A verifier error: nothing would read the skip input, or two
        # would.
        if operand == "skip" and (connection == "none" or adds):
            continue
        name = f"b_{pre}_{connection}_{operand}_{readout}"
        names[name] = operand == "skip" or adds
        declarations.append(
            block_declaration(
                name, info, BlockShape(pre, connection, operand, readout)
            )
        )
    assert len(names) == (3 * 7 + 3 * 4) * 2
    text = block_module(
        (neuron.compiled.directory / "configured.mlir").read_text(),
        declarations,
    )
    path = tmp_path / "blocks.mlir"
    path.write_text(text)
    done = subprocess.run(
        [*tool, str(path), "--flexsn-expand-blocks"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "flexsn.block @" not in done.stdout
    for name, takes_skip in names.items():
        header = re.search(
            rf"func.func @{name}\((.*)\) -> .*attributes "
            rf"{{flexsn.block}}",
            done.stdout,
        )
        assert header, name
        assert (
            '{flexsn.name = "skip"}' in header.group(1)
        ) == takes_skip, name


def test_bad_input_is_a_clear_error():
    block = bn_lif(3, "cpu")
    with pytest.raises(TypeError, match="storage_types"):
        block(torch.zeros(2, 1, 3, 4, dtype=torch.float16))
    with pytest.raises(ValueError, match="scale"):
        block(torch.zeros(2, 1, 5, 4))  # 5 channels, scale has 3
    with pytest.raises(ValueError, match="readout"):
        Block(LIFNode(step_mode="m"), readout="rate")
    with pytest.raises(ValueError, match="Residual op"):
        Residual("xor")
    with pytest.raises(ValueError, match="num_channels"):
        Affine(num_channels=0)
    with pytest.raises(ValueError, match="storage_types"):
        Block(LIFNode(step_mode="m"), storage_types=("f64",))
    with pytest.raises(ValueError, match="float32 only"):
        Block(LIFNode(step_mode="m"), readout="sum", storage_types=("f16",))
    with pytest.raises(TypeError, match="neuron module"):
        Block(torch.nn.ReLU())
    with pytest.raises(ValueError, match="per-neuron or per-channel"):
        Block(
            LIFNode(
                step_mode="m", per_neuron_threshold=True, neuron_shape=(4,)
            )
        )


@pytest.mark.skipif(
    not flexsn.torch.has_custom_op(),
    reason="torch.library.custom_op needs torch >= 2.4",
)
@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_traces_the_block(device):
    T, B, C, S = 4, 2, 3, 5
    x, scale, shift = inputs((T, B, C, S), device, seed=9)
    # Compiled (and cached) by the other tests' CPU run even where
    # torch.compile is not there.
    block = bn_lif(C, device)

    def run(x):
        block.reset()
        return block(x)

    results = []
    for fn in (run, torch.compile(run, fullgraph=True, backend="aot_eager")):
        xi = x.clone().requires_grad_()
        y = fn(xi)
        y.sum().backward()
        results.append((y.detach(), xi.grad, block.scale.grad.clone()))
        block.zero_grad()
    for got, want in zip(results[1], results[0]):
        assert torch.equal(got, want)
