"""Training kernels that save in the storage type (`save_in_storage_type`).

With `save_in_storage_type=False` an f16 or bf16 training forward saves
what its backward reads (LIF: the charge h) in float32. By default
(`save_in_storage_type=True`) it saves h in the storage type: rounded to
nearest, except where that would put h on the other side of the
threshold, which the backward would then see as a spike the forward did
not fire; there it saves the neighbour on h's side. The backward
evaluates its derivatives at the saved h, and the forward's outputs stay
those of the exact h.

The reference is a plain loop over T with lib/Neurons/lif.mlir's formulas
(hard reset, decay_input, tau = 2, threshold 1, sigmoid surrogate with
alpha = 4), differentiated by torch autograd in float32. Its saved-h
variants give each step's outputs the values of the exact h and the
derivatives at the saved h: `value(exact) + grad(saved)`, written with
`detach()`; the saved h is worked out here from the threshold (1.0, which
both half types hold) and the spacing of the type just below it. It
shares no code with the package.

One neuron is built so that its charge at step 0 is exactly 1 - u/4 in
float32 (u: the storage type's spacing just below 1): below the
threshold, it does not fire, but rounded to nearest it is 1.0, which
would. A backward reading that h recomputes a spike there, and its input
gradient differs from the exact one by far more than the tolerance.
"""

import pytest
import torch

import flexsn
from flexsn.torch import LIFNode

from devices import DEVICES  # noqa: E402
from shaped_params import SigmoidSpike, close  # noqa: E402

T, N = 5, 64
HALF = [torch.float16, torch.bfloat16]
TOL = {
    torch.float16: dict(rtol=1e-2, atol=2e-3),
    torch.bfloat16: dict(rtol=3e-2, atol=1e-2),
}


def spacing_below_one(dtype):
    return 2.0**-11 if dtype == torch.float16 else 2.0**-8


def saved_h(h, dtype, keep_side):
    """h as saved in `dtype`: rounded to nearest; with `keep_side`, where
    that crosses the threshold 1, the neighbour on h's side instead (the
    rounding crosses 1 only upwards, from below 1 to 1.0)."""
    nearest = h.to(dtype).float()
    if not keep_side:
        return nearest
    crossed = (nearest >= 1.0) != (h >= 1.0)
    return torch.where(crossed, 1.0 - spacing_below_one(dtype), nearest)


def lif_reference(x, v0, saved_as=None, keep_side=True):
    """(spikes, v_seq) of LIF with a hard reset to 0 over float32 `x`
    `[T, N]` from `v0`; with `saved_as`, derivatives at h as saved in that
    dtype."""
    v = v0
    spikes, vs = [], []
    for t in range(x.shape[0]):
        h = v + (x[t] - (v - 0.0)) / 2.0

        def fire(h):
            s = SigmoidSpike.apply(h - 1.0)
            return s, s * 0.0 + (1 - s) * h

        s, v = fire(h)
        if saved_as is not None:
            h_r = h + (saved_h(h, saved_as, keep_side) - h).detach()
            s_r, v_r = fire(h_r)
            s = s_r + (s - s_r).detach()
            v = v_r + (v - v_r).detach()
        spikes.append(s)
        vs.append(v)
    return torch.stack(spikes), torch.stack(vs)


def inputs(dtype, device):
    """x [T, N] and v0 [N] in `dtype`; neuron 0 charges to 1 - u/4 at
    step 0 (h = (v0 + x) / 2 with v0 = 2 - 2u and x = 3u/2, all exact)."""
    g = torch.Generator().manual_seed(7)
    x = torch.rand(T, N, generator=g) * 1.6 - 0.3
    v0 = torch.rand(N, generator=g) * 0.8
    u = spacing_below_one(dtype)
    x[0, 0], x[1:, 0], v0[0] = 1.5 * u, 0.0, 2 - 2 * u
    x, v0 = x.to(dtype), v0.to(dtype)
    assert float(x[0, 0]) == 1.5 * u and float(v0[0]) == 2 - 2 * u
    return x.to(device), v0.to(device)


def run_module(m, x, v0):
    """Output and gradients of sum(w_s * s) + sum(w_v * v_seq)."""
    g = torch.Generator().manual_seed(3)
    w_s, w_v = (torch.randn(T, N, generator=g).to(x.device) for _ in range(2))
    x = x.clone().requires_grad_()
    v0 = v0.clone().requires_grad_()
    m.reset()
    m.v = v0
    s = m(x)
    ((s.float() * w_s).sum() + (m.v_seq.float() * w_v).sum()).backward()
    return s.detach(), m.v_seq.detach(), x.grad, v0.grad, (w_s, w_v)


def reference(x, v0, weights, saved_as, keep_side=True):
    x = x.float().requires_grad_()
    v0 = v0.float().requires_grad_()
    s, v = lif_reference(x, v0, saved_as, keep_side)
    w_s, w_v = weights
    ((s * w_s).sum() + (v * w_v).sum()).backward()
    return s.detach(), v.detach(), x.grad, v0.grad


_modules = {}


