#!/usr/bin/env python3
"""Runs the device scripts' checking logic without a GPU, on an emulated one.

    python3 utils/device_selftest.py [--bundle .device] [--faults]

utils/device_check.py --quick and utils/device_train_check.py --quick run as
they do on the device machine (the bundle's manifests, its shim library's
exports, the CPU-path results), but with the CUDA driver replaced by a fake
one (device memory = NumPy byte arrays at made-up addresses) and every kernel
call replaced by an emulation: the runtime's argument validation
(lib/Runtime/flexsn_runtime.c: statuses, T = 0 and N = 0, buffer extents and
contexts), then the kernel's effect computed in NumPy (the inference step
loop of device_check.simulate; for the training pair,
device_train_check.reference on the inputs the forward call saw, found again
through its workspace pointer). Both must pass.

With --faults, the emulated kernels are then broken one way at a time (a
gradient off by 1%, a write into a guard, an element left unwritten, the
T = 0 gradient copy missing, a forward value 1 ulp off the inference
kernel's, a too-small workspace accepted, parameter gradients whose last bit
changes from call to call, ...) and each run must fail.

This checks the scripts, not the kernels: it is for changing them here.
"""

import argparse
import io
import os
import sys
import contextlib

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import device_check as dc  # noqa: E402
import device_train_check as dtc  # noqa: E402

INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
FAULTS = set()
CALLS = [0]      # backward calls (the nondeterministic fault)


class FakeDriver(object):
    """Device memory as NumPy byte arrays at made-up, 512-byte aligned
    addresses with gaps between allocations."""
    name = "fake GPU"

    def __init__(self):
        self.mem = {}
        self.next = 0x7F0000000000

    def alloc(self, nbytes):
        nbytes = max(int(nbytes), 1)
        p = self.next
        self.next += (nbytes + 4096 + 511) // 512 * 512
        self.mem[p] = np.zeros(nbytes, np.uint8)
        return p

    def free(self, p):
        self.mem.pop(p, None)

    def find(self, p):
        """(base, array) of the allocation holding address p, or None."""
        for base, arr in self.mem.items():
            if base <= p < base + arr.size:
                return base, arr
        return None

    def bytes_at(self, p, n):
        base, arr = self.find(p)
        return arr[p - base:p - base + n]

    def htod(self, dst, host):
        host = np.ascontiguousarray(host)
        self.bytes_at(dst, host.nbytes)[:] = host.view(np.uint8).reshape(-1)

    def dtoh(self, host, src):
        host.view(np.uint8).reshape(-1)[:] = self.bytes_at(src, host.nbytes)

    def memset8(self, p, value, nbytes):
        self.bytes_at(p, nbytes)[:] = value

    def sync(self):
        pass

    def create_stream(self):
        return 1


DRV = None
REGISTRY = {}    # workspace pointer -> what the forward call saw
NP = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


def elem_size(arg, dtype):
    if arg.role in ("workspace_out", "workspace_in", "workspace_inout",
                    "param_gradient"):
        return 4
    return dc.ELEM[dtype]


def read_seq(p, T, N, ld, dtype):
    es = dc.ELEM[dtype]
    out = np.zeros((T, N), np.float32)
    for t in range(T):
        raw = np.frombuffer(DRV.bytes_at(p + t * ld * es, N * es).tobytes(),
                            NP[dtype])
        out[t] = dc.np_to_f32(raw, dtype)
    return out


def read_vec(p, N, dtype):
    es = dc.ELEM[dtype]
    raw = np.frombuffer(DRV.bytes_at(p, N * es).tobytes(), NP[dtype])
    return dc.np_to_f32(raw, dtype)


def encode(a, dtype):
    return np.ascontiguousarray(dc.np_storage(np.asarray(a, np.float32),
                                              dtype)).view(np.uint8)


def write_seq(p, a, ld, dtype, skip_last=False):
    es = dc.ELEM[dtype]
    T, N = a.shape
    for t in range(T):
        row = encode(a[t], dtype)
        if skip_last and t == T - 1:
            row = row[:-es]
        DRV.bytes_at(p + t * ld * es, row.size)[:] = row


