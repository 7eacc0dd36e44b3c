"""DistributedDataParallel over 2 GPUs with FlexSN's LIFNode.

    python3 -m bench device-ddp --compile-only   # here: fill the cache
    python3 -m bench device-ddp --out DIR        # on a machine with 2 GPUs
    python3 -m bench device-ddp --smoke          # 2 CPU processes, gloo

As device-torch: the GPU machine has no FlexSN tools, so set
FLEXSN_CACHE_DIR to a cache filled by --compile-only and FLEXSN_RUNTIME_LIB
to libflexsn_runtime.so.

The digits SNN of device-torch (Conv-BN-LIF x2, T = 8), its BatchNorms
made SyncBatchNorm, wrapped in DDP: one process per GPU, NCCL over
localhost. One global batch split in halves must give, after DDP's
averaging, the gradients of the same model run on one GPU over the whole
batch (compared on the first batch whose forwards agree spike for spike:
rounding flips spikes at the threshold); both ranks must hold the same
gradients; then some Adam steps of DDP training must leave both ranks'
parameters and buffers bit-identical.
Prints one line per check, writes DIR/ddp_results.json; exits 1 on a
failure, 2 with fewer than 2 GPUs. --smoke runs the same checks in two CPU
processes over gloo (BatchNorm on running statistics: SyncBatchNorm needs
GPUs), a global batch of 20, one batch tried, 3 steps, into a temporary
folder.
"""

import argparse
import copy
import datetime
import json
import math
import os
import pathlib
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from . import cli, device_torch, results

PROG = "bench device-ddp"
WORLD = 2
RTOL, ATOL = 1e-4, 1e-5
RESULTS = "ddp_results.json"
ERROR = "ddp_rank{}_error.txt"
SMOKE = (20, 3, 1)  # --smoke's global batch, steps and batches tried


class Digits(nn.Module):
    """device_torch's net as one module, so that DDP's forward runs it (DDP
    prepares its gradient reduction in forward)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return device_torch.run_digits_net(self.net, x)


def build(device, sync_bn, options):
    net = device_torch.make_digits_net(
        device_torch.lif_node(**options), device
    )
    if sync_bn:
        net = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    return Digits(net).to(device)


def freeze_bn(model):
    """BatchNorm on running statistics: SyncBatchNorm needs GPU tensors, so
    the CPU self-test keeps batch statistics out of the comparison."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.eval()


def training_data():
    """(images [1400, 1, 8, 8], labels, name): the digits training split;
    seeded noise without scikit-learn (the check needs no learnable data)."""
    try:
        data, target, train, _ = device_torch.digits_data()
        name = "digits"
    except ImportError:
        data, target, train, _ = device_torch.noise_data()
        name = "random (no scikit-learn)"
    return data[train].unsqueeze(1), target[train], name


def global_batches(n, batch, count):
    """count index batches of a seeded order, full batches only (so every
    rank gets exactly batch / WORLD samples); the same on every rank."""
    g = torch.Generator().manual_seed(1)
    batches = []
    while len(batches) < count:
        perm = torch.randperm(n, generator=g)
        batches += [
            perm[i : i + batch] for i in range(0, n - batch + 1, batch)
        ]
    return batches[:count]


def gather(t):
    """Every rank's copy of t (on each rank)."""
    t = t.detach().contiguous()
    out = [torch.empty_like(t) for _ in range(WORLD)]
    dist.all_gather(out, t)
    return out


