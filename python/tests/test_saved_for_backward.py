"""A training call saves for backward only what the backward kernel binds.

For every shipped neuron (and the SpikingJelly-style modules), the bytes a
training forward hands to autograd's saved-tensor hooks are compared with
what its backward kernel's signature in the compiled manifest
(`cpu.json`, read here as plain JSON) says it reads: the workspace
(`workspace_sequences` sequences of [T, N] in the storage type) and each
input sequence it binds by value. An input the backward does not read is
not saved: saving it would hold a second copy of the layer's input from
the forward to the backward (LIF's backward reads only its charge h).
"""

import json

import pytest
import torch

import flexsn
from flexsn.torch import FlexSN, IFNode, LIFNode, ParametricLIFNode

T, N = 6, 256  # N a multiple of every row alignment: no padding


def saved_bytes(run):
    """The bytes of the distinct storages saved for backward while `run()`
    runs, and their count (parameters excluded: a module holds them
    anyway)."""
    storages = {}

    def pack(t):
        if not isinstance(t, torch.nn.Parameter):
            s = (
                t.untyped_storage()
                if hasattr(t, "untyped_storage")
                else t.storage()
            )
            storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    return sum(storages.values()), len(storages), out


def signature_bytes(module, dtype_name: str, itemsize: int) -> int:
    """What the backward kernel of `module`'s neuron reads, by its
    signature: its workspace and the input sequences it binds."""
    manifest = json.loads((module.compiled.directory / "cpu.json").read_text())
    backward = [
        k
        for k in manifest["targets"]["cpu"]["kernels"]
        if k["variant"] == "backward"
        and k["dtype"] == dtype_name
        and not k["deterministic"]
        and not k["options"]
    ]
    assert len(backward) == 1, [k["name"] for k in backward]
    kernel = backward[0]
    inputs = {
        b["binds"]["index"]
        for b in kernel["buffers"]
        if b["binds"]["value"] == "input" and not b["binds"]["gradient"]
    }
    return (kernel["workspace_sequences"] + len(inputs)) * T * N * itemsize


MODULES = [
    (name, lambda name=name: FlexSN(name))
    for name in sorted(flexsn.shipped_neurons())
] + [
    ("IFNode", lambda: IFNode(step_mode="m")),
    ("LIFNode", lambda: LIFNode(step_mode="m")),
    (
        "LIFNode(decay_input=False)",
        lambda: LIFNode(decay_input=False, step_mode="m"),
    ),
    ("ParametricLIFNode", lambda: ParametricLIFNode(step_mode="m")),
]


@pytest.mark.parametrize("name,make", MODULES, ids=[m[0] for m in MODULES])
def test_saves_only_what_the_backward_binds(name, make):
    module = make()
    inputs = [
        (torch.rand(T, N) * 2).requires_grad_() for _ in module.info.inputs
    ]
    total, count, out = saved_bytes(lambda: module(*inputs))
    expected = signature_bytes(module, "f32", 4)
    assert total == expected, (
        f"{name}: saved {total} bytes in {count} storage(s), its backward "
        f"kernel reads {expected}"
    )
    # And the backward runs from what was saved.
    outs = out if isinstance(out, (tuple, list)) else (out,)
    sum(o.sum() for o in outs).backward()
    assert all(x.grad is not None for x in inputs)


def test_lif_saves_its_charge_only():
    """LIF's backward reads its charge h alone: a training call saves one
    [T, N] float32 sequence, not also its input."""
    total, _, _ = saved_bytes(
        lambda: LIFNode(step_mode="m")(torch.rand(T, N, requires_grad=True))
    )
    assert total == T * N * 4


