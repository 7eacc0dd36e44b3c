"""flexsn.torch.from_nir: each NIR primitive against its equation, written
here in NumPy float64 from NIR's documentation (docs/NIR.md states the
forward-Euler step), graphs of several kinds, and the errors."""

import numpy as np
import pytest
import torch

from flexsn import nir
from devices import DEVICES
from reference import spike
from flexsn.torch import IFNode, LIFNode, ParametricLIFNode, from_nir, to_nir

DT = 1e-4
T, B = 12, 3


def graph_of(node, shape):
    """Input -> node -> Output."""
    shape = np.array(shape)
    return nir.Graph(
        {
            "input": nir.Node("Input", {"shape": shape}),
            "node": node,
            "output": nir.Node("Output", {"shape": shape}),
        },
        [("input", "node"), ("node", "output")],
    )


def run(graph, x):
    model = from_nir(graph, dt=DT)
    with torch.no_grad():
        return model(torch.as_tensor(x, dtype=torch.float32)).double().numpy()


# -- the neurons: NIR's equations, forward Euler ----------------------------


def euler_step(kind, g, xt, v, i):
    """One step of NIR's `kind` (parameters g, float64) on input xt from
    the states v, i: (output, v, i, the margin |v - v_threshold| before
    the reset, or None)."""
    if kind == "LIF" or kind == "LI":
        v = v + DT / g["tau"] * ((g["v_leak"] - v) + g["r"] * xt)
    elif kind == "IF" or kind == "I":
        v = v + DT * g["r"] * xt
    else:  # CubaLIF, CubaLI: v integrates the previous step's current
        v_next = v + DT / g["tau_mem"] * ((g["v_leak"] - v) + g["r"] * i)
        i = i + DT / g["tau_syn"] * (g["w_in"] * xt - i)
        v = v_next
    if kind not in ("LIF", "IF", "CubaLIF"):
        return v.copy(), v, i, None
    margin = np.abs(v - g["v_threshold"])
    s = (v > g["v_threshold"]).astype(np.float64)
    return s, np.where(s > 0, g["v_reset"], v), i, margin


def euler(kind, p, x):
    """(outputs [T, ...], the margin |v - v_threshold| of each step before
    the reset, or None) of NIR's `kind` over x [T, ...], from rest."""
    g = {k: np.asarray(v, np.float64) for k, v in p.items()}
    v = np.zeros(x.shape[1:])
    i = np.zeros(x.shape[1:])
    outs, margins = [], []
    for xt in x:
        out, v, i, margin = euler_step(kind, g, xt, v, i)
        outs.append(out)
        margins.append(margin)
    return np.stack(outs), (None if margins[0] is None else np.stack(margins))


def neuron_params(kind, n, rng, scalar=False):
    shape = () if scalar else (n,)

    def u(lo, hi):
        return rng.uniform(lo, hi, shape).astype(np.float32)

    p = {}
    if kind in ("LIF", "LI"):
        p.update(tau=u(2e-4, 8e-4), r=u(0.5, 2.0), v_leak=u(-0.2, 0.2))
    elif kind in ("IF", "I"):
        p.update(r=u(2e3, 8e3))  # r = 1/dt-ish: a step adds about x
    else:
        p.update(
            tau_syn=u(2e-4, 6e-4),
            tau_mem=u(2e-4, 8e-4),
            r=u(0.5, 2.0),
            v_leak=u(-0.2, 0.2),
            w_in=u(1.0, 3.0),
        )
    if kind in ("LIF", "IF", "CubaLIF"):
        p.update(v_threshold=u(0.5, 1.0), v_reset=u(-0.3, 0.1))
    return p


@pytest.mark.parametrize(
    "scalar", [False, True], ids=["per-neuron", "one-for-all"]
)
@pytest.mark.parametrize("kind", ["LIF", "IF", "LI", "I", "CubaLIF", "CubaLI"])
def test_neuron_against_its_equation(kind, scalar):
    rng = np.random.default_rng(7)
    n = 5
    p = neuron_params(kind, n, rng, scalar)
    x = rng.normal(0.6, 0.8, (T, B, n))
    got = run(graph_of(nir.Node(kind, p), [n]), x)
    want, margins = euler(kind, p, x)
    if margins is None:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
        return
    # Compare each neuron up to the first step within 1e-4 of its
    # threshold, where float32 and float64 may decide apart.
    near = margins < 1e-4
    first = np.where(near.any(0), near.argmax(0), T)
    steps = np.arange(T)[:, None, None]
    check = steps < first
    assert check.mean() > 0.8
    np.testing.assert_array_equal(got[check], want[check])
    assert 0 < want.mean() < 1  # some spikes, not all


