"""LIF training with the charge saved in f32 or in the storage type.

    python3 -m bench saved-storage [--out DIR]
    python3 -m bench saved-storage --smoke      # tiny shapes on the CPU

For f16 and bf16, T in {4, 16, 64}, N = 2^24: times LIF's training forward
+ backward compiled with `save_in_storage_type=False` (h saved in f32),
by default (h saved in the storage type, rounded so that the backward's
spikes are the forward's), and with `approximate_surrogates=True` as
well (the surrogate's exp and division approximate), on the same
buffers (one workspace, sized for the f32 saves, serves all three: only
the kernels differ), in turn twice and averaging each kernel's two
medians (bench/timing.py). Each is reported as
a fraction of the device-to-device copy bandwidth measured first, on its
own bytes: T N (4 es + 2 saved) + 2 N es (forward: x, spike, h; backward:
spike gradient, h, x gradient; v_init and its gradient).

The precision cost, at N = 2^20 and the same T: the kernels' input
gradients against float64 autograd of the same LIF loop on the same
(rounded) inputs, as the mean absolute error over the mean absolute
gradient, the largest error over the largest gradient, and the fraction of
elements off by more than 1% of the largest gradient; also whether all
wrote the same spikes (the forward does not depend on how h is saved).

Through the modules, against SpikingJelly (f16, T = 64; skipped with
--smoke, and SpikingJelly's rows where it does not import): one training
step (a fresh state, forward, `autograd.grad` of x) of FlexSN's LIFNode
with h saved in f32 and in the storage type, and of SpikingJelly's LIFNode
on its Triton and CuPy backends (tau = 2, sigmoid(4), hard reset to 0, as
the loop). Median time at N = 2^24, each as a fraction of copy on the
bytes of h saved in f16 (T N 12 bytes); x's gradient at N = 2^20 against
float64 autograd of the loop from v = 0, with the fraction of spikes that
differ from float64's (SpikingJelly's f16 kernels compute in f16).

Writes saved_storage_results.json and .md to --out. Needs the compile
cache of the bundle (utils/gpu_bundle.sh compiles them: --compile-only).
--smoke: bf16, T = 4, N = 2^12 on the CPU (whose kernels take the
approximate surrogates as exact ones).
"""

import sys

from . import cli, kernels, results, traffic
from .timing import Timer

PROG = "bench saved-storage"
N_TIME, N_PRECISION = 1 << 24, 1 << 20
MODULE_DTYPE, MODULE_T = "f16", 64
TS = (4, 16, 64)
DTYPES = ("f16", "bf16")
MODES = ("f32", "storage", "approx")
# No f16 with --smoke: torch's CPU sigmoid, in the float64 reference's
# inputs' rounding, has no half kernel in some versions.
SMOKE = dict(
    N_TIME=1 << 12,
    N_PRECISION=1 << 12,
    Ts=(4,),
    dtypes=("bf16",),
    reps=3,
    copy_bytes=8 << 20,
)


def compile_all(smoke=False):
    """{mode: compiled LIF}: saving in f32, in the storage type (the
    default), and that with approximate surrogates."""
    import flexsn

    storage = dict(
        variants=("forward", "backward"),
        storage_types=DTYPES,
        **kernels.compile_options(smoke),
    )
    return {
        "f32": flexsn.compile("lif", save_in_storage_type=False, **storage),
        "storage": flexsn.compile("lif", **storage),
        "approx": flexsn.compile(
            "lif", approximate_surrogates=True, **storage
        ),
    }


def training_call(torch, device, compiled, dtype, T, N):
    """Buffers for one training step at [T, N] and, per mode, a function
    launching its forward and backward on them; returns (calls, outputs
    per mode: spike, x_grad, v_init_grad, each mode's own copies,
    inputs)."""
    x, v0, gs = kernels.make_inputs(torch, "train", dtype, T, N, device)
    tdt = kernels.tdtypes(torch)[dtype]
    bind = kernels.binder(torch, device)
    pairs = {
        m: (
            k.kernel(device, "forward", dtype),
            k.kernel(device, "backward", dtype),
        )
        for m, k in compiled.items()
    }
    ws = kernels.new_workspace(
        torch, [k for p in pairs.values() for k in p], T, N, device
    )
    calls, outs = {}, {}
    for mode, (kf, kb) in pairs.items():
        spike = torch.empty((T, N), dtype=tdt, device=device)
        xg = torch.empty((T, N), dtype=tdt, device=device)
        vg = torch.empty((N,), dtype=tdt, device=device)
        forward = bind(
            kf,
            T,
            N,
            kernels.addresses(kf, {"x": x, "v_init": v0, "spike": spike}),
            ws.data_ptr(),
        )
        backward = bind(
            kb,
            T,
            N,
            kernels.addresses(
                kb, {"spike_grad": gs, "x_grad": xg, "v_init_grad": vg}
            ),
            ws.data_ptr(),
        )

        def call(forward=forward, backward=backward):
            forward()
            backward()

        calls[mode], outs[mode] = call, (spike, xg, vg)
    # The launches hold raw addresses: the buffers live as long as calls.
    calls["keep"] = (ws, x, v0, gs, outs)
    return calls, outs, (x, v0, gs)


