"""Timing shared by the benchmarks.

On a GPU: CUDA events, warm-up first, then the median (and the minimum) of
many runs, each queued behind a short GPU sleep so that launch latency is
not counted. On the CPU (--smoke): the same with time.perf_counter around
each run (torch's CPU operations and FlexSN's CPU kernels return when
done).
"""

import contextlib
import statistics
import time

SLEEP_CYCLES = 200000  # ~0.1 ms of GPU sleep ahead of each timed run


class Timer(object):
    """Times callables on one device; `lock` (an object with a held()
    context manager) is held around every measurement when given."""

    def __init__(self, torch, device="cuda", reps=20, warmup=3, lock=None):
        self.torch, self.reps, self.warmup, self.lock = (
            torch,
            reps,
            warmup,
            lock,
        )
        self.device = str(device)
        self.cuda = torch.device(device).type == "cuda"
        self.sleep = getattr(torch.cuda, "_sleep", None) if self.cuda else None

    def held(self):
        return self.lock.held() if self.lock else contextlib.nullcontext()

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def free(self):
        """Hands the caching allocator's free blocks back between rows, so
        that the next row's large buffers fit."""
        if self.cuda:
            self.torch.cuda.empty_cache()

    def ms(self, fn, reps=None, warmup=None):
        """(median, minimum) time of fn() in ms over `reps` runs after
        `warmup` untimed ones."""
        reps = reps or self.reps
        with self.held():
            for _ in range(self.warmup if warmup is None else warmup):
                fn()
            self.sync()
            if not self.cuda:
                ts = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    fn()
                    ts.append((time.perf_counter() - t0) * 1e3)
                return statistics.median(ts), min(ts)
            cuda = self.torch.cuda
            evs = [
                (
                    cuda.Event(enable_timing=True),
                    cuda.Event(enable_timing=True),
                )
                for _ in range(reps)
            ]
            for s, e in evs:
                if self.sleep is not None:
                    self.sleep(SLEEP_CYCLES)
                s.record()
                fn()
                e.record()
            cuda.synchronize()
        ts = [s.elapsed_time(e) for s, e in evs]
        return statistics.median(ts), min(ts)

    def rounds(self, fns, rounds, before=None):
        """{name: [median ms of each round]}: the callables take turns
        within a round, so that drift hits them alike; `before(name)`, if
        given, runs ahead of each measurement, untimed."""
        times = {name: [] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                if before is not None:
                    before(name)
                times[name].append(self.ms(fn)[0])
        return times

    def wall_us(self, fn, calls=20):
        """Host wall time per call of back-to-back calls until the device
        is done (CPU overhead included), in microseconds."""
        with self.held():
            fn()
            self.sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            self.sync()
            return (time.perf_counter() - t0) / calls * 1e6

    def span_ms(self, fn, calls=1):
        """ms per call of `calls` back-to-back calls, from before the first
        is queued until the device has finished the last. With the device
        idle before (the caller's part), the calls' host work counts."""
        if not self.cuda:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            return (time.perf_counter() - t0) * 1e3 / calls
        cuda = self.torch.cuda
        s = cuda.Event(enable_timing=True)
        e = cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / calls
