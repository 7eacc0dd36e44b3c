"""lif's module rows: the PyTorch modules (flexsn.torch.LIFNode and
FlexSN("lif"), f32) against direct launches of the same kernels on
preallocated buffers, each module call from a reset state (inference under
torch.no_grad: the final-state kernel; train: forward + torch.autograd.grad
of the spikes; the direct train launches pass the buffers the module
passes):

  host  T = 4, N = 1024 (the kernel is negligible): host time per call of
        back-to-back calls; target: module - direct < 20 us (train: module
        - autograd floor, a bare autograd.Function over the same two
        launches);
  wall  T = 16, N = 2^24: CUDA-event time of one call (GPU idle before it,
        so the call's host work counts) and of back-to-back calls; target:
        module <= 1.03 x direct back to back (a single call also counts the
        host time, reported).
"""

import statistics
import sys
import time

from .kernels import addresses, binder, new_workspace
from .results import fmt

PROG = "bench lif"
HOST_TARGET_US = 20.0
WALL_TARGET = 0.03
# The GPU run's sizes and repeats; --smoke's are tiny (bench.lif).
SIZES = dict(
    host_T=4,
    host_N=1024,
    host_calls=dict(inference=1000, train=300),
    host_rounds=5,
    host_warmup=20,
    settle_s=0.5,
    wall_T=16,
    wall_N=1 << 24,
    single_reps=30,
    b2b_calls=10,
    b2b_rounds=3,
)


def module_calls(torch, module, T, N, device):
    """Callables for one module at [T, N] f32, every call from a reset
    state: name -> fn for (direct | module) x (inference | train), the
    direct ones on preallocated buffers with the module's own kernels and
    the buffers the module passes (its training forward is the one keeping
    v only at its end), plus direct_train_min (the sequence forward with
    no state output at all: the least a forward moves). Returns (calls,
    check) with check() comparing module and direct results."""
    bind = binder(torch, device)
    compiled = module.compiled
    kfs = compiled.kernel(device, "final-state", "f32")
    kf = compiled.kernel(device, "forward", "f32", final_states=True)
    kf_min = compiled.kernel(device, "forward", "f32", final_states=False)
    kb = compiled.kernel(device, "backward", "f32")
    g = torch.Generator(device=device).manual_seed(1000 * T + N % 997)
    x = torch.randn((T, N), generator=g, device=device) * 0.9 + 0.8
    gs = torch.randn((T, N), generator=g, device=device)
    xr = x.detach().requires_grad_(True)
    spike, xg = torch.empty_like(x), torch.empty_like(x)
    vf, vg = torch.empty(N, device=device), torch.empty(N, device=device)
    vfin = torch.empty(N, device=device)
    workspace = new_workspace(torch, (kf, kb), T, N, device)
    wp = workspace.data_ptr()
    direct_inference = bind(
        kfs, T, N, addresses(kfs, {"x": x, "spike": spike, "v_final": vf})
    )
    forward = bind(
        kf, T, N, addresses(kf, {"x": x, "spike": spike, "v_final": vfin}), wp
    )
    forward_min = bind(
        kf_min, T, N, addresses(kf_min, {"x": x, "spike": spike}), wp
    )
    backward = bind(
        kb,
        T,
        N,
        addresses(kb, {"spike_grad": gs, "x_grad": xg, "v_init_grad": vg}),
        wp,
    )

    def direct_train():
        forward()
        backward()

    def direct_train_min():
        forward_min()
        backward()

    class FloorFunction(torch.autograd.Function):
        """The least a custom autograd op over the same two kernels costs:
        PyTorch's autograd plus the launches, no checks, no bookkeeping."""

        @staticmethod
        def forward(ctx, xin):
            forward()
            return torch.empty_like(xin)

        @staticmethod
        def backward(ctx, grad):
            backward()
            return torch.empty_like(grad)

    def floor_train():
        s = FloorFunction.apply(xr)
        return torch.autograd.grad(s, (xr,), gs)[0]

    def module_inference():
        module.reset()
        with torch.no_grad():
            return module(x)

    def module_train():
        module.reset()
        s = module(xr)
        return s, torch.autograd.grad(s, (xr,), gs)[0]

    def sync():
        if device != "cpu":
            torch.cuda.synchronize()

    def check():
        direct_inference()
        s = module_inference()
        sync()
        ok_inf = bool(
            torch.equal(s, spike) and torch.equal(module.states[0], vf)
        )
        direct_train()
        s, gx = module_train()
        sync()
        diff = float((gx - xg).abs().max())
        return dict(
            inference_equal=ok_inf,
            train_spikes_equal=bool(torch.equal(s, spike)),
            train_x_grad_maxdiff=diff,
        )

    calls = dict(
        direct_inference=direct_inference,
        direct_train=direct_train,
        direct_train_min=direct_train_min,
        floor_train=floor_train,
        module_inference=module_inference,
        module_train=module_train,
    )
    calls["keep"] = (x, gs, xr, spike, xg, vf, vg, vfin, workspace)
    return calls, check