def record_spikes(net):
    """Keeps the LIF layers' output spikes of the next forward."""
    spikes = {}
    handles = [
        net[name].register_forward_hook(
            lambda module, inputs, out, name=name: spikes.__setitem__(
                name, out.detach()
            )
        )
        for name in ("n1", "n2")
    ]
    return spikes, handles


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_ms(times):
    return 1e3 * sorted(times)[len(times) // 2] if times else None


def worker(rank, cfg):
    """mp.spawn's entry. Leaves by os._exit, skipping interpreter teardown,
    where torch 1.13's gloo can deadlock (the DDP reducer's destructor joins
    a gloo thread that waits for the GIL); a failure is printed and left in
    a file for the parent."""
    code = 0
    try:
        run_rank(rank, cfg)
    except BaseException:
        code = 1
        text = traceback.format_exc()
        print(f"{PROG}: rank {rank} failed:\n{text}", file=sys.stderr)
        (pathlib.Path(cfg["out"]) / ERROR.format(rank)).write_text(text)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_rank(rank, cfg):
    gpu = cfg["backend"] == "nccl"
    if gpu:
        # Before any module or tensor: FlexSN launches on the current
        # stream of the tensor's device, NCCL binds to the current device.
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        # Float32 convolutions (not TF32), a fixed algorithm: the tolerances
        # are float32's.
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)
    dist.init_process_group(
        cfg["backend"],
        init_method="env://",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=300),
    )
    results = []
    out = pathlib.Path(cfg["out"])

    def report(record):
        # Written after each check: a later crash keeps the earlier ones.
        if rank == 0:
            results.append(record)
            (out / RESULTS).write_text(json.dumps(results, indent=1))

    B, half, steps = cfg["batch"], cfg["batch"] // WORLD, cfg["steps"]
    xs, ys, data_name = training_data()
    batches = global_batches(len(xs), B, cfg["tries"] + steps)

    def shard(idx):
        mine = idx[rank * half : (rank + 1) * half]
        return xs[mine].to(device), ys[mine].to(device)

    options = cfg["options"]
    model = build(device, sync_bn=gpu, options=options)
    if not gpu:
        freeze_bn(model)
    ddp = DDP(model, device_ids=[rank] if gpu else None)
    # DDP broadcast rank 0's parameters and buffers; the one-device model
    # starts from the same state.
    init_state = copy.deepcopy(ddp.module.state_dict())
    env = {
        "torch": torch.__version__,
        "backend": cfg["backend"],
        "devices": [torch.cuda.get_device_name(i) for i in range(WORLD)]
        if gpu
        else ["cpu"] * WORLD,
        "batch": B,
        "per_rank": half,
        "T": 8,
        "data": data_name,
        "batchnorm": "SyncBatchNorm" if gpu else "running stats (cpu)",
    }
    if rank == 0:
        print(f"{PROG}: {env}", flush=True)

    # -- one step: DDP on halves vs one device on the whole batch ---------
    if rank == 0:
        single = build(device, sync_bn=False, options=options)
        single.load_state_dict(init_state)
        if not gpu:
            freeze_bn(single)
    names = [n for n, _ in ddp.module.named_parameters()]
    flips_seen = []
    for attempt, idx in enumerate(batches[: cfg["tries"]]):
        ddp.zero_grad(set_to_none=True)
        x, y = shard(idx)
        spikes, hooks = record_spikes(ddp.module.net)
        logits = ddp(x)
        loss = F.cross_entropy(logits, y)  # mean over the half; DDP averages
        loss.backward()
        for h in hooks:
            h.remove()
        rank_grads = {
            n: gather(p.grad) for n, p in ddp.module.named_parameters()
        }
        rank_spikes = {n: gather(s) for n, s in spikes.items()}
        rank_logits = gather(logits)
        rank_losses = gather(loss.reshape(1))
        done = torch.zeros(1, device=device)
        if rank == 0:
            single.zero_grad(set_to_none=True)
            spikes1, hooks = record_spikes(single.net)
            logits1 = single(xs[idx].to(device))
            loss1 = F.cross_entropy(logits1, ys[idx].to(device))
            loss1.backward()
            for h in hooks:
                h.remove()
            # Spikes are thresholded: rounding differences of the batch
            # statistics (SyncBatchNorm's two-part reduction vs one) flip a
            # neuron sitting within an ulp of the threshold, which moves
            # the gradients far beyond float32 noise. The gradients are
            # compared on the first batch whose forwards agree.
            flips = {
                n: int((torch.cat(rank_spikes[n], dim=1) != s).sum())
                for n, s in spikes1.items()
            }
            flips_seen.append(flips)
            if not any(flips.values()) or attempt == cfg["tries"] - 1:
                done.fill_(1)
        dist.broadcast(done, 0)
        if done.item():
            break
    if rank == 0:
        grads1 = dict((n, p.grad) for n, p in single.named_parameters())
        per_param, bad, worst = {}, [], 0.0
        for n in names:
            got, want = rank_grads[n][0].double(), grads1[n].double()
            diff = (got - want).abs()
            # > 1 where torch.allclose(rtol, atol) fails. "rel" is noise for
            # the conv biases before BatchNorm: their true gradient is 0.
            ratio = float((diff / (ATOL + RTOL * want.abs())).max())
            per_param[n] = {
                "max_abs": float(diff.max()),
                "rel": float(diff.max()) / max(float(want.abs().max()), 1e-30),
                "err_over_tol": ratio,
            }
            worst = max(worst, ratio)
            if ratio > 1:
                bad.append(n)
        agreed = not any(flips_seen[-1].values())
        report(
            {
                "check": "ddp gradients == one GPU on the whole batch",
                "ok": not bad and agreed,
                "rtol": RTOL,
                "atol": ATOL,
                "not_close": bad,
                "worst_err_over_tol": worst,
                "batches_tried": len(flips_seen),
                "spike_flips_per_batch": flips_seen,
                "logits_max_diff": float(
                    (torch.cat(rank_logits) - logits1).abs().max()
                ),
                "diff_in_loss": abs(
                    float(sum(rank_losses)) / WORLD - float(loss1)
                ),
                "per_param": per_param,
                "env": env,
                **(
                    {}
                    if agreed
                    else {
                        "note": "the forwards' spikes differ "
                        "on every batch tried"
                    }
                ),
            }
        )
        differ = [
            n
            for n in names
            if not all(
                torch.equal(g, rank_grads[n][0]) for g in rank_grads[n][1:]
            )
        ]
        report(
            {
                "check": "ddp gradients identical on both ranks",
                "ok": not differ,
                "differ": differ,
                "parameters": len(names),
            }
        )
        single.zero_grad()

    # -- DDP training, the one-device model alongside on rank 0 -----------
    opt = torch.optim.Adam(ddp.parameters(), lr=2e-3)
    opt.zero_grad()
    if rank == 0:
        opt1 = torch.optim.Adam(single.parameters(), lr=2e-3)
    losses, losses1, times, times1 = [], [], [], []
    for step, idx in enumerate(batches[cfg["tries"] :], 1):
        x, y = shard(idx)
        sync(device)
        t = time.perf_counter()
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sync(device)
        times.append(time.perf_counter() - t)
        losses.append(float(sum(gather(loss.reshape(1)))) / WORLD)
        if rank == 0:
            sync(device)
            t = time.perf_counter()
            loss1 = F.cross_entropy(
                single(xs[idx].to(device)), ys[idx].to(device)
            )
            opt1.zero_grad()
            loss1.backward()
            opt1.step()
            sync(device)
            times1.append(time.perf_counter() - t)
            losses1.append(float(loss1))
            print(
                f"step {step:3d}  ddp loss {losses[-1]:.6f}  one-GPU loss "
                f"{losses1[-1]:.6f}",
                flush=True,
            )
    if rank == 0:
        finite = all(math.isfinite(v) for v in losses)
        tail = sum(losses[-5:]) / len(losses[-5:])
        # Noise labels need not be learnt in a few steps: there, finite.
        learns = tail < losses[0] if data_name == "digits" else True
        report(
            {
                "check": f"ddp training {steps} steps: loss finite and "
                "falling",
                "ok": finite and learns,
                "first": losses[0],
                "last5_mean": tail,
                "max_diff_vs_one_gpu": max(
                    abs(a - b) for a, b in zip(losses, losses1)
                ),
                "ddp_step_ms": median_ms(times),
                "one_gpu_step_ms": median_ms(times1),
                "loss_ddp": losses,
                "loss_one_gpu": losses1,
            }
        )
    # DDP's guarantee: the same update on every rank, bit for bit.
    differ, count = [], 0
    for n, t in list(ddp.module.named_parameters()) + list(
        ddp.module.named_buffers()
    ):
        copies = gather(t)
        count += 1
        if not all(torch.equal(copies[0], c) for c in copies[1:]):
            differ.append(n)
    report(
        {
            "check": f"parameters and buffers bit-identical on both ranks "
            f"after {steps} steps",
            "ok": not differ,
            "differ": differ,
            "tensors": count,
        }
    )
    # Neither rank exits while the other may still need it.
    dist.barrier(**({"device_ids": [rank]} if gpu else {}))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    parser = cli.parser("device-ddp", __doc__)
    parser.add_argument("--compile-only", action="store_true")
    cli.add_out_and_smoke(parser, ".")
    parser.add_argument(
        "--batch",
        type=int,
        default=100,
        help="global batch, split evenly over the 2 ranks",
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--tries",
        type=int,
        default=8,
        help="batches tried for one whose forwards agree "
        "spike for spike with the one-GPU run",
    )
    # The GPU-free self-test, 2 CPU processes over gloo (--smoke: smaller).
    parser.add_argument(
        "--cpu-gloo", action="store_true", help=argparse.SUPPRESS
    )
    args = cli.finish(parser.parse_args(argv))
    options = dict(targets=("cpu",)) if args.smoke else {}
    if args.compile_only:
        # The only FlexSN module used; default targets.
        device_torch.lif_node(**options)()
        print("compiled lif-node")
        return 0
    if args.smoke:
        args.cpu_gloo = True
        args.batch, args.steps, args.tries = SMOKE
    if args.batch < WORLD or args.batch % WORLD or args.batch > 1400:
        parser.error(f"--batch must be a multiple of {WORLD} up to 1400")
    if args.steps < 1 or args.tries < 1:
        parser.error("--steps and --tries must be at least 1")
    if args.cpu_gloo:
        backend = "gloo"
    else:
        backend = "nccl"
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if found < WORLD or not dist.is_nccl_available():
            print(
                f"{PROG}: needs {WORLD} CUDA GPUs and NCCL; found "
                f"{found} GPU(s), NCCL "
                f"{'available' if dist.is_nccl_available() else 'missing'}"
                "; nothing run (--smoke: 2 CPU processes)",
                file=sys.stderr,
            )
            return 2
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in [RESULTS] + [ERROR.format(r) for r in range(WORLD)]:
        (out / name).unlink(missing_ok=True)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    cfg = {
        "backend": backend,
        "out": str(out),
        "batch": args.batch,
        "steps": args.steps,
        "tries": args.tries,
        "options": options,
    }
    error = None
    t = time.perf_counter()
    try:
        mp.spawn(worker, args=(cfg,), nprocs=WORLD, join=True)
    except Exception as e:  # a rank died: keep what rank 0 reported
        error = e
    wall = time.perf_counter() - t
    path = out / RESULTS
    res = json.loads(path.read_text()) if path.is_file() else []
    if error is not None:
        record = {
            "check": "workers",
            "ok": False,
            "error": f"{type(error).__name__}: {error}"[:2000],
        }
        for r in range(WORLD):
            if (out / ERROR.format(r)).is_file():
                record[f"rank{r}"] = (out / ERROR.format(r)).read_text()[
                    -2000:
                ]
                (out / ERROR.format(r)).unlink()
        res.append(record)
    elif not res:
        res.append(
            {
                "check": "workers",
                "ok": False,
                "error": "rank 0 reported nothing",
            }
        )
    path.write_text(json.dumps(res, indent=1))
    for r in res:
        shown = dict(r)
        if "per_param" in r:
            shown["max_abs/rel"] = {
                n.replace("net.", ""): "%.1e/%.1e" % (v["max_abs"], v["rel"])
                for n, v in r["per_param"].items()
            }
        print(results.check_line(shown, hide=("per_param", "env", "loss_")))
    failed = results.summary(PROG, res, " (%.1f s)" % wall)
    print(f"{PROG}: results in {out}")
    return 1 if failed else 0