def test_neuron_of_a_conv_layer_keeps_its_shape():
    """Parameters of a [C, H, W] layer, one per neuron."""
    rng = np.random.default_rng(1)
    shape = (2, 3, 4)
    p = {
        k: np.broadcast_to(v, shape).copy()
        for k, v in neuron_params("LIF", 1, rng, scalar=True).items()
    }
    p["tau"] = rng.uniform(2e-4, 8e-4, shape).astype(np.float32)
    x = rng.normal(0.6, 0.8, (T, B) + shape)
    got = run(graph_of(nir.Node("LIF", p), shape), x)
    want, margins = euler("LIF", p, x)
    ok = (margins > 1e-4).all(0)
    np.testing.assert_array_equal(got[:, ok], want[:, ok])


def test_gradients_reach_the_weights_and_the_neurons():
    rng = np.random.default_rng(3)
    p = neuron_params("LIF", 4, rng)
    graph = nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([3])}),
            "fc": nir.Node(
                "Affine",
                {
                    "weight": rng.normal(0, 1, (4, 3)).astype(np.float32),
                    "bias": np.full(4, 0.3, np.float32),
                },
            ),
            "lif": nir.Node("LIF", p),
            "output": nir.Node("Output", {"shape": np.array([4])}),
        },
        [("input", "fc"), ("fc", "lif"), ("lif", "output")],
    )
    model = from_nir(graph, dt=DT)
    out = model(torch.rand(T, B, 3) * 2)
    out.sum().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all()
        assert param.grad.abs().sum() > 0, name


# -- the other primitives ---------------------------------------------------


def conv_ref(x, w, b, stride, pads, dilation, groups):
    """A direct convolution: x [N, Ci, *S], w [Co, Ci/groups, *K], pads
    per spatial dimension as (before, after)."""
    x = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    n, k = x.shape[2:], w.shape[2:]
    out_size = [
        (n[d] - dilation[d] * (k[d] - 1) - 1) // stride[d] + 1
        for d in range(len(n))
    ]
    co, cig = w.shape[:2]
    y = np.zeros((x.shape[0], co) + tuple(out_size))
    for o in range(co):
        g = o // (co // groups)
        for pos in np.ndindex(*out_size):
            for kk in np.ndindex(*k):
                idx = tuple(
                    pos[d] * stride[d] + kk[d] * dilation[d]
                    for d in range(len(n))
                )
                patch = x[(slice(None), slice(g * cig, (g + 1) * cig)) + idx]
                y[(slice(None), o) + pos] += patch @ w[(o, slice(None)) + kk]
        y[:, o] += b[o]
    return y