def host_times(timer, fns, calls, rounds, warmup, settle_s):
    """Per-call host time (until the last of `calls` back-to-back calls has
    returned) and wall time (until the device is done too), in us, medians
    over `rounds`; the callables take turns within a round, so that drift
    hits them alike. Returns name -> (host_us, wall_us)."""
    # settle_s of calls each first: the host's clocks and caches settle
    # (the first module measured otherwise ran ~1.5x slower, direct calls
    # included).
    for fn in fns.values():
        for _ in range(warmup):
            fn()
        end = time.perf_counter() + settle_s
        while time.perf_counter() < end:
            fn()
        timer.sync()
    got = dict((name, ([], [])) for name in fns)
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            timer.sync()
            t2 = time.perf_counter()
            got[name][0].append((t1 - t0) / calls * 1e6)
            got[name][1].append((t2 - t0) / calls * 1e6)
    return dict(
        (name, (statistics.median(h), statistics.median(w)))
        for name, (h, w) in got.items()
    )


def event_times(timer, fns, reps, calls, rounds, warmup=3):
    """name -> (ms of one call with the device idle before it, so that the
    call's host work counts: median of `reps`; ms per call of `calls`
    back-to-back calls: median of `rounds`)."""
    out = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        timer.sync()
        single = [timer.span_ms(fn) for _ in range(reps)]
        b2b = [timer.span_ms(fn, calls) for _ in range(rounds)]
        out[name] = (statistics.median(single), statistics.median(b2b))
    return out


