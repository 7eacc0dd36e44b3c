"""CPU kernels on this machine: LIF against eager PyTorch and the copy
bandwidth, on 1 and 2 threads.

    python3 -m bench cpu [--out DIR] [--threads 1 2]
    python3 -m bench cpu --smoke      # tiny shapes, few repeats

LIF in f32, T = 16, N = 2^20 (tau = 2, hard reset to 0, sigmoid(4)
surrogate), in one process, for each thread count (torch.set_num_threads,
which FlexSN's CPU path passes on to its kernels):

- copy: a torch copy_ of 64 MiB into a buffer allocated beforehand, as
  GB/s counting read + write: the bandwidth the kernel rows are a
  fraction of;
- kernels, on buffers allocated beforehand: inference (x in; spikes and
  the state sequence out), final-state (spikes and the final state) and a
  training step (forward with h saved, then backward), each as a fraction
  of copy on its bytes (bench/traffic.py: every input read once, every
  output written once);
- modules: a step of flexsn.torch.LIFNode (multi-step) against the eager
  PyTorch loop every benchmark times (bench/kernels.py), on the same
  inputs: inference under no_grad, and training (forward, then
  autograd.grad of x and the initial state). Both allocate their outputs
  in the call.

Median of --reps runs after warm-up (time.perf_counter: the CPU
operations return when done). Checks, printed as PASS/FAIL lines and kept
in the results: the modules' spikes equal the eager loop's, the
gradients agree with its autograd (relative error), and every kernel's
outputs are bitwise the same for every thread count.

Writes cpu_results.json, cpu_results.md and cpu.png to --out (default
docs/perf).
"""

import os
import sys

from . import cli, kernels, results, traffic
from .timing import Timer

PROG = "bench cpu"
T, N = 16, 1 << 20
COPY_BYTES = 64 << 20
SMOKE = dict(T=4, N=1 << 12, reps=3, copy_bytes=1 << 20)
GRAD_RTOL = 1e-4  # the modules' gradients against eager autograd


def kernel_calls(torch, compiled, T, N):
    """{row: (call, outputs, bytes)} for the kernels on buffers allocated
    here; call(threads) launches on that many threads."""
    from flexsn._runtime import load_kernel

    x, v0, gs = kernels.make_inputs(torch, "train", "f32", T, N, "cpu")
    spike = torch.empty_like(x)
    v_seq = torch.empty_like(x)
    v_final = torch.empty_like(v0)
    x_grad = torch.empty_like(x)
    v0_grad = torch.empty_like(v0)
    k = {
        v: load_kernel(compiled, "cpu", v, "f32")
        for v in ("inference", "final-state", "forward", "backward")
    }
    workspace = kernels.new_workspace(
        torch, (k["forward"], k["backward"]), T, N, "cpu"
    )

    def launch(kernel, tensors):
        buffers = kernels.addresses(kernel, tensors)

        def call(threads):
            # `tensors` is named here so that the buffers live as long as
            # the call that holds their addresses.
            assert tensors
            kernel.launch(
                T, N, buffers, workspace.data_ptr(), num_threads=threads
            )

        return call

    inference = launch(
        k["inference"], {"x": x, "v_init": v0, "spike": spike, "v_seq": v_seq}
    )
    final = launch(
        k["final-state"],
        {"x": x, "v_init": v0, "spike": spike, "v_final": v_final},
    )
    forward = launch(k["forward"], {"x": x, "v_init": v0, "spike": spike})
    backward = launch(
        k["backward"],
        {"spike_grad": gs, "x_grad": x_grad, "v_init_grad": v0_grad},
    )

    def train(threads):
        forward(threads)
        backward(threads)

    return {
        "inference": (
            inference,
            (spike, v_seq),
            traffic.lif_bytes("inference", T, N, 4),
        ),
        "final_state": (
            final,
            (spike, v_final),
            traffic.lif_bytes("final_state", T, N, 4),
        ),
        "train": (
            train,
            (spike, x_grad, v0_grad),
            traffic.lif_bytes("train", T, N, 4),
        ),
    }


