"""flexsn.torch.Recurrent: s[t] = neuron(W_in x[t] + b + W_rec s[t-1])
against the same layer written as an eager loop over the numerics
oracle's step (reference.recurrent_ref): spikes, and the gradients of the
input, both weight matrices, the bias and the neuron's parameters by
relative norm; its state across calls; to_nir and back."""

import pytest
import torch

from devices import DEVICES
from flexsn.torch import (
    IFNode,
    LIFNode,
    ParametricLIFNode,
    Recurrent,
    from_nir,
    to_nir,
)
from reference import recurrent_ref

T, B, I, H = 24, 3, 5, 7

NEURONS = {
    "lif": (lambda: LIFNode(tau=2.0, step_mode="m"), {"tau": 2.0}),
    "if": (lambda: IFNode(v_reset=None), {"v_reset": None}),
    "plif": (lambda: ParametricLIFNode(init_tau=3.0, step_mode="m"), None),
}


def relative_error(got, want):
    return float((got - want).norm() / want.norm())


def layer_and_inputs(kind, device, bias=True, seed=0):
    torch.manual_seed(seed)
    make, _ = NEURONS[kind]
    layer = Recurrent(I, H, make(), bias=bias).to(device)
    with torch.no_grad():  # drives that make the neurons fire now and then
        layer.input.weight.normal_(0.2, 0.8)
        layer.recurrent.weight.normal_(0, 0.6)
    x = (torch.randn(T, B, I, device=device) + 0.8).requires_grad_()
    return layer, x


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("kind", sorted(NEURONS))
def test_against_an_eager_loop(kind, bias, device):
    layer, x = layer_and_inputs(kind, device, bias)
    weights = torch.randn(T, B, H, device=device)
    out = layer(x)
    (out * weights).sum().backward()

    w_in = layer.input.weight.detach().clone().requires_grad_()
    b_in = (
        None
        if not bias
        else layer.input.bias.detach().clone().requires_grad_()
    )
    w_rec = layer.recurrent.weight.detach().clone().requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    _, params = NEURONS[kind]
    if params is None:  # PLIF: 1/tau = sigmoid(w), w trainable
        w = layer.neuron.w.detach().clone().requires_grad_()
        params = {"w": w}
    want = recurrent_ref(kind, x_ref, w_in, b_in, w_rec, **params)
    assert torch.equal(out, want)
    assert 0.05 < float(want.mean()) < 0.95
    (want * weights).sum().backward()

    pairs = [
        (x.grad, x_ref.grad),
        (layer.input.weight.grad, w_in.grad),
        (layer.recurrent.weight.grad, w_rec.grad),
    ]
    if bias:
        pairs.append((layer.input.bias.grad, b_in.grad))
    if kind == "plif":
        pairs.append((layer.neuron.w.grad, params["w"].grad))
    for got, ref in pairs:
        assert ref.abs().sum() > 0
        assert relative_error(got, ref) < 1e-5


def test_the_recurrent_weights_matter():
    """With W_rec zero the layer is the neuron after a Linear; with it, it
    is not (the spikes do come back)."""
    layer, x = layer_and_inputs("lif", "cpu")
    with torch.no_grad():
        x = x.detach()
        recurrent = layer(x)
        layer.reset()
        layer.recurrent.weight.zero_()
        open_loop = layer(x)
        neuron = LIFNode(tau=2.0, step_mode="m")
        assert torch.equal(open_loop, neuron(layer.input(x)))
    assert not torch.equal(recurrent, open_loop)


def test_state_carries_across_calls_until_reset():
    """Two calls of T/2 steps compute one call of T (outputs and
    gradients); reset() starts again from rest."""
    layer, x = layer_and_inputs("lif", "cpu")
    whole = layer(x)
    whole.sum().backward()
    grads = [p.grad.clone() for p in layer.parameters()] + [x.grad.clone()]
    layer.zero_grad()
    x.grad = None
    layer.reset()
    halves = torch.cat([layer(x[: T // 2]), layer(x[T // 2 :])])
    assert torch.equal(halves, whole)
    halves.sum().backward()
    for got, want in zip(
        [p.grad for p in layer.parameters()] + [x.grad], grads
    ):
        assert relative_error(got, want) < 1e-6
    layer.reset()
    assert torch.equal(layer(x), whole)
    # detach() cuts the history: a backward after it reaches only the
    # second call.
    layer.reset()
    layer(x[: T // 2])
    layer.detach()
    x.grad = None
    layer(x[T // 2 :]).sum().backward()
    assert torch.all(x.grad[: T // 2] == 0)
    assert x.grad[T // 2 :].abs().sum() > 0


def test_empty_sequences_and_a_new_batch_size():
    layer, x = layer_and_inputs("lif", "cpu")
    assert layer(x[:0]).shape == (0, B, H)
    layer(x)
    smaller = layer(x[:, :2])  # the last spikes were of 3 samples
    layer.reset()
    assert torch.equal(smaller, layer(x[:, :2]))


def test_goes_to_nir_and_back_identically(tmp_path):
    """to_nir writes the layer as a nested graph with a cycle; from_nir
    reads it back as a model computing the same spikes, bit for bit."""
    from flexsn import nir

    layer, x = layer_and_inputs("lif", "cpu")
    model = torch.nn.Sequential(layer, torch.nn.Linear(H, 2))
    graph = to_nir(model)
    cell = graph.nodes["0"]
    assert isinstance(cell, nir.Graph)
    assert ("w_rec", "neuron") in cell.edges
    assert cell.nodes["neuron"].type == "LIF"
    nir.write(tmp_path / "rnn.nir", graph)
    back = from_nir(str(tmp_path / "rnn.nir"))
    with torch.no_grad():
        x = x.detach()
        layer.reset()
        assert torch.equal(back(x), model(x))


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="hidden_size must be a positive"):
        Recurrent(3, 0)
    with pytest.raises(TypeError, match="must be a FlexSN neuron module"):
        Recurrent(3, 4, torch.nn.ReLU())
    with pytest.raises(ValueError, match=r"expects \[T, B, 3\] inputs"):
        Recurrent(3, 4)(torch.zeros(2, 5))