def saved_bytes(mode, dtype):
    return 4 if mode == "f32" else kernels.ELEM[dtype]


def reference_grads(torch, x, v0, gs, T):
    """float64 autograd of the benchmark's LIF loop: (x_grad, v0_grad)."""
    loop = kernels.make_loop(torch, "train", "f64", T)
    xr = x.double().requires_grad_(True)
    vr = v0.double().requires_grad_(True)
    s = loop(xr, vr)
    return torch.autograd.grad(s, (xr, vr), gs.double())


def errors(got, want):
    d = (got.double() - want).abs()
    scale = want.abs().max().item() or 1.0
    return dict(
        mean_rel=d.mean().item() / (want.abs().mean().item() or 1.0),
        max_rel=d.max().item() / scale,
        beyond_1pct=(d > 1e-2 * scale).double().mean().item(),
    )


def module_peers(torch, smoke):
    """{name: a factory of the module}: FlexSN's LIFNode saving h in f32
    and in the storage type, and SpikingJelly's LIFNode on its Triton and
    CuPy backends where it imports (not with --smoke)."""
    from flexsn.torch import LIFNode

    peers = {
        "flexsn, h in f32": lambda: LIFNode(
            step_mode="m", tau=2.0, save_in_storage_type=False
        ),
        "flexsn, h in the storage type": lambda: LIFNode(
            step_mode="m", tau=2.0, save_in_storage_type=True
        ),
    }
    if smoke:
        return peers, None
    try:
        from spikingjelly.activation_based import neuron, surrogate
    except ImportError as e:
        return peers, cli.skip(
            PROG, "SpikingJelly's rows", "it does not import: %s" % e
        )
    for backend in ("triton", "cupy"):
        peers["spikingjelly " + backend] = lambda b=backend: neuron.LIFNode(
            tau=2.0,
            step_mode="m",
            backend=b,
            surrogate_function=surrogate.Sigmoid(alpha=4.0),
        )
    return peers, None


def module_step(torch, module, x, gs):
    """One training step from a fresh state: x's gradient."""
    xr = x.detach().requires_grad_(True)

    def step():
        module.reset()
        return torch.autograd.grad(module(xr), xr, gs)[0]

    return step


def module_rows(torch, device, timer, copy, smoke):
    """Time and precision of each module peer (docstring)."""
    T = 4 if smoke else MODULE_T
    dtype = "bf16" if smoke else MODULE_DTYPE
    n_time, n_precision = (
        (SMOKE["N_TIME"], SMOKE["N_PRECISION"])
        if smoke
        else (N_TIME, N_PRECISION)
    )
    peers, skipped = module_peers(torch, smoke)
    x, _, gs = kernels.make_inputs(
        torch, "train", dtype, T, n_precision, device
    )
    v0 = torch.zeros_like(x[0])
    gx_ref, _ = reference_grads(torch, x, v0, gs, T)
    with torch.no_grad():
        s_ref = kernels.make_loop(torch, "train", "f64", T)(
            x.double(), v0.double()
        )
    rows = []
    for name, make in peers.items():
        row = dict(name=name, dtype=dtype, T=T, N=n_time)
        try:
            module = make().to(device)
            with torch.no_grad():
                module.reset()
                spikes = module(x)
            module.reset()
            gx = module_step(torch, module, x, gs)()
            row.update(
                x_grad=errors(gx, gx_ref),
                spikes_off=(spikes.double() != s_ref).double().mean().item(),
            )
            xt, _, gt = kernels.make_inputs(
                torch, "train", dtype, T, n_time, device
            )
            row["ms"] = timer.ms(module_step(torch, module, xt, gt))[0]
            nbytes = traffic.lif_bytes(
                "train",
                T,
                n_time,
                kernels.ELEM[dtype],
                saved_es=kernels.ELEM[dtype],
                v_init=False,
            )
            row["frac_copy"] = traffic.frac_copy(nbytes, row["ms"], copy)
            del xt, gt
        except Exception as e:  # a peer that fails says why, in the row
            row["error"] = "%s: %s" % (type(e).__name__, e)
        rows.append(row)
        print(
            "%s: module %s %s T=%d: %s"
            % (
                PROG,
                name,
                dtype,
                T,
                row.get("error")
                or (
                    "%.4f ms (%.1f%% of copy); x_grad vs float64 mean %.2e, "
                    "max %.2e, beyond 1%% %.2e; spikes off float64's %.2e"
                    % (
                        row["ms"],
                        100 * row["frac_copy"],
                        *row["x_grad"].values(),
                        row["spikes_off"],
                    )
                ),
            )
        )
        sys.stdout.flush()
        timer.free()
    return rows, skipped


