#!/usr/bin/env python3
"""Checks FlexSN's GPU kernels for per-channel parameters.

    python3 python/tests/channel_kernel_checks.py [--quick] [--out DIR]
    python3 python/tests/channel_kernel_checks.py --compile-only

The neuron is the shipped PLIF with its leak `w` made `trainable
per_channel`: k = sigmoid(w[c]) for every neuron of channel c of
[T, B, C, S] data. Its inference, forward and backward kernels
(flexsn._runtime.GpuKernel, launched through flexsn_launch_channels) run on
shapes chosen to reach every path of the per-channel reduction:

  (B, C, S) = (2, 3, 1000)   warps whose neurons share one channel
              (4, 64, 1)     one channel per neuron: per-lane atomics
              (3, 5, 7)      vector groups straddling channels, a tail
              (2, 1, 4099)   one channel, a partial last group
              (8, 256, 49)   many channels, conv-like
              (1, 7, 3)      fewer neurons than a warp

each at T = 1 and 8 in f32 and f16 storage, once with a time stride
ld = N + 4 (vector kernel) and once with buffers 4 bytes off 16-byte
alignment (scalar kernel); and T = 0, where only the gradients are written
(w_grad exactly zero).

Reference: the step loop of lib/Neurons/plif.mlir's comment (hard reset to
0, decay_input, no detach), written here in float64 PyTorch on the
storage-rounded inputs, Heaviside forward and sigmoid (alpha = 4) surrogate
backward, differentiated by autograd with w expanded to one leaf per neuron:
a neuron's contribution to w_grad[c] is its leaf's gradient.

Checks:
  spikes      equal the reference's, except for neurons whose h came within
              1e-4 of the threshold (at most 2% of them), which are left out
              of everything below; inference spikes equal forward spikes bit
              for bit;
  x_grad      |got - want| <= 1e-4 |want| + 1e-5 max|want| (f32), or 4 f16
              ulps of max|want| per element (f16 storage);
  w_grad[c]   |got - want| <= 1e-3 max(|want|, 0.01 sum |contrib|) plus the
              sum of |contrib| of the neurons left out (atomics add in any
              order);
  deterministic  the deterministic backward kernel's per-neuron w_grad
              terms, summed per channel here, within the same tolerance;
              two launches give the same bits;
  guards      C and S that do not tile N are refused (BAD_CHANNELS), and a
              kernel with channels launched without them raises.

Exit status 0 when every case passes; one line per case on stdout.
"""

import pathlib
import sys

# The package of this checkout, wherever it is installed.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import flexsn  # noqa: E402
import check_cli  # noqa: E402  (beside this script)
from flexsn import compiler  # noqa: E402

SHAPES = [
    (2, 3, 1000),
    (4, 64, 1),
    (3, 5, 7),
    (2, 1, 4099),
    (8, 256, 49),
    (1, 7, 3),
]
DTYPES = ("f32", "f16")
NEAR = 1e-4


def compile_neuron():
    """PLIF with a per-channel w. Training kernels save in float32
    (`save_in_storage_type=False`), as kernel_checks.compile_copy does: the
    float16 gradients then meet these float64 tolerances; saving in the
    storage type (the default) has its own checks (test_saved_storage.py)."""
    text, _ = compiler.read_source("plif")
    old = "%w: f32 = 0.0 trainable,"
    assert text.count(old) == 1, "plif.mlir's w declaration moved"
    text = text.replace(old, "%w: f32 = 0.0 trainable per_channel,")
    return flexsn.compile(
        text,
        variants=("inference", "forward", "backward"),
        storage_types=DTYPES,
        targets=("cuda",),
        save_in_storage_type=False,
    )


def reference(torch, x, w, gy):
    """Spikes, per-neuron h - threshold minimum distance, x_grad and the
    per-neuron contributions to w_grad, in float64."""
    T, B, C, S = x.shape

    class Spike(torch.autograd.Function):
        @staticmethod
        def forward(ctx, over):
            ctx.save_for_backward(over)
            return (over >= 0).to(over.dtype)

        @staticmethod
        def backward(ctx, g):
            (over,) = ctx.saved_tensors
            sg = torch.sigmoid(4 * over)
            return g * 4 * sg * (1 - sg)

    x = x.double().requires_grad_(True)
    leaves = w.double().view(1, C, 1).expand(B, C, S).clone()
    leaves.requires_grad_(True)
    k = torch.sigmoid(leaves)
    v = torch.zeros(B, C, S, dtype=torch.float64, device=x.device)
    spikes, near = [], torch.full(
        (B, C, S), float("inf"), device=x.device, dtype=torch.float64
    )
    for t in range(T):
        h = v + (x[t] - v) * k
        over = h - 1.0
        near = torch.minimum(near, over.detach().abs())
        s = Spike.apply(over)
        v = (1 - s) * h
        spikes.append(s)
    if T == 0:
        return (
            torch.zeros_like(x),
            near,
            torch.zeros_like(x),
            torch.zeros(B, C, S, dtype=torch.float64, device=x.device),
        )
    spikes = torch.stack(spikes)
    (spikes * gy.double()).sum().backward()
    return spikes.detach(), near, x.grad, leaves.grad


