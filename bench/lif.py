"""Benchmarks FlexSN's LIF kernels and PyTorch modules on a GPU machine
(targets: docs/Reference.md).

    python3 -m bench lif [--out DIR] [--reps 20] [--budget SECONDS]
                         [--workers K] [--ns 24,20] [--quick]
                         [--no-compile] [--no-modules]
    python3 -m bench lif --compile-only      # fill the kernel cache
    python3 -m bench lif --smoke             # tiny shapes on the CPU

Kernels come from the package, as users get them: flexsn.compile("lif",
all four variants, f32/f16/bf16, targets cpu and cuda, sm_90) and
CompiledNeuron.kernel("cuda", variant, dtype) -> flexsn._runtime.GpuKernel,
launched with GpuKernel.launch. The GPU machine has no FlexSN tools: run
--compile-only where they are with FLEXSN_CACHE_DIR set, carry that cache,
and set FLEXSN_CACHE_DIR (and FLEXSN_RUNTIME_LIB, libflexsn_runtime.so) on
the GPU machine; every compile here has fixed arguments, so both runs use
the same cache keys.

For N in {2^24, 2^20} (--ns) x T in {4, 16, 64} x {f32, f16, bf16} x
{inference, final_state, train} it times (bench/timing.py: CUDA events,
warm-up, then the median of --reps runs, each queued behind a short GPU
sleep so that launch latency is not counted), on fresh random inputs
(never zeros):

  FlexSN   the <variant> kernel of the compiled LIF, v_init given;
           train = the forward kernel (x -> spike, v_seq NULL, the f32
           workspace) then the backward (spike_grad given, v_seq_grad and
           v_final_grad NULL -> x_grad, v_init_grad), timed as one pair;
  stream   a same-mix stream (bench/stream.py: CuPy RawKernels, 16-byte
           accesses) moving the same arrays;
  eager    the plain PyTorch LIF loop in the storage dtype, torch.stack'ed;
           for train with the spike as a torch.autograd.Function (Heaviside
           forward, sigmoid(4) surrogate backward), forward + autograd.grad
           of the spikes w.r.t. x and v_init;
  compile  torch.compile (mode default, static shapes) of the same loop
           (train: forward + backward through AOTAutograd). Compiling is the
           slow part, so --workers processes compile AND time it, in
           parallel with this process's measurements (bench/
           compile_workers.py: one GPU lock around every timed measurement,
           a memory ledger for the workers' allocations). Its compile time
           (the first call) is reported, not counted;

plus the device-to-device copy bandwidth (a torch copy of 1 GiB; bytes =
read + write), at the start and the end. For every row: the time, the bytes
that must move (bench/traffic.py), the achieved bandwidth, the fraction of
the copy bandwidth and of the same-mix stream, the speedups over eager and
torch.compile, and (N <= 2^20) the host wall time per call of back-to-back
calls. FlexSN's spikes (f32: and state, x_grad) are compared with eager's.

Then, with the compile workers done so that the host is quiet: the
PyTorch modules against direct launches (bench/lif_modules.py), PLIF's
atomic vs deterministic and scalar vs per-channel parameter gradients
(bench/lif_params.py) and spikes stored as bytes and bits (bench/
spikes.py).

Writes results.json, results.md, bench.png (inference and final-state) and
bench_train.png (train) to --out. Stops adding rows when --budget seconds
have passed (the rows done are still written).

--smoke runs every part that can run on the CPU at N = 2^12, T = 4, with
few repeats and CPU kernels (the stream, torch.compile and the PLIF
gradient rows need a GPU and are skipped), into a temporary folder, no
plots: it checks that the benchmark runs and agrees with eager PyTorch.
"""

import argparse
import json
import os
import sys
import time

from . import cli, compile_workers, kernels, lif_modules, lif_params, spikes
from . import traffic
from .kernels import DTYPES, ELEM, KERNEL_VARIANT, TAU, V_TH
from .results import fmt, pyplot
from .timing import Timer