def write_vec(p, a, dtype):
    b = encode(a, dtype)
    DRV.bytes_at(p, b.size)[:] = b


def bump_ulp(v, d):
    """The value one storage ulp above v (float32 result)."""
    st = dc.np_storage(np.array([v], np.float32), d)
    bits = st.view(np.uint32 if d == "f32" else np.uint16) + 1
    return dc.np_to_f32(bits.view(NP[d]), d)[0]


def fake_launch(env, kern, stream, T, N, ld, pointers, params):
    """flexsn_launch's validation, then the kernel's effect."""
    st = BUNDLE.status
    bufs = kern.buffers
    required = ("input_sequence", "workspace_out", "workspace_in",
                "workspace_inout", "param_gradient")
    if T < 0 or N < 0:
        return st("NEGATIVE_SIZE")
    if ld < 0 or (ld != 0 and ld < N):
        return st("BAD_STRIDE")
    ld = ld or N
    ptrs = [int(p) if p else 0 for p in pointers]
    for a, p in zip(bufs, ptrs):
        if a.role in required and not p:
            return st("NULL_POINTER")
    if N > INT64_MAX:
        return st("SIZE_OVERFLOW")
    seq = 0
    if T > 0 and N > 0:
        if T - 1 > (INT64_MAX - N) // ld:
            return st("SIZE_OVERFLOW")
        seq = (T - 1) * ld + N
    if N > 0 and (N - 1) // 256 + 1 > INT32_MAX:
        return st("SIZE_OVERFLOW")
    saved = int(kern.spec.get("workspace_sequences", 0) or 0)
    extents = []
    for a in bufs:
        es = elem_size(a, kern.dtype)
        if a.role == "param_gradient":
            count = 1
        elif a.role in ("workspace_out", "workspace_in"):
            count = (saved - 1) * T * ld + seq if seq else 0
        elif a.role == "workspace_inout":
            # The saved values, then the deterministic reduction scratch.
            slots = int(kern.spec.get("reduction_slots", 0))
            count = saved * T * ld + 1 + slots * ((N + 255) // 256) \
                if seq else 0
        elif a.role in ("initial_state", "final_state"):
            count = N
        else:
            count = seq
        if count > INT64_MAX // es:
            return st("SIZE_OVERFLOW")
        extents.append(count * es)
    for a, p in zip(bufs, ptrs):
        if p % elem_size(a, kern.dtype):
            return st("INVALID_ARGUMENT")

    def check(p, nbytes):
        hit = DRV.find(p)
        if hit is None:
            return st("CONTEXT_MISMATCH")
        base, arr = hit
        if p - base + nbytes > arr.size:
            if "ws-small-ok" in FAULTS:
                return "accept"       # a runtime that checks nothing
            return st("BUFFER_TOO_SMALL")
        return 0

    pg = [p for a, p in zip(bufs, ptrs) if a.role == "param_gradient"]
    if T == 0 or N == 0:
        for p in pg:
            write_vec(p, np.zeros(1, np.float32), "f32")
        if N == 0:
            return 0
        inits = [p for a, p in zip(bufs, ptrs) if a.role == "initial_state"]
        finals = [p for a, p in zip(bufs, ptrs) if a.role == "final_state"]
        nb = N * dc.ELEM[kern.dtype]
        for k, p in enumerate(finals):
            if not p:
                continue
            s = check(p, nb) or (check(inits[k], nb) if inits[k] else 0)
            if s:
                return s
        for k, p in enumerate(finals):
            if not p:
                continue
            if inits[k] and "t0" not in FAULTS:
                DRV.bytes_at(p, nb)[:] = DRV.bytes_at(inits[k], nb)
            else:
                DRV.bytes_at(p, nb)[:] = 0
        return 0
    for a, p, nbytes in zip(bufs, ptrs, extents):
        if p:
            s = check(p, nbytes)
            if s == "accept":
                return 0              # (and the kernel would overrun)
            if s:
                return s
    P = dict(zip([q.name for q in kern.params], params))
    if kern.variant in ("inference", "final_state", "forward"):
        return emulate_forward(kern, T, N, ld, ptrs, P)
    return emulate_backward(kern, T, N, ld, ptrs, P)


def emulate_forward(kern, T, N, ld, ptrs, P):
    d = kern.dtype
    by = {}
    for a, p in zip(kern.buffers, ptrs):
        by.setdefault(a.role, []).append(p)
    x = read_seq(by["input_sequence"][0], T, N, ld, d)
    inits = [read_vec(p, N, d) if p else None for p in by["initial_state"]]
    ref = dc.simulate(dc.NumpyOps(), kern.neuron, P, x, inits)
    spikes = ref["spikes"]
    if "inference" in FAULTS and kern.variant == "inference":
        ref["state_seq"][0][T - 1, N - 1] += 1e-3
    for p in by.get("output_sequence", []):
        if p:
            write_seq(p, spikes, ld, d)
    for i, p in enumerate(by.get("state_sequence", [])):
        if p:
            s = ref["state_seq"][i].copy()
            if "fwd-bits" in FAULTS and kern.variant == "forward":
                s[T - 1, N - 1] = bump_ulp(s[T - 1, N - 1], d)
            write_seq(p, s, ld, d)
    for i, p in enumerate(by.get("final_state", [])):
        if p:
            write_vec(p, ref["final"][i], d)
    if kern.variant == "forward":
        ws = by["workspace_out"][0]
        saved = int(kern.spec.get("workspace_sequences", 1))
        for k in range(saved):
            write_seq(ws + k * T * ld * 4, spikes + 0.5, ld, "f32")
        REGISTRY[ws] = dict(x=x, inits=inits, params=P, T=T, N=N)
    return 0


def emulate_backward(kern, T, N, ld, ptrs, P):
    d = kern.dtype
    nd = BUNDLE.neuron_defs[kern.neuron]
    roles = dtc.bwd_roles(kern, nd)
    ws = [p for (w, i), p in zip(roles, ptrs) if w == "ws"][0]
    saw = REGISTRY.get(ws)
    if saw is None or saw["T"] != T or saw["N"] != N:
        return BUNDLE.status("INVALID_ARGUMENT")
    gin = dict(out=None, seq=[None] * len(nd["states"]),
               final=[None] * len(nd["states"]))
    for (w, i), p in zip(roles, ptrs):
        if not p:
            continue
        if w == "gout":
            gin["out"] = read_seq(p, T, N, ld, d)
        elif w == "gseq":
            gin["seq"][i] = read_seq(p, T, N, ld, d)
        elif w == "gfin":
            gin["final"][i] = read_vec(p, N, d)
    trainable = [p["name"] for p in nd["params"] if p["kind"] == "trainable"]
    ref = dtc.reference(dtc.NumpyAD(), kern.neuron, P, trainable, saw["x"],
                        saw["inits"], gin)
    for (w, i), p in zip(roles, ptrs):
        if not p:
            continue
        if w == "xgrad":
            g = ref["x_grad"].copy()
            if "xgrad" in FAULTS:
                g[T - 1, N - 1] = g[T - 1, N - 1] * 1.01 + 1e-3
            write_seq(p, g, ld, d, skip_last="unwritten" in FAULTS)
            if "guard" in FAULTS:
                es = dc.ELEM[d]
                write_vec(p + ((T - 1) * ld + N) * es, np.zeros(1), d)
        elif w == "igrad":
            write_vec(p, ref["init_grads"][i], d)
        elif w == "pgrad":
            v = np.float32(ref["params"][i].sum())
            if "pgrad" in FAULTS:
                v = v * np.float32(1.01) + np.float32(1e-3)
            if "nondeterministic" in FAULTS:   # a different last bit per call
                CALLS[0] += 1
                v = np.nextafter(v, np.float32(np.inf)) if CALLS[0] % 2 else v
            write_vec(p, np.array([v], np.float32), "f32")
    return 0


BUNDLE = None


def BUNDLE_LOADED(folder):
    return dc.Bundle(folder)


def install(bundle_folder):
    """Patches device_check's driver, environment and kernel calls."""
    global DRV, BUNDLE
    DRV = FakeDriver()
    BUNDLE = dc.Bundle(bundle_folder, load=False)
    dc.CudaDriver = lambda: DRV
    dc.NumpyEnv.launch = fake_launch
    dc.Kernel.__call__ = lambda self, stream, T, N, ld, pointers, params: \
        fake_launch(None, self, stream, T, N, ld, pointers, params)

    orig_init = dc.Bundle.__init__

    def init(self, folder, load=True):
        orig_init(self, folder, load=load)
        if self.lib is not None:
            self.lib.fx_unload_all = lambda: 0
    dc.Bundle.__init__ = init


def run(label, fn, argv, want_ok):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = fn(argv)
    text = out.getvalue()
    summary = [l for l in text.splitlines() if " passed, " in l and
               l.startswith(("device_check:", "device_train_check:"))]
    ok = (rc == 0) == want_ok
    print("%s %-44s rc %d  %s" % ("ok  " if ok else "BAD ", label, rc,
                                  summary[-1] if summary else "no summary"))
    if not ok:
        print("\n".join(["      " + l for l in text.splitlines()
                         if l.startswith(("FAIL", "     "))][:12]))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", default=".device")
    ap.add_argument("--faults", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--full", default=None, metavar="NEURONS",
                    help="also device_train_check's full-mode groups on "
                    "NumPy for these neurons (slow)")
    args = ap.parse_args()
    install(args.bundle)
    out = lambda n: ["--out", os.path.join(args.out, n)] \
        if args.out else []  # noqa: E731
    good = True
    good &= run("device_check --quick", dc.main,
                ["--quick", "--bundle", args.bundle] + out("check"), True)
    good &= run("device_train_check --quick", dtc.main,
                ["--quick", "--bundle", args.bundle] + out("train"), True)
    if args.full:
        # The full mode's groups on NumPy (PyTorch is the device's), with
        # N = 2^20 + 3 replaced by a smaller odd N.
        import time
        t0 = time.time()
        dtc.BIG_N = 2053
        cargs = argparse.Namespace(deadline=None, seed=0)
        c = dtc.TrainChecker(dc.NumpyEnv(DRV), BUNDLE_LOADED(args.bundle),
                             cargs, dtc.NumpyAD())
        neurons = args.full.split(",")
        out_ = io.StringIO()
        with contextlib.redirect_stdout(out_):
            dtc.run_groups(c, neurons, "full")
            rc = dc.summarize(c, args.out and os.path.join(args.out, "full"),
                              {}, prog="device_train_check")
        text = out_.getvalue()
        print("%s device_train_check full (NumPy)            rc %d  %s  "
              "(%.0f s)" % ("ok  " if rc == 0 else "BAD ", rc,
                            text.strip().splitlines()[-1], time.time() - t0))
        if rc:
            print("\n".join(["      " + l for l in text.splitlines()
                             if l.startswith(("FAIL", "     "))][:12]))
        good &= rc == 0
    if args.faults:
        sub = ["--quick", "--bundle", args.bundle, "--neurons",
               "lif,plif,lif_detach"]
        cases = [("xgrad", dtc.main), ("pgrad", dtc.main),
                 ("guard", dtc.main), ("unwritten", dtc.main),
                 ("t0", dtc.main), ("fwd-bits", dtc.main),
                 ("ws-small-ok", dtc.main), ("nondeterministic", dtc.main),
                 ("inference", dc.main),
                 ("t0", dc.main)]
        for fault, fn in cases:
            FAULTS.clear()
            FAULTS.add(fault)
            good &= run("fault %-12s -> %s" % (fault, fn.__module__), fn,
                        sub if fn is dtc.main else
                        ["--quick", "--bundle", args.bundle, "--neurons",
                         "lif,plif"], False)
        FAULTS.clear()
    print("device_selftest: %s" % ("all as expected" if good else "FAILED"))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
