"""What test_per_neuron_params.py and test_per_channel_params.py share:
tolerances, the reset-flag matrix, the spike of their reference loops, a
comparison that says by how much it missed, a per-file cache of compiled
modules, and the module-side steps of their checks (setting flags and a
shaped parameter, running both forward kernels). Independent of the
`flexsn` package, as the references built on it must be."""

import contextlib

import torch

# Float32 tolerances (as test_torch_neurons.py): on CPU the kernels
# evaluate the neuron file's operations in its order, as the loops do;
# NVVM may contract multiply-adds into FMAs. Gradients reduced over
# neurons (per-channel, scalar) sum in another order than autograd does.
FWD_TOL = {
    "cpu": dict(rtol=1e-6, atol=1e-6),
    "cuda": dict(rtol=1e-5, atol=1e-5),
}
GRAD_TOL = {
    "cpu": dict(rtol=1e-4, atol=1e-5),
    "cuda": dict(rtol=2e-4, atol=2e-5),
}

FLAGS = {
    "hard": dict(soft=False, detach=False),
    "soft": dict(soft=True, detach=False),
    "hard-detach": dict(soft=False, detach=True),
    "soft-detach": dict(soft=True, detach=True),
}


class SigmoidSpike(torch.autograd.Function):
    """H(x) = (x >= 0); backward: g(x) = alpha sigmoid(alpha x)
    (1 - sigmoid(alpha x)), alpha = 4 (the shipped neurons' and the
    drop-in nodes' default) unless changed with `slope`."""

    alpha = 4.0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        alpha = SigmoidSpike.alpha
        s = torch.sigmoid(alpha * x)
        return grad * alpha * s * (1 - s)


@contextlib.contextmanager
def slope(alpha: float):
    """Another surrogate slope for the references run inside: a
    sensitivity check of the comparisons."""
    saved, SigmoidSpike.alpha = SigmoidSpike.alpha, alpha
    try:
        yield
    finally:
        SigmoidSpike.alpha = saved


def close(got, want, tol, what):
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert torch.allclose(
        got, want, **tol
    ), f"{what}: max |diff| {(got - want).abs().max().item():.3g}"


class ModuleCache:
    """Modules by configuration name, built once per test file from
    `configs` (name -> constructor) and handed out with fresh states on
    the asked device."""

    def __init__(self, configs):
        self.configs, self.modules = configs, {}

    def __call__(self, name, device):
        if name not in self.modules:
            self.modules[name] = self.configs[name]()
        m = self.modules[name]
        m.reset()
        return m.to(device)


def set_flags(m, flags):
    """The module's reset flags from a FLAGS entry's name."""
    m.soft_reset = FLAGS[flags]["soft"]
    m.detach_reset = FLAGS[flags]["detach"]


def set_param(m, name, value):
    """Overwrites shaped parameter `name` of module m, clearing its
    gradient."""
    param = getattr(m, name)
    with torch.no_grad():
        param.copy_(value)
    param.grad = None


def check_forward_kernels(m, x, v0, want_s, want_v, tol):
    """Module m (store_state_seqs) from initial state v0 over x gives the
    reference's spikes and v sequence through both forward kernels: the
    inference kernel (no graph, also the final state) and the training
    forward."""
    with torch.no_grad():
        m.reset()
        m.states[0] = v0.clone()
        s = m(x)
    close(s, want_s, tol, "spikes")
    close(m.state_seqs[0], want_v, tol, "v_seq")
    close(m.states[0], want_v[-1], tol, "v")
    m.reset()
    m.states[0] = v0.clone()
    s = m(x)
    assert s.requires_grad
    close(s.detach(), want_s, tol, "spikes (training)")
    close(m.state_seqs[0].detach(), want_v, tol, "v_seq (training)")
