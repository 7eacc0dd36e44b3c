"""Per-neuron parameters (`shapes={"v_threshold": "per_neuron"}`) through
flexsn.compile, flexsn.torch.scan, FlexSN and the drop-in nodes.

Every expected value comes from `lif_loop` below: a plain loop over T with
the formulas of lib/Neurons/lif.mlir's comment (in the file's order of
operations), whose spike is H(x) = (x >= 0) with the sigmoid surrogate's
backward (alpha = 4: g(x) = 4 sigmoid(4x) (1 - sigmoid(4x))), differentiated
by torch autograd. It shares no code with the package.

* forward (inference and training kernels) and gradients of x, the initial
  state and a trainable per-neuron threshold, hard and soft reset, with and
  without detach_reset;
* a scalar trainable tau, a trainable per-neuron threshold and a runtime
  per-neuron v_reset in one neuron (the kernels' argument order);
* T = 0 and N = 0 (zero per-neuron gradients), an optimizer step that moves
  each element, runtime per-neuron parameters (buffers), single-step mode,
  deterministic mode, torch.compile (the custom op, torch >= 2.4);
* bad per-neuron tensors (shape, dtype, device) and bad constructor
  arguments are clear errors naming the parameter.

Each case runs on CPU tensors and, where a GPU is present, on CUDA tensors
(`cuda` marker).
"""

import pytest
import torch

import flexsn
from flexsn.torch import FlexSN, LIFNode, ParametricLIFNode

from devices import DEVICES  # noqa: E402
from shaped_params import (
    FLAGS,
    FWD_TOL,
    GRAD_TOL,
    ModuleCache,  # noqa: E402
    SigmoidSpike,
    check_forward_kernels,
    close,
    set_flags,
    set_param,
    slope,
)

SHAPE = (3, 5)  # the neuron shape: N = 15
T = 7
PER_NEURON = {"v_threshold": "per_neuron"}


# ---------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------


def lif_loop(x, thr, v0=None, tau=2.0, v_reset=0.0, soft=False, detach=False):
    """LIF with decay_input (lib/Neurons/lif.mlir), per-neuron `thr` (and
    possibly per-neuron `v_reset`, tensor `tau`): (spikes, v_seq).

        h = v + (x - (v - V_r)) / tau      V_r = v_reset (hard) or 0 (soft)
        s = spike(h - thr)
        hard: v' = s_d * v_reset + (1 - s_d) * h
        soft: v' = h - s_d * thr           s_d = detach(s) if detach else s
    """
    v = torch.zeros_like(x[0]) if v0 is None else v0
    spikes, vs = [], []
    for t in range(x.shape[0]):
        v_rest = 0.0 if soft else v_reset
        dv = v - v_rest
        h = v + (x[t] - dv) / tau
        s = SigmoidSpike.apply(h - thr)
        s_d = s.detach() if detach else s
        if soft:
            v = h - s_d * thr
        else:
            v = s_d * v_reset + (1 - s_d) * h
        spikes.append(s)
        vs.append(v)
    if not spikes:
        return x.new_zeros(x.shape), x.new_zeros(x.shape)
    return torch.stack(spikes), torch.stack(vs)


