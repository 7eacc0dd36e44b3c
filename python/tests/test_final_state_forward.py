"""Training calls that keep only final states (a model's neuron between two
layers, SpikingJelly's default store_v_seq=False) run the forward kernel
that writes each state once, at its end, instead of the whole sequence.
Its step and saves are those of the sequence forward, whose results other
tests check against formulas: here the two forwards' results are compared
bitwise, and which kernel ran is observed at its launch."""

import pytest
import torch

from flexsn.torch import (
    FlexSN,
    get_compile_policy,
    has_custom_op,
    set_compile_policy,
)
from flexsn.torch._kernels import NeuronKernels

from devices import DEVICES


@pytest.fixture
def launches(monkeypatch):
    """The names of the kernels launched."""
    names = []
    launch = NeuronKernels._launch

    def spy(self, kernel, *args, **kwargs):
        names.append(kernel.spec.name)
        return launch(self, kernel, *args, **kwargs)

    monkeypatch.setattr(NeuronKernels, "_launch", spy)
    return names


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("neuron", ["lif", "izhikevich"])
def test_final_state_forward_equals_sequence_forward(
    device, dtype, neuron, launches
):
    """Spikes, final states and the gradients of x and of the initial
    states, through a loss reading the spikes and every final state."""
    gen = torch.Generator().manual_seed(7)
    T, shape = 5, (3, 70)
    x = (torch.randn((T,) + shape, generator=gen) * 1.5 + 0.4).to(
        device, dtype
    )
    modules = {
        store: FlexSN(neuron, store_state_seqs=store).to(device)
        for store in (False, True)
    }
    num_states = len(modules[False].states)
    inits = [
        (torch.rand(shape, generator=gen) * 0.5).to(device, dtype)
        for _ in range(num_states)
    ]
    grad_s = torch.randn((T,) + shape, generator=gen).to(device, dtype)
    grad_v = [
        torch.randn(shape, generator=gen).to(device, dtype)
        for _ in range(num_states)
    ]
    results = {}
    for store, module in modules.items():
        del launches[:]
        xi = x.clone().requires_grad_()
        v0 = [v.clone().requires_grad_() for v in inits]
        module.states[:] = v0
        s = module(xi)
        finals = list(module.states)
        loss = (s.float() * grad_s.float()).sum() + sum(
            (v.float() * g.float()).sum() for v, g in zip(finals, grad_v)
        )
        loss.backward()
        results[store] = [s, *finals, xi.grad, *(v.grad for v in v0)]
        forward = [n for n in launches if "_forward" in n]
        assert forward == [
            f"{neuron}_forward"
            + ("" if store else "_final_state")
            + "_"
            + {torch.float32: "f32", torch.float16: "f16"}[dtype]
        ], launches
    for got, want in zip(results[False], results[True]):
        assert got.shape == want.shape and torch.equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_no_steps_keep_the_initial_states(device, launches):
    """T = 0: nothing runs; the final states are (copies of) the initial
    ones, and their gradients pass straight through."""
    module = FlexSN("izhikevich").to(device)
    v0 = [
        torch.full((4,), 0.25, device=device, requires_grad=True),
        torch.full((4,), -0.5, device=device, requires_grad=True),
    ]
    module.states[:] = v0
    x = torch.empty((0, 4), device=device, requires_grad=True)
    module(x)
    finals = list(module.states)
    assert not launches
    assert all(torch.equal(f, v) and f is not v for f, v in zip(finals, v0))
    sum(f.sum() for f in finals).backward()
    assert all(torch.equal(v.grad, torch.ones(4, device=device)) for v in v0)


@pytest.mark.skipif(
    not has_custom_op(), reason="torch has no torch.library.custom_op"
)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("neuron", ["lif", "izhikevich"])
def test_compiled_training_keeps_final_states(device, neuron, launches):
    """Under torch.compile (the flexsn::scan custom op) a training call
    that keeps only final states runs the same final-state forward, and
    the final states' gradients reach the backward kernel: the loss, x's
    and the initial states' gradients equal the eager call's. The kernels
    run for every call (policy "kernels"): by size, a call this small
    would run the neuron's PyTorch step, which launches none."""
    previous = get_compile_policy()
    set_compile_policy("kernels")
    try:
        _compiled_training_keeps_final_states(device, neuron, launches)
    finally:
        set_compile_policy(previous)


def _compiled_training_keeps_final_states(device, neuron, launches):
    gen = torch.Generator().manual_seed(11)
    T, N = 6, 200
    x = (torch.randn(T, N, generator=gen) * 1.5 + 0.4).to(device)
    module = FlexSN(neuron).to(device)
    inits = [
        (torch.rand(N, generator=gen) * 0.5).to(device) for _ in module.states
    ]
    grad_s = torch.randn(T, N, generator=gen).to(device)
    grad_v = [torch.randn(N, generator=gen).to(device) for _ in inits]

    def run(x, inits):
        module.states[:] = inits
        s = module(x)
        return (s * grad_s).sum() + sum(
            (v * g).sum() for v, g in zip(module.states, grad_v)
        )

    results = []
    for fn in (run, torch.compile(run, fullgraph=True, backend="aot_eager")):
        del launches[:]
        xi = x.clone().requires_grad_()
        v0 = [v.clone().requires_grad_() for v in inits]
        loss = fn(xi, v0)
        loss.backward()
        results.append([loss.detach(), xi.grad, *(v.grad for v in v0)])
        assert [n for n in launches if "_forward" in n] == [
            f"{neuron}_forward_final_state_f32"
        ], launches
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