PROG = "bench lif"
NS = (1 << 24, 1 << 20)
TS = (4, 16, 64)
VARIANTS = ("inference", "final_state", "train")
TARGETS = {
    "inference": (0.93, 0.97),
    "final_state": (0.95, None),
    "train": (0.95, None),
}
# --smoke's sizes. No f16: torch's CPU sigmoid (the eager surrogate) has
# no half-precision kernel in some versions.
SMOKE = dict(
    ns=(1 << 12,),
    ts=(4,),
    dtypes=("f32", "bf16"),
    reps=3,
    copy_bytes=8 << 20,
    spike_ts=(4,),
    modules=dict(
        host_T=4,
        host_N=1024,
        host_calls=dict(inference=20, train=10),
        host_rounds=2,
        host_warmup=2,
        settle_s=0.0,
        wall_T=4,
        wall_N=1 << 12,
        single_reps=3,
        b2b_calls=3,
        b2b_rounds=2,
    ),
)


def compile_all(smoke=False):
    """Every flexsn.compile the benchmark makes: the LIF kernels, PLIF's
    with a scalar and with a per-channel w (the parameter-gradient rows),
    the modules' (their constructors compile) and LIF's inference kernels
    with spikes stored as bytes and bits (and the dense ones they are
    compared with). Returns (lif, {"scalar": plif, "per_channel": plif},
    {name: module}, lif with u8 and bits spike kernels)."""
    import flexsn
    from flexsn.torch import FlexSN, LIFNode

    options = kernels.compile_options(smoke)
    lif = flexsn.compile("lif", **kernels.lif_compile(smoke))
    plif_args = dict(
        variants=("forward", "backward"), storage_types=("f32",), **options
    )
    plif = {
        "scalar": flexsn.compile("plif", **plif_args),
        "per_channel": flexsn.compile(
            "plif", shapes={"w": "per_channel"}, **plif_args
        ),
    }
    modules = {
        "LIFNode": LIFNode(
            step_mode="m", tau=TAU, v_threshold=V_TH, **options
        ),
        "FlexSN(lif)": FlexSN("lif", **options),
    }
    lif_u8 = flexsn.compile(
        "lif",
        variants=("inference", "final-state"),
        storage_types=("f32", "f16"),
        spike_storage=("dense", "u8", "bits"),
        **options,
    )
    return lif, plif, modules, lif_u8