@pytest.mark.parametrize(
    "case",
    [
        dict(
            padding=np.array([1, 0]), stride=(1, 2), dilation=(1, 1), groups=1
        ),
        dict(padding="same", stride=(1, 1), dilation=(2, 1), groups=2),
        dict(padding="valid", stride=(2, 1), dilation=(1, 1), groups=1),
    ],
    ids=["pad-stride", "same-dilation-groups", "valid"],
)
def test_conv2d_against_a_direct_convolution(case):
    rng = np.random.default_rng(2)
    ci, co, k = 4, 6, (3, 2)
    w = rng.normal(0, 1, (co, ci // case["groups"]) + k).astype(np.float32)
    b = rng.normal(0, 1, co).astype(np.float32)
    node = nir.Node(
        "Conv2d",
        {
            "weight": w,
            "bias": b,
            "stride": np.array(case["stride"]),
            "padding": case["padding"],
            "dilation": np.array(case["dilation"]),
            "groups": case["groups"],
        },
    )
    x = rng.normal(0, 1, (T, B, ci, 7, 6))
    got = run(graph_of(node, [ci, 7, 6]), x)
    if isinstance(case["padding"], str):
        total = [case["dilation"][d] * (k[d] - 1) for d in range(2)]
        pads = (
            [(t // 2, t - t // 2) for t in total]
            if case["padding"] == "same"
            else [(0, 0), (0, 0)]
        )
    else:
        pads = [(int(p), int(p)) for p in case["padding"]]
    want = conv_ref(
        x.reshape((T * B,) + x.shape[2:]),
        w,
        b,
        case["stride"],
        pads,
        case["dilation"],
        case["groups"],
    )
    np.testing.assert_allclose(
        got, want.reshape((T, B) + want.shape[1:]), rtol=1e-4, atol=1e-4
    )


def test_conv1d_and_pools():
    rng = np.random.default_rng(4)
    w = rng.normal(0, 1, (3, 2, 3)).astype(np.float32)
    node = nir.Node(
        "Conv1d",
        {
            "weight": w,
            "bias": np.zeros(3, np.float32),
            "stride": 1,
            "padding": 1,
            "dilation": 1,
            "groups": 1,
        },
    )
    x = rng.normal(0, 1, (T, B, 2, 9))
    got = run(graph_of(node, [2, 9]), x)
    want = conv_ref(
        x.reshape(T * B, 2, 9), w, np.zeros(3), (1,), [(1, 1)], (1,), 1
    )
    np.testing.assert_allclose(
        got, want.reshape(T, B, 3, 9), rtol=1e-4, atol=1e-4
    )
    x = rng.normal(0, 1, (T, B, 2, 4, 6))
    windows = x.reshape(T, B, 2, 2, 2, 3, 2).transpose(0, 1, 2, 3, 5, 4, 6)
    for kind, want in (
        ("SumPool2d", windows.sum((5, 6))),
        ("AvgPool2d", windows.mean((5, 6))),
    ):
        node = nir.Node(
            kind,
            {
                "kernel_size": np.array([2, 2]),
                "stride": np.array([2, 2]),
                "padding": np.array([0, 0]),
            },
        )
        np.testing.assert_allclose(
            run(graph_of(node, [2, 4, 6]), x), want, rtol=1e-5, atol=1e-5
        )


def test_affine_scale_flatten_threshold_delay():
    rng = np.random.default_rng(5)
    w = rng.normal(0, 1, (4, 6)).astype(np.float32)
    b = rng.normal(0, 1, 4).astype(np.float32)
    x = rng.normal(0, 1, (T, B, 6))
    np.testing.assert_allclose(
        run(graph_of(nir.Node("Affine", {"weight": w, "bias": b}), [6]), x),
        x @ w.T.astype(np.float64) + b,
        rtol=1e-5,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        run(graph_of(nir.Node("Linear", {"weight": w}), [6]), x),
        x @ w.T.astype(np.float64),
        rtol=1e-5,
        atol=1e-5,
    )
    scale = rng.normal(0, 1, 6).astype(np.float32)
    np.testing.assert_allclose(
        run(graph_of(nir.Node("Scale", {"scale": scale}), [6]), x),
        x * scale,
        rtol=1e-6,
        atol=1e-6,
    )
    x3 = rng.normal(0, 1, (T, B, 2, 3, 4))
    flat = run(
        graph_of(
            nir.Node("Flatten", {"start_dim": 1, "end_dim": -1}), [2, 3, 4]
        ),
        x3,
    )
    assert flat.shape == (T, B, 2, 12)
    np.testing.assert_allclose(flat, x3.reshape(T, B, 2, 12), rtol=1e-6)
    threshold = np.array([0.0, 0.5, -0.5, 1.0, 0.25, 2.0], np.float32)
    x[0, 0] = threshold  # exactly at the threshold: no spike (strict)
    got = run(
        graph_of(nir.Node("Threshold", {"threshold": threshold}), [6]), x
    )
    np.testing.assert_array_equal(got, (x.astype(np.float32) > threshold))
    delay = np.array([0, 1, 2, 5, 0, 3], np.float32) * DT
    got = run(graph_of(nir.Node("Delay", {"delay": delay}), [6]), x)
    want = np.zeros_like(x)
    for n, d in enumerate(np.round(delay / DT).astype(int)):
        want[d:, :, n] = x[: T - d, :, n]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# -- graphs -----------------------------------------------------------------


def test_nested_graphs_and_summed_inputs(tmp_path):
    """A nested graph addressed as "sub.node" and as "sub" itself, and a
    node with two incoming edges (their sum); read from a file."""
    scale = np.array([2.0, -1.0, 0.5], np.float32)
    inner = nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([3])}),
            "scale": nir.Node("Scale", {"scale": scale}),
            "output": nir.Node("Output", {"shape": np.array([3])}),
        },
        [("input", "scale"), ("scale", "output")],
    )
    graph = nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([3])}),
            "sub": inner,
            "twice": nir.Node("Scale", {"scale": np.full(3, 3.0, np.float32)}),
            "output": nir.Node("Output", {"shape": np.array([3])}),
        },
        [
            ("input", "sub"),
            ("input", "twice"),
            ("sub.output", "output"),
            ("twice", "output"),
        ],
    )
    nir.write(tmp_path / "g.nir", graph)
    model = from_nir(str(tmp_path / "g.nir"), dt=DT)
    x = np.random.default_rng(6).normal(0, 1, (T, B, 3))
    with torch.no_grad():
        got = model(torch.as_tensor(x, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(got, x * scale + 3 * x, rtol=1e-5, atol=1e-6)


# -- recurrent graphs --------------------------------------------------------


def recurrent_network(rng, nested):
    """The NIR paper's recurrent network, small: input -> fc1 -> a CubaLIF
    layer whose spikes come back through an Affine w_rec -> fc2 -> a
    CubaLIF readout -> output. Flat, with the ids NIR's writer gives a
    graph it flattened ("lif1.lif"), or with lif1 a nested graph."""
    n_in, n_hid, n_out = 4, 6, 3

    def affine(n, m, scale):
        return nir.Node(
            "Affine",
            {
                "weight": rng.normal(0, scale, (n, m)).astype(np.float32),
                "bias": rng.normal(0.1, 0.2, n).astype(np.float32),
            },
        )

    nodes = {
        "input": nir.Node("Input", {"shape": np.array([n_in])}),
        "fc1": affine(n_hid, n_in, 1.5),
        "fc2": affine(n_out, n_hid, 3.0),
        "lif2": nir.Node("CubaLIF", neuron_params("CubaLIF", n_out, rng)),
        "output": nir.Node("Output", {"shape": np.array([n_out])}),
    }
    cell = {
        "lif": nir.Node("CubaLIF", neuron_params("CubaLIF", n_hid, rng)),
        "w_rec": affine(n_hid, n_hid, 0.8),
    }
    edges = [("input", "fc1"), ("lif2", "output"), ("fc2", "lif2")]
    if nested:
        nodes["lif1"] = nir.Graph(
            dict(
                cell,
                input=nir.Node("Input", {"shape": np.array([n_hid])}),
                output=nir.Node("Output", {"shape": np.array([n_hid])}),
            ),
            [
                ("input", "lif"),
                ("lif", "w_rec"),
                ("w_rec", "lif"),
                ("lif", "output"),
            ],
        )
        edges += [("fc1", "lif1"), ("lif1", "fc2")]
    else:
        nodes.update({"lif1." + k: v for k, v in cell.items()})
        # In the paper's file's order: the edge closing the cycle first.
        edges = (
            [("lif1.w_rec", "lif1.lif")]
            + edges
            + [
                ("lif1.lif", "lif1.w_rec"),
                ("fc1", "lif1.lif"),
                ("lif1.lif", "fc2"),
            ]
        )
    return nir.Graph(nodes, edges), cell


def recurrent_reference(graph, cell, x):
    """NIR's equations step by step, in float64: the layer's input at step
    t is fc1(x[t]) + w_rec(s[t-1]), s[-1] = 0 (so w_rec gives its bias at
    the first step). Returns (outputs, margins of both layers)."""
    g = {
        k: {p: np.asarray(v, np.float64) for p, v in node.params.items()}
        for k, node in [
            ("fc1", graph.nodes["fc1"]),
            ("fc2", graph.nodes["fc2"]),
            ("lif2", graph.nodes["lif2"]),
        ]
        + list(cell.items())
    }
    n_hid = g["fc1"]["bias"].size
    s1 = np.zeros(x.shape[1:2] + (n_hid,))
    v1 = i1 = np.zeros_like(s1)
    v2 = i2 = np.zeros(x.shape[1:2] + g["fc2"]["bias"].shape)
    outs, margins = [], []
    for xt in x:
        drive = (
            xt @ g["fc1"]["weight"].T
            + g["fc1"]["bias"]
            + s1 @ g["w_rec"]["weight"].T
            + g["w_rec"]["bias"]
        )
        s1, v1, i1, m1 = euler_step("CubaLIF", g["lif"], drive, v1, i1)
        s2, v2, i2, m2 = euler_step(
            "CubaLIF",
            g["lif2"],
            s1 @ g["fc2"]["weight"].T + g["fc2"]["bias"],
            v2,
            i2,
        )
        outs.append(s2)
        margins.append(np.minimum(m1.min(-1), m2.min(-1)))
    return np.stack(outs), np.stack(margins)


@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_a_recurrent_graph_against_its_equations(nested, tmp_path):
    """The spikes of a cycle come back at the next step; read from a
    file."""
    rng = np.random.default_rng(11)
    graph, cell = recurrent_network(rng, nested)
    nir.write(tmp_path / "rnn.nir", graph)
    steps = 40
    x = rng.normal(0.8, 1.0, (steps, 5, 4))
    model = from_nir(str(tmp_path / "rnn.nir"), dt=DT)
    with torch.no_grad():
        got = model(torch.as_tensor(x, dtype=torch.float32)).numpy()
    want, margins = recurrent_reference(graph, cell, x)
    # Each sample up to its first step within 1e-4 of a threshold, where
    # float32 and float64 may decide apart (and the cycle carries it on).
    near = margins < 1e-4
    first = np.where(near.any(0), near.argmax(0), steps)
    check = np.arange(steps)[:, None] < first
    assert check.mean() > 0.8
    np.testing.assert_array_equal(got[check], want[check])
    assert 0.05 < want.mean() < 0.95
    # The cycle matters: without w_rec the output differs.
    graph.edges = [
        e
        for e in graph.edges
        if e not in (("lif1.w_rec", "lif1.lif"), ("w_rec", "lif"))
    ]
    if nested:
        graph.nodes["lif1"].edges.remove(("w_rec", "lif"))
        graph.nodes["lif1"].nodes.pop("w_rec")
        graph.nodes["lif1"].edges.remove(("lif", "w_rec"))
    else:
        graph.nodes.pop("lif1.w_rec")
        graph.edges.remove(("lif1.lif", "lif1.w_rec"))
    with torch.no_grad():
        open_loop = from_nir(graph, dt=DT)(
            torch.as_tensor(x, dtype=torch.float32)
        ).numpy()
    assert not np.array_equal(open_loop, got)


def unrolled(params, x, dt=DT):
    """recurrent_network's model unrolled by hand in torch, from its
    parameters and buffers by name (`named_parameters` and
    `named_buffers` of its model), with the step from_nir's neurons take
    (docs/Semantics.md) and the sigmoid(4) surrogate."""

    def p(layer, name):
        return params[f"layers.{layer}.{name}"]

    def cuba(layer, x, i, v):
        def q(name):
            return p(layer, "neuron." + name)

        i_next = i + (q("w_in") * x - i) / q("tau_syn")
        h = v + ((q("v_leak") - v) + q("r") * i) / q("tau_mem")
        s = spike(h - q("v_threshold"))
        return s, i_next, s * q("v_reset") + (1.0 - s) * h

    def affine(layer, x):
        return x @ p(layer, "weight").T + p(layer, "bias")

    zeros1 = x.new_zeros(x.shape[1], p("fc1", "bias").numel())
    zeros2 = x.new_zeros(x.shape[1], p("fc2", "bias").numel())
    s1, (i1, v1), (i2, v2), outs = (
        zeros1,
        (zeros1, zeros1),
        (zeros2, zeros2),
        [],
    )
    for xt in x:
        drive = affine("fc1", xt) + affine("lif1__w_rec", s1)
        s1, i1, v1 = cuba("lif1__lif", drive, i1, v1)
        s2, i2, v2 = cuba("lif2", affine("fc2", s1), i2, v2)
        outs.append(s2)
    return torch.stack(outs)


def test_a_recurrent_graph_trains_through_time():
    """Gradients of every weight and neuron parameter of a recurrent graph
    equal those of the network unrolled by hand: the step by step run
    differentiates back through the cycle."""
    rng = np.random.default_rng(12)
    graph, _ = recurrent_network(rng, nested=False)
    model = from_nir(graph, dt=DT)
    x = torch.as_tensor(rng.normal(0.8, 1.0, (16, 3, 4)), dtype=torch.float32)
    weights = torch.as_tensor(
        rng.normal(0, 1, (16, 3, 3)), dtype=torch.float32
    )
    (model(x) * weights).sum().backward()
    params = {
        name: param.detach().clone().requires_grad_()
        for name, param in model.named_parameters()
    }
    want = unrolled(dict(model.named_buffers(), **params), x)
    with torch.no_grad():
        assert torch.equal(model(x), want)
    (want * weights).sum().backward()
    for name, param in model.named_parameters():
        ref = params[name].grad
        assert ref.abs().sum() > 0, name
        error = (param.grad - ref).norm() / ref.norm()
        assert error < 1e-4, (name, float(error))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_a_recurrent_layer_runs_as_coupled_kernels(
    nested, device, monkeypatch
):
    """A cycle lif -> w_rec -> lif runs as the neuron's coupled kernels
    (its module is never called step by step): the outputs and every
    gradient are those of the step-by-step run of the same model."""
    rng = np.random.default_rng(13)
    graph, _ = recurrent_network(rng, nested)
    model = from_nir(graph, dt=DT).to(device)
    x = torch.as_tensor(
        rng.normal(0.8, 1.0, (16, 3, 4)), dtype=torch.float32, device=device
    )
    weights = torch.as_tensor(
        rng.normal(0, 1, (16, 3, 3)), dtype=torch.float32, device=device
    )

    def run():
        model.zero_grad()
        out = model(x)
        (out * weights).sum().backward()
        return out, {n: p.grad.clone() for n, p in model.named_parameters()}

    from flexsn.torch import _nir

    with monkeypatch.context() as patch:
        patch.setattr(_nir, "runs_coupled", lambda neuron, drive: False)
        want, want_grads = run()
    cell = model.layers["lif1__lif"]

    def refuse(*args):
        raise AssertionError("the cycle's neuron was called step by step")

    monkeypatch.setattr(cell, "forward", refuse)
    got, grads = run()
    assert 0.05 < float(want.mean()) < 0.95
    assert torch.equal(got, want)
    for name, ref in want_grads.items():
        assert ref.abs().sum() > 0, name
        error = (grads[name] - ref).norm() / ref.norm()
        assert error < 1e-4, (name, float(error))


def test_a_delay_on_a_cycle():
    """lif -> Delay(d) -> Scale -> lif: the spikes come back d + 1 steps
    later (d by the delay, one by the edge closing the cycle), each
    neuron after its own d."""
    rng = np.random.default_rng(14)
    n, steps = 4, 30
    p = neuron_params("LIF", n, rng)
    delays = np.array([0, 1, 3, 2])
    gain = np.array([0.8, -0.5, 1.2, 0.6], np.float32)
    graph = nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([n])}),
            "lif": nir.Node("LIF", p),
            "d": nir.Node("Delay", {"delay": delays * DT}),
            "w": nir.Node("Scale", {"scale": gain}),
            "output": nir.Node("Output", {"shape": np.array([n])}),
        },
        [
            ("input", "lif"),
            ("lif", "d"),
            ("d", "w"),
            ("w", "lif"),
            ("lif", "output"),
        ],
    )
    x = rng.normal(0.6, 0.8, (steps, B, n))
    got = run(graph, x)
    g = {k: np.asarray(v, np.float64) for k, v in p.items()}
    v, i = np.zeros((B, n)), None
    spikes, margins = [], []
    for t in range(steps):
        back = np.zeros((B, n))
        for k in range(n):  # s[t - 1 - d], zero before the first step
            if t - 1 - delays[k] >= 0:
                back[:, k] = spikes[t - 1 - delays[k]][:, k]
        s, v, i, margin = euler_step("LIF", g, x[t] + gain * back, v, i)
        spikes.append(s)
        margins.append(margin.min(-1))
    want, margins = np.stack(spikes), np.stack(margins)
    near = margins < 1e-4
    first = np.where(near.any(0), near.argmax(0), steps)
    check = np.arange(steps)[:, None] < first
    assert check.mean() > 0.8
    np.testing.assert_array_equal(got[check], want[check])
    assert 0.05 < want.mean() < 0.95