def data(device, seed, shape=SHAPE, steps=T):
    """Inputs that make a good fraction of the neurons spike, an initial
    state, and thresholds that differ per neuron."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((steps,) + shape, generator=g) * 0.9 + 0.8
    v0 = torch.rand(shape, generator=g) * 1.1 - 0.2
    thr = torch.rand(shape, generator=g) * 0.8 + 0.6  # 0.6 .. 1.4
    return x.to(device), v0.to(device), thr.to(device)


def weights(device, seed, shape=SHAPE, steps=T):
    g = torch.Generator().manual_seed(seed + 1000)
    return (
        torch.randn((steps,) + shape, generator=g).to(device),
        torch.randn((steps,) + shape, generator=g).to(device),
        torch.randn(shape, generator=g).to(device),
    )


# ---------------------------------------------------------------------------
# Modules, compiled once per file
# ---------------------------------------------------------------------------


def _lif_runtime_flags():
    # The reset flags as runtime parameters: one compile for the matrix.
    return FlexSN(
        "lif",
        kinds={
            "v_threshold": "trainable",
            "soft_reset": "runtime",
            "detach_reset": "runtime",
        },
        shapes=PER_NEURON,
        neuron_shape=SHAPE,
        store_state_seqs=True,
    )


CONFIGS = {
    "lif": _lif_runtime_flags,
    # tau a scalar trainable parameter, v_threshold a trainable per-neuron
    # one, v_reset a runtime per-neuron one: declaration order tau,
    # v_threshold, v_reset.
    "mixed": lambda: FlexSN(
        "lif",
        kinds={
            "tau": "trainable",
            "v_threshold": "trainable",
            "v_reset": "runtime",
        },
        shapes={"v_threshold": "per_neuron", "v_reset": "per_neuron"},
        neuron_shape=SHAPE,
        store_state_seqs=True,
    ),
    "runtime": lambda: FlexSN(
        "lif",
        kinds={"v_threshold": "runtime"},
        shapes=PER_NEURON,
        params={"v_threshold": torch.full(SHAPE, 0.9)},
    ),
    "node": lambda: LIFNode(
        step_mode="m", per_neuron_threshold=True, neuron_shape=(6,)
    ),
    "node-s": lambda: LIFNode(
        per_neuron_threshold=True, neuron_shape=(6,), step_mode="s"
    ),
}

# A fresh-state module of a configuration on a device (one compile each).
module = ModuleCache(CONFIGS)


# ---------------------------------------------------------------------------
# Compile and manifest
# ---------------------------------------------------------------------------


def test_manifest_param_shapes():
    compiled = flexsn.compile(
        "lif",
        kinds={"v_threshold": "trainable", "v_reset": "runtime"},
        shapes={"v_threshold": "per_neuron", "v_reset": "per_neuron"},
        targets=("cpu",),
    )
    params = {p.name: p for p in compiled.info.params}
    assert params["v_threshold"].shape == "per_neuron"
    assert params["v_threshold"].per_neuron
    assert params["v_reset"].per_neuron and params["v_reset"].kind == "runtime"
    assert params["tau"].shape == "scalar" and not params["tau"].per_neuron
    assert [p.name for p in compiled.info.per_neuron_params] == [
        "v_threshold",
        "v_reset",
    ]
    assert compiled.info.scalar_runtime_params == ()
    backward = compiled.manifest.find("cpu", "backward", "f32")
    assert [
        (b.name, b.role) for b in backward.buffers if "per_neuron" in b.role
    ] == [
        ("v_threshold", "per_neuron_param"),
        ("v_reset", "per_neuron_param"),
        ("v_threshold_grad", "per_neuron_param_gradient"),
    ]
    assert backward.params == ()  # no scalar runtime parameter
    # Another shape is another compile (cache key).
    scalar = flexsn.compile(
        "lif",
        kinds={"v_threshold": "trainable", "v_reset": "runtime"},
        targets=("cpu",),
    )
    assert scalar.directory != compiled.directory
    assert not any(p.per_neuron for p in scalar.info.params)


def test_compile_errors():
    with pytest.raises(ValueError, match="unknown shape 'vector'"):
        flexsn.compile(
            "lif", shapes={"v_threshold": "vector"}, targets=("cpu",)
        )
    if not flexsn._tools.tools_available():
        pytest.skip("the FlexSN tools are not installed (a cache-only run)")
    # The compiler refuses a per-neuron const parameter.
    with pytest.raises(
        flexsn.CompileError, match="must be runtime or trainable"
    ):
        flexsn.compile(
            "lif", shapes={"v_threshold": "per_neuron"}, targets=("cpu",)
        )


def test_deterministic_kernel_choice():
    """A deterministic backward exists only for scalar trainable
    parameters: per-neuron gradients alone take the plain kernel."""
    only = flexsn.compile(
        "lif", kinds={"v_threshold": "trainable"}, shapes=PER_NEURON
    )
    mixed = flexsn.compile(
        "lif",
        kinds={"v_threshold": "trainable", "tau": "trainable"},
        shapes=PER_NEURON,
    )
    if "cuda" not in only.targets or only.gpu_image is None:
        pytest.skip("compiled without the CUDA target")
    spec = only.kernel("cuda", "backward", "f32", deterministic=True).spec
    assert not spec.deterministic
    assert spec.buffers_with_role("per_neuron_param_gradient")
    spec = mixed.kernel("cuda", "backward", "f32", deterministic=True).spec
    assert spec.deterministic


# ---------------------------------------------------------------------------
# Forward and gradients against the reference
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flags", list(FLAGS))
def test_forward_matches_reference(flags, device):
    m = module("lif", device)
    set_flags(m, flags)
    x, v0, thr = data(device, 1)
    set_param(m, "v_threshold", thr)
    want_s, want_v = lif_loop(x, thr, v0, **FLAGS[flags])
    assert 0.1 < want_s.mean().item() < 0.9  # the thresholds matter
    check_forward_kernels(m, x, v0, want_s, want_v, FWD_TOL[device])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flags", list(FLAGS))
def test_gradients_match_reference(flags, device):
    m = module("lif", device)
    set_flags(m, flags)
    x, v0, thr = data(device, 2)
    w_s, w_v, w_final = weights(device, 2)
    set_param(m, "v_threshold", thr)

    def loss(s, v_seq):
        return (
            (s * w_s).sum() + (v_seq * w_v).sum() + (v_seq[-1] * w_final).sum()
        )

    x_m, v0_m = x.clone().requires_grad_(), v0.clone().requires_grad_()
    m.reset()
    m.states[0] = v0_m
    loss(m(x_m), m.state_seqs[0]).backward()

    x_r, v0_r = x.clone().requires_grad_(), v0.clone().requires_grad_()
    thr_r = thr.clone().requires_grad_()
    loss(*lif_loop(x_r, thr_r, v0_r, **FLAGS[flags])).backward()

    tol = GRAD_TOL[device]
    close(x_m.grad, x_r.grad, tol, "x.grad")
    close(v0_m.grad, v0_r.grad, tol, "v0.grad")
    assert m.v_threshold.grad.dtype == torch.float32
    close(m.v_threshold.grad, thr_r.grad, tol, "v_threshold.grad")
    # A per-neuron gradient, not one value repeated.
    assert thr_r.grad.abs().min() < 0.5 * thr_r.grad.abs().max()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_storage(dtype, device):
    """Sequences stored in half precision, the per-neuron values and their
    gradient in float32: the kernels compute in float32 from the rounded
    inputs, so they match the float32 reference on those, up to the
    rounding of what they store."""
    m = module("lif", device)
    set_flags(m, "soft")
    x, v0, thr = data(device, 5)
    w_s, w_v, _ = weights(device, 5)
    x, v0 = x.to(dtype), v0.to(dtype)
    set_param(m, "v_threshold", thr)
    x_m, v0_m = x.clone().requires_grad_(), v0.clone().requires_grad_()
    m.reset()
    m.states[0] = v0_m
    s = m(x_m)
    assert s.dtype == dtype and m.v_threshold.dtype == torch.float32
    (
        (s.float() * w_s).sum() + (m.state_seqs[0].float() * w_v).sum()
    ).backward()

    x_r = x.float().requires_grad_()
    v0_r = v0.float().requires_grad_()
    thr_r = thr.clone().requires_grad_()
    want_s, want_v = lif_loop(x_r, thr_r, v0_r, soft=True)
    ((want_s * w_s).sum() + (want_v * w_v).sum()).backward()
    assert torch.equal(s.detach().float(), want_s.detach())
    tol = dict(rtol=2e-2, atol=2e-2)
    close(m.state_seqs[0].detach().float(), want_v.detach(), tol, "v_seq")
    assert m.v_threshold.grad.dtype == torch.float32
    close(m.v_threshold.grad, thr_r.grad, tol, "v_threshold.grad")
    close(x_m.grad.float(), x_r.grad, tol, "x.grad")


@pytest.mark.parametrize("device", DEVICES)
def test_reference_sensitivity(device):
    """The comparisons above can fail: a threshold moved on one neuron, or
    another surrogate slope, moves the reference beyond the tolerances."""
    m = module("lif", device)
    set_flags(m, "hard")
    x, v0, thr = data(device, 2)
    w_s, _, _ = weights(device, 2)
    set_param(m, "v_threshold", thr)
    m.reset()
    x_m = x.clone().requires_grad_()
    (m(x_m) * w_s).sum().backward()

    def reference(thr, alpha=SigmoidSpike.alpha):
        with slope(alpha):
            x_r, thr_r = x.clone().requires_grad_(), thr.clone()
            thr_r.requires_grad_()
            (lif_loop(x_r, thr_r)[0] * w_s).sum().backward()
        return x_r.grad, thr_r.grad

    gx, gthr = reference(thr)
    close(x_m.grad, gx, GRAD_TOL[device], "x.grad")
    close(m.v_threshold.grad, gthr, GRAD_TOL[device], "v_threshold.grad")
    moved = thr.clone()
    moved[1, 2] += 0.05
    gx2, gthr2 = reference(moved)
    assert not torch.allclose(x_m.grad, gx2, **GRAD_TOL[device])
    gx3, gthr3 = reference(thr, alpha=4.4)
    assert not torch.allclose(m.v_threshold.grad, gthr3, **GRAD_TOL[device])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "deterministic", [False, True], ids=["plain", "deterministic"]
)
def test_scalar_and_per_neuron_params_together(deterministic, device):
    """tau (scalar, trainable), v_threshold (per-neuron, trainable) and
    v_reset (per-neuron, runtime) in one neuron."""
    m = module("mixed", device)
    m.deterministic = deterministic
    x, v0, thr = data(device, 3)
    w_s, w_v, _ = weights(device, 3)
    g = torch.Generator().manual_seed(33)
    v_reset = (torch.rand(SHAPE, generator=g) * 0.4 - 0.2).to(device)
    assert [n for n, _ in m.named_parameters()] == ["tau", "v_threshold"]
    assert [n for n, _ in m.named_buffers()] == ["v_reset"]
    with torch.no_grad():
        m.tau.fill_(2.5)
        m.v_reset.copy_(v_reset)
    m.tau.grad = None
    set_param(m, "v_threshold", thr)
    m.reset()
    m.states[0] = v0.clone()
    x_m = x.clone().requires_grad_()
    s = m(x_m)
    ((s * w_s).sum() + (m.state_seqs[0] * w_v).sum()).backward()

    x_r, thr_r = x.clone().requires_grad_(), thr.clone().requires_grad_()
    tau_r = torch.tensor(2.5, device=device, requires_grad=True)
    want_s, want_v = lif_loop(x_r, thr_r, v0, tau=tau_r, v_reset=v_reset)
    ((want_s * w_s).sum() + (want_v * w_v).sum()).backward()

    close(s.detach(), want_s.detach(), FWD_TOL[device], "spikes")
    close(m.state_seqs[0].detach(), want_v.detach(), FWD_TOL[device], "v_seq")
    tol = GRAD_TOL[device]
    close(x_m.grad, x_r.grad, tol, "x.grad")
    close(m.v_threshold.grad, thr_r.grad, tol, "v_threshold.grad")
    assert m.tau.grad.shape == ()
    close(m.tau.grad, tau_r.grad, dict(rtol=1e-3, atol=1e-4), "tau.grad")
    assert m.v_reset.grad is None
    m.deterministic = False


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "steps,shape", [(0, SHAPE), (4, (0,))], ids=["T0", "N0"]
)
def test_empty_gives_zero_gradients(steps, shape, device):
    m = FlexSN(
        "lif",
        kinds={"v_threshold": "trainable"},
        shapes=PER_NEURON,
        params={"v_threshold": torch.full(shape, 0.7)},
    ).to(device)
    x = torch.zeros((steps,) + shape, device=device, requires_grad=True)
    v0 = (
        torch.arange(float(torch.Size(shape).numel()))
        .reshape(shape)
        .to(device)
        .requires_grad_()
    )
    w = torch.arange(1.0, 1.0 + torch.Size(shape).numel()).reshape(shape)
    m.states[0] = v0
    with torch.no_grad():
        m.v_threshold.fill_(0.7)
    s = m(x)
    assert s.shape == (steps,) + shape
    (s.sum() + (m.states[0] * w.to(device)).sum()).backward()
    assert m.v_threshold.grad is not None
    assert m.v_threshold.grad.shape == shape
    assert torch.equal(m.v_threshold.grad, torch.zeros(shape, device=device))
    if steps == 0:
        # The final state is the initial one.
        assert torch.equal(v0.grad, w.to(device))


# ---------------------------------------------------------------------------
# Modules: training, runtime buffers, single step, the drop-in nodes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_optimizer_step_changes_each_element(device):
    m = module("node", device)
    assert isinstance(m.v_threshold, torch.nn.Parameter)
    assert m.v_threshold.shape == (6,)
    with torch.no_grad():
        m.v_threshold.fill_(1.0)  # the default
    m.v_threshold.grad = None
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(12, 6, generator=g) * 0.9 + 0.8).to(device)
    w = torch.randn(12, 6, generator=g).to(device)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    before = m.v_threshold.detach().clone()
    m.reset()
    (m(x) * w).sum().backward()
    grad = m.v_threshold.grad.clone()
    thr_r = before.clone().requires_grad_()
    (lif_loop(x, thr_r)[0] * w).sum().backward()
    close(grad, thr_r.grad, GRAD_TOL[device], "v_threshold.grad")
    opt.step()
    after = m.v_threshold.detach()
    close(after, before - 0.1 * grad, dict(rtol=1e-6, atol=1e-7), "step")
    assert (after != before).any()
    assert len(set(after.tolist())) > 1  # each element its own value
    # The next call runs with the new thresholds.
    m.reset()
    with torch.no_grad():
        s = m(x)
    close(s, lif_loop(x, after)[0], FWD_TOL[device], "spikes after step")


@pytest.mark.parametrize("device", DEVICES)
def test_runtime_per_neuron_param_is_a_buffer(device):
    m = module("runtime", device)
    assert list(m.parameters()) == []
    assert [n for n, _ in m.named_buffers()] == ["v_threshold"]
    assert m.v_threshold.dtype == torch.float32
    assert not m.v_threshold.requires_grad
    assert "v_threshold" in m.state_dict()
    x, v0, thr = data(device, 5)
    m.v_threshold.copy_(thr)
    with torch.no_grad():
        m.reset()
        s = m(x)
    close(s, lif_loop(x, thr)[0], FWD_TOL[device], "spikes")
    # Changed in place: the next call sees the new values (the plan cached
    # for this layout holds no values).
    m.v_threshold.add_(0.3)
    with torch.no_grad():
        m.reset()
        s = m(x)
    close(s, lif_loop(x, thr + 0.3)[0], FWD_TOL[device], "spikes (moved)")
    # Gradients reach the inputs, not the buffer.
    x_m, x_r = x.clone().requires_grad_(), x.clone().requires_grad_()
    w = weights(device, 5)[0]
    m.reset()
    m.states[0] = v0.clone()
    (m(x_m) * w).sum().backward()
    (lif_loop(x_r, thr + 0.3, v0)[0] * w).sum().backward()
    close(x_m.grad, x_r.grad, GRAD_TOL[device], "x.grad")
    assert m.v_threshold.grad is None
    m.v_threshold.copy_(torch.full(SHAPE, 0.9))


@pytest.mark.parametrize("device", DEVICES)
def test_single_step_mode(device):
    m = module("node-s", device)
    g = torch.Generator().manual_seed(6)
    thr = (torch.rand(6, generator=g) * 0.8 + 0.6).to(device)
    x = (torch.randn(9, 6, generator=g) * 0.9 + 0.8).to(device)
    w = torch.randn(9, 6, generator=g).to(device)
    set_param(m, "v_threshold", thr)
    m.reset()
    spikes = [m(x[t]) for t in range(x.shape[0])]
    assert spikes[0].shape == (6,)
    s = torch.stack(spikes)
    (s * w).sum().backward()
    thr_r = thr.clone().requires_grad_()
    want, want_v = lif_loop(x, thr_r)
    (want * w).sum().backward()
    close(s.detach(), want.detach(), FWD_TOL[device], "spikes")
    close(m.v.detach(), want_v[-1].detach(), FWD_TOL[device], "v")
    close(
        m.v_threshold.grad,
        thr_r.grad,
        GRAD_TOL[device],
        "v_threshold.grad (summed over the steps)",
    )


@pytest.mark.parametrize("device", DEVICES)
def test_node_with_tensor_threshold(device):
    """LIFNode(v_threshold=tensor): a trainable per-neuron threshold of the
    tensor's shape; here with a soft, detached reset (const flags)."""
    g = torch.Generator().manual_seed(7)
    thr = torch.rand(2, 4, generator=g) * 0.8 + 0.6
    node = LIFNode(
        step_mode="m",
        v_threshold=thr,
        v_reset=None,
        detach_reset=True,
        surrogate_function=flexsn.surrogate.Sigmoid(alpha=4.0),
    )
    assert node.neuron_shape == (2, 4)
    assert torch.equal(node.v_threshold.detach(), thr)
    assert node.v_threshold.data_ptr() != thr.data_ptr()  # a copy
    node = node.to(device)
    thr = thr.to(device)
    x = (torch.randn(6, 2, 4, generator=g) * 0.9 + 0.8).to(device)
    x_m, x_r = x.clone().requires_grad_(), x.clone().requires_grad_()
    s = node(x_m)
    s.sum().backward()
    thr_r = thr.clone().requires_grad_()
    want = lif_loop(x_r, thr_r, soft=True, detach=True)[0]
    want.sum().backward()
    close(s.detach(), want.detach(), FWD_TOL[device], "spikes")
    close(x_m.grad, x_r.grad, GRAD_TOL[device], "x.grad")
    close(
        node.v_threshold.grad, thr_r.grad, GRAD_TOL[device], "v_threshold.grad"
    )


