"""lif's torch.compile peers: worker processes that compile the eager LIF
loop (static shapes) and time it while the main process measures, every
timed measurement of every process under one GPU lock (flock), so that
none overlaps another; a memory ledger keeps the workers' big allocations
within --worker-gib."""

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time

from . import ROOT, kernels
from .timing import Timer

# The Inductor and Triton caches of the compile workers; set before torch is
# imported (bench.lif imports this module first).
CACHE = os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR", "/tmp/flexsn_bench_inductor_%d" % os.getuid()
)
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(CACHE, "triton"))
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

# Rough compile cost of a task (seconds, for sharing them among workers) and
# memory (bytes per element of [T, N]).
COST = {
    "inference": {4: 2.0, 16: 4.0, 64: 18.0},
    "final_state": {4: 1.5, 16: 3.0, 64: 14.0},
    "train": {4: 6.0, 16: 18.0, 64: 70.0},
}
MEM_PER_ELEM = {"inference": 3, "final_state": 2, "train": 7}


def key_str(variant, dtype, T):
    return "%s/%s/T%d" % (variant, dtype, T)


def configure_dynamo(torch):
    import torch._dynamo

    cfg = torch._dynamo.config
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, 64)


class GpuLock(object):
    """An exclusive flock held around every timed measurement."""

    def __init__(self, path):
        self.path = path
        self.f = open(path, "a+")

    @contextlib.contextmanager
    def held(self):
        fcntl.flock(self.f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.f, fcntl.LOCK_UN)


class MemLedger(object):
    """GiB reserved by the compile workers, in a JSON file under a flock;
    entries of dead processes are dropped. A task larger than the budget
    runs alone."""

    def __init__(self, path, budget_gib):
        self.path, self.budget = path, budget_gib

    def _edit(self, fn):
        with open(self.path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.seek(0)
                text = f.read()
                try:
                    led = json.loads(text) if text.strip() else {}
                except ValueError:
                    led = {}
                for pid in list(led):
                    try:
                        os.kill(int(pid), 0)
                    except OSError:
                        del led[pid]
                ok = fn(led)
                f.seek(0)
                f.truncate()
                f.write(json.dumps(led))
                return ok
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def acquire(self, gib):
        me = str(os.getpid())

        def take(led):
            used = sum(v for k, v in led.items() if k != me)
            if used + gib <= self.budget or not [k for k in led if k != me]:
                led[me] = gib
                return True
            return False

        while not self._edit(take):
            time.sleep(0.5)

    def release(self):
        me = str(os.getpid())
        self._edit(lambda led: led.pop(me, None) or True)


def worker_main(tasks, args):
    """A compile worker (`python3 -m bench lif --worker TASKS`): compiles
    and times each (variant, dtype, T, N); prints one WORKER line each."""
    import torch

    configure_dynamo(torch)
    torch.zeros(1, device="cuda")
    lock = GpuLock(args.lock)
    ledger = MemLedger(args.ledger, args.worker_gib)
    timer = Timer(torch, "cuda", args.reps, 3, lock)
    for variant, dtype, T, N in tasks:
        rec = dict(key=key_str(variant, dtype, T), N=N, ok=False)
        gib = (
            MEM_PER_ELEM[variant] * T * N * kernels.ELEM[dtype] / 2.0**30
            + 0.5
        )
        ledger.acquire(gib)
        try:
            compile_and_time(torch, timer, rec, variant, dtype, T, N)
        except Exception as e:  # reported in the row
            rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        finally:
            # The task's tensors went with compile_and_time's frame.
            torch.cuda.empty_cache()
            ledger.release()
        print("WORKER " + json.dumps(rec))
        sys.stdout.flush()
    return 0


def compile_and_time(torch, timer, rec, variant, dtype, T, N):
    """torch.compile of the eager loop on one task: the first call's time
    (it compiles) and the timed calls after it, into `rec`."""
    x, v0, gs = kernels.make_inputs(torch, variant, dtype, T, N)
    fn = torch.compile(
        kernels.make_loop(torch, variant, dtype, T, N), dynamic=False
    )
    run = kernels.peer_call(torch, fn, variant, x, v0, gs)
    t0 = time.time()
    run()
    torch.cuda.synchronize()
    rec["cold_s"] = time.time() - t0
    ms, mn = timer.ms(run)
    rec.update(ms=ms, min_ms=mn, ok=True)
    if N <= (1 << 20):
        rec["wall_us"] = timer.wall_us(run)


class Workers(object):
    """The compile workers, started at once, collected at the end."""

    def __init__(self, count, tasks, args):
        self.procs, self.t0 = [], time.time()
        self.results = {}
        self.logs = []
        if count <= 0 or not tasks:
            return
        order = sorted(tasks, key=lambda k: -COST[k[0]].get(k[2], 10.0))
        bins = [[] for _ in range(count)]
        load = [0.0] * count
        for k in order:
            i = load.index(min(load))
            bins[i].append(k)
            load[i] += COST[k[0]].get(k[2], 10.0)
        env = dict(os.environ)
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        for i, b in enumerate(bins):
            if not b:
                continue
            cmd = [
                sys.executable,
                "-m",
                "bench",
                "lif",
                "--worker",
                json.dumps([list(k) for k in b]),
                "--lock",
                args.lock,
                "--ledger",
                args.ledger,
                "--worker-gib",
                str(args.worker_gib),
                "--reps",
                str(args.reps),
            ]
            # Output to a file: a full pipe nobody reads would stall it.
            log = open(os.path.join(CACHE, "worker%d.log" % i), "w+")
            self.logs.append(log)
            self.procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=env,
                    cwd=str(ROOT),
                )
            )

    def collect(self, deadline):
        """Waits for the workers until `deadline` (time.time()), kills the
        rest; returns ({(key, N): record}, seconds since the start)."""
        for p, log in zip(self.procs, self.logs):
            left = max(1.0, deadline - time.time())
            try:
                p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            log.seek(0)
            out = log.read()
            log.close()
            got = False
            for line in out.splitlines():
                if line.startswith("WORKER "):
                    rec = json.loads(line[len("WORKER ") :])
                    self.results[(rec["key"], rec["N"])] = rec
                    got = True
            if p.returncode not in (0, None) and not got:
                print("bench lif: a compile worker failed:\n" + out[-2000:])
        return self.results, time.time() - self.t0