def run_case(torch, compiled, B, C, S, T, dtype, layout):
    """One case; returns (ok, message)."""
    dev = torch.device("cuda")
    tdtype = torch.float32 if dtype == "f32" else torch.float16
    N = B * C * S
    ld = N + 4 if layout == "strided" else N
    off = (
        2
        if layout == "misaligned" and dtype == "f32"
        else (4 if layout == "misaligned" else 0)
    )  # elements: 8 bytes off
    gen = torch.Generator(device=dev).manual_seed(
        B * 1000003 + C * 101 + S + T
    )

    def seq(mean, std):
        # [T, ld] storage with a gap, viewed as [T, B, C, S].
        base = torch.full(
            (max(T, 1) * ld + off + 8,), float("nan"), dtype=tdtype, device=dev
        )
        view = (
            base[off : off + T * ld].view(T, ld)[:, :N]
            if T
            else base[off:off].view(0, N)
        )
        view.copy_(
            (torch.randn(T, N, generator=gen, device=dev) * std + mean).to(
                tdtype
            )
        )
        return base, view

    def out_seq():
        base = torch.full(
            (max(T, 1) * ld + off + 8,), float("nan"), dtype=tdtype, device=dev
        )
        return base, (
            base[off : off + T * ld].view(T, ld)[:, :N]
            if T
            else base[off:off].view(0, N)
        )

    def ptr(view):
        return view.data_ptr() if view.numel() or T == 0 else 0

    _, x = seq(0.6, 1.0)
    _, gy = seq(0.0, 1.0)
    w = (torch.rand(C, generator=gen, device=dev) * 4 - 2).float()
    _, spike_inf = out_seq()
    _, spike = out_seq()
    _, x_grad = out_seq()
    v_init_grad = torch.full(
        (N + off + 8,), float("nan"), dtype=tdtype, device=dev
    )[off : off + N]
    w_grad = torch.full((C,), float("nan"), device=dev)
    # The deterministic kernel's per-neuron sums, written twice.
    w_terms = [
        torch.full((N + off + 8,), float("nan"), device=dev)[off : off + N]
        for _ in range(2)
    ]

    inference = compiled.kernel("cuda", "inference", dtype)
    forward = compiled.kernel("cuda", "forward", dtype)
    backward = compiled.kernel("cuda", "backward", dtype)
    fixed = compiled.kernel("cuda", "backward", dtype, deterministic=True)
    work = torch.empty(
        max(1, forward.spec.workspace_size(T, N, ld)),
        dtype=torch.uint8,
        device=dev,
    )
    stream = torch.cuda.current_stream().cuda_stream
    xs = x.data_ptr() if T else w.data_ptr()  # any valid address when T = 0
    args = {
        "x": xs,
        "v_init": 0,
        "spike": ptr(spike),
        "v_seq": 0,
        "w": w.data_ptr(),
        "spike_grad": ptr(gy) if T else xs,
        "v_seq_grad": 0,
        "v_final_grad": 0,
        "x_grad": ptr(x_grad),
        "v_init_grad": v_init_grad.data_ptr(),
        "w_grad": w_grad.data_ptr(),
    }

    def launch(kernel, overrides=None, channels=(C, S)):
        names = [b.name for b in kernel.spec.buffers if not b.in_workspace]
        values = dict(args, **(overrides or {}))
        kernel.launch(
            stream,
            T,
            N,
            ld if T else 0,
            [values[n] for n in names],
            work.data_ptr(),
            channels=channels,
        )

    launch(inference, {"spike": ptr(spike_inf)})
    launch(forward)
    launch(backward)
    for terms in w_terms:
        launch(fixed, {"w_grad": terms.data_ptr()})
    torch.cuda.synchronize()

    want_s, near, want_gx, contrib = reference(
        torch, x.float().view(T, B, C, S), w, gy.float().view(T, B, C, S)
    )
    if T == 0:
        ok = (
            bool(torch.all(w_grad == 0))
            and bool(torch.all(v_init_grad == 0))
            and bool(torch.all(w_terms[0] == 0))
        )
        return ok, f"w_grad {w_grad.tolist()[:4]}"
    if not torch.equal(w_terms[0], w_terms[1]):
        return False, "the deterministic kernel's w_grad terms differ by run"
    got_s = spike.float().view(T, B, C, S)
    if not torch.equal(spike_inf.float(), spike.float()):
        return False, "inference and forward spikes differ"
    left_out = near < NEAR  # [B, C, S]
    bad = (got_s.double() != want_s).any(0) & ~left_out
    if bad.any():
        return False, f"{int(bad.sum())} spikes differ away from threshold"
    if left_out.double().mean() > 0.02:
        return False, f"{int(left_out.sum())} neurons near the threshold"
    keep = ~left_out
    gx, rgx = x_grad.double().view(T, B, C, S), want_gx
    scale = float(rgx.abs().max()) or 1.0
    if dtype == "f32":
        tol = 1e-4 * rgx.abs() + 1e-5 * scale
    else:
        tol = torch.full_like(rgx, 4 * 2.0**-10 * scale)
    err = ((gx - rgx).abs() - tol).amax(0)[keep]
    if err.numel() and float(err.max()) > 0:
        return False, f"x_grad off by {float(err.max()):.3g} beyond tolerance"
    absum = contrib.abs().sum((0, 2))
    want_w = (contrib * keep).sum((0, 2))
    slack = (contrib.abs() * left_out).sum((0, 2))
    tol_w = 1e-3 * torch.maximum(want_w.abs(), 0.01 * absum) + slack + 1e-6
    fixed_w = w_terms[0].double().view(B, C, S).sum((0, 2))
    for what, got_w in (
        ("w_grad", w_grad.double()),
        ("deterministic w_grad", fixed_w),
    ):
        werr = (got_w - want_w).abs() - tol_w
        if float(werr.max()) > 0:
            c = int(werr.argmax())
            return False, (
                f"{what}[{c}] = {float(got_w[c]):.6g}, want "
                f"{float(want_w[c]):.6g} (tolerance "
                f"{float(tol_w[c]):.3g})"
            )
    w_err = float((w_grad.double() - want_w).abs().max())
    return True, (
        f"max |w_grad - want| {w_err:.3g}, " f"{int(left_out.sum())} left out"
    )