def test_node_runtime_threshold_and_plif():
    node = LIFNode(
        step_mode="m",
        v_threshold=torch.full((4,), 0.5),
        kinds={"v_threshold": "runtime"},
    )
    assert list(node.parameters()) == []
    assert torch.equal(node.v_threshold, torch.full((4,), 0.5))
    x = torch.full((3, 4), 0.7)
    # h = 0.35 < 0.5, then 0.525 >= 0.5
    assert node(x)[:, 0].tolist() == [0.0, 1.0, 0.0]
    plif = ParametricLIFNode(
        step_mode="m", per_neuron_threshold=True, neuron_shape=4
    )
    assert [n for n, _ in plif.named_parameters()] == ["w", "v_threshold"]
    assert plif.v_threshold.shape == (4,)
    plif(torch.randn(3, 4)).sum().backward()
    assert plif.w.grad is not None and plif.v_threshold.grad.shape == (4,)


def test_half_module_passes_float32():
    """A module converted with .half() keeps working: the kernels get
    float32 copies of its per-neuron parameters, the gradient comes back
    in the parameter's dtype."""
    m = LIFNode(
        step_mode="m", per_neuron_threshold=True, neuron_shape=(5,)
    ).half()
    assert m.v_threshold.dtype == torch.float16
    x = torch.randn(4, 5).half() + 0.8
    m(x).sum().backward()
    assert m.v_threshold.grad.dtype == torch.float16
    assert m.v_threshold.grad.shape == (5,)


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_mode_per_neuron_only(device):
    """On the GPU a neuron whose only trainable parameters are per-neuron
    has no deterministic kernel: its plain one serves."""
    m = module("node", device)
    x, _, _ = data(device, 8, shape=(6,))
    with torch.no_grad():
        m.v_threshold.fill_(1.0)
    grads = []
    for deterministic in (False, True):
        m.deterministic = deterministic
        m.v_threshold.grad = None
        m.reset()
        m(x).sum().backward()
        grads.append(m.v_threshold.grad.clone())
    m.deterministic = False
    assert torch.equal(grads[0], grads[1])