def module(save_in_storage_type, device):
    if save_in_storage_type not in _modules:
        _modules[save_in_storage_type] = LIFNode(
            step_mode="m",
            tau=2.0,
            v_reset=0.0,
            store_v_seq=True,
            save_in_storage_type=save_in_storage_type,
        )
    return _modules[save_in_storage_type].to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("save_in_storage_type", [False, True])
def test_backward_reads_what_was_saved(save_in_storage_type, dtype, device):
    """Both savings give the forward of the exact h; the gradients follow
    the exact h (float32 saves) or the saved one (storage saves), and
    neither takes the branch of h rounded across the threshold."""
    x, v0 = inputs(dtype, device)
    s, v_seq, gx, gv0, weights = run_module(
        module(save_in_storage_type, device), x, v0
    )
    assert gx.dtype == dtype and gv0.dtype == dtype
    exact = reference(x, v0, weights, None)
    want = reference(x, v0, weights, dtype) if save_in_storage_type else exact
    crossed = reference(x, v0, weights, dtype, keep_side=False)
    tol = TOL[dtype]
    # Neuron 0 does not fire at step 0 either way.
    assert float(s[0, 0]) == 0.0
    assert torch.equal(s.float(), exact[0])
    close(v_seq.float(), exact[1], tol, "v_seq")
    close(gx.float(), want[2], tol, "x.grad")
    close(gv0.float(), want[3], tol, "v_init.grad")
    # At neuron 0, h rounded to nearest would fire in the backward: its
    # gradients differ from the kernels' by far more than the tolerance.
    assert not torch.allclose(crossed[2][:, 0], want[2][:, 0], **tol)
    assert not torch.allclose(gx.float()[:, 0], crossed[2][:, 0], **tol)
    close(gx.float(), exact[2], dict(rtol=0.1, atol=0.05), "x.grad vs exact")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
def test_no_branch_crosses_the_threshold(dtype, device):
    """Charges spread over a few rounding steps around the threshold (not
    representable in the storage type): the storage saves' gradients are
    the saved-h reference's everywhere, where h rounded to nearest would
    cross the threshold at many neurons."""
    u = spacing_below_one(dtype)
    g = torch.Generator().manual_seed(11)
    M = 4096
    # h = (v0 + x) / 2 at step 0: v0 small with fine spacing, x near 2.
    v0 = (torch.rand(M, generator=g) * 0.01).to(dtype)
    x = torch.rand(T, M, generator=g) * 1.6 - 0.3
    x[0] = 2.0 - v0.float() + (torch.rand(M, generator=g) - 0.5) * 8 * u
    x = x.to(dtype)
    h0 = (v0.float() + x[0].float()) / 2
    assert int(((h0.to(dtype).float() >= 1) != (h0 >= 1)).sum()) > M // 20
    m = LIFNode(
        step_mode="m",
        tau=2.0,
        v_reset=0.0,
        store_v_seq=True,
        save_in_storage_type=True,
    ).to(device)
    x, v0 = x.to(device), v0.to(device)
    g2 = torch.Generator().manual_seed(5)
    w_s, w_v = (torch.randn(T, M, generator=g2).to(device) for _ in range(2))
    xr, vr = x.clone().requires_grad_(), v0.clone().requires_grad_()
    m.v = vr
    s = m(xr)
    ((s.float() * w_s).sum() + (m.v_seq.float() * w_v).sum()).backward()
    xf = x.float().requires_grad_()
    vf = v0.float().requires_grad_()
    rs, rv = lif_reference(xf, vf, dtype)
    ((rs * w_s).sum() + (rv * w_v).sum()).backward()
    assert torch.equal(s.float(), rs.detach())
    close(xr.grad.float(), xf.grad, TOL[dtype], "x.grad")
    close(vr.grad.float(), vf.grad, TOL[dtype], "v_init.grad")


@pytest.mark.parametrize("storage", ["f16", "bf16"])
def test_workspace_holds_storage_type(storage):
    """By default the saved sequence has the storage type's dtype and the
    workspace shrinks to its bytes, rounded up to whole floats; with
    `save_in_storage_type=False` it is float32; f32 kernels are unchanged
    by the option."""
    compiled = flexsn.compile(
        "lif",
        variants=("forward", "backward"),
        storage_types=("f32", storage),
        targets=("cpu",),
    )
    plain = flexsn.compile(
        "lif",
        variants=("forward", "backward"),
        storage_types=("f32", storage),
        targets=("cpu",),
        save_in_storage_type=False,
    )
    for variant in ("forward", "backward"):
        half = compiled.kernel("cpu", variant, storage).spec
        saved = [b for b in half.buffers if b.in_workspace]
        assert [b.dtype for b in saved] == [storage]
        for T_, N_ in ((3, 5), (4, 8), (0, 7)):
            assert half.workspace_size(T_, N_, N_) == 4 * -(-2 * T_ * N_ // 4)
            assert (
                plain.kernel("cpu", variant, storage).spec.workspace_size(
                    T_, N_, N_
                )
                == 4 * T_ * N_
            )
        f32 = compiled.kernel("cpu", variant, "f32").spec
        assert [b.dtype for b in f32.buffers if b.in_workspace] == ["f32"]
        assert f32.workspace_size(3, 5, 5) == 60