def test_graphs_it_cannot_model_are_clear_errors():
    rng = np.random.default_rng(8)
    n = 3
    lif = nir.Node("LIF", neuron_params("LIF", n, rng))

    def linear():
        return nir.Node("Linear", {"weight": np.eye(n, dtype=np.float32)})

    no_neuron = nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([n])}),
            "a": linear(),
            "b": linear(),
            "lif": lif,
            "output": nir.Node("Output", {"shape": np.array([n])}),
        },
        [
            ("input", "a"),
            ("a", "b"),
            ("b", "a"),
            ("b", "lif"),
            ("lif", "output"),
        ],
    )
    with pytest.raises(
        nir.NIRError, match="cycle through 'a', 'b' has no " "neuron"
    ):
        from_nir(no_neuron, dt=DT)
    unreached = nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([n])}),
            "lif": lif,
            "w": linear(),
            "other": linear(),
            "output": nir.Node("Output", {"shape": np.array([n])}),
        },
        [("input", "lif"), ("lif", "output"), ("other", "w"), ("w", "other")],
    )
    with pytest.raises(nir.NIRError, match="the input does not reach it"):
        from_nir(unreached, dt=DT)
    # Shapes that do not fit along an edge, found when the model is built.
    wrong_weight = graph_of(
        nir.Node("Linear", {"weight": np.ones((4, 5), np.float32)}), [n]
    )
    with pytest.raises(
        nir.NIRError,
        match=r"node 'node' \(Linear\): what its edges bring \(\(3,\), "
        r"from 'input'\) does not fit it",
    ):
        from_nir(wrong_weight, dt=DT)
    two_sizes = nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([n])}),
            "wide": nir.Node(
                "Linear", {"weight": np.ones((n + 1, n), np.float32)}
            ),
            "lif": lif,
            "output": nir.Node("Output", {"shape": np.array([n])}),
        },
        [
            ("input", "wide"),
            ("input", "lif"),
            ("wide", "lif"),
            ("lif", "output"),
        ],
    )
    with pytest.raises(
        nir.NIRError,
        match=r"node 'lif' \(LIF\): what its edges bring \(\(3,\), "
        r"\(4,\), from 'input', 'wide'\)",
    ):
        from_nir(two_sizes, dt=DT)
    short = dict(neuron_params("LIF", n, rng), tau=np.full(n, 0.5 * DT))
    with pytest.raises(
        nir.NIRError, match="tau = 5e-05 s is shorter than " "dt = 0.0001 s"
    ):
        from_nir(graph_of(nir.Node("LIF", short), [n]), dt=DT)
    delay = nir.Node("Delay", {"delay": np.array([1.5 * DT])})
    with pytest.raises(nir.NIRError, match="not whole steps"):
        from_nir(graph_of(delay, [1]), dt=DT)
    zero_tau = dict(neuron_params("LIF", n, rng))
    zero_tau["tau"] = np.zeros(n, np.float32)
    with pytest.raises(
        nir.NIRError, match="node .node. \\(LIF\\): tau " "must be positive"
    ):
        from_nir(graph_of(nir.Node("LIF", zero_tau), [n]), dt=DT)
    with pytest.raises(ValueError, match="dt must be a positive"):
        from_nir(graph_of(lif, [n]), dt=0)
    two_inputs = graph_of(lif, [n])
    two_inputs.nodes["input2"] = nir.Node("Input", {"shape": np.array([n])})
    with pytest.raises(nir.NIRError, match="2 Input and 1 Output"):
        from_nir(two_inputs, dt=DT)