@pytest.mark.skipif(
    not flexsn.torch.has_custom_op(),
    reason="torch has no torch.library.custom_op",
)
@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_custom_op(device):
    """torch.compile(fullgraph=True) traces flexsn::scan with per-neuron
    tensors (trainable and runtime) and its backward op."""
    m = module("mixed", device)
    x, v0, thr = data(device, 9)
    g = torch.Generator().manual_seed(99)
    v_reset = (torch.rand(SHAPE, generator=g) * 0.4 - 0.2).to(device)
    with torch.no_grad():
        m.tau.fill_(2.0)
        m.v_reset.copy_(v_reset)
    set_param(m, "v_threshold", thr)
    w = weights(device, 9)[0]

    def run(x, v0):
        m.reset()
        m.states[0] = v0
        return (m(x) * w).sum() + m.state_seqs[0].sum()

    def run_scan(x, v0):
        # flexsn.torch.scan itself: trainable (tau, v_threshold), runtime
        # (v_reset) in declaration order.
        outputs, states = flexsn.torch.scan(
            m.handle, [x], [v0], [m.tau, m.v_threshold], [m.v_reset], True
        )
        return (outputs[0] * w).sum() + states[0].sum()

    results = []
    for fn in (
        run,
        torch.compile(run, fullgraph=True, backend="aot_eager"),
        torch.compile(run_scan, fullgraph=True, backend="aot_eager"),
    ):
        m.tau.grad = m.v_threshold.grad = None
        x_m = x.clone().requires_grad_()
        loss = fn(x_m, v0.clone())
        loss.backward()
        results.append(
            (
                loss.detach(),
                x_m.grad,
                m.tau.grad.clone(),
                m.v_threshold.grad.clone(),
            )
        )
    for other in results[1:]:
        for name, a, b in zip(
            ("loss", "x.grad", "tau.grad", "v_threshold.grad"),
            results[0],
            other,
        ):
            close(b, a, GRAD_TOL[device], name)
    with torch.no_grad():
        m.reset()
        want = m(x)
        m.reset()
        got = torch.compile(
            lambda x: m(x), fullgraph=True, backend="aot_eager"
        )(x)
    assert torch.equal(got, want)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_constructor_errors():
    with pytest.raises(ValueError, match="neuron_shape"):
        FlexSN("lif", kinds={"v_threshold": "trainable"}, shapes=PER_NEURON)
    with pytest.raises(ValueError, match="neuron_shape"):
        LIFNode(step_mode="m", per_neuron_threshold=True)
    with pytest.raises(
        ValueError,
        match=r"'v_threshold' has shape \(4,\), " r"neuron_shape is \(5,\)",
    ):
        FlexSN(
            "lif",
            kinds={"v_threshold": "trainable"},
            shapes=PER_NEURON,
            params={"v_threshold": torch.ones(4)},
            neuron_shape=(5,),
        )
    with pytest.raises(ValueError, match="'v_threshold' is a scalar"):
        FlexSN(
            "lif",
            kinds={"v_threshold": "trainable"},
            params={"v_threshold": torch.ones(4)},
        )