def main(argv=None):
    ap = cli.parser("saved-storage", __doc__)
    ap.add_argument(
        "--compile-only",
        action="store_true",
        help="compile the three LIFs (fills $FLEXSN_CACHE_DIR "
        "for a machine without the tools), then exit",
    )
    cli.add_out_and_smoke(ap, "saved-storage-out")
    args = cli.finish(ap.parse_args(argv))
    smoke = args.smoke
    if args.compile_only:
        compile_all(smoke)
        return 0
    import torch

    device = cli.device(torch, args, PROG)
    if device is None:
        return 2
    compiled = compile_all(smoke)
    n_time, n_precision, Ts, dtypes = (
        (SMOKE["N_TIME"], SMOKE["N_PRECISION"], SMOKE["Ts"], SMOKE["dtypes"])
        if smoke
        else (N_TIME, N_PRECISION, TS, DTYPES)
    )
    timer = Timer(torch, device, SMOKE["reps"] if smoke else 20, 3)
    copy, _ = traffic.copy_gbs(
        torch, timer, SMOKE["copy_bytes"] if smoke else traffic.COPY_BYTES
    )
    meta = dict(
        device=cli.device_name(torch, device),
        torch=torch.__version__,
        copy_gbs=copy,
        rows=[],
        precision=[],
    )
    print("%s: %s, copy %.0f GB/s" % (PROG, meta["device"], copy))

    for dtype in dtypes:
        es = kernels.ELEM[dtype]
        for T in Ts:
            calls, _, _ = training_call(
                torch, device, compiled, dtype, T, n_time
            )
            times = timer.rounds(
                {m: calls[m] for m in MODES},
                2,
                before=lambda m, c=calls: c[m](),
            )
            row = dict(dtype=dtype, T=T, N=n_time)
            for m in MODES:
                ms = sum(times[m]) / len(times[m])
                nbytes = traffic.lif_bytes(
                    "train", T, n_time, es, saved_es=saved_bytes(m, dtype)
                )
                row[m] = dict(
                    ms=ms,
                    medians=times[m],
                    bytes=nbytes,
                    frac_copy=traffic.frac_copy(nbytes, ms, copy),
                )
            for m in MODES[1:]:
                row[m]["speedup"] = row["f32"]["ms"] / row[m]["ms"]
            meta["rows"].append(row)
            print(
                "%s: %s T=%d N=2^%d: h in f32 %.4f ms "
                "(%.1f%% of copy), in %s %.4f ms (%.1f%%): x%.3f, also "
                "approximate surrogates %.4f ms (%.1f%%): x%.3f"
                % (
                    PROG,
                    dtype,
                    T,
                    n_time.bit_length() - 1,
                    row["f32"]["ms"],
                    100 * row["f32"]["frac_copy"],
                    dtype,
                    row["storage"]["ms"],
                    100 * row["storage"]["frac_copy"],
                    row["storage"]["speedup"],
                    row["approx"]["ms"],
                    100 * row["approx"]["frac_copy"],
                    row["approx"]["speedup"],
                )
            )
            sys.stdout.flush()
            del calls
            timer.free()

    for dtype in dtypes:
        for T in Ts:
            calls, outs, (x, v0, gs) = training_call(
                torch, device, compiled, dtype, T, n_precision
            )
            for m in MODES:
                calls[m]()
            timer.sync()
            gx, gv = reference_grads(torch, x, v0, gs, T)
            rec = dict(
                dtype=dtype,
                T=T,
                N=n_precision,
                same_spikes=all(
                    torch.equal(outs["f32"][0], outs[m][0]) for m in MODES[1:]
                ),
            )
            for m in MODES:
                rec[m] = dict(
                    x_grad=errors(outs[m][1], gx),
                    v_init_grad=errors(outs[m][2], gv),
                )
            meta["precision"].append(rec)
            print(
                "%s: %s T=%d N=2^%d x_grad vs float64 "
                "(mean, max, beyond 1%%): h in f32 %.2e %.2e %.2e; in %s "
                "%.2e %.2e %.2e; also approximate %.2e %.2e %.2e; same "
                "spikes: %s"
                % (
                    PROG,
                    dtype,
                    T,
                    n_precision.bit_length() - 1,
                    *rec["f32"]["x_grad"].values(),
                    dtype,
                    *rec["storage"]["x_grad"].values(),
                    *rec["approx"]["x_grad"].values(),
                    rec["same_spikes"],
                )
            )
            sys.stdout.flush()
            del calls, outs, x, v0, gs, gx, gv
            timer.free()

    meta["modules"], meta["modules_skipped"] = module_rows(
        torch, device, timer, copy, smoke
    )

    results.write_results(
        args.out, "saved_storage_results", meta, markdown(meta)
    )
    print("%s: results in %s" % (PROG, args.out))
    return 0