# -- models to NIR ----------------------------------------------------------


def test_a_model_from_nir_goes_back_to_nir_as_trained(tmp_path):
    """from_nir -> train a step -> to_nir -> file -> from_nir computes
    what the trained model computes, bit for bit."""
    rng = np.random.default_rng(9)
    graph = nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([2, 6, 6])}),
            "conv": nir.Node(
                "Conv2d",
                {
                    "weight": rng.normal(0, 0.5, (3, 2, 3, 3)).astype(
                        np.float32
                    ),
                    "bias": np.full(3, 0.1, np.float32),
                    "stride": 1,
                    "padding": "same",
                    "dilation": 1,
                    "groups": 1,
                },
            ),
            "lif": nir.Node(
                "LIF",
                {
                    k: np.broadcast_to(v, (3, 6, 6)).copy()
                    for k, v in neuron_params(
                        "LIF", 1, rng, scalar=True
                    ).items()
                },
            ),
            "flat": nir.Node("Flatten", {"start_dim": 0, "end_dim": -1}),
            "fc": nir.Node(
                "Affine",
                {
                    "weight": rng.normal(0, 0.3, (4, 108)).astype(np.float32),
                    "bias": np.zeros(4, np.float32),
                },
            ),
            "cuba": nir.Node("CubaLI", neuron_params("CubaLI", 4, rng)),
            "output": nir.Node("Output", {"shape": np.array([4])}),
        },
        [
            ("input", "conv"),
            ("conv", "lif"),
            ("lif", "flat"),
            ("flat", "fc"),
            ("fc", "cuba"),
            ("cuba", "output"),
        ],
    )
    model = from_nir(graph, dt=DT)
    x = torch.rand(T, B, 2, 6, 6) * 3
    model(x).sum().backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= 0.01 * param.grad
        want = model(x)
    nir.write(tmp_path / "trained.nir", to_nir(model, dt=DT))
    again = from_nir(str(tmp_path / "trained.nir"), dt=DT)
    with torch.no_grad():
        assert torch.equal(again(x), want)
    assert want.abs().sum() > 0


