"""The PyTorch layer on a GPU: correctness, torch.compile, overhead, training.

    python3 utils/device_torch.py --compile-only   # here: fill the cache
    python3 utils/device_torch.py --out DIR        # on the GPU machine

The GPU machine has no FlexSN tools: set FLEXSN_CACHE_DIR to a cache filled
by --compile-only and FLEXSN_RUNTIME_LIB to libflexsn_runtime.so. Prints a
table and writes DIR/torch_results.json.
"""

import argparse
import json
import math
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "python" / "tests")]

import torch  # noqa: E402

import flexsn  # noqa: E402
from flexsn.torch import FlexSN, LIFNode, ParametricLIFNode  # noqa: E402
import reference  # noqa: E402

NEURONS = ["if", "lif", "plif", "qif", "eif", "izhikevich", "cuba_lif"]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def modules():
    """Every module configuration the run uses (compiled by --compile-only)."""
    for name in NEURONS:
        yield name, lambda name=name: FlexSN(name, store_state_seqs=True)
    yield "lif-node", lambda: LIFNode()
    yield "plif-node", lambda: ParametricLIFNode(init_tau=2.0)


def check_neurons(results):
    """Each shipped neuron on CUDA against the CPU path and the eager
    reference: outputs, state sequences, input/state/parameter gradients."""
    torch.manual_seed(0)
    for name, make in modules():
        if name.endswith("-node"):
            continue
        for dtype_name, dtype in DTYPES.items():
            T, N = 16, 4099  # N not a multiple of the vector width
            x = (torch.randn(T, N) * 1.5 + 0.5).to(dtype)
            module = make()
            got = {}
            for device in ("cuda", "cpu"):
                xd = x.to(device).requires_grad_()
                module.reset()
                y = module(xd)
                y = y[0] if isinstance(y, tuple) else y
                w = torch.linspace(-1, 1, N, device=device)
                loss = (y.float() * w).sum() + sum(
                    (s.float() * w).sum() for s in module.state_seqs)
                params = list(module.parameters())
                grads = torch.autograd.grad(loss, [xd] + params)
                got[device] = [y.float().cpu()] + [
                    s.float().cpu() for s in module.state_seqs] + [
                    g.float().cpu() for g in grads]
            errors = [float((a - b).abs().max()) for a, b in
                      zip(got["cuda"], got["cpu"])]
            flips = float((got["cuda"][0] != got["cpu"][0]).float().mean())
            tol = {"f32": 1e-4, "f16": 2e-2, "bf16": 1.5e-1}[dtype_name]
            ok = flips < 1e-3 and all(
                e <= tol * max(1.0, float(b.abs().max()))
                for e, b in zip(errors[1:], got["cpu"][1:]))
            results.append({"check": f"{name}/{dtype_name} cuda vs cpu",
                            "ok": ok, "max_errors": errors,
                            "spike_flip_fraction": flips})
    # The eager reference on the GPU for LIF and PLIF (f32).
    for name in ("lif", "plif"):
        x = (torch.randn(8, 1000, device="cuda") * 1.5).requires_grad_()
        module = (LIFNode() if name == "lif" else ParametricLIFNode()).cuda()
        y = module(x)
        g = torch.randn_like(y)
        grads = torch.autograd.grad((y * g).sum(), [x] + list(
            module.parameters()))
        x2 = x.detach().clone().requires_grad_()
        if name == "lif":
            ys, _ = reference.lif_ref(x2)
            ref = torch.autograd.grad((ys * g).sum(), [x2])
        else:
            w = torch.zeros((), device="cuda", requires_grad=True)
            ys, _ = reference.plif_ref(x2, w=w)
            ref = torch.autograd.grad((ys * g).sum(), [x2, w])
        ok = torch.equal(y, ys) and all(
            torch.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in
            zip(grads, ref))
        results.append({"check": f"{name} cuda vs eager reference",
                        "ok": ok})


def check_compile(results):
    """torch.compile(fullgraph=True) forward + backward of a LIF model."""
    if not flexsn.torch.has_custom_op():
        results.append({"check": "torch.compile", "ok": True,
                        "skipped": "torch has no custom_op"})
        return
    import torch._dynamo as dynamo
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), LIFNode()).cuda()

    def model(x):
        net[1].reset()
        return net(x)

    x = torch.randn(8, 32, 64, device="cuda")
    explain = dynamo.explain(model)(x)
    compiled = torch.compile(model, fullgraph=True)
    y = compiled(x)
    y.sum().backward()
    grad_compiled = net[0].weight.grad.clone()
    net.zero_grad()
    y_eager = model(x)
    y_eager.sum().backward()
    ok = (explain.graph_break_count == 0 and torch.equal(y, y_eager)
          and torch.allclose(grad_compiled, net[0].weight.grad, rtol=1e-4,
                             atol=1e-5))
    results.append({"check": "torch.compile fullgraph fwd+bwd", "ok": ok,
                    "graph_breaks": explain.graph_break_count})