def markdown(meta):
    lines = [
        "# LIF training: the charge saved in f32 or in the storage type",
        "",
        "From `python3 -m bench saved-storage` (docstring: method), "
        "%s, torch %s, copy %.0f GB/s measured in the same run. Forward + "
        "backward, %% of copy on each call's own bytes (h in f32: T N (4 es "
        "+ 8) + 2 N es; in the storage type: T N 6 es + 2 N es). h in f32: "
        "`save_in_storage_type=False`; storage: the default; + approx: also "
        "`approximate_surrogates=True`; x: speedup over h in f32."
        % (meta["device"], meta["torch"], meta["copy_gbs"]),
        "",
        "| dtype | T | h in f32: ms | % copy | storage: ms | % copy | x "
        "| + approx: ms | % copy | x |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in meta["rows"]:
        a, b, c = (r[m] for m in MODES)
        lines.append(
            "| %s | %d | %.4f | %.1f | %.4f | %.1f | %.3f | %.4f "
            "| %.1f | %.3f |"
            % (
                r["dtype"],
                r["T"],
                a["ms"],
                100 * a["frac_copy"],
                b["ms"],
                100 * b["frac_copy"],
                b["speedup"],
                c["ms"],
                100 * c["frac_copy"],
                c["speedup"],
            )
        )
    lines += [
        "",
        "Precision, N = 2^%d: the input gradient against float64 autograd "
        "of the same loop on the same inputs: mean |error| / mean "
        "|gradient|; max |error| / max |gradient|; the fraction of elements "
        "off by more than 1%% of the max |gradient|. Same spikes: all three "
        "kernels wrote identical spikes."
        % (
            (meta["precision"] or [dict(N=N_PRECISION)])[0]["N"].bit_length()
            - 1
        ),
        "",
        "| dtype | T | h in f32: mean | max | > 1% | storage: mean | max "
        "| > 1% | + approx: mean | max | > 1% | same spikes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in meta["precision"]:
        cells = []
        for m in MODES:
            e = r[m]["x_grad"]
            cells += [
                "%.2e" % e["mean_rel"],
                "%.2e" % e["max_rel"],
                "%.2e" % e["beyond_1pct"],
            ]
        lines.append(
            "| %s | %d | %s | %s |"
            % (
                r["dtype"],
                r["T"],
                " | ".join(cells),
                "yes" if r["same_spikes"] else "no",
            )
        )
    rows = meta.get("modules") or []
    if rows:
        lines += [
            "",
            "Through the modules, one training step (%s, T = %d; time at N "
            "= 2^%d, %% of copy on h-in-%s bytes; x_grad against float64 at "
            "N = 2^%d; spikes off: the fraction of spikes that differ from "
            "float64's)%s."
            % (
                rows[0]["dtype"],
                rows[0]["T"],
                rows[0]["N"].bit_length() - 1,
                rows[0]["dtype"],
                (meta["precision"] or [dict(N=N_PRECISION)])[0][
                    "N"
                ].bit_length()
                - 1,
                "; SpikingJelly: " + meta["modules_skipped"]
                if meta.get("modules_skipped")
                else "",
            ),
            "",
            "| module | ms | % copy | x_grad mean | max | > 1% | spikes off |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            if "error" in r:
                lines.append(
                    "| %s | %s |  |  |  |  |  |" % (r["name"], r["error"])
                )
                continue
            e = r["x_grad"]
            lines.append(
                "| %s | %.4f | %.1f | %.2e | %.2e | %.2e | %.2e |"
                % (
                    r["name"],
                    r["ms"],
                    100 * r["frac_copy"],
                    e["mean_rel"],
                    e["max_rel"],
                    e["beyond_1pct"],
                    r["spikes_off"],
                )
            )
    return "\n".join(lines) + "\n"
