"""Where a fused chain's host time goes, against the unfused one: the host
microseconds per call of each Python piece of a BatchNorm2d -> LIFNode
chain's training step (forward and backward), 16 pairs on [4, 2, 16, 8, 8]
(the GPU idles: every row is host time), float32 and AMP (half input under
autocast).

    PYTHONPATH=python python3 utils/host_breakdown.py [--ops]

`--ops` also lists the PyTorch operators each variant calls per chain
(torch.profiler, host side: calls and self time), to find what one
variant calls that the other does not.

Each piece is timed by wrapping it (a wrapper costs about 0.5 µs); the
first two lines are the un-instrumented step per chain.
docs/perf/zoo/host_breakdown_h200.md holds a run on an H200.
"""
import collections
import os
import functools
import sys
import time

import torch
from torch import nn

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), "..", "python", "tests")
)
from flexsn.torch import LIFNode, fuse  # noqa: E402
from flexsn.torch import _block, _fuse, _function, _kernels  # noqa: E402
from flexsn import _runtime  # noqa: E402
from test_fuse import MultiStepBatchNorm2d  # noqa: E402

acc = collections.defaultdict(float)
cnt = collections.Counter()


def timed(name, f):
    @functools.wraps(f)
    def g(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[name] += time.perf_counter() - t0
            cnt[name] += 1

    return g


def instrument():
    for mod, names in (
        (_fuse, ["fused_block"]),
        (
            _block,
            [
                "batch_norm_affine",
                "_batch_statistics",
                "_batch_affine",
                "run_block",
                "_batch_norm_backward",
            ],
        ),
        (
            _function,
            [
                "scan_autograd",
                "_check_inputs",
                "_runtime_values",
                "_shaped_tensors",
                "split_tensors",
                "final_states",
                "_check_no_grad_spikes",
            ],
        ),
    ):
        for n in names:
            if hasattr(mod, n):
                setattr(
                    mod,
                    n,
                    timed(
                        mod.__name__.split(".")[-1] + "." + n, getattr(mod, n)
                    ),
                )
    for cls, names in (
        (
            _kernels.NeuronKernels,
            ["forward", "backward", "_launch", "_workspace", "kernels_for"],
        ),
        (_runtime.GpuKernel, ["launch"]),
        (_block.BatchStatistics, ["backward"]),
    ):
        for n in names:
            if hasattr(cls, n):
                setattr(cls, n, timed(cls.__name__ + "." + n, getattr(cls, n)))
    for n in ("forward", "backward"):
        f = getattr(_function._ScanFunction, n)
        setattr(
            _function._ScanFunction,
            n,
            staticmethod(timed("_ScanFunction." + n, f)),
        )


class Chain(nn.Module):
    def __init__(self, n=16, c=16):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n):
            self.layers.append(MultiStepBatchNorm2d(c))
            self.layers.append(
                LIFNode(tau=2.0, detach_reset=True, step_mode="m")
            )

    def forward(self, x):
        for m in self.layers:
            x = m(x)
        return x


def bench(fused, amp, steps=200):
    torch.manual_seed(0)
    net = Chain().to(DEV)
    if fused:
        net = fuse(net)
    x = torch.randn(4, 2, 16, 8, 8, device=DEV, requires_grad=True)
    if amp:
        x = x.detach().half().requires_grad_()

    def step():
        for m in net.modules():
            if hasattr(m, "reset") and m is not net:
                m.reset()
        with torch.autocast(DEV, enabled=amp):
            y = net(x)
        y.float().sum().backward()

    for _ in range(10):
        step()
    sync()
    acc.clear()
    cnt.clear()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t0) / steps * 1e6 / 16


DEV = "cuda" if torch.cuda.is_available() else "cpu"
sync = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)
AMPS = (False, True) if DEV == "cuda" else (False,)
for amp in AMPS:
    base = {f: bench(f, amp) for f in (False, True)}
    mode = "amp" if amp else "f32"
    print(
        f"{mode}: per chain µs, unfused {base[False]:.1f}, "
        f"fused {base[True]:.1f}"
    )


def operators(fused, amp, steps=20):
    """{operator: (calls, self µs)} per chain, from torch.profiler."""
    bench(fused, amp, steps=2)  # built and warm
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        bench(fused, amp, steps=steps)
    per = (steps + 10) * 16  # bench's warm-up steps are profiled too
    return {
        e.key: (e.count / per, e.self_cpu_time_total / per)
        for e in prof.key_averages()
    }


if "--ops" in sys.argv:
    for amp in AMPS:
        mode = "amp" if amp else "f32"
        ops = {f: operators(f, amp) for f in (False, True)}
        print(f"--- operators per chain, {mode}: unfused | fused")
        head = f"{'calls':>6s} {'µs':>7s}"
        print(f"   {'operator':44s} {head} | {head}")
        names = sorted(
            set(ops[False]) | set(ops[True]),
            key=lambda k: -max(
                ops[False].get(k, (0, 0))[1], ops[True].get(k, (0, 0))[1]
            ),
        )
        for k in names:
            a = ops[False].get(k, (0.0, 0.0))
            b = ops[True].get(k, (0.0, 0.0))
            if max(a[0], b[0]) < 0.05:
                continue
            row = [f"{c:6.2f} {us:7.1f}" for c, us in (a, b)]
            print(f"   {k[:44]:44s} {row[0]} | {row[1]}")
instrument()
for amp in AMPS:
    for fused in (False, True):
        per = bench(fused, amp)
        mode = "amp" if amp else "f32"
        kind = "fused" if fused else "unfused"
        print(f"--- instrumented {mode} {kind}: {per:.1f} µs per chain")
        for k in sorted(acc, key=lambda k: -acc[k]):
            each = acc[k] / cnt[k] * 1e6
            calls = cnt[k] / 200 / 16
            print(f"   {k:40s} {each:8.1f} µs x {calls:.1f} per chain")