@pytest.mark.parametrize("device", DEVICES)
def test_bad_per_neuron_tensors_are_clear_errors(device):
    m = module("runtime", device)
    x = torch.zeros((4,) + SHAPE, device=device)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            xs = x.clone().requires_grad_(grad)
            # Inputs of another neuron shape.
            m.reset()
            with pytest.raises(
                ValueError,
                match=r"'v_threshold' has shape "
                r"\(3, 5\), expected the "
                r"neuron shape \(15,\)",
            ):
                m(xs.reshape(4, 15))
    h = m.handle
    good = torch.full(SHAPE, 0.9, device=device)
    cases = [
        (good.to(torch.float64), TypeError, "'v_threshold' is torch.float64"),
        (good.to(torch.int32), TypeError, "'v_threshold' is torch.int32"),
        (good.reshape(15), ValueError, "'v_threshold' has shape"),
        (
            torch.empty(SHAPE, device="meta"),
            ValueError,
            "'v_threshold' is on meta",
        ),
        (1.0, TypeError, "'v_threshold' is a tensor"),
    ]
    if device == "cuda":
        cases.append((good.cpu(), ValueError, "'v_threshold' is on cpu"))
    for value, error, message in cases:
        for grad in (False, True):
            with torch.set_grad_enabled(grad):
                with pytest.raises(error, match=message):
                    flexsn.torch.scan(
                        h,
                        [x.clone().requires_grad_(grad)],
                        [None],
                        [],
                        [value],
                        False,
                    )
    with pytest.raises(ValueError, match="non-trainable runtime"):
        flexsn.torch.scan(h, [x], [None], [], [], False)
    # The module's own buffer, replaced by one of a wrong dtype.
    m.v_threshold = torch.ones(SHAPE, dtype=torch.int64, device=device)
    try:
        with pytest.raises(TypeError, match="'v_threshold' is torch.int64"):
            m(x)
    finally:
        m.v_threshold = torch.full(SHAPE, 0.9, device=device)
    # The good tensor still works after the errors.
    s, _ = flexsn.torch.scan(h, [x], [None], [], [good], False)
    assert torch.equal(s[0], torch.zeros_like(x))