def module_calls(torch, T, N):
    """{row: (flexsn call, eager call)} through flexsn.torch.LIFNode and
    the eager loop, and the check comparing them."""
    import flexsn.torch as ftorch

    x, v0, gs = kernels.make_inputs(torch, "train", "f32", T, N, "cpu")
    node = ftorch.LIFNode(step_mode="m")
    loop = {
        v: kernels.make_loop(torch, v, "f32", T, N)
        for v in ("final_state", "train")
    }

    def flexsn_inference():
        with torch.no_grad():
            node.reset()
            node.v = v0.clone()
            return node(x)

    def eager_inference():
        with torch.no_grad():
            return loop["final_state"](x, v0)[0]

    xr = x.detach().requires_grad_(True)
    vr = v0.detach().requires_grad_(True)

    def flexsn_train():
        node.reset()
        node.v = vr
        return torch.autograd.grad(node(xr), (xr, vr), gs)

    def eager_train():
        return torch.autograd.grad(loop["train"](xr, vr), (xr, vr), gs)

    def check():
        spikes = torch.equal(flexsn_inference(), eager_inference())
        ours, theirs = flexsn_train(), eager_train()
        err = max(
            float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))
            for a, b in zip(ours, theirs)
        )
        return [
            dict(check="LIFNode spikes equal the eager loop's", ok=spikes),
            dict(
                check="LIFNode gradients match eager autograd",
                ok=err <= GRAD_RTOL,
                max_rel_err=err,
            ),
        ]

    return {
        "inference": (flexsn_inference, eager_inference),
        "train": (flexsn_train, eager_train),
    }, check