def test_unsaved_input_gradient_matches_saved():
    """The gradient of a neuron whose input is not saved equals the one
    of the same call through autograd's plain formulas (LIF, hard reset,
    sigmoid surrogate alpha 4, decay_input, tau 2)."""
    torch.manual_seed(0)
    x = (torch.rand(T, N) * 2).requires_grad_()
    LIFNode(step_mode="m")(x).sum().backward()
    y = x.detach().clone().requires_grad_()
    v, out = torch.zeros(N), []
    for t in range(T):
        h = v + (y[t] - v) / 2.0
        s_value = (h >= 1.0).float()
        sg = torch.sigmoid(4.0 * (h - 1.0))
        s = s_value + (sg - sg.detach())
        v = h * (1 - s)
        out.append(s)
    torch.stack(out).sum().backward()
    assert ((x.grad - y.grad).norm() / y.grad.norm()).item() < 1e-5


def _call_and_gradients(module, inputs):
    """The call's outputs, final states and input and parameter gradients
    (the loss weighs each output and final state by a fixed random draw:
    both gradients reach the backward)."""
    out = module(*inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    states = [s for s in module.states if isinstance(s, torch.Tensor)]
    gen = torch.Generator().manual_seed(1)
    sum(
        (o * torch.randn(o.shape, generator=gen)).sum()
        for o in list(outs) + states
    ).backward()
    return (
        [o.detach() for o in outs]
        + [s.detach() for s in states]
        + [x.grad for x in inputs]
        + [p.grad for p in module.parameters()]
    )


@pytest.mark.parametrize("name,make", MODULES, ids=[m[0] for m in MODULES])
def test_recompute_saves_the_inputs_alone(name, make):
    """With `recompute`, a training call saves its inputs and nothing of
    its backward's (no workspace), and computes bit for bit what the
    saving call computes: outputs, states and every gradient."""
    results = []
    for recompute in (False, True):
        torch.manual_seed(0)
        module = make()
        module.recompute = recompute
        inputs = [
            (torch.rand(T, N) * 2).requires_grad_() for _ in module.info.inputs
        ]
        if recompute:
            total, count, _ = saved_bytes(lambda: module(*inputs))
            expected = len(inputs) * T * N * 4
            assert total == expected, (
                f"{name}: a recomputing call saved {total} bytes in "
                f"{count} storage(s), its inputs are {expected}"
            )
            module.reset()
        results.append(_call_and_gradients(module, inputs))
    saving, recomputing = results
    assert len(saving) == len(recomputing)
    for k, (a, b) in enumerate(zip(saving, recomputing)):
        assert (a is None) == (b is None), k
        assert a is None or torch.equal(a, b), f"{name}: result {k} differs"


def test_recompute_from_a_given_initial_state():
    """A recomputing call with initial states (a sequence fed in pieces)
    keeps them too, and its gradients match the saving call's."""
    results = []
    for recompute in (False, True):
        module = FlexSN("izhikevich", recompute=recompute)
        torch.manual_seed(0)
        x = (torch.rand(T, N) * 20).requires_grad_()
        module(x[: T // 2])
        results.append(_call_and_gradients(module, [x]))
    for a, b in zip(*results):
        assert a is None and b is None or torch.equal(a, b)


def test_fused_block_recomputing_holds_no_charge():
    """conv -> batch norm -> LIF fused into a block: recomputing, the
    training step holds the charge h no more (the batch norm keeps the
    block's input anyway), T * N float32 bytes less."""
    from torch import nn

    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.sn = LIFNode(step_mode="m")

        def forward(self, x):
            y = self.conv(x.flatten(0, 1))
            return self.sn(self.bn(y).view(x.shape[0], x.shape[1], 4, 8, 8))

    held = []
    for recompute in (False, True):
        torch.manual_seed(0)
        model = flexsn.torch.fuse(Chain())
        assert flexsn.torch.set_recompute(model, recompute) == 1
        x = torch.rand(T, 2, 2, 8, 8)
        total, _, y = saved_bytes(lambda: model(x))
        y.sum().backward()
        held.append(total)
    assert held[0] - held[1] == T * 2 * 4 * 8 * 8 * 4, held