def timed(fn, repeat=200):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    times = []
    for _ in range(repeat):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def host_time(fn, repeat=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    elapsed = (time.perf_counter() - t) / repeat
    torch.cuda.synchronize()
    return elapsed * 1e6


def measure_overhead(results):
    """Host time per call of the module vs the bare kernel (tiny N), and
    wall time at N = 2^24."""
    lif = LIFNode()
    compiled = lif.compiled
    kernel = compiled.kernel("cuda", "final-state", "f32")
    stream = torch.cuda.current_stream().cuda_stream
    for N in (1024, 1 << 24):
        T = 16
        x = torch.randn(T, N, device="cuda")
        spikes, v = torch.empty_like(x), torch.empty(N, device="cuda")

        def bare():
            kernel.launch(stream, T, N, 0, [x.data_ptr(), 0,
                                             spikes.data_ptr(), v.data_ptr()],
                          0)

        def module():
            lif.reset()
            with torch.no_grad():
                lif(x)

        if N == 1024:
            bare_us, module_us = host_time(bare), host_time(module)
            results.append({"check": f"host overhead N={N}",
                            "ok": module_us - bare_us < 20,
                            "bare_us": bare_us, "module_us": module_us})
        else:
            bare_ms, module_ms = timed(bare), timed(module)
            results.append({"check": f"wall time N=2^24 T={T}",
                            "ok": module_ms <= 1.03 * bare_ms,
                            "bare_ms": bare_ms, "module_ms": module_ms})


def train_digits(results, epochs=30):
    """Conv-BN-LIF x2 + linear readout, T = 8, on scikit-learn's digits,
    with FlexSN's LIFNode and with an eager LIF (same seed, same data)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        results.append({"check": "digits training", "ok": True,
                        "skipped": "no scikit-learn"})
        return
    digits = load_digits()
    data = torch.tensor(digits.images, dtype=torch.float32) / 16.0
    target = torch.tensor(digits.target)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(data), generator=g)
    train, test = order[:1400], order[1400:]

    class EagerLIF(torch.nn.Module):
        def forward(self, x):
            spikes, _ = reference.lif_ref(x)
            return spikes

    def make(node):
        torch.manual_seed(0)
        return torch.nn.ModuleDict({
            "c1": torch.nn.Conv2d(1, 16, 3, padding=1),
            "b1": torch.nn.BatchNorm2d(16), "n1": node(),
            "c2": torch.nn.Conv2d(16, 32, 3, padding=1),
            "b2": torch.nn.BatchNorm2d(32), "n2": node(),
            "fc": torch.nn.Linear(32 * 8 * 8, 10)}).cuda()

    def run(net, x, T=8):
        for n in ("n1", "n2"):
            if hasattr(net[n], "reset"):
                net[n].reset()
        B = x.shape[0]
        x = x.unsqueeze(0).repeat(T, 1, 1, 1, 1).flatten(0, 1)  # [T*B,1,8,8]
        h = net["b1"](net["c1"](x))
        h = net["n1"](h.view(T, B, 16, 8, 8)).flatten(0, 1)
        h = net["b2"](net["c2"](h))
        h = net["n2"](h.view(T, B, 32, 8, 8))
        return net["fc"](h.flatten(2)).mean(0)

    curves = {}
    for label, node in (("flexsn", LIFNode), ("eager", EagerLIF)):
        net = make(node)
        opt = torch.optim.Adam(net.parameters(), lr=2e-3)
        losses, step_times = [], []
        xs, ys = data[train].unsqueeze(1).cuda(), target[train].cuda()
        for epoch in range(epochs):
            perm = torch.randperm(len(xs), generator=g)
            total = 0.0
            for i in range(0, len(xs), 100):
                idx = perm[i:i + 100]
                torch.cuda.synchronize()
                t = time.perf_counter()
                loss = torch.nn.functional.cross_entropy(
                    run(net, xs[idx]), ys[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                torch.cuda.synchronize()
                step_times.append(time.perf_counter() - t)
                total += float(loss)
            losses.append(total / math.ceil(len(xs) / 100))
        net.eval()
        with torch.no_grad():
            pred = run(net, data[test].unsqueeze(1).cuda()).argmax(1).cpu()
        accuracy = float((pred == target[test]).float().mean())
        step_times.sort()
        curves[label] = {"loss": losses, "accuracy": accuracy,
                         "step_ms": 1e3 * step_times[len(step_times) // 2]}
    results.append({"check": "digits training (FlexSN LIFNode)",
                    "ok": curves["flexsn"]["accuracy"] >= 0.95,
                    **{f"{k}_{m}": v[m] for k, v in curves.items()
                       for m in ("accuracy", "step_ms")},
                    "loss_flexsn": curves["flexsn"]["loss"],
                    "loss_eager": curves["eager"]["loss"]})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    if args.compile_only:
        for name, make in modules():
            make()
            print("compiled", name)
        return 0
    results = []
    for step in (check_neurons, check_compile, measure_overhead, train_digits):
        try:
            step(results)
        except Exception as error:  # report, and go on with the next step
            import traceback
            traceback.print_exc()
            results.append({"check": step.__name__, "ok": False,
                            "error": repr(error)})
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "torch_results.json").write_text(json.dumps(results, indent=1))
    for r in results:
        extra = {k: v for k, v in r.items()
                 if k not in ("check", "ok") and not k.startswith("loss")}
        print(f"{'PASS' if r['ok'] else 'FAIL'}  {r['check']}  {extra}")
    failed = sum(not r["ok"] for r in results)
    print(f"device_torch: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