def run_bench(args, lif, plif, modules, lif_u8):
    import torch
    import flexsn

    t_start = time.time()
    device = args.device
    cuda = device == "cuda"
    ns = args.ns_list
    if args.smoke:
        ts, dtypes = SMOKE["ts"], SMOKE["dtypes"]
    else:
        ts = TS if not args.quick else (4, 16)
        dtypes = DTYPES if not args.quick else ("f32", "f16")
    variants = [v for v in VARIANTS if v in args.variants.split(",")]

    # 1. The compile workers start at once (they share the GPU through the
    # lock; their compiling is CPU work).
    tasks = [
        (v, d, T, N) for N in ns for v in variants for d in dtypes for T in ts
    ]
    if cuda:
        if args.worker_gib is None:
            total = torch.cuda.get_device_properties(0).total_memory
            args.worker_gib = round(total / 2.0**31, 1)
        compile_workers.configure_dynamo(torch)
        workers = compile_workers.Workers(
            0 if args.no_compile else args.workers, tasks, args
        )
        torch.zeros(1, device=device)
        lock = compile_workers.GpuLock(args.lock)
    else:
        workers = compile_workers.Workers(0, tasks, args)
        lock = None
        cli.skip(PROG, "torch.compile workers")
    timer = Timer(torch, device, args.reps, 3, lock)
    stream = None
    if not cuda:
        stream_note = "unavailable: " + cli.skip(
            PROG, "same-mix stream", "needs CuPy and a CUDA GPU"
        )
    else:
        try:
            from .stream import Stream

            stream = Stream(torch)
            stream_note = "cupy %s" % stream.version
        except Exception as e:
            stream_note = "unavailable: %s: %s" % (type(e).__name__, e)
            print("%s: same-mix stream %s" % (PROG, stream_note))

    # 2. Copy bandwidth.
    copy_bytes = traffic.COPY_BYTES if cuda else SMOKE["copy_bytes"]
    copy_gbs, copy_ms = traffic.copy_gbs(torch, timer, copy_bytes, reps=30)
    name = cli.device_name(torch, device)
    print(
        "%s: %s; copy %.1f GB/s (%.3f ms for 2 x %s); %d compile "
        "workers on %d tasks"
        % (
            PROG,
            name,
            copy_gbs,
            copy_ms,
            size_text(copy_bytes),
            len(workers.procs),
            len(tasks) if workers.procs else 0,
        )
    )
    sys.stdout.flush()

    rows, skipped = [], []
    entry_name = kernels.entry_name
    meta = dict(
        device=name,
        torch=torch.__version__,
        cuda=torch.version.cuda,
        stream=stream_note,
        flexsn=flexsn.__version__,
        flexsn_entries=dict(
            lif=entry_name(lif),
            plif=entry_name(plif["scalar"]),
            plif_per_channel=entry_name(plif["per_channel"]),
            lif_u8=entry_name(lif_u8),
            **{k: entry_name(m.compiled) for k, m in modules.items()},
        ),
        copy_bytes=2 * copy_bytes,
        copy_ms=copy_ms,
        copy_gbs=copy_gbs,
        copy_end_gbs=None,
        reps=args.reps,
        compile_workers=len(workers.procs),
        compile_wall_s=None,
        skipped=[],
        complete=False,
    )
    if args.smoke:
        meta["smoke"] = True
    reserve = 0.0 if args.no_compile else args.compile_reserve
    for N in ns:
        for variant in variants:
            for dtype in dtypes:
                for T in ts:
                    if time.time() - t_start > args.budget - reserve:
                        skipped.append((N, variant, dtype, T))
                        continue
                    row = bench_row(
                        torch,
                        lif,
                        timer,
                        stream,
                        variant,
                        dtype,
                        T,
                        N,
                        copy_gbs,
                    )
                    rows.append(row)
                    print_row(row)
                    sys.stdout.flush()
                    meta["seconds"] = time.time() - t_start
                    write_outputs(args.out, meta, rows, with_plot=False)
    if skipped:
        print(
            "%s: budget of %.0f s reached: %d rows skipped"
            % (PROG, args.budget, len(skipped))
        )

    # 3. torch.compile results from the workers.
    if workers.procs:
        print(
            "%s: waiting for the compile workers (at most %.0f s)"
            % (PROG, max(0.0, args.budget - (time.time() - t_start)))
        )
        sys.stdout.flush()
        results, wall = workers.collect(t_start + args.budget)
        meta["compile_wall_s"] = wall
        for row in rows:
            rec = results.get(
                (
                    compile_workers.key_str(
                        row["variant"], row["dtype"], row["T"]
                    ),
                    row["N"],
                )
            )
            if rec is None:
                row["compile_error"] = "not compiled within the budget"
            elif not rec.get("ok"):
                row["compile_error"] = rec.get("error", "?")
                row["compile_cold_s"] = rec.get("cold_s")
            else:
                row["compile_ms"] = rec["ms"]
                row["compile_cold_s"] = rec["cold_s"]
                if "wall_us" in rec:
                    row["compile_wall_us"] = rec["wall_us"]
            finish_row(row, copy_gbs)
        print(
            "%s: compile workers: %d of %d tasks in %.0f s; the rows "
            "with torch.compile:"
            % (
                PROG,
                sum(1 for r in results.values() if r.get("ok")),
                len(tasks),
                wall,
            )
        )
        for row in rows:
            print_row(row)

    # 4. The modules, with the workers gone (host overhead is CPU time).
    if not args.no_modules:
        try:
            meta["modules"] = lif_modules.bench_modules(
                torch,
                modules,
                timer,
                SMOKE["modules"] if args.smoke else lif_modules.SIZES,
            )
        except Exception as e:  # reported; the rest of the run goes on
            import traceback

            traceback.print_exc()
            meta["modules"] = dict(
                error="%s: %s" % (type(e).__name__, str(e)[:500])
            )
        timer.free()
        write_outputs(args.out, meta, rows, with_plot=False)

    # The deterministic reduction's price (PLIF: LIF has no trainable
    # parameter) and what a per-channel w costs over a scalar one, by
    # channel layout, when time is left: GPU matters (atomics).
    if not cuda:
        cli.skip(
            PROG,
            "PLIF atomic vs deterministic and per-channel " "gradient rows",
        )
    if cuda and time.time() - t_start < args.budget - reserve:
        meta["deterministic"] = lif_params.bench_deterministic(
            torch, plif["scalar"], timer, ns[0]
        )
    if cuda and time.time() - t_start < args.budget - reserve:
        meta["per_channel"] = lif_params.bench_per_channel(
            torch, plif, timer, ns[0], copy_gbs
        )
    # Spikes stored as bytes against spikes in the storage type.
    if time.time() - t_start < args.budget - reserve:
        meta["spike_storage"] = spikes.bench_spike_storage(
            torch,
            lif_u8,
            timer,
            ns[0],
            copy_gbs,
            **({"Ts": SMOKE["spike_ts"]} if args.smoke else {}),
        )

    # The copy again at the end: drift check.
    copy_end_gbs, _ = traffic.copy_gbs(torch, timer, copy_bytes, reps=20)
    meta.update(
        copy_end_gbs=copy_end_gbs,
        skipped=[dict(N=a, variant=b, dtype=c, T=d) for a, b, c, d in skipped],
        seconds=time.time() - t_start,
        complete=True,
    )
    return meta, rows