def bench_modules(torch, modules, timer, sizes=SIZES):
    """The modules' host overhead (tiny N) and wall time (large N) against
    direct launches; see the module docstring. Returns a record for
    results.json (meta["modules"])."""
    res = dict(
        host=[],
        wall=[],
        checks=[],
        host_target_us=HOST_TARGET_US,
        wall_target=WALL_TARGET,
    )
    device = timer.device
    # The targets are a GPU's: on the CPU (--smoke) the figures are
    # reported, the targets not judged (ok None).
    judged = timer.cuda
    HT, HN, WT, WN = (
        sizes[k] for k in ("host_T", "host_N", "wall_T", "wall_N")
    )
    for name, module in modules.items():
        calls, check = module_calls(torch, module, HT, HN, device)
        res["checks"].append(dict(module=name, T=HT, N=HN, **check()))
        with timer.held():
            for mode, n in sizes["host_calls"].items():
                fns = {
                    "direct": calls["direct_" + mode],
                    "module": calls["module_" + mode],
                }
                if mode == "train":
                    fns["floor"] = calls["floor_train"]
                t = host_times(
                    timer,
                    fns,
                    n,
                    sizes["host_rounds"],
                    sizes["host_warmup"],
                    sizes["settle_s"],
                )
                (dh, dw), (mh, mw) = t["direct"], t["module"]
                # Training's baseline is the autograd floor: PyTorch's own
                # cost of any custom op, which no module can avoid.
                base = t["floor"][0] if mode == "train" else dh
                rec = dict(
                    module=name,
                    mode=mode,
                    T=HT,
                    N=HN,
                    calls=n,
                    direct_host_us=dh,
                    module_host_us=mh,
                    overhead_us=mh - dh,
                    direct_wall_us=dw,
                    module_wall_us=mw,
                    overhead_wall_us=mw - dw,
                    ok=mh - base < HOST_TARGET_US if judged else None,
                )
                if mode == "train":
                    rec.update(floor_host_us=base, own_us=mh - base)
                res["host"].append(rec)
                print(
                    "%s: host %-11s %-9s T=%d N=%d: direct %.1f us, "
                    "module %.1f us per call: %+.1f us (wall %+.1f us)%s; "
                    "target < %.0f us: %s"
                    % (
                        PROG,
                        name,
                        mode,
                        HT,
                        HN,
                        dh,
                        mh,
                        mh - dh,
                        mw - dw,
                        ""
                        if mode != "train"
                        else "; autograd floor %.1f us, module %+.1f us over "
                        "it" % (base, mh - base),
                        HOST_TARGET_US,
                        verdict(rec["ok"]),
                    )
                )
                sys.stdout.flush()
        del calls, check
        timer.free()

        calls, check = module_calls(torch, module, WT, WN, device)
        res["checks"].append(dict(module=name, T=WT, N=WN, **check()))
        with timer.held():
            for mode in ("inference", "train"):
                fns = {
                    "direct": calls["direct_" + mode],
                    "module": calls["module_" + mode],
                }
                if mode == "train":
                    fns["direct_min"] = calls["direct_train_min"]
                t = event_times(
                    timer,
                    fns,
                    sizes["single_reps"],
                    sizes["b2b_calls"],
                    sizes["b2b_rounds"],
                )
                (d1, db), (m1, mb) = t["direct"], t["module"]
                rec = dict(
                    module=name,
                    mode=mode,
                    T=WT,
                    N=WN,
                    direct_ms=d1,
                    module_ms=m1,
                    ratio=m1 / d1,
                    direct_b2b_ms=db,
                    module_b2b_ms=mb,
                    ratio_b2b=mb / db,
                    # Back-to-back is what a training loop sees;
                    # one call after an idle GPU adds the host time.
                    ok=mb / db <= 1 + WALL_TARGET if judged else None,
                )
                if "direct_min" in t:
                    rec["direct_min_ms"], rec["direct_min_b2b_ms"] = t[
                        "direct_min"
                    ]
                res["wall"].append(rec)
                print(
                    "%s: wall %-11s %-9s T=%d N=2^%d: direct %.3f "
                    "ms, module %.3f ms (%+.1f%%; back-to-back %.3f vs "
                    "%.3f ms, %+.1f%%)%s; target <= +%.0f%%: %s"
                    % (
                        PROG,
                        name,
                        mode,
                        WT,
                        WN.bit_length() - 1,
                        d1,
                        m1,
                        100 * (m1 / d1 - 1),
                        db,
                        mb,
                        100 * (mb / db - 1),
                        ""
                        if "direct_min" not in t
                        else "; direct without v_seq %.3f ms"
                        % t["direct_min"][0],
                        100 * WALL_TARGET,
                        verdict(rec["ok"]),
                    )
                )
                sys.stdout.flush()
        del calls, check
        timer.free()
    for c in res["checks"]:
        if not check_ok(c):
            print(
                "%s: %s T=%d N=%d: module and direct results differ: %s"
                % (PROG, c["module"], c["T"], c["N"], c)
            )
    res["ok"] = (
        all(r["ok"] for r in res["host"] + res["wall"]) if judged else None
    )
    return res