def copy_gbs(torch, timer, nbytes):
    src = torch.rand(nbytes // 4)
    dst = torch.empty_like(src)
    ms = timer.ms(lambda: dst.copy_(src))[0]
    return traffic.gbs(2 * nbytes, ms)


def measure(torch, args, compiled, T, N):
    timer = Timer(torch, "cpu", args.reps, 2)
    kcalls = kernel_calls(torch, compiled, T, N)
    mcalls, check = module_calls(torch, T, N)
    rows, checks, outputs = [], [], {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        copy = copy_gbs(torch, timer, args.copy_bytes)
        for name, (call, outs, nbytes) in kcalls.items():
            ms, min_ms = timer.ms(lambda: call(threads))
            rows.append(
                dict(
                    threads=threads,
                    row="kernel " + name,
                    ms=ms,
                    min_ms=min_ms,
                    gbs=traffic.gbs(nbytes, ms),
                    frac_copy=traffic.frac_copy(nbytes, ms, copy),
                    copy_gbs=copy,
                )
            )
            call(threads)
            outputs.setdefault(name, []).append(
                (threads, [o.clone() for o in outs])
            )
        for name, (ours, eager) in mcalls.items():
            ms, min_ms = timer.ms(ours)
            eager_ms = timer.ms(eager)[0]
            rows.append(
                dict(
                    threads=threads,
                    row="LIFNode " + name,
                    ms=ms,
                    min_ms=min_ms,
                    eager_ms=eager_ms,
                    vs_eager=eager_ms / ms,
                    copy_gbs=copy,
                )
            )
        checks += [dict(c, threads=threads) for c in check()]
    for name, runs in outputs.items():
        first_threads, first = runs[0]
        same = all(
            all(torch.equal(a, b) for a, b in zip(first, outs))
            for _, outs in runs[1:]
        )
        checks.append(
            dict(
                check="kernel %s bitwise equal for threads %s"
                % (name, [t for t, _ in runs]),
                ok=same,
            )
        )
    return rows, checks


def markdown(meta):
    lines = [
        "# CPU kernels: LIF f32, T = %d, N = %d" % (meta["T"], meta["N"]),
        "",
        "`python3 -m bench cpu` on %s (%d cores), torch %s, in one "
        "process. Kernels on buffers allocated beforehand, as a "
        "fraction of the copy bandwidth measured in the same run; "
        "modules (`flexsn.torch.LIFNode`) against the eager PyTorch "
        "loop, both allocating their outputs. Median (and fastest) "
        "of %d runs; GB/s, the fraction of copy and the ratio to "
        "eager are of the medians."
        % (meta["device"], meta["cores"], meta["torch"], meta["reps"]),
        "",
        "| threads | row | ms | fastest ms | GB/s | of copy | eager ms "
        "| vs eager |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in meta["rows"]:
        lines.append(
            "| %d | %s | %s | %s | %s | %s | %s | %s |"
            % (
                r["threads"],
                r["row"],
                results.fmt(r["ms"], ".2f"),
                results.fmt(r["min_ms"], ".2f"),
                results.fmt(r.get("gbs"), ".1f"),
                results.fmt(r.get("frac_copy") and 100 * r["frac_copy"], ".0f")
                + ("%" if r.get("frac_copy") else ""),
                results.fmt(r.get("eager_ms"), ".2f"),
                results.fmt(r.get("vs_eager"), ".2f")
                + ("x" if r.get("vs_eager") else ""),
            )
        )
    lines += [
        "",
        "Copy: %s GB/s (read + write)."
        % ", ".join(
            "%.1f on %d thread%s"
            % (r["copy_gbs"], r["threads"], "s" if r["threads"] > 1 else "")
            for r in meta["rows"]
            if r["row"] == "kernel inference"
        ),
        "",
        "Checks:",
        "",
    ]
    lines += ["- " + results.check_line(c) for c in meta["checks"]]
    return "\n".join(lines) + "\n"


def plot(meta, out):
    plt = results.pyplot(PROG, "plot")
    if plt is None:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for threads in sorted({r["threads"] for r in meta["rows"]}):
        rows = [r for r in meta["rows"] if r["threads"] == threads]
        kern = [r for r in rows if r["row"].startswith("kernel")]
        mods = [r for r in rows if r["row"].startswith("LIFNode")]
        left.bar(
            [r["row"][7:] + " %dt" % threads for r in kern],
            [100 * r["frac_copy"] for r in kern],
        )
        right.bar(
            [r["row"][8:] + " %dt" % threads for r in mods],
            [r["vs_eager"] for r in mods],
        )
    left.set_ylabel("% of copy bandwidth")
    left.set_title("kernels")
    right.set_ylabel("speedup over eager PyTorch")
    right.set_title("LIFNode")
    for ax in (left, right):
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "cpu.png"), dpi=100)


def main(argv=None):
    ap = cli.parser("cpu", __doc__)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=15)
    cli.add_out_and_smoke(ap, "docs/perf")
    args = cli.finish(ap.parse_args(argv))
    args.copy_bytes = SMOKE["copy_bytes"] if args.smoke else COPY_BYTES
    if args.smoke:
        args.reps = SMOKE["reps"]
    t, n = (SMOKE["T"], SMOKE["N"]) if args.smoke else (T, N)

    import torch
    import flexsn

    compiled = flexsn.compile(
        "lif",
        targets=("cpu",),
        storage_types=("f32",),
        variants=("inference", "final-state", "forward", "backward"),
    )
    rows, checks = measure(torch, args, compiled, t, n)
    meta = dict(
        device=cli.device_name(torch, "cpu"),
        cores=os.cpu_count(),
        torch=torch.__version__,
        T=t,
        N=n,
        reps=args.reps,
        rows=rows,
        checks=checks,
    )
    for c in checks:
        print(results.check_line(c))
    text = markdown(meta)
    print(text)
    results.write_results(args.out, "cpu_results", meta, text)
    if not args.smoke:
        plot(meta, args.out)
    return 1 if results.summary(PROG, checks) else 0


if __name__ == "__main__":
    sys.exit(main())