def bench_row(torch, lif, timer, stream, variant, dtype, T, N, copy_gbs):
    """One row: FlexSN's kernel(s), eager PyTorch (timed, and the
    correctness yardstick) and the same-mix stream on one (variant, dtype,
    T, N)."""
    import flexsn

    device = timer.device
    es = ELEM[dtype]
    tdt = kernels.tdtypes(torch)[dtype]
    nbytes = traffic.lif_bytes(variant, T, N, es)
    row = dict(N=N, T=T, dtype=dtype, variant=variant, bytes=nbytes)
    x, v0, gs = kernels.make_inputs(torch, variant, dtype, T, N, device)
    nan = float("nan")

    def seq(dt=tdt):
        return torch.full((T, N), nan, dtype=dt, device=device)

    def vec():
        return torch.full((N,), nan, dtype=tdt, device=device)

    bind = kernels.binder(torch, device)
    addresses = kernels.addresses

    # FlexSN.
    if variant == "train":
        kf = lif.kernel(device, "forward", dtype)
        kb = lif.kernel(device, "backward", dtype)
        spike, xg, vg = seq(), seq(), vec()
        ws = kernels.new_workspace(torch, (kf, kb), T, N, device)
        forward = bind(
            kf,
            T,
            N,
            addresses(kf, {"x": x, "v_init": v0, "spike": spike}),
            ws.data_ptr(),
        )
        backward = bind(
            kb,
            T,
            N,
            addresses(kb, {"spike_grad": gs, "x_grad": xg, "v_init_grad": vg}),
            ws.data_ptr(),
        )
        outs = (spike, xg, vg)

        def flexsn_call():
            forward()
            backward()

    else:
        kern = lif.kernel(device, KERNEL_VARIANT[variant], dtype)
        spike = seq()
        state = seq() if variant == "inference" else vec()
        flexsn_call = bind(
            kern,
            T,
            N,
            addresses(
                kern,
                {
                    "x": x,
                    "v_init": v0,
                    "spike": spike,
                    ("v_seq" if variant == "inference" else "v_final"): state,
                },
            ),
        )
        outs = (spike, state)
    try:
        flexsn_call()
        timer.sync()
    except flexsn.RuntimeStatusError as e:
        row.update(status=e.status, error=str(e))
        return row
    row["status"] = "FLEXSN_SUCCESS"
    row["unwritten"] = int(sum(torch.isnan(o).sum().item() for o in outs))
    ms, mn = timer.ms(flexsn_call)
    row.update(flexsn_ms=ms, flexsn_min_ms=mn)
    if N <= (1 << 20):
        row["flexsn_wall_us"] = timer.wall_us(flexsn_call)

    # Eager (also the correctness yardstick).
    loop = kernels.make_loop(torch, variant, dtype, T)
    run = kernels.peer_call(torch, loop, variant, x, v0, gs)
    res = run()
    timer.sync()
    e_spike = res[0] if variant != "train" else None
    if variant == "train":
        with torch.no_grad():
            e_spike = kernels.make_loop(torch, "final_state", dtype, T)(x, v0)[
                0
            ]
        gx = res[0]
        row["spike_mismatch_vs_eager"] = (
            (e_spike != spike).float().mean().item()
        )
        d = (gx.float() - xg.float()).abs()
        scale = gx.float().abs().amax().item() or 1.0
        row["x_grad_maxdiff_vs_eager"] = d.max().item() / scale
        row["x_grad_mismatch_vs_eager"] = (
            (d > 1e-2 * scale).float().mean().item()
        )
        del gx, d
    else:
        row["spike_mismatch_vs_eager"] = (
            (e_spike != spike).float().mean().item()
        )
        if dtype == "f32":
            row["state_maxdiff_vs_eager"] = float(
                (res[1].float() - state.float()).abs().max().item()
            )
    # FlexSN's buffers go before eager's timing (memory).
    del res, e_spike, flexsn_call, outs
    if variant == "train":
        del spike, xg, vg, ws, forward, backward
    else:
        del spike, state
    timer.free()
    ms, _ = timer.ms(run, warmup=1)
    row["eager_ms"] = ms
    if N <= (1 << 20):
        row["eager_wall_us"] = timer.wall_us(run, calls=5)
    del run, loop
    timer.free()

    # Same-mix stream.
    if stream is not None:
        try:
            srun, sb = stream.make(variant, T, N, es)
            ms, _ = timer.ms(srun)
            row["stream_ms"] = ms
            row["stream_bytes"] = sb
            row["stream_gbs"] = traffic.gbs(sb, ms)
            row["stream_frac_copy"] = row["stream_gbs"] / copy_gbs
            del srun
        except Exception as e:
            row["stream_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
    del x, v0, gs
    timer.free()
    finish_row(row, copy_gbs)
    return row


def finish_row(row, copy_gbs):
    """Derived figures of a row (again once the compile times are in)."""
    if "flexsn_ms" not in row:
        return
    nbytes = row["bytes"]
    row["flexsn_gbs"] = traffic.gbs(nbytes, row["flexsn_ms"])
    row["frac_copy"] = row["flexsn_gbs"] / copy_gbs
    if row.get("stream_gbs"):
        row["frac_stream"] = row["flexsn_gbs"] / row["stream_gbs"]
    for peer in ("eager", "compile"):
        if row.get(peer + "_ms"):
            row["speedup_" + peer] = row[peer + "_ms"] / row["flexsn_ms"]
            row[peer + "_frac_copy"] = traffic.frac_copy(
                nbytes, row[peer + "_ms"], copy_gbs
            )
    tc, _ = TARGETS[row["variant"]]
    row["target_copy"] = tc
    row["meets_copy_target"] = (
        row["frac_copy"] >= tc if row["N"] == NS[0] else None
    )


def print_row(r):
    if r.get("status") != "FLEXSN_SUCCESS":
        print(
            "N=2^%-2d %-11s %-4s T=%-2d  FlexSN status %s: %s"
            % (
                r["N"].bit_length() - 1,
                r["variant"],
                r["dtype"],
                r["T"],
                r.get("status"),
                r.get("error", ""),
            )
        )
        return
    print(
        "N=2^%-2d %-11s %-4s T=%-2d  %8.4f ms %7.1f GB/s  %5.1f%% copy  "
        "%s stream  x%s eager  x%s compile%s"
        % (
            r["N"].bit_length() - 1,
            r["variant"],
            r["dtype"],
            r["T"],
            r["flexsn_ms"],
            r["flexsn_gbs"],
            100 * r["frac_copy"],
            fmt(r.get("frac_stream") and 100 * r["frac_stream"], "5.1f") + "%",
            fmt(r.get("speedup_eager"), ".2f"),
            fmt(r.get("speedup_compile"), ".2f"),
            ""
            if not r.get("unwritten")
            else "  UNWRITTEN %d" % r["unwritten"],
        )
    )


def write_outputs(out, meta, rows, with_plot=True):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    lines = [
        "# FlexSN LIF benchmark",
        "",
        "%s, torch %s (CUDA %s), stream: %s. Copy bandwidth %.1f GB/s "
        "(read + write, %s; %s GB/s at the end). Median of %d runs "
        "after warm-up, %s. Bytes that must move (es = element "
        "size): inference (3T+1)N es, final-state (2T+2)N es, train "
        "(forward + backward) TN(4es+8) + 2N es (x, spike, f32 "
        "workspace; spike_grad, workspace, x_grad; v_init, "
        "v_init_grad). torch.compile: static shapes, timed by compile "
        "workers under the same GPU lock; cold = its first call."
        % (
            meta["device"],
            meta["torch"],
            meta["cuda"],
            meta["stream"],
            meta["copy_gbs"],
            size_text(meta["copy_bytes"] // 2),
            fmt(meta.get("copy_end_gbs"), ".1f"),
            meta["reps"],
            "time.perf_counter (--smoke, CPU)"
            if meta.get("smoke")
            else "CUDA events",
        ),
    ]
    head = [
        "",
        "| N | variant | dtype | T | FlexSN ms | GB/s | % copy "
        "| % stream | stream % copy | eager ms | compile ms | x eager "
        "| x compile | compile s (cold) | wall us/call |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for title, which in (
        ("Inference and final state", ("inference", "final_state")),
        ("Training: forward + backward", ("train",)),
    ):
        rs = [r for r in rows if r["variant"] in which]
        if not rs:
            continue
        lines += ["", "## " + title] + head
        for r in rs:
            lines.append(md_row(r))
    if meta.get("deterministic"):
        lines += lif_params.deterministic_md(meta["deterministic"])
    if meta.get("per_channel"):
        lines += lif_params.per_channel_md(meta["per_channel"])
    if meta.get("spike_storage"):
        lines += [
            "",
            "## Spikes stored as bytes and bits",
            "",
            "LIF inference (x, spike, v_seq) and final-state (x, spike, "
            "v_final) kernels, same inputs, spikes in the storage type, "
            "as uint8 or bit-packed; % of copy on each call's own "
            "bytes. x SJ: SpikingJelly's fastest kernel for the call "
            "(measured side by side on an H200, docs/Reference.md) "
            "over u8 / bits.",
            "",
        ] + spikes.table(meta["spike_storage"])
    if meta.get("modules"):
        lines += lif_modules.module_md(meta["modules"])
    if meta.get("skipped"):
        lines += ["", "%d rows skipped (time budget)." % len(meta["skipped"])]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if not with_plot:
        return
    for name, which in (
        ("bench.png", ("inference", "final_state")),
        ("bench_train.png", ("train",)),
    ):
        try:
            if any(r["variant"] in which for r in rows):
                plot(out, meta, rows, which, name)
        except Exception as e:
            print("%s: no %s: %s: %s" % (PROG, name, type(e).__name__, e))


def size_text(nbytes):
    return "1 GiB" if nbytes == 1 << 30 else "%d MiB" % (nbytes >> 20)


def md_row(r):
    if r.get("status") != "FLEXSN_SUCCESS":
        return "| 2^%d | %s | %s | %d | %s | | | | | | | | | | |" % (
            r["N"].bit_length() - 1,
            r["variant"],
            r["dtype"],
            r["T"],
            r.get("status"),
        )
    mark = ""
    if r.get("meets_copy_target") is False:
        mark = " (< %d%%)" % round(100 * r["target_copy"])
    return (
        "| 2^%d | %s | %s | %d | %.4f | %.0f | %.1f%s | %s | %s | %s | %s "
        "| %s | %s | %s | %s |"
        % (
            r["N"].bit_length() - 1,
            r["variant"],
            r["dtype"],
            r["T"],
            r["flexsn_ms"],
            r["flexsn_gbs"],
            100 * r["frac_copy"],
            mark,
            fmt(r.get("frac_stream") and 100 * r["frac_stream"], ".1f"),
            fmt(
                r.get("stream_frac_copy") and 100 * r["stream_frac_copy"],
                ".1f",
            ),
            fmt(r.get("eager_ms"), ".3f"),
            fmt(r.get("compile_ms"), ".4f"),
            fmt(r.get("speedup_eager"), ".2f"),
            fmt(r.get("speedup_compile"), ".2f"),
            fmt(r.get("compile_cold_s"), ".1f"),
            fmt(r.get("flexsn_wall_us"), ".1f"),
        )
    )


def plot(out, meta, rows, variants, name):
    plt = pyplot(PROG, name)
    if plt is None:
        return
    ns = sorted(
        {r["N"] for r in rows if r["variant"] in variants}, reverse=True
    )
    fig, axes = plt.subplots(
        len(variants),
        max(len(ns), 1),
        figsize=(6 * max(len(ns), 1), 4 * len(variants) + 1),
        squeeze=False,
    )
    peers = [
        ("FlexSN", "frac_copy", "tab:red"),
        ("same-mix stream", "stream_frac_copy", "tab:gray"),
        ("torch.compile", "compile_frac_copy", "tab:blue"),
        ("eager", "eager_frac_copy", "tab:green"),
    ]
    for i, variant in enumerate(variants):
        for j, N in enumerate(ns):
            ax = axes[i][j]
            rs = [
                r
                for r in rows
                if r["N"] == N
                and r["variant"] == variant
                and r.get("status") == "FLEXSN_SUCCESS"
            ]
            labels = ["%s T%d" % (r["dtype"], r["T"]) for r in rs]
            width = 0.8 / len(peers)
            for k, (pname, field, color) in enumerate(peers):
                vals = [r.get(field) or 0.0 for r in rs]
                ax.bar(
                    [p + (k - 1.5) * width for p in range(len(rs))],
                    vals,
                    width,
                    label=pname,
                    color=color,
                )
            ax.axhline(1.0, color="k", lw=0.8)
            ax.axhline(TARGETS[variant][0], color="tab:red", lw=0.8, ls="--")
            ax.set_xticks(range(len(rs)))
            ax.set_xticklabels(labels, rotation=60, fontsize=8)
            ax.set_ylim(0, 1.1)
            what = (
                "training forward + backward"
                if variant == "train"
                else variant
            )
            ax.set_title("LIF %s, N = 2^%d" % (what, N.bit_length() - 1))
            if j == 0:
                ax.set_ylabel("fraction of copy bandwidth")
    handles, labels = axes[0][0].get_legend_handles_labels()
    top = 1.0 - 0.3 / fig.get_figheight()
    fig.suptitle(
        "FlexSN LIF on %s: fraction of copy bandwidth (%.0f GB/s); "
        "dashed: target (docs/Reference.md)"
        % (meta["device"], meta["copy_gbs"]),
        x=0.02,
        y=0.995,
        ha="left",
    )
    fig.legend(
        handles,
        labels,
        loc="upper right",
        ncol=len(peers),
        fontsize=9,
        bbox_to_anchor=(0.995, top),
    )
    fig.tight_layout(rect=(0, 0, 1, top - 0.3 / fig.get_figheight()))
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)


def parse_args(argv):
    ap = cli.parser("lif", __doc__)
    ap.add_argument(
        "--compile-only",
        action="store_true",
        help="run every flexsn.compile of the benchmark (fills "
        "$FLEXSN_CACHE_DIR for a machine without the tools), "
        "then exit",
    )
    ap.add_argument(
        "--no-modules",
        action="store_true",
        help="skip the PyTorch module measurements",
    )
    # Accepted and ignored: older callers pass the gpu_bundle.sh folder.
    ap.add_argument("--bundle", default=None, help=argparse.SUPPRESS)
    cli.add_out_and_smoke(ap, "bench-out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument(
        "--budget",
        type=float,
        default=200.0,
        help="seconds after which no new row starts and the "
        "compile workers are stopped",
    )
    ap.add_argument(
        "--compile-reserve",
        type=float,
        default=10.0,
        help="stop adding rows this long before the budget, for "
        "the compile results",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=min(8, max(1, (os.cpu_count() or 2) // 2)),
    )
    ap.add_argument(
        "--worker-gib",
        type=float,
        default=None,
        help="GPU memory the compile workers may hold at once "
        "(default: half the GPU's, so that the rows timed "
        "beside them fit on an 80 GiB card too)",
    )
    ap.add_argument(
        "--ns", default=None, help="comma-separated log2 N (default 24,20)"
    )
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="N = 2^20, T in {4, 16}, f32/f16 only",
    )
    ap.add_argument("--lock", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ledger", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return cli.finish(ap.parse_args(argv))


def main(argv=None):
    args = parse_args(argv)
    cache = compile_workers.CACHE
    if args.lock is None:
        args.lock = os.path.join(cache, "gpu.lock")
    if args.ledger is None:
        args.ledger = os.path.join(cache, "ledger.json")
    os.makedirs(cache, exist_ok=True)
    if args.worker is not None:
        tasks = [tuple(k) for k in json.loads(args.worker)]
        return compile_workers.worker_main(tasks, args)
    import flexsn

    if not args.compile_only:
        import torch

        args.device = cli.device(torch, args, PROG)
        if args.device is None:
            return 2
    t0 = time.time()
    try:
        lif, plif, modules, lif_u8 = compile_all(args.smoke)
    except flexsn.CompileError as e:
        # ToolNotFoundError included: no tools and no cached entry.
        print(
            "%s: %s\n(on a machine without the FlexSN tools: run "
            "'python3 -m bench lif --compile-only' where they are, with "
            "FLEXSN_CACHE_DIR set, carry that cache and set "
            "FLEXSN_CACHE_DIR and FLEXSN_RUNTIME_LIB here)" % (PROG, e)
        )
        return 2
    if args.compile_only:
        print(
            "%s: compiled in %.1f s into %s:"
            % (PROG, time.time() - t0, flexsn.cache_dir())
        )
        for name, c in [
            ("lif", lif),
            ("plif", plif["scalar"]),
            ("plif (per-channel w)", plif["per_channel"]),
            ("lif (u8 spikes)", lif_u8),
        ] + [(k, m.compiled) for k, m in modules.items()]:
            print("  %-12s %s" % (name, kernels.entry_name(c)))
        return 0
    try:
        lif.kernel(args.device, "inference", "f32")  # loads the runtime
    except flexsn.CompileError as e:  # no libflexsn_runtime.so
        print("%s: %s (set FLEXSN_RUNTIME_LIB)" % (PROG, e))
        return 2
    if os.path.exists(args.ledger):
        os.remove(args.ledger)
    if args.smoke:
        args.reps = SMOKE["reps"]
        args.ns_list = SMOKE["ns"]
    else:
        args.reps = max(args.reps, 20)
        if args.ns:
            args.ns_list = tuple(1 << int(n) for n in args.ns.split(","))
        else:
            args.ns_list = NS if not args.quick else (1 << 20,)
    meta, rows = run_bench(args, lif, plif, modules, lif_u8)
    write_outputs(args.out, meta, rows, with_plot=not args.smoke)
    big = [r for r in rows if r["N"] == NS[0] and "frac_copy" in r]
    for variant in VARIANTS:
        vb = [r for r in big if r["variant"] == variant]
        if vb:
            worst = min(vb, key=lambda r: r["frac_copy"])
            print(
                "%s: N=2^24 %s: FlexSN %.1f%%-%.1f%% of copy (worst "
                "%s T=%d)"
                % (
                    PROG,
                    variant,
                    100 * worst["frac_copy"],
                    100 * max(r["frac_copy"] for r in vb),
                    worst["dtype"],
                    worst["T"],
                )
            )
    m = meta.get("modules")
    if m and "error" not in m:
        for r in m["host"]:
            print(
                "%s: module host overhead %s %s: %+.1f us per call "
                "(target < %.0f): %s"
                % (
                    PROG,
                    r["module"],
                    r["mode"],
                    r["overhead_us"],
                    m["host_target_us"],
                    lif_modules.verdict(r["ok"]),
                )
            )
        for r in m["wall"]:
            print(
                "%s: module wall %s %s N=2^%d T=%d: x%.3f, "
                "back-to-back x%.3f of direct (target <= x%.2f): %s"
                % (
                    PROG,
                    r["module"],
                    r["mode"],
                    r["N"].bit_length() - 1,
                    r["T"],
                    r["ratio"],
                    r["ratio_b2b"],
                    1 + m["wall_target"],
                    lif_modules.verdict(r["ok"]),
                )
            )
    elif m:
        print("%s: module measurements failed: %s" % (PROG, m["error"]))
    print("%s: results in %s" % (PROG, args.out))
    bad = [
        r
        for r in rows
        if r.get("status") != "FLEXSN_SUCCESS" or r.get("unwritten")
    ]
    # Missed targets are results; a module giving other results than the
    # kernels, or failing, is an error.
    if m is not None and not lif_modules.modules_consistent(m):
        bad.append(m)
    return 1 if bad else 0