def verdict(ok, words=("FAIL", "PASS")):
    """A target's verdict; ok None: not judged (the CPU)."""
    return "not judged on the CPU" if ok is None else words[bool(ok)]


def check_ok(c):
    """Whether a module gave the direct launches' results."""
    return (
        c["inference_equal"]
        and c["train_spikes_equal"]
        and c["train_x_grad_maxdiff"] <= 1e-6
    )


def modules_consistent(res):
    """Whether the module measurements ran and every module call gave the
    direct launches' results."""
    return (
        bool(res)
        and "error" not in res
        and all(check_ok(c) for c in res["checks"])
    )


def module_md(m):
    """results.md's section on the modules (meta["modules"])."""
    lines = ["", "## PyTorch modules vs direct kernel launches", ""]
    if "error" in m:
        return lines + ["Not measured: %s" % m["error"]]
    lines += [
        "flexsn.torch modules (f32, every call from a reset state; "
        "inference under torch.no_grad, train = forward + "
        "autograd.grad of the spikes) against GpuKernel.launch of the "
        "same kernels on preallocated buffers.",
        "",
        "Host time per call of back-to-back calls (until the last call "
        "returns; wall: until the GPU is done), median of 5 rounds. "
        "Target: module - baseline < %.0f us, the baseline being the "
        "direct launch for inference and, for training, the autograd "
        "floor (a bare torch.autograd.Function launching the same two "
        "kernels, plus autograd.grad: PyTorch's own cost of any custom "
        "op)." % m["host_target_us"],
        "",
        "| module | mode | T | N | direct us | floor us | module us "
        "| module - direct us | module - baseline us | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in m["host"]:
        base = r.get("floor_host_us", r["direct_host_us"])
        lines.append(
            "| %s | %s | %d | %d | %.1f | %s | %.1f | %+.1f | %+.1f "
            "| %s |"
            % (
                r["module"],
                r["mode"],
                r["T"],
                r["N"],
                r["direct_host_us"],
                fmt(r.get("floor_host_us"), ".1f"),
                r["module_host_us"],
                r["overhead_us"],
                r["module_host_us"] - base,
                verdict(r["ok"], ("**fail**", "pass")),
            )
        )
    lines += [
        "",
        "Wall time, CUDA events: one call with the GPU idle before "
        "it (its host work counts; median of 30) and back-to-back "
        "calls (per call, median of 3 x 10). Target: module <= "
        "%.2f x direct back to back (one call after an idle GPU also "
        "counts the host time above). Direct train launches pass the "
        "module's buffers (its forward writes v at its end only); "
        "direct- runs the sequence forward with no state output (the "
        "least a forward moves)." % (1 + m["wall_target"]),
        "",
        "| module | mode | T | N | direct ms | module ms | ratio "
        "| direct b2b ms | module b2b ms | ratio b2b | direct- ms "
        "| target |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in m["wall"]:
        lines.append(
            "| %s | %s | %d | 2^%d | %.3f | %.3f | %.3f | %.3f "
            "| %.3f | %.3f | %s | %s |"
            % (
                r["module"],
                r["mode"],
                r["T"],
                r["N"].bit_length() - 1,
                r["direct_ms"],
                r["module_ms"],
                r["ratio"],
                r["direct_b2b_ms"],
                r["module_b2b_ms"],
                r["ratio_b2b"],
                fmt(r.get("direct_min_ms"), ".3f"),
                verdict(r["ok"], ("**fail**", "pass")),
            )
        )
    bad = [c for c in m["checks"] if not check_ok(c)]
    lines += [
        "",
        "Module results equal to the direct launches' (spikes, "
        "final state, x_grad): %s."
        % (
            "yes"
            if not bad
            else "**no**: "
            + "; ".join(
                "%s T=%d N=%d %s" % (c["module"], c["T"], c["N"], c)
                for c in bad
            )
        ),
    ]
    return lines