def check_guards(torch, compiled):
    """C and S must tile N; a channel kernel needs them."""
    from flexsn._runtime import RuntimeStatusError

    kernel = compiled.kernel("cuda", "inference", "f32")
    dev = torch.device("cuda")
    x = torch.zeros(2, 24, device=dev)
    w = torch.zeros(3, device=dev)
    names = [b.name for b in kernel.spec.buffers if not b.in_workspace]
    values = {
        "x": x.data_ptr(),
        "v_init": 0,
        "spike": 0,
        "v_seq": 0,
        "w": w.data_ptr(),
    }
    buffers = [values[n] for n in names]
    stream = torch.cuda.current_stream().cuda_stream
    try:
        kernel.launch(stream, 2, 24, 0, buffers, 0, channels=(5, 4))
        return False, "C * S = 20 not dividing N = 24 was accepted"
    except RuntimeStatusError as e:
        if e.status != "FLEXSN_ERROR_BAD_CHANNELS":
            return False, f"got {e.status}"
    try:
        kernel.launch(stream, 2, 24, 0, buffers, 0)
        return False, "a launch without channels was accepted"
    except ValueError:
        pass
    return True, "BAD_CHANNELS, and channels required"


def checks(torch, compiled, quick):
    cases = []
    for B, C, S in SHAPES:
        for dtype in DTYPES:
            for T in (8,) if quick else (0, 1, 8):
                layouts = (
                    ("dense",)
                    if quick or T == 0
                    else ("dense", "strided", "misaligned")
                )
                cases += [(B, C, S, T, dtype, layout) for layout in layouts]
    return [
        (
            "B=%d C=%d S=%d T=%d %s %s" % case,
            lambda case=case: run_case(torch, compiled, *case),
        )
        for case in cases
    ] + [("guards", lambda: check_guards(torch, compiled))]


if __name__ == "__main__":
    sys.exit(
        check_cli.main(
            __doc__,
            "T = 8, f32 and f16, default layout only",
            compile_neuron,
            checks,
        )
    )