@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_a_recurrent_model_goes_back_to_nir(nested, tmp_path):
    """to_nir of a model read from a recurrent graph: one flat graph, the
    ids a flat file had (a nested graph's nodes named by their path, its
    Input and Output left out), which reads back as the same model."""
    rng = np.random.default_rng(13)
    graph, _ = recurrent_network(rng, nested)
    model = from_nir(graph, dt=DT)
    back = to_nir(model, dt=DT)
    flat, _ = recurrent_network(np.random.default_rng(13), nested=False)
    assert set(back.nodes) == set(flat.nodes)
    assert sorted(back.edges) == sorted(flat.edges)
    nir.write(tmp_path / "back.nir", back)
    again = from_nir(str(tmp_path / "back.nir"), dt=DT)
    x = torch.as_tensor(rng.normal(0.8, 1.0, (20, 3, 4)), dtype=torch.float32)
    with torch.no_grad():
        assert torch.equal(again(x), model(x))


def test_a_sequence_of_flexsn_neurons_goes_to_nir():
    """nn.Linear and FlexSN's IF and LIF neurons (hard reset, tau 3,
    decay_input) as NIR nodes, read back into a model that computes what
    they compute, bit for bit."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(5, 7),
        LIFNode(tau=3.0, step_mode="m", v_threshold=0.8, v_reset=-0.1),
        torch.nn.Linear(7, 4, bias=False),
        IFNode(step_mode="m", v_threshold=0.2),
    )
    graph = to_nir(model, dt=DT)
    assert [n.type for n in graph.nodes.values()] == [
        "Input",
        "Affine",
        "LIF",
        "Linear",
        "IF",
        "Output",
    ]
    lif = graph.nodes["1"].params
    np.testing.assert_allclose(lif["tau"], 3 * DT)
    np.testing.assert_array_equal(lif["v_leak"], lif["v_reset"])
    np.testing.assert_allclose(graph.nodes["3"].params["r"], 1 / DT)
    x = torch.rand(T, B, 5) * 3
    for m in model:
        if hasattr(m, "reset"):
            m.reset()
    with torch.no_grad():
        want = model(x)
        got = from_nir(graph, dt=DT)(x)
    assert torch.equal(got, want) and want.sum() > 0
    # PLIF: tau = 1 / sigmoid(w); without decay_input r = tau.
    plif = torch.nn.Sequential(
        torch.nn.Linear(3, 3),
        ParametricLIFNode(init_tau=4.0, step_mode="m", decay_input=False),
    )
    node = to_nir(plif, dt=DT).nodes["1"]
    np.testing.assert_allclose(node.params["tau"], 4 * DT, rtol=1e-6)
    np.testing.assert_allclose(node.params["r"], 4.0, rtol=1e-6)


def test_what_nir_cannot_hold_names_the_module():
    with pytest.raises(
        nir.NIRError, match="module '1' \\(LIFNode\\): a soft " "reset"
    ):
        to_nir(
            torch.nn.Sequential(
                torch.nn.Linear(2, 2), LIFNode(step_mode="m", v_reset=None)
            )
        )
    with pytest.raises(nir.NIRError, match="module '1' \\(ReLU\\): no NIR"):
        to_nir(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))
    with pytest.raises(nir.NIRError, match="give input_shape"):
        to_nir(torch.nn.Sequential(LIFNode(step_mode="m")))
    with pytest.raises(nir.NIRError, match="takes a model from from_nir"):
        to_nir(LIFNode(step_mode="m"))
