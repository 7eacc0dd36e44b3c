#!/usr/bin/env python3
"""Checks FlexSN's GPU training kernels (forward + backward) through the
package.

    python3 python/tests/train_kernel_checks.py [--out DIR]
                                                [--quick | --reference-only]
                                                [--seed S] [--deadline SECONDS]
                                                [--neurons lif,plif_detach,...]
    python3 python/tests/train_kernel_checks.py --compile-only [--neurons ...]

The kernels come from flexsn.compile as kernel_checks.py describes (the
same compile calls, cache included), plus the copies with detach_reset =
true: <neuron>_detach and <neuron>_soft_detach. Every forward / backward
pair (flexsn._runtime.GpuKernel) is launched on buffers poisoned with NaN
and surrounded by NaN guards, with one workspace allocation of the size the
manifest gives, on the current stream (PyTorch's in full mode); the
forward's workspace goes to the backward. Then:

  forward   spikes and state sequences equal, bit for bit, those of the
            inference kernel of the same forward step (<neuron>, or
            <neuron>_soft for the soft copies; detach changes no value) on the
            same inputs; every element written, guards and row gaps intact,
            inputs untouched, the workspace's saved values written;
  backward  the gradients of L = <spike_grad, spike> + sum <v_seq_grad, v_seq>
            + sum <v_final_grad, v_T> w.r.t. x, the initial states and the
            trainable parameters (PLIF's w) against automatic differentiation
            of the step loop written here from docs/Semantics.md (float32, on
            the storage-rounded inputs and incoming gradients; Heaviside
            forward, sigmoid(alpha = 4) surrogate backward, the reset's spike
            detached for the _detach copies): PyTorch autograd on the GPU
            (full mode; the Heaviside a torch.autograd.Function), or a small
            reverse-mode tape on NumPy (--quick, --reference-only).

Tolerances. Spikes may differ from the reference only for neurons whose h
came within 1e-4 of the threshold (a 1-ulp difference there flips a spike and
the trajectory after it); such neurons are left out of the gradient
comparisons (all that came that near when the spikes were not stored), and
at most 2% of a group's neurons may be left out. Per neuron n, with S_n =
max |reference gradient| over its x_grad column and initial-state gradients:
  f32        |got - want| <= 1e-4 |want| + 1e-5 max(1, S_n);
  f16/bf16   |got - want| <= 4 ulps of the storage type at S_n (plus 4
             subnormal steps): the kernels compute in f32 and round once;
  parameter gradients (one float, summed over T and N):
             |got - want| <= 1e-3 max(|want|, 0.01 sum_n |c_n|) (c_n: the
             reference's per-neuron contributions), plus sum_n |c_n| + max |c|
             over the neurons left out.
Where the gradients explode over T (QIF / Izhikevich with a detached soft
reset) and would overflow f16, the incoming gradients are scaled down by a
power of two (the backward is linear in them; the record says so). There,
two correct float32 evaluation orders can differ beyond the f32 tolerance:
an f32 gradient that misses it is arbitrated by float64 autograd (full mode):
it passes when it is no further from float64 than PyTorch's float32 autograd
(at most 5% more elements beyond the tolerance, plus 10; a max error at most
2x); the record's "arbitrated" field holds both sides' numbers.
T = 0: nothing written but the initial-state gradients, which equal the
final-state gradients bit for bit (zeros when those are NULL), and the
parameter gradients, which are exactly 0.

Groups (one line each):
  grid/<neuron>/<dtype>  every shipped neuron (hard reset, its
      _soft, _detach and _soft_detach copies) x {f32, f16, bf16} x T in
      {0, 1, 16, 64} x N in {1, 1000, 2^20 + 3} (copies with detach: T in
      {0, 16, 64}, N in {1000, 2^20 + 3}); incoming gradients and initial
      states sometimes NULL (four patterns), v_seq sometimes not stored.
  absent/<neuron>     each incoming gradient NULL, all NULL (zero gradients),
                      each optional output NULL, initial states NULL.
  strided/<neuron>    ld > N (scalar and vector kernels), workspace T x ld.
  misaligned/<neuron> every buffer one element off (the scalar kernels) vs
                      aligned (the vector kernels): both vs the reference and
                      vs each other.
  workspace/<neuron>  the manifests' workspace sizes and part offsets
                      (saved sequences, then the deterministic reduction
                      scratch); a too-small workspace (forward
                      and backward; the deterministic backward given room
                      for the saved values but not its reduction scratch):
                      FLEXSN_ERROR_BUFFER_TOO_SMALL, nothing written; NULL
                      workspace / parameter gradient:
                      FLEXSN_ERROR_NULL_POINTER; each naming the buffer;
                      then a good call.
  deterministic/<neuron>  the deterministic backward kernels (neurons with
                      trainable parameters) x {f32, f16, bf16} x (T, N) in
                      {(0, 1000), (1, 1), (64, 1000), (16, 2^20 + 3)}, vector
                      and scalar: against the reference as above, then run
                      three more times: every gradient the same bit for bit.
  cpu-path/<neuron>   the package's CPU forward and backward kernels (run
                      here at N = 256: f32 T in {1, 16}, f16 and bf16
                      T = 16; the copies f32 T = 16) vs the GPU kernels on
                      the same inputs.
  reference/<neuron>  the reference of this script vs those CPU results (no
                      GPU needed: --reference-only runs only this group).

Prints one line per group, then `train_kernel_checks: N passed, M failed`;
writes results.json to --out; exits 1 on any failure (or a check skipped by
--deadline, unless --allow-skip).
"""

import os
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_checks as kc  # noqa: E402
from flexsn._manifest import evaluate_size  # noqa: E402

np.seterr(all="ignore")

DTYPES = ("f32", "f16", "bf16")
ELEM = kc.ELEM
GUARD = kc.GUARD
NEAR = 1e-4  # |h - v_threshold| < NEAR: neuron left out
MAX_CUT = kc.MAX_CUT  # fraction of neurons that may be left out
F32_RTOL, F32_ATOL = 1e-4, 1e-5
GRAD_ULPS = 4  # f16 / bf16: storage ulps at the column max
SUBNORMAL = {"f16": 2.0**-24, "bf16": 2.0**-133}
ARBITER_COUNT = 1.05  # float64 arbitration: elements beyond the
ARBITER_MAX = 2.0  # tolerance, and max error, vs PyTorch float32
PARAM_RTOL = 1e-3
PARAM_CANCEL = 1e-2  # ... of sum |c_n| when the sum cancels
MAX_VALUE = 1e30  # reference values must stay below (design)
F16_GRAD_MAX = 1.6e4  # f16 gradients: scale the incoming ones down
BIG_N = (1 << 20) + 3
CPU_N = 256  # neurons of the CPU-path cases
ALPHA = 4.0  # the sigmoid surrogate of every shipped neuron

# ---------------------------------------------------------------------------
# Reverse-mode differentiation on NumPy: just what the step loops need.


def _f32(c):
    return np.float32(c)


def _one(g):
    return g


def _neg(g):
    return -g


class Var(object):
    """A float32 NumPy array with the operations that made it (a tape)."""

    __slots__ = ("value", "parents", "grad")
    __array_priority__ = 1000  # numpy scalars defer to Var's reflected ops

    def __init__(self, value, parents=()):
        self.value = value
        self.parents = parents  # ((Var, vector-Jacobian product), ...)
        self.grad = None

    def __add__(self, o):
        if isinstance(o, Var):
            return Var(self.value + o.value, ((self, _one), (o, _one)))
        return Var(self.value + _f32(o), ((self, _one),))

    __radd__ = __add__

    def __sub__(self, o):
        if isinstance(o, Var):
            return Var(self.value - o.value, ((self, _one), (o, _neg)))
        return Var(self.value - _f32(o), ((self, _one),))

    def __rsub__(self, o):
        return Var(_f32(o) - self.value, ((self, _neg),))

    def __mul__(self, o):
        if isinstance(o, Var):
            a, b = self.value, o.value
            return Var(a * b, ((self, lambda g: g * b), (o, lambda g: g * a)))
        c = _f32(o)
        return Var(self.value * c, ((self, lambda g: g * c),))

    __rmul__ = __mul__

    def __truediv__(self, o):
        if isinstance(o, Var):
            a, b = self.value, o.value
            q = a / b
            return Var(
                q, ((self, lambda g: g / b), (o, lambda g: -(g * q) / b))
            )
        c = _f32(o)
        return Var(self.value / c, ((self, lambda g: g / c),))

    def __rtruediv__(self, o):
        b = self.value
        q = _f32(o) / b
        return Var(q, ((self, lambda g: -(g * q) / b),))

    def __neg__(self):
        return Var(-self.value, ((self, _neg),))


def tape_backward(pairs):
    """pairs: (Var, seed gradient). Accumulates .grad on every Var reached."""
    order, seen = [], set()
    stack = [(v, False) for v, _ in pairs]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for p, _ in node.parents:
            if id(p) not in seen:
                stack.append((p, False))
    for v, g in pairs:
        v.grad = g if v.grad is None else v.grad + g
    for node in reversed(order):  # outputs before what they were made of
        if node.grad is None:
            continue
        for p, vjp in node.parents:
            c = vjp(node.grad)
            p.grad = c if p.grad is None else p.grad + c


def surrogate_sigmoid(over, xp_exp):
    """g(x) = a sigma(a x) (1 - sigma(a x)), a = 4 (float32)."""
    sg = 1.0 / (1.0 + xp_exp(-ALPHA * over))
    return ALPHA * sg * (1.0 - sg)


class NumpyAD(object):
    """The reference's backend on NumPy (float32) with the tape above."""

    name = "numpy"

    def leaf(self, a):
        return Var(np.array(a, dtype=np.float32, copy=True))

    def rows(self, x):
        """A [T, N] input: (handle for grads(), list of per-step leaves)."""
        leaves = [self.leaf(x[t]) for t in range(x.shape[0])]
        return leaves, leaves

    def exp(self, a):
        v = np.exp(a.value)
        return Var(v, ((a, lambda g: g * v),))

    def spike(self, over):
        o = over.value
        return Var(
            (o >= 0).astype(np.float32),
            ((over, lambda g: g * surrogate_sigmoid(o, np.exp)),),
        )

    def detach(self, a):
        return Var(a.value)

    def value(self, a):
        return a.value

    def near(self, over):
        return np.abs(over.value) < NEAR

    def stack(self, vals, T, N):
        if not vals:
            return np.zeros((T, N), np.float32)
        return np.stack(vals)

    def zeros(self, shape):
        return np.zeros(shape, np.float32)

    def param_leaf(self, n, v):
        return Var(np.full((n,), v, np.float32))

    def falses(self, n):
        return np.zeros((n,), bool)

    def grads(self, pairs, handles):
        tape_backward(pairs)
        out = []
        for h in handles:
            if isinstance(h, list):
                out.append(
                    np.stack(
                        [
                            z.grad
                            if z.grad is not None
                            else np.zeros_like(z.value)
                            for z in h
                        ]
                    )
                    if h
                    else None
                )
            else:
                out.append(
                    h.grad if h.grad is not None else np.zeros_like(h.value)
                )
        return out


class TorchAD(object):
    """The reference's backend on PyTorch autograd (float32, on the GPU)."""

    name = "torch"

    def __init__(self, torch, device, dtype=None):
        self.torch, self.device = torch, device
        self.dtype = dtype or torch.float32

        class Spike(torch.autograd.Function):
            """Heaviside forward (H(0) = 1); sigmoid(4) surrogate backward."""

            @staticmethod
            def forward(ctx, over):
                ctx.save_for_backward(over)
                return (over >= 0).to(over.dtype)

            @staticmethod
            def backward(ctx, g):
                (over,) = ctx.saved_tensors
                return g * surrogate_sigmoid(over, torch.exp)

        self.Spike = Spike

    def leaf(self, a):
        return a.detach().to(self.dtype).clone().requires_grad_(True)

    def rows(self, x):
        h = self.leaf(x)
        return h, list(h.unbind(0))

    def exp(self, a):
        return self.torch.exp(a)

    def spike(self, over):
        return self.Spike.apply(over)

    def detach(self, a):
        return a.detach()

    def value(self, a):
        return a.detach()

    def near(self, over):
        return over.detach().abs() < NEAR

    def stack(self, vals, T, N):
        if not vals:
            return self.zeros((T, N))
        return self.torch.stack(vals)

    def zeros(self, shape):
        return self.torch.zeros(shape, dtype=self.dtype, device=self.device)

    def param_leaf(self, n, v):
        return self.torch.full(
            (n,),
            float(v),
            dtype=self.dtype,
            device=self.device,
            requires_grad=True,
        )

    def falses(self, n):
        return self.torch.zeros(
            (n,), dtype=self.torch.bool, device=self.device
        )

    def grads(self, pairs, handles):
        torch = self.torch
        outs = [v for v, _ in pairs]
        gouts = [g.to(v.dtype) for v, g in pairs]
        got = torch.autograd.grad(outs, handles, gouts, allow_unused=True)
        return [
            g if g is not None else torch.zeros_like(h)
            for g, h in zip(got, handles)
        ]


class _OracleOps(object):
    """The numerics oracle's ops (test/Oracle/neuron_oracle.py) on a tape `ad`
    (NumpyAD or TorchAD)."""

    def __init__(self, ad):
        self.ad = ad

    @staticmethod
    def scalar(value):
        return value

    def exp(self, a):
        return self.ad.exp(a)

    def sigmoid(self, w):
        return 1.0 / (1.0 + self.ad.exp(-w))

    def spike(self, over):
        return self.ad.spike(over)

    def detach(self, s):
        return self.ad.detach(s)


def step(ad, neuron, p, tw, x, st):
    """One step of the oracle: (spike, new states, h - v_threshold).
    p: parameter values (flags as bools); tw: trainable parameter leaves,
    which the step reads in their place."""
    return kc.neuron_oracle.step(_OracleOps(ad), neuron, dict(p, **tw), x, st)


def reference(ad, gpu_neuron, params, trainable, x, inits, gin):
    """Forward values and gradients of the neuron a kernel was built from.

    x: [T, N] float32 (backend array); inits: per state an [N] float32 array
    or None (zeros), or None; gin: dict(out=[T, N] or None,
    seq=[per state [T, N] or None], final=[per state [N] or None]) incoming
    gradients (float32 values). Returns dict(spikes, seqs, finals, near [N]
    bool, x_grad [T, N], init_grads [per state [N]], params {name: [N]
    per-neuron contributions}).
    """
    base = kc.base_neuron(gpu_neuron)
    raw = kc.reference_params(gpu_neuron, params)
    # The kernels' parameters are float32 values: so are these, also for a
    # float64 reference.
    p = {
        k: (bool(v) if k in kc.FLAGS else float(np.float32(v)))
        for k, v in raw.items()
    }
    names = kc.STATES[base]
    T, N = int(x.shape[0]), int(x.shape[1])
    x_handle, x_rows = ad.rows(x)
    init_leaves = []
    for i in range(len(names)):
        s0 = None if inits is None else inits[i]
        init_leaves.append(
            ad.leaf(s0) if s0 is not None else ad.leaf(ad.zeros((N,)))
        )
    # A trainable parameter as one leaf per neuron (same value): its
    # gradient gives the per-neuron contributions of the sum.
    tw = {name: ad.param_leaf(N, p[name]) for name in trainable}
    st = dict(zip(names, init_leaves))
    spikes, seqs = [], [[] for _ in names]
    pairs = {}

    def seed(var, g):
        if g is None:
            return
        k = id(var)
        pairs[k] = (var, g) if k not in pairs else (var, pairs[k][1] + g)

    near = ad.falses(N)
    for t in range(T):
        s, st, over = step(ad, base, p, tw, x_rows[t], st)
        near = near | ad.near(over)
        spikes.append(ad.value(s))
        if gin.get("out") is not None:
            seed(s, gin["out"][t])
        for i, n in enumerate(names):
            seqs[i].append(ad.value(st[n]))
            g = gin["seq"][i] if gin.get("seq") else None
            if g is not None:
                seed(st[n], g[t])
    finals = [st[n] for n in names]
    out = dict(
        spikes=ad.stack(spikes, T, N),
        seqs=[ad.stack(q, T, N) for q in seqs],
        finals=[ad.value(f) for f in finals],
        near=near,
    )
    gfin = gin.get("final") or [None] * len(names)
    if T == 0:
        # Nothing to differentiate: the initial-state gradients are the
        # final-state ones, everything else is zero.
        out["x_grad"] = ad.zeros((0, N))
        out["init_grads"] = [
            g if g is not None else ad.zeros((N,)) for g in gfin
        ]
        out["params"] = {n: ad.zeros((N,)) for n in trainable}
        return out
    for f, g in zip(finals, gfin):
        seed(f, g)
    handles = [x_handle] + init_leaves + [tw[n] for n in trainable]
    if pairs:
        grads = ad.grads(list(pairs.values()), handles)
    else:
        grads = [ad.zeros((T, N))] + [ad.zeros((N,)) for _ in handles[1:]]
    out["x_grad"] = grads[0]
    out["init_grads"] = grads[1 : 1 + len(names)]
    out["params"] = dict(zip(trainable, grads[1 + len(names) :]))
    return out


# ---------------------------------------------------------------------------
# Backend-neutral array helpers for the checks


class Xp(object):
    def __init__(self, env):
        self.env = env
        self.torch = (
            getattr(env, "torch", None) if env.kind == "torch" else None
        )

    def col_absmax(self, a):
        """[T, N] -> [N] max |a| over T (zeros for T = 0)."""
        if self.torch is not None:
            if a.shape[0] == 0:
                return self.torch.zeros(a.shape[1], device=a.device)
            return a.abs().amax(0)
        if a.shape[0] == 0:
            return np.zeros(a.shape[1], np.float32)
        return np.abs(a).max(0)

    def maximum(self, a, b):
        if self.torch is not None:
            return self.torch.maximum(a, b)
        return np.maximum(a, b)

    def sum64(self, a):
        if self.torch is not None:
            return float(a.double().sum().item())
        return float(np.asarray(a, np.float64).sum())

    def abssum64(self, a):
        if self.torch is not None:
            return float(a.double().abs().sum().item())
        return float(np.abs(np.asarray(a, np.float64)).sum())

    def masked_abssum64(self, a, mask):
        if self.torch is not None:
            return float(a[mask].double().abs().sum().item())
        return float(np.abs(np.asarray(a[mask], np.float64)).sum())

    def any_rows(self, mask):
        """[T, N] bool -> [N]: any over T."""
        if self.torch is not None:
            if mask.shape[0] == 0:
                return self.torch.zeros(
                    mask.shape[1], dtype=self.torch.bool, device=mask.device
                )
            return mask.any(0)
        if mask.shape[0] == 0:
            return np.zeros(mask.shape[1], bool)
        return mask.any(0)

    def to_storage(self, a, dtype):
        """float32 array -> the env's storage array of dtype."""
        if self.torch is not None:
            return a.to(self.env.tdt[dtype])
        return kc.np_storage(a, dtype)

    def f32_from_numpy(self, arr):
        if self.torch is not None:
            return self.torch.from_numpy(
                np.ascontiguousarray(arr, dtype=np.float32)
            ).to(self.env.device)
        return np.asarray(arr, dtype=np.float32)


def grad_tolerance(xp, ops, want, scale, dtype):
    """Tolerance of a gradient array; scale: per-neuron S_n broadcast."""
    if dtype == "f32":
        return F32_RTOL * ops.abs(want) + F32_ATOL * ops.clamp_min(scale, 1.0)
    return GRAD_ULPS * (kc.EPS[dtype] * scale + SUBNORMAL[dtype])


def compare(env, res, what, got, want, tol, valid, exact=False):
    """kernel_checks.compare_within on the env's array ops."""
    kc.compare_within(env.ops, res, what, got, want, tol, valid, exact)


class TBuf(object):
    """A flat NaN-poisoned allocation: GUARD + offset + extent + GUARD
    elements. kind: seq ([T, N], rows L apart), state ([N]), ws (the
    workspace, f32: `saved` sequences of T x L, then whatever else the
    manifest's size holds, e.g. the deterministic reduction scratch; extent
    given), param (one f32)."""

    def __init__(
        self, env, kind, dtype, T, N, L, offset=0, saved=1, extent=None
    ):
        self.kind, self.dtype = kind, dtype
        self.T, self.N, self.L, self.saved = T, N, L, saved
        self.start = GUARD + offset
        if extent is not None:
            self.extent = extent
        elif kind == "seq":
            self.extent = T * L
        elif kind == "state":
            self.extent = N
        else:
            self.extent = 1
        self.nelem = self.start + self.extent + GUARD
        self.handle = env.alloc(self.nelem, dtype)
        self.ptr = env.address(self.handle) + self.start * ELEM[dtype]
        self.data = None  # what was written (inputs)

    def view(self, flat):
        s = self.start
        if self.kind == "seq":
            return kc.seq_view(flat, s, self.T, self.N, self.L)
        if self.kind == "ws":
            return flat[s : s + self.saved * self.T * self.L].reshape(
                self.saved, self.T, self.L
            )[:, :, : self.N]
        if self.kind == "state":
            return flat[s : s + self.N]
        return flat[s : s + 1]

    def outside(self, flat):
        """What must stay NaN: the guards and the gaps between rows."""
        parts = [flat[: self.start], flat[self.start + self.extent :]]
        if self.L > self.N and self.T > 0 and self.kind in ("seq", "ws"):
            rows = (self.saved if self.kind == "ws" else 1) * self.T
            parts.append(
                flat[self.start : self.start + rows * self.L].reshape(
                    rows, self.L
                )[:, self.N :]
            )
        return parts


def fwd_roles(kf, nd):
    """Per forward buffer (workspace parts aside): (what, index)."""
    out = []
    i_init = i_seq = i_out = 0
    for a in kf.buffers:
        if a.role == "input_sequence":
            out.append(("x", 0))
        elif a.role == "initial_state":
            out.append(("init", i_init))
            i_init += 1
        elif a.role == "output_sequence":
            out.append(("out", i_out))
            i_out += 1
        elif a.role == "state_sequence":
            out.append(("seq", i_seq))
            i_seq += 1
        else:
            raise ValueError(
                "%s: unexpected role %s of %s" % (kf.name, a.role, a.name)
            )
    if i_init != len(nd.states) or i_seq != len(nd.states):
        raise ValueError(
            "%s: %d initial states, %d state sequences for "
            "states %s" % (kf.name, i_init, i_seq, nd.states)
        )
    return out


def bwd_roles(kb, nd):
    """Per backward buffer (workspace parts aside): (what, index or name),
    from the buffer names
    (<output>_grad, <state>_seq_grad, <state>_final_grad, <input>_grad,
    <state>_init_grad, <param>_grad) and roles."""
    states, outs, ins = nd.states, nd.outputs, nd.inputs
    out = []
    for a in kb.buffers:
        n, r = a.name, a.role
        if (
            r == "optional_input_sequence"
            and n[:-5] in outs
            and n.endswith("_grad")
        ):
            out.append(("gout", outs.index(n[:-5])))
        elif (
            r == "optional_input_sequence"
            and n.endswith("_seq_grad")
            and n[:-9] in states
        ):
            out.append(("gseq", states.index(n[:-9])))
        elif r == "input_sequence" and n in ins:
            out.append(("x", ins.index(n)))
        elif (
            r == "initial_state"
            and n.endswith("_final_grad")
            and n[:-11] in states
        ):
            out.append(("gfin", states.index(n[:-11])))
        elif r == "output_sequence" and n.endswith("_grad") and n[:-5] in ins:
            out.append(("xgrad", ins.index(n[:-5])))
        elif (
            r == "final_state"
            and n.endswith("_init_grad")
            and n[:-10] in states
        ):
            out.append(("igrad", states.index(n[:-10])))
        elif r == "param_gradient" and n.endswith("_grad"):
            out.append(("pgrad", n[:-5]))
        else:
            raise ValueError(
                "%s: unexpected argument %s (%s)" % (kb.name, n, r)
            )
    return out


class TrainCase(object):
    """One forward + backward call on given inputs.

    data: dict(x=[T, N] storage, inits=[per state storage or None] or None,
    gout=[per output storage or None], gseq=[per state ...], gfin=[per
    state [N] ...] or None). ld; offset (elements, every buffer);
    fwd_absent / bwd_absent: buffer names passed as NULL. run_forward and
    run_backward take ws_ptr (another workspace address, 0 = NULL) to test
    bad workspaces; the backward re-reads the forward's x buffer and its
    workspace.
    """

    def __init__(
        self,
        env,
        kernels,
        gpu_neuron,
        dtype,
        T,
        N,
        data,
        params,
        ld=0,
        offset=0,
        fwd_absent=(),
        bwd_absent=(),
        deterministic=False,
    ):
        self.env, self.kernels = env, kernels
        self.neuron, self.dtype, self.T, self.N = gpu_neuron, dtype, T, N
        self.kf = kernels[(gpu_neuron, "forward", dtype)]
        self.kb = kernels[
            (
                gpu_neuron,
                "backward_deterministic" if deterministic else "backward",
                dtype,
            )
        ]
        self.nd = kernels.info(gpu_neuron)
        self.ld, self.L = ld, (ld if ld else N)
        self.offset = offset
        self.data, self.params = data, params
        self.fwd_absent, self.bwd_absent = set(fwd_absent), set(bwd_absent)
        self.fbufs, self.bbufs = {}, {}
        self.fstatus = self.bstatus = None
        self.saved = len(
            [p for p in self.kf.workspace_parts if p.role == "saved_output"]
        )
        # One workspace for both calls: the manifests' sizes (f32 elements).
        self.ws_elems = (
            max(k.workspace_bytes(T, N, ld) for k in (self.kf, self.kb)) + 3
        ) // 4

    def _buf(self, kind, dtype, saved=1, extent=None):
        return TBuf(
            self.env,
            kind,
            dtype,
            self.T,
            self.N,
            self.L,
            self.offset,
            saved,
            extent,
        )

    def launch(self, kern, pointers, params, workspace):
        return kern(
            self.env.stream(),
            self.T,
            self.N,
            self.ld,
            pointers,
            params,
            workspace,
        )

    def run_forward(self, ws_ptr=None):
        env, d = self.env, self.data
        pointers = []
        for a, (what, i) in zip(self.kf.buffers, fwd_roles(self.kf, self.nd)):
            src = None
            if what == "x":
                src = d["x"]
            elif what == "init":
                src = d["inits"][i] if d.get("inits") is not None else None
                if src is None:
                    self.fwd_absent.add(a.name)
            if a.name in self.fwd_absent:
                pointers.append(None)
                continue
            b = self._buf("state" if what == "init" else "seq", self.dtype)
            if src is not None:
                env.write(b, src)
                b.data = src
            b.role, b.index = what, i
            self.fbufs[a.name] = b
            pointers.append(b.ptr)
        if ws_ptr is None:
            b = self._buf("ws", "f32", self.saved, self.ws_elems)
            b.role, b.index = "ws", 0
            self.fbufs["workspace"] = b
            ws_ptr = b.ptr
        params = [self.params[p.name] for p in self.kf.params]
        env.sync()
        self.fstatus = self.launch(self.kf, pointers, params, ws_ptr)
        env.sync()
        return self.fstatus

    def run_backward(self, ws_ptr=None, pgrad_null=False):
        env, d = self.env, self.data
        pointers = []
        x_buf = [b for b in self.fbufs.values() if b.role == "x"]
        ws_buf = [b for b in self.fbufs.values() if b.role == "ws"]
        if ws_ptr is None:
            ws_ptr = ws_buf[0].ptr if ws_buf else 0
        for a, (what, i) in zip(self.kb.buffers, bwd_roles(self.kb, self.nd)):
            if what == "x":  # re-read input: the forward's buffer
                pointers.append(x_buf[0].ptr if x_buf else None)
                continue
            if what == "pgrad" and pgrad_null:
                pointers.append(None)
                continue
            src = None
            if what in ("gout", "gseq", "gfin"):
                lst = d.get(what)
                src = lst[i] if lst is not None else None
                if src is None:
                    self.bwd_absent.add(a.name)
            if a.name in self.bwd_absent:
                pointers.append(None)
                continue
            if what == "pgrad":
                b = TBuf(
                    env, "param", "f32", self.T, self.N, self.L, self.offset
                )
            elif what in ("gfin", "igrad"):
                b = self._buf("state", self.dtype)
            else:
                b = self._buf("seq", self.dtype)
            if src is not None:
                env.write(b, src)
                b.data = src
            b.role, b.index = what, i
            self.bbufs[a.name] = b
            pointers.append(b.ptr)
        params = [self.params[p.name] for p in self.kb.params]
        env.sync()
        self.bstatus = self.launch(self.kb, pointers, params, ws_ptr)
        env.sync()
        return self.bstatus

    def fetch(self):
        self.flat = {}
        for n, b in list(self.fbufs.items()) + list(self.bbufs.items()):
            self.flat[id(b)] = self.env.fetch(b)

    def view(self, b):
        return b.view(self.flat[id(b)])

    def bufs(self, role, where="b"):
        src = self.bbufs if where == "b" else self.fbufs
        return [b for b in src.values() if b.role == role]

    def release(self):
        for b in list(self.fbufs.values()) + list(self.bbufs.values()):
            self.env.free(b)
        self.flat = {}


# ---------------------------------------------------------------------------
# The checker


class TrainChecker(kc.Checker):
    def __init__(self, env, kernels, args, ad):
        kc.Checker.__init__(self, env, kernels, args)
        self.ad = ad
        # float64 autograd, which arbitrates f32 gradients that miss the
        # float32 reference's tolerance (PyTorch only).
        self.ad64 = (
            TorchAD(ad.torch, ad.device, ad.torch.float64)
            if isinstance(ad, TorchAD)
            else None
        )
        self.xp = Xp(env)

    def record(self, group, case, res, status=None, extra=None):
        """As kc.Checker.record; messages lose the case's label, which the
        record shows already."""
        res.errors = [
            e[len(case) :].lstrip(": ") if e.startswith(case) else e
            for e in res.errors
        ]
        kc.Checker.record(self, group, case, res, status, extra)

    # -- inputs ---------------------------------------------------------------
    def trainable(self, gpu_neuron):
        return [
            p.name
            for p in self.kernels.info(gpu_neuron).params
            if p.kind == "trainable"
        ]

    def make_data(self, gpu_neuron, dtype, T, N, seed, pattern=0):
        """Random storage inputs and incoming gradients. pattern: 0 all
        given; 1 spike gradient only (v_seq not stored either); 2 spike and
        final-state gradients, NULL initial states; 3 state-sequence and
        final-state gradients, no spike gradient."""
        env = self.env
        base = kc.base_neuron(gpu_neuron)
        states = kc.STATES[base]
        mean, std = kc.drive(gpu_neuron)
        if env.kind == "torch":
            torch = env.torch
            g = torch.Generator(device=env.device)
            g.manual_seed(seed)

            def normal(shape, m, s):
                return (
                    torch.randn(shape, generator=g, device=env.device) * s + m
                )

            def uniform(shape, lo, hi):
                return (
                    torch.rand(shape, generator=g, device=env.device)
                    * (hi - lo)
                    + lo
                )

        else:
            rng = np.random.default_rng(seed)

            def normal(shape, m, s):
                return rng.normal(m, s, shape).astype(np.float32)

            def uniform(shape, lo, hi):
                return rng.uniform(lo, hi, shape).astype(np.float32)

        st = self.xp.to_storage
        d = dict(x=st(normal((T, N), mean, std), dtype))
        d["inits"] = [st(uniform((N,), *kc.INIT[s]), dtype) for s in states]
        d["gout"] = [st(normal((T, N), 0.0, 1.0), dtype)]
        d["gseq"] = [st(normal((T, N), 0.0, 1.0), dtype) for _ in states]
        d["gfin"] = [st(normal((N,), 0.0, 1.0), dtype) for _ in states]
        fwd_absent = []
        if pattern == 1:
            d["gseq"] = [None] * len(states)
            d["gfin"] = [None] * len(states)
            fwd_absent = ["%s_seq" % s for s in states]
        elif pattern == 2:
            d["gseq"] = [None] * len(states)
            d["inits"] = None
        elif pattern == 3:
            d["gout"] = [None]
        return d, fwd_absent

    def ref_for(self, gpu_neuron, dtype, data, params, ad=None):
        def to(a):
            return None if a is None else self.env.to_f32(a, dtype)

        inits = (
            None
            if data.get("inits") is None
            else [to(s) for s in data["inits"]]
        )
        gin = dict(
            out=to(data["gout"][0]) if data.get("gout") else None,
            seq=[to(g) for g in data["gseq"]] if data.get("gseq") else None,
            final=[to(g) for g in data["gfin"]] if data.get("gfin") else None,
        )
        ref = reference(
            ad or self.ad,
            gpu_neuron,
            params,
            self.trainable(gpu_neuron),
            to(data["x"]),
            inits,
            gin,
        )
        return ref

    def ref_sane(self, ref):
        ops = self.ops
        arrs = (
            [ref["spikes"], ref["x_grad"]]
            + ref["seqs"]
            + ref["finals"]
            + ref["init_grads"]
            + list(ref["params"].values())
        )
        for a in arrs:
            if min(tuple(a.shape) or (1,)) == 0:
                continue
            if not ops.all(ops.isfinite(a)):
                return "test design: the reference is not finite"
            if ops.max(ops.abs(a)) >= MAX_VALUE:
                return "test design: a reference value reached %g" % MAX_VALUE
        return None

    def grad_max(self, ref):
        ops = self.ops
        m = 0.0
        for a in [ref["x_grad"]] + ref["init_grads"]:
            if min(tuple(a.shape) or (1,)) > 0:
                m = max(m, ops.max(ops.abs(a)))
        return m

    def fit_f16(self, gpu_neuron, dtype, data, params, ref):
        """Gradients that explode over T (e.g. QIF with a detached soft
        reset) would overflow f16 storage: the backward is linear in the
        incoming gradients, so scale those down by a power of two (then
        recompute the reference on the stored values). Returns (data, ref,
        scale exponent)."""
        m = self.grad_max(ref)
        if dtype != "f16" or not m < MAX_VALUE or m < F16_GRAD_MAX:
            return data, ref, 0
        k = 1
        while m * 2.0**-k >= F16_GRAD_MAX:
            k += 1
        env, xp = self.env, self.xp

        def scale(a):
            if a is None:
                return None
            return xp.to_storage(env.to_f32(a, dtype) * 2.0**-k, dtype)

        d = dict(data)
        for key in ("gout", "gseq", "gfin"):
            if d.get(key) is not None:
                d[key] = [scale(a) for a in d[key]]
        return d, self.ref_for(gpu_neuron, dtype, d, params), k

    # -- running and checking one case ----------------------------------------
    def twin(self, gpu_neuron, dtype):
        """The inference kernel computing the same forward values."""
        base, soft, _ = kc.copy_flags(gpu_neuron)
        name = base + ("_soft" if soft else "")
        return self.kernels.get((name, "inference", dtype))

    def run_case(
        self,
        gpu_neuron,
        dtype,
        T,
        N,
        data,
        params,
        ref,
        label,
        fwd_absent=(),
        bwd_absent=(),
        ld=0,
        offset=0,
        twin=True,
        cpu=None,
        keep=False,
        deterministic=False,
    ):
        env = self.env
        res = kc.Result()
        case = TrainCase(
            env,
            self.kernels,
            gpu_neuron,
            dtype,
            T,
            N,
            data,
            params,
            ld=ld,
            offset=offset,
            fwd_absent=fwd_absent,
            bwd_absent=bwd_absent,
            deterministic=deterministic,
        )
        try:
            s = case.run_forward()
            res.status = s
            if s != 0:
                res.fail(
                    "%s: forward status %s (%s)"
                    % (
                        label,
                        self.kernels.status_name(s),
                        self.kernels.message(s),
                    )
                )
                return res
            s = case.run_backward()
            res.status = s
            if s != 0:
                res.fail(
                    "%s: backward status %s (%s)"
                    % (
                        label,
                        self.kernels.status_name(s),
                        self.kernels.message(s),
                    )
                )
                return res
            case.fetch()
            self.check_buffers(case, res, label)
            inf = None
            if twin and T > 0:
                kt = self.twin(gpu_neuron, dtype)
                if kt is not None:
                    inits = data.get("inits")
                    inf = kc.Case(
                        env,
                        kt,
                        T,
                        N,
                        data["x"],
                        None if inits is None else list(inits),
                        ld=ld,
                        offset=offset,
                        params=dict(
                            (p.name, params[p.name]) for p in kt.params
                        ),
                    )
                    st = inf.run()
                    if st != 0:
                        res.fail(
                            "%s: inference kernel %s: status %s"
                            % (label, kt.name, self.kernels.status_name(st))
                        )
                        inf = None
            self.check_values(case, res, ref, label, inf, cpu)
            if inf is not None:
                inf.release()
        finally:
            if keep and res.ok:
                res.case = case
            else:
                case.release()
        return res

    def check_buffers(self, case, res, label):
        """Guards and row gaps untouched, inputs unchanged, outputs and the
        workspace completely written."""
        env, ops = self.env, self.ops
        for b in list(case.fbufs.values()) + list(case.bbufs.values()):
            flat = case.flat[id(b)]
            name = [
                n
                for n, x in list(case.fbufs.items()) + list(case.bbufs.items())
                if x is b
            ][0]
            for part in b.outside(flat):
                if tuple(part.shape) and min(part.shape) > 0:
                    n = ops.count(~env.isnan_storage(part, b.dtype))
                    if n:
                        res.fail(
                            "%s: %s: %d elements written outside the "
                            "buffer (guards or row gaps)" % (label, name, n)
                        )
            v = b.view(flat)
            empty = min(tuple(v.shape) or (1,)) == 0
            if b.data is not None:
                if not empty and not env.equal_bits(v, b.data, b.dtype):
                    res.fail("%s: input %s was modified" % (label, name))
            elif (
                b.role in ("out", "seq", "ws", "xgrad", "igrad", "pgrad")
                and not empty
            ):
                n = ops.count(env.isnan_storage(v, b.dtype))
                if n:
                    res.fail(
                        "%s: %s: %d of %d elements not written (NaN)"
                        % (label, name, n, int(np.prod(tuple(v.shape))))
                    )

    def check_values(self, case, res, ref, label, inf, cpu):
        env, ops, xp = self.env, self.ops, self.xp
        T, N, dtype = case.T, case.N, case.dtype
        f32 = lambda a: env.to_f32(a, dtype)  # noqa: E731
        near = ref["near"]
        # Forward: vs the inference kernel (bits) and the reference spikes.
        spikes = case.bufs("out", "f")
        fseq = dict((b.index, b) for b in case.bufs("seq", "f"))
        if inf is not None and T > 0:
            ko = inf.kern.buffers_of("output_sequence")
            ks = inf.kern.buffers_of("state_sequence")
            for b, a in zip(spikes, ko):
                if a.name in inf.bufs and not env.equal_bits(
                    case.view(b), inf.view(a.name), dtype
                ):
                    res.fail(
                        "%s: forward %s differs from %s's (bits)"
                        % (label, a.name, inf.kern.name)
                    )
            for i, a in enumerate(ks):
                if (
                    i in fseq
                    and a.name in inf.bufs
                    and not env.equal_bits(
                        case.view(fseq[i]), inf.view(a.name), dtype
                    )
                ):
                    res.fail(
                        "%s: forward %s differs from %s's (bits)"
                        % (label, a.name, inf.kern.name)
                    )
        diverged = None
        if spikes and T > 0:
            got = f32(case.view(spikes[0]))
            differs = got != ref["spikes"]
            diverged = xp.any_rows(differs)
            bad = diverged & ~near
            if ops.count(bad):
                n = ops.first(bad)[0]
                res.fail(
                    "%s: spikes of %d neurons differ from the reference "
                    "away from the threshold (first: neuron %d)"
                    % (label, ops.count(bad), n)
                )
        # Left out of the gradient comparisons: the neurons whose spikes
        # left the reference's (after nearing the threshold); all that came
        # near it when the spikes were not stored.
        ndiv = ops.count(diverged) if diverged is not None else None
        if diverged is None:
            diverged = near
        valid = ~diverged
        res.diverged = ops.count(diverged) if T > 0 else 0
        res.extra = dict(near=ops.count(near) if T > 0 else 0, diverged=ndiv)
        # Backward.
        want_x = ref["x_grad"]
        scale = xp.col_absmax(want_x)
        for g in ref["init_grads"]:
            scale = xp.maximum(scale, ops.abs(g))
        for b in case.bufs("xgrad"):
            got = f32(case.view(b))
            tol = grad_tolerance(xp, ops, want_x, scale.reshape(1, N), dtype)
            self.compare_grad(
                case,
                res,
                "%s x_grad vs reference" % label,
                got,
                ref,
                lambda r: r["x_grad"],
                tol,
                valid.reshape(1, N),
            )
            if cpu is not None and "x_grad" in cpu:
                compare(
                    env,
                    res,
                    "%s x_grad vs CPU path" % label,
                    got,
                    cpu["x_grad"],
                    tol,
                    valid.reshape(1, N),
                )
        gfin = case.data.get("gfin")
        for b in case.bufs("igrad"):
            i = b.index
            got = f32(case.view(b))
            want = ref["init_grads"][i]
            if T == 0:
                src = gfin[i] if gfin is not None else None
                if src is None:
                    src = env.zeros_storage(N, dtype)
                if not env.equal_bits(case.view(b), src, dtype):
                    res.fail(
                        "%s: %s with T = 0 differs from the final-state "
                        "gradient (bits)" % (label, "init_grad[%d]" % i)
                    )
                continue
            tol = grad_tolerance(xp, ops, want, scale, dtype)
            self.compare_grad(
                case,
                res,
                "%s init_grad[%d] vs reference" % (label, i),
                got,
                ref,
                lambda r, i=i: r["init_grads"][i],
                tol,
                valid,
            )
            key = "%s_init_grad" % case.nd.states[i]
            if cpu is not None and key in cpu:
                compare(
                    env,
                    res,
                    "%s %s vs CPU path" % (label, key),
                    got,
                    cpu[key],
                    tol,
                    valid,
                )
        for b in case.bufs("pgrad"):
            name = b.index
            got = float(env.to_f32(case.view(b), "f32")[0])
            c = ref["params"][name]
            if T == 0:
                if got != 0.0:
                    res.fail(
                        "%s: %s_grad = %r with T = 0, expected 0"
                        % (label, name, got)
                    )
                continue
            self.check_param(res, label, name, got, c, diverged, cpu)

    def compare_grad(self, case, res, what, got, ref, pick, tol, valid):
        """compare() against the float32 reference. An f32 gradient that
        misses it goes to float64: it passes when FlexSN is no further from
        the float64 gradient than PyTorch's own float32 autograd is: at most
        ARBITER_COUNT times as many elements beyond the tolerance (plus 10),
        and a max error at most ARBITER_MAX times PyTorch's. This is where a
        neuron's gradients grow over T
        (QIF / Izhikevich with a detached soft reset: dh/dv > 1), so two
        correct float32 evaluation orders differ by more than any fixed
        tolerance; float64 says which one is wrong."""
        first = kc.Result()
        compare(self.env, first, what, got, pick(ref), tol, valid)
        res.max_err = max(res.max_err, first.max_err)
        res.max_ratio = max(res.max_ratio, first.max_ratio)
        if first.ok or case.dtype != "f32" or self.ad64 is None:
            res.errors += first.errors
            return
        ops = self.ops
        if getattr(case, "ref64", None) is None:
            case.ref64 = self.ref_for(
                case.neuron, "f32", case.data, case.params, ad=self.ad64
            )
        ref64 = case.ref64
        want64, want32 = pick(ref64), pick(ref)
        # Neurons whose float64 spikes differ follow another trajectory.
        other = (
            self.xp.any_rows(ref64["spikes"] != ref["spikes"])
            if case.T > 0
            else None
        )
        keep = (
            valid
            if other is None
            else valid
            & ~other.reshape(
                (1, -1) if len(tuple(valid.shape)) == 2 else (-1,)
            )
        )
        ours = (got.double() - want64).abs()  # PyTorch tensors
        theirs = (want32.double() - want64).abs()
        keep = keep.expand_as(ours)
        n_ours = ops.count(keep & (ours > tol))
        n_theirs = ops.count(keep & (theirs > tol))
        m_ours = float(ours[keep].max()) if ops.count(keep) else 0.0
        m_theirs = float(theirs[keep].max()) if ops.count(keep) else 0.0
        res.extra = dict(getattr(res, "extra", None) or {})
        res.extra.setdefault("arbitrated", []).append(
            dict(
                what=what,
                beyond=[n_ours, n_theirs],
                max_err=[m_ours, m_theirs],
                other_trajectory=ops.count(other) if other is not None else 0,
            )
        )
        if (
            n_ours > ARBITER_COUNT * n_theirs + 10
            or m_ours > ARBITER_MAX * m_theirs
        ):
            res.fail(
                "%s; against float64: %d elements beyond tolerance, max "
                "error %.3g (PyTorch float32: %d, %.3g)"
                % (first.errors[0], n_ours, m_ours, n_theirs, m_theirs)
            )

    def check_param(self, res, label, name, got, c, diverged, cpu=None):
        xp, ops = self.xp, self.ops
        want = xp.sum64(c)
        tol = PARAM_RTOL * max(abs(want), PARAM_CANCEL * xp.abssum64(c))
        if diverged is not None and ops.count(diverged):
            tol += xp.masked_abssum64(c, diverged) + ops.count(
                diverged
            ) * ops.max(ops.abs(c))
        tol = max(tol, 1e-30)
        err = abs(got - want)
        res.max_err = max(res.max_err, err)
        res.max_ratio = max(res.max_ratio, err / tol)
        if not err <= tol:
            res.fail(
                "%s: %s_grad = %r, reference %r (|diff| %.3g > tol %.3g)"
                % (label, name, got, want, err, tol)
            )
        if cpu is not None and name + "_grad" in cpu:
            cg = float(cpu[name + "_grad"])
            if not abs(got - cg) <= tol:
                res.fail(
                    "%s: %s_grad = %r, CPU path %r (tol %.3g)"
                    % (label, name, got, cg, tol)
                )

    # -- groups ---------------------------------------------------------------
    def grid(self, neurons, dtypes, Ts, Ns, Ts_copy=None, Ns_copy=None):
        for neuron in neurons:
            _, soft, detach = kc.copy_flags(neuron)
            ts, ns = Ts, Ns
            if detach:
                ts, ns = Ts_copy or Ts, Ns_copy or Ns
            for di, dtype in enumerate(dtypes):
                for ti, T in enumerate(ts):
                    for ni, N in enumerate(ns):
                        self._grid_point(
                            neuron, dtype, T, N, (di + ti + ni) % 4
                        )

    def _grid_point(self, neuron, dtype, T, N, pattern):
        g = "grid/%s/%s" % (neuron, dtype)
        label = "T=%d N=%d pattern %d" % (T, N, pattern)
        if self.out_of_time():
            self.skip(g, label)
            return
        kern = self.kernels[(neuron, "forward", dtype)]
        params = self.kernels.runtime_params(kern)
        seed = zlib.crc32(
            (
                "train/%s/%s/%d/%d/%d" % (neuron, dtype, T, N, self.args.seed)
            ).encode()
        )

        def fn():
            data, fwd_absent = self.make_data(
                neuron, dtype, T, N, seed, pattern
            )
            ref = self.ref_for(neuron, dtype, data, params)
            data, ref, k = self.fit_f16(neuron, dtype, data, params, ref)
            bad = self.ref_sane(ref)
            if bad:
                r = kc.Result()
                r.fail(bad)
                return r
            if T > 0:
                self.group(g)["neurons"] += N
            r = self.run_case(
                neuron,
                dtype,
                T,
                N,
                data,
                params,
                ref,
                label,
                fwd_absent=fwd_absent,
            )
            if k:
                r.extra = dict(
                    getattr(r, "extra", None) or {},
                    incoming_grads_scaled_by="2^-%d" % k,
                )
            return r

        self.run_guarded(g, label, fn)

    def absent(self, neurons, dtypes, T=16, N=1000):
        for neuron in neurons:
            g = "absent/%s" % neuron
            for dtype in dtypes:
                kf = self.kernels[(neuron, "forward", dtype)]
                kb = self.kernels[(neuron, "backward", dtype)]
                nd = self.kernels.info(neuron)
                params = self.kernels.runtime_params(kf)
                seed = zlib.crc32(("absent/%s/%s" % (neuron, dtype)).encode())
                if self.out_of_time():
                    self.skip(g, "%s" % dtype)
                    continue
                data, _ = self.make_data(neuron, dtype, T, N, seed, 0)
                roles = bwd_roles(kb, nd)
                cases = []
                # Each incoming gradient NULL alone.
                for a, (what, i) in zip(kb.buffers, roles):
                    if what in ("gout", "gseq", "gfin"):
                        d = dict(data)
                        d[what] = list(d[what])
                        d[what][i] = None
                        cases.append(("%s NULL" % a.name, d, (), ()))
                # All of them NULL: every gradient zero.
                d = dict(
                    data,
                    gout=[None],
                    gseq=[None] * len(nd.states),
                    gfin=[None] * len(nd.states),
                )
                cases.append(("all incoming gradients NULL", d, (), ()))
                # Optional outputs NULL.
                for a, (what, i) in zip(kb.buffers, roles):
                    if what in ("xgrad", "igrad"):
                        cases.append(("%s NULL" % a.name, data, (), (a.name,)))
                fwd_opt = [
                    a.name
                    for a, (w, i) in zip(kf.buffers, fwd_roles(kf, nd))
                    if w in ("out", "seq")
                ]
                cases.append(("forward outputs NULL", data, fwd_opt, ()))
                cases.append(
                    ("initial states NULL", dict(data, inits=None), (), ())
                )
                for label, d, fa, ba in cases:

                    def fn(d=d, fa=fa, ba=ba, label=label):
                        ref = self.ref_for(neuron, dtype, d, params)
                        r = self.run_case(
                            neuron,
                            dtype,
                            T,
                            N,
                            d,
                            params,
                            ref,
                            label,
                            fwd_absent=fa,
                            bwd_absent=ba,
                        )
                        if label == "all incoming gradients NULL":
                            self._all_zero(r, ref)
                        return r

                    self.run_guarded(g, "%s %s" % (dtype, label), fn)

    def _all_zero(self, r, ref):
        ops = self.ops
        for a in (
            [ref["x_grad"]] + ref["init_grads"] + list(ref["params"].values())
        ):
            if ops.count(a != 0):
                r.fail(
                    "reference gradients with no incoming gradient are "
                    "not all zero"
                )

    def strided(self, neurons, dtypes, shapes, T=16):
        for neuron in neurons:
            g = "strided/%s" % neuron
            for dtype in dtypes:
                kf = self.kernels[(neuron, "forward", dtype)]
                params = self.kernels.runtime_params(kf)
                for N, ld in shapes:
                    label = "%s N=%d ld=%d (%s)" % (
                        dtype,
                        N,
                        ld,
                        "vector" if ld % kf.vector_width == 0 else "scalar",
                    )
                    if self.out_of_time():
                        self.skip(g, label)
                        continue
                    seed = zlib.crc32(
                        (
                            "strided/%s/%s/%d/%d" % (neuron, dtype, N, ld)
                        ).encode()
                    )

                    def fn(
                        N=N,
                        ld=ld,
                        seed=seed,
                        label=label,
                        dtype=dtype,
                        params=params,
                    ):
                        data, _ = self.make_data(neuron, dtype, T, N, seed, 0)
                        ref = self.ref_for(neuron, dtype, data, params)
                        self.group(g)["neurons"] += N
                        return self.run_case(
                            neuron,
                            dtype,
                            T,
                            N,
                            data,
                            params,
                            ref,
                            label,
                            ld=ld,
                        )

                    self.run_guarded(g, label, fn)

    def misaligned(self, neurons, dtypes, T=16, N=1000):
        """The scalar kernels (every buffer one element off) and the vector
        ones (aligned) against the reference and against each other."""
        for neuron in neurons:
            g = "misaligned/%s" % neuron
            for dtype in dtypes:
                if self.out_of_time():
                    self.skip(g, dtype)
                    continue
                kf = self.kernels[(neuron, "forward", dtype)]
                params = self.kernels.runtime_params(kf)
                seed = zlib.crc32(
                    ("misaligned/%s/%s" % (neuron, dtype)).encode()
                )
                data, _ = self.make_data(neuron, dtype, T, N, seed, 0)
                ref = self.ref_for(neuron, dtype, data, params)
                kept = {}
                for off in (0, 1):
                    label = "%s %s" % (
                        dtype,
                        "aligned (vector)"
                        if off == 0
                        else "all buffers +1 element (scalar)",
                    )

                    def fn(off=off, label=label):
                        return self.run_case(
                            neuron,
                            dtype,
                            T,
                            N,
                            data,
                            params,
                            ref,
                            label,
                            offset=off,
                            keep=True,
                        )

                    kept[off] = self.run_guarded(g, label, fn)
                if all(
                    kept.get(o) is not None and hasattr(kept[o], "case")
                    for o in (0, 1)
                ):
                    self.run_guarded(
                        g,
                        "%s scalar == vector" % dtype,
                        lambda: self._agree(kept[0].case, kept[1].case, ref),
                    )
                for o in (0, 1):
                    if kept.get(o) is not None and hasattr(kept[o], "case"):
                        kept[o].case.release()

    def _agree(self, a, b, ref):
        env, ops, xp = self.env, self.ops, self.xp
        res = kc.Result()
        dtype, N = a.dtype, a.N
        valid = ~ref["near"]
        scale = xp.col_absmax(ref["x_grad"])
        for g in ref["init_grads"]:
            scale = xp.maximum(scale, ops.abs(g))
        for role, where in (("out", "f"), ("seq", "f")):
            for x, y in zip(a.bufs(role, where), b.bufs(role, where)):
                if not env.equal_bits(a.view(x), b.view(y), dtype):
                    res.fail(
                        "forward %s: vector and scalar kernels differ "
                        "(bits)" % role
                    )
        for role in ("xgrad", "igrad"):
            for x, y in zip(a.bufs(role), b.bufs(role)):
                gx = env.to_f32(a.view(x), dtype)
                gy = env.to_f32(b.view(y), dtype)
                sc = scale.reshape(1, N) if role == "xgrad" else scale
                compare(
                    env,
                    res,
                    "%s vector vs scalar" % role,
                    gy,
                    gx,
                    grad_tolerance(xp, ops, gx, sc, dtype),
                    valid.reshape(1, N) if role == "xgrad" else valid,
                )
        for x, y in zip(a.bufs("pgrad"), b.bufs("pgrad")):
            gx = float(env.to_f32(a.view(x), "f32")[0])
            gy = float(env.to_f32(b.view(y), "f32")[0])
            c = ref["params"][x.index]
            tol = PARAM_RTOL * max(abs(gx), PARAM_CANCEL * xp.abssum64(c))
            if not abs(gx - gy) <= max(tol, 1e-30):
                res.fail("%s_grad: vector %r, scalar %r" % (x.index, gx, gy))
        return res

    def workspace(self, neurons, dtypes):
        b = self.kernels
        for neuron in neurons:
            g = "workspace/%s" % neuron
            for dtype in dtypes:
                kf = b[(neuron, "forward", dtype)]
                kb = b[(neuron, "backward", dtype)]
                kd = b.get((neuron, "backward_deterministic", dtype))
                ks = [k for k in (kf, kb, kd) if k is not None]
                self.run_guarded(
                    g,
                    "%s workspace sizes and offsets" % dtype,
                    lambda ks=ks: self._ws_bytes(ks),
                )
                for label, kind in (
                    ("forward workspace too small", "fwd-small"),
                    ("backward workspace too small", "bwd-small"),
                    ("forward workspace NULL", "fwd-null"),
                    ("backward workspace NULL", "bwd-null"),
                    ("parameter gradient NULL", "pgrad-null"),
                    (
                        "deterministic backward, workspace without the "
                        "scratch",
                        "det-no-scratch",
                    ),
                    ("a good call afterwards", "good"),
                ):
                    if kind == "pgrad-null" and not any(
                        a.role == "param_gradient" for a in kb.buffers
                    ):
                        continue
                    if kind == "det-no-scratch" and kd is None:
                        continue
                    self.run_guarded(
                        g,
                        "%s %s" % (dtype, label),
                        lambda kind=kind, dtype=dtype: self._ws_case(
                            neuron, dtype, kind
                        ),
                    )

    def _ws_bytes(self, kernels):
        """Each kernel's workspace size and part offsets (the manifest's
        formulas, which the runtime wrapper and flexsn.torch use): the saved
        f32 sequences, T x ld each, from offset 0; then, where the neuron
        has a deterministic backward, the reduction scratch (a counter and
        one float per parameter gradient and 256-neuron block), which
        every training kernel's size leaves room for."""
        res = kc.Result()
        kf, kb = kernels[0], kernels[1]
        det = len(kernels) > 2
        slots = len(kb.buffers_of("param_gradient")) if det else 0
        saved = len(
            [p for p in kf.workspace_parts if p.role == "saved_output"]
        )
        for k in kernels:
            seqs = [
                p
                for p in k.workspace_parts
                if p.role in ("saved_output", "saved_input")
            ]
            scratch = [
                p for p in k.workspace_parts if p.role == "reduction_scratch"
            ]
            if len(seqs) != saved:
                res.fail(
                    "%s: %d saved sequences, the forward %d"
                    % (k.name, len(seqs), saved)
                )
            if len(scratch) != (k.variant == "backward_deterministic"):
                res.fail(
                    "%s: %d reduction scratch parts" % (k.name, len(scratch))
                )
            for T, N, ld in (
                (0, 5, 0),
                (16, 1000, 0),
                (16, 1000, 1003),
                (64, BIG_N, 0),
            ):
                L = ld if ld else N
                want = saved * T * L * 4
                if slots:
                    want += 4 * (1 + slots * ((N + 255) // 256))
                got = k.workspace_bytes(T, N, ld)
                if got != want:
                    res.fail(
                        "%s workspace bytes (T=%d, N=%d, ld=%d) = %d, "
                        "expected %d" % (k.name, T, N, ld, got, want)
                    )
                offsets = [(p, i * T * L * 4) for i, p in enumerate(seqs)]
                offsets += [(p, saved * T * L * 4) for p in scratch]
                for p, want in offsets:
                    got = evaluate_size(p.workspace_offset, T=T, N=N, ld=L)
                    if got != want:
                        res.fail(
                            "%s: %s at byte %d (T=%d, N=%d, ld=%d), "
                            "expected %d"
                            % (k.name, p.name, got, T, N, ld, want)
                        )
        return res

    def _ws_case(self, neuron, dtype, kind):
        """A bad workspace / parameter gradient: its status, nothing written;
        or ('good') a normal call."""
        env, b = self.env, self.kernels
        T, N = 4, 1 << 18  # a 4 MiB workspace (f32)
        res = kc.Result()
        kf = b[(neuron, "forward", dtype)]
        params = b.runtime_params(kf)
        data, _ = self.make_data(neuron, dtype, T, N, 11, 0)
        if kind == "good":
            ref = self.ref_for(neuron, dtype, data, params)
            self.group("workspace/%s" % neuron)["neurons"] += N
            return self.run_case(
                neuron, dtype, T, N, data, params, ref, "good call"
            )
        case = TrainCase(
            env,
            b,
            neuron,
            dtype,
            T,
            N,
            data,
            params,
            deterministic=kind.startswith("det"),
        )
        raw = None
        try:
            want = (
                "BUFFER_TOO_SMALL"
                if kind.endswith(("small", "scratch"))
                else "NULL_POINTER"
            )
            if kind.endswith("small"):
                raw = kc.RawAlloc(env, 2 << 20)  # half of what T x N needs
            elif kind == "det-no-scratch":
                # The saved values and the scratch's counter, not its slots
                # (a scratch starting past the allocation's end would be
                # CONTEXT_MISMATCH: no allocation holds it).
                raw = kc.RawAlloc(env, case.saved * T * N * 4 + 4)
            if kind.startswith("fwd"):
                s = case.run_forward(ws_ptr=raw.ptr if raw else 0)
                which = "forward"
            else:
                s = case.run_forward()
                if s != 0:
                    res.fail("forward: status %s" % b.status_name(s))
                    return res
                s = case.run_backward(
                    ws_ptr=(
                        raw.ptr if raw else (0 if kind == "bwd-null" else None)
                    ),
                    pgrad_null=kind == "pgrad-null",
                )
                which = "backward"
            res.status = s
            kern = case.kf if which == "forward" else case.kb
            if s != b.status(want):
                res.fail(
                    "%s status %s (%s), expected FLEXSN_ERROR_%s"
                    % (which, b.status_name(s), b.message(s), want)
                )
            elif kern.blamed != self._ws_blamed(kern, kind):
                res.fail(
                    "%s: the error names argument %r, expected %r"
                    % (which, kern.blamed, self._ws_blamed(kern, kind))
                )
            case.fetch()
            bufs = case.fbufs if which == "forward" else case.bbufs
            for name, buf in bufs.items():
                if buf.data is not None:
                    continue
                if which == "forward" or buf.role in (
                    "xgrad",
                    "igrad",
                    "pgrad",
                ):
                    v = case.view(buf)
                    n = self.ops.count(~env.isnan_storage(v, buf.dtype))
                    if n:
                        res.fail(
                            "%s: %d elements written by a call that "
                            "failed" % (name, n)
                        )
        finally:
            if raw is not None:
                raw.free()
            case.release()
        return res

    @staticmethod
    def _ws_blamed(kern, kind):
        """The buffer a _ws_case failure must name: the first saved
        sequence, the parameter gradient or the scratch."""
        if kind == "pgrad-null":
            return kern.buffers_of("param_gradient")[0].name
        role = (
            "reduction_scratch"
            if kind == "det-no-scratch"
            else ("saved_output" if kind.startswith("fwd") else "saved_input")
        )
        return [p for p in kern.workspace_parts if p.role == role][0].name

    def deterministic(self, neurons, dtypes, shapes, reruns=3):
        """The deterministic backward kernels: against the reference like
        the atomic ones, then run again on the same inputs: every gradient
        (parameter gradients included) the same bit for bit."""
        b = self.kernels
        for neuron in neurons:
            g = "deterministic/%s" % neuron
            for dtype in dtypes:
                if (neuron, "backward_deterministic", dtype) not in b:
                    continue
                params = b.runtime_params(b[(neuron, "forward", dtype)])
                for T, N, off in shapes:
                    label = "%s T=%d N=%d %s" % (
                        dtype,
                        T,
                        N,
                        "scalar (+1 element)" if off else "vector",
                    )

                    def fn(
                        dtype=dtype,
                        T=T,
                        N=N,
                        off=off,
                        label=label,
                        params=params,
                    ):
                        seed = zlib.crc32(
                            (
                                "deterministic/%s/%s/%d/%d"
                                % (neuron, dtype, T, N)
                            ).encode()
                        )
                        data, _ = self.make_data(neuron, dtype, T, N, seed, 0)
                        ref = self.ref_for(neuron, dtype, data, params)
                        self.group(g)["neurons"] += N
                        return self._rerun_same(
                            neuron,
                            dtype,
                            T,
                            N,
                            data,
                            params,
                            ref,
                            label,
                            off,
                            reruns,
                        )

                    self.run_guarded(g, label, fn)

    def _rerun_same(
        self, neuron, dtype, T, N, data, params, ref, label, off, reruns
    ):
        first = self.run_case(
            neuron,
            dtype,
            T,
            N,
            data,
            params,
            ref,
            label,
            offset=off,
            keep=True,
            deterministic=True,
        )
        if not hasattr(first, "case"):
            return first
        try:
            for k in range(reruns):
                again = self.run_case(
                    neuron,
                    dtype,
                    T,
                    N,
                    data,
                    params,
                    ref,
                    "%s rerun %d" % (label, k + 1),
                    offset=off,
                    keep=True,
                    deterministic=True,
                )
                if not hasattr(again, "case"):
                    return again
                a, c = first.case, again.case
                for name, x in a.bbufs.items():
                    if x.data is not None:  # an input
                        continue
                    y = c.bbufs[name]
                    if not self.env.equal_bits(a.view(x), c.view(y), x.dtype):
                        first.fail(
                            "%s: rerun %d: %s differs (bits)"
                            % (label, k + 1, name)
                        )
                again.case.release()
        finally:
            first.case.release()
        return first

    def cpu_entries(self, neurons):
        """The CPU-path cases: N = 256; a neuron f32 T in {1, 16}, f16 and
        bf16 T = 16; its copies f32 T = 16."""
        out = []
        for n in neurons:
            configs = (
                [("f32", 1), ("f32", 16), ("f16", 16), ("bf16", 16)]
                if kc.base_neuron(n) == n
                else [("f32", 16)]
            )
            out += [
                dict(gpu_neuron=n, dtype=d, T=T, N=CPU_N) for d, T in configs
            ]
        return out

    def load_cpu(self, e):
        """Seeded inputs and incoming gradients of a CPU-path case, and the
        package's CPU forward and backward kernels run on them: (data in
        the env's storage, CPU results by buffer name as float32 arrays or,
        for parameter gradients, floats, params)."""
        b, env, xp = self.kernels, self.env, self.xp
        n, dtype, T, N = e["gpu_neuron"], e["dtype"], e["T"], e["N"]
        nd = b.info(n)
        rng = np.random.default_rng(
            [
                zlib.crc32(("train/" + n).encode()),
                DTYPES.index(dtype),
                T,
                N,
                self.args.seed,
            ]
        )
        mean, std = kc.drive(n)

        def storage(a):
            return kc.np_storage(np.asarray(a, np.float32), dtype)

        host = dict(
            x=[storage(rng.normal(mean, std, (T, N)))],
            init=[storage(rng.uniform(*kc.INIT[s], N)) for s in nd.states],
            gout=[storage(rng.normal(0.0, 1.0, (T, N))) for _ in nd.outputs],
            gseq=[storage(rng.normal(0.0, 1.0, (T, N))) for _ in nd.states],
            gfin=[storage(rng.normal(0.0, 1.0, N)) for _ in nd.states],
        )
        cpu_f, cpu_b = b.cpu(n, "forward", dtype), b.cpu(n, "backward", dtype)
        kf, kb = kc.Kernel(n, cpu_f.spec, None), kc.Kernel(n, cpu_b.spec, None)
        params = b.runtime_params(kf)
        froles, broles = fwd_roles(kf, nd), bwd_roles(kb, nd)
        fout, ws = kc.run_cpu(
            cpu_f,
            T,
            N,
            {
                a.name: host[w][i]
                for a, (w, i) in zip(kf.buffers, froles)
                if w in host
            },
            params,
        )
        bout, _ = kc.run_cpu(
            cpu_b,
            T,
            N,
            {
                a.name: host[w][i]
                for a, (w, i) in zip(kb.buffers, broles)
                if w in host
            },
            params,
            ws,
        )
        cpu = {}
        for k, roles, got in ((kf, froles, fout), (kb, broles, bout)):
            for a, (w, i) in zip(k.buffers, roles):
                if w == "pgrad":
                    cpu[a.name] = float(got[a.name][0])
                elif w in ("out", "seq", "xgrad", "igrad"):
                    cpu[a.name] = xp.f32_from_numpy(
                        kc.np_to_f32(got[a.name], dtype)
                    )

        def device(arrays):
            return [env.from_storage(a, dtype) for a in arrays]

        data = dict(
            x=device(host["x"])[0],
            inits=device(host["init"]),
            gout=device(host["gout"]),
            gseq=device(host["gseq"]),
            gfin=device(host["gfin"]),
        )
        return data, cpu, params

    def reference_vs_cpu(self, neurons):
        """This script's reference against the package's CPU kernels."""
        ops, xp = self.ops, self.xp
        for e in self.cpu_entries(neurons):
            g = "reference/%s" % kc.base_neuron(e["gpu_neuron"])
            label = "%s %s T=%d N=%d" % (
                e["gpu_neuron"],
                e["dtype"],
                e["T"],
                e["N"],
            )

            def fn(e=e, label=label):
                res = kc.Result()
                data, cpu, params = self.load_cpu(e)
                dtype, N = e["dtype"], e["N"]
                ref = self.ref_for(e["gpu_neuron"], dtype, data, params)
                nd = self.kernels.info(e["gpu_neuron"])
                near = ref["near"]
                out = nd.outputs[0]
                differs = near
                if out in cpu:
                    differs = xp.any_rows(cpu[out] != ref["spikes"])
                    bad = differs & ~near
                    if ops.count(bad):
                        res.fail(
                            "spikes of %d neurons differ from the CPU "
                            "path away from the threshold" % ops.count(bad)
                        )
                valid = ~differs
                res.diverged = ops.count(differs)
                res.extra = dict(near=ops.count(near))
                self.group(g)["neurons"] += N
                for i, s in enumerate(nd.states):
                    k = "%s_seq" % s
                    if k in cpu:
                        compare(
                            self.env,
                            res,
                            "%s vs CPU path" % k,
                            cpu[k],
                            ref["seqs"][i],
                            kc.tolerance(ops, ref["seqs"][i], dtype),
                            valid.reshape(1, N),
                        )
                scale = xp.col_absmax(ref["x_grad"])
                for gi in ref["init_grads"]:
                    scale = xp.maximum(scale, ops.abs(gi))
                x_name = nd.inputs[0] + "_grad"
                compare(
                    self.env,
                    res,
                    "%s: CPU path vs reference" % x_name,
                    cpu[x_name],
                    ref["x_grad"],
                    grad_tolerance(
                        xp, ops, ref["x_grad"], scale.reshape(1, N), dtype
                    ),
                    valid.reshape(1, N),
                )
                for i, s in enumerate(nd.states):
                    k = "%s_init_grad" % s
                    compare(
                        self.env,
                        res,
                        "%s: CPU path vs reference" % k,
                        cpu[k],
                        ref["init_grads"][i],
                        grad_tolerance(
                            xp, ops, ref["init_grads"][i], scale, dtype
                        ),
                        valid,
                    )
                for name in ref["params"]:
                    self.check_param(
                        res,
                        "CPU path",
                        name,
                        cpu[name + "_grad"],
                        ref["params"][name],
                        differs,
                    )
                return res

            self.run_guarded(g, label, fn)

    def cpu_path(self, neurons):
        """The GPU kernels on the CPU-path cases' inputs vs the CPU
        kernels' results."""
        for e in self.cpu_entries(neurons):
            n = e["gpu_neuron"]
            if (n, "forward", e["dtype"]) not in self.kernels:
                continue
            g = "cpu-path/%s" % kc.base_neuron(n)
            label = "%s %s T=%d N=%d" % (n, e["dtype"], e["T"], e["N"])

            def fn(e=e, n=n, label=label):
                data, cpu, params = self.load_cpu(e)
                ref = self.ref_for(n, e["dtype"], data, params)
                self.group(g)["neurons"] += e["N"]
                return self.run_case(
                    n,
                    e["dtype"],
                    e["T"],
                    e["N"],
                    data,
                    params,
                    ref,
                    label,
                    cpu=cpu,
                )

            self.run_guarded(g, label, fn)


# ---------------------------------------------------------------------------
# Main


def run_groups(c, neurons, mode, only=None):
    """The groups of a mode (full, quick, reference-only) on a checker; the
    big grid last (a --deadline skips the end of it rather than whole
    groups). `only`: the one group to run."""

    def run(name, fn, *args, **kwargs):
        if only is None or only == name:
            c.run_group(name, fn, *args, **kwargs)

    base = [n for n in neurons if kc.base_neuron(n) == n]
    some = [
        n for n in ("lif", "plif", "izhikevich", "cuba_lif") if n in base
    ] or base[:2]
    run("reference", c.reference_vs_cpu, neurons)
    if mode == "reference-only":
        return
    run("cpu-path", c.cpu_path, neurons)
    if mode == "quick":
        run("workspace", c.workspace, some[:2], ("f32",))
        run(
            "deterministic",
            c.deterministic,
            base,
            ("f32", "f16"),
            [(0, 37, 0), (16, 1000, 0), (16, 1000, 1)],
            reruns=1,
        )
        run("absent", c.absent, some[:2], ("f32",), 16, 100)
        run("misaligned", c.misaligned, some[:2], ("f32", "f16"))
        run("strided", c.strided, some[:2], ("f16",), [(37, 40), (100, 104)])
        run(
            "grid",
            c.grid,
            neurons,
            ("f32", "bf16"),
            (0, 1, 16),
            (1, 37, 1000),
            Ts_copy=(0, 16),
            Ns_copy=(1000,),
        )
        return
    run("workspace", c.workspace, some[:2], DTYPES)
    run(
        "deterministic",
        c.deterministic,
        neurons,
        DTYPES,
        [
            (0, 1000, 0),
            (1, 1, 0),
            (64, 1000, 0),
            (16, BIG_N, 0),
            (16, BIG_N, 1),
        ],
    )
    run("absent", c.absent, some, DTYPES)
    run("misaligned", c.misaligned, base, DTYPES)
    run(
        "strided",
        c.strided,
        some[:3],
        DTYPES,
        [(1000, 1005), (1000, 1008), (BIG_N, BIG_N + 5)],
    )
    run(
        "grid",
        c.grid,
        neurons,
        DTYPES,
        (0, 1, 16, 64),
        (1, 1000, BIG_N),
        Ts_copy=(0, 16, 64),
        Ns_copy=(1000, BIG_N),
    )


def make_ad(env):
    """The reference's backend matching the env: autograd on PyTorch,
    the NumPy tape otherwise."""
    if env.kind == "torch":
        return TorchAD(env.torch, env.device)
    return NumpyAD()


def main(argv=None):
    ap = kc.checker_arguments(__doc__)
    ap.add_argument(
        "--reference-only",
        action="store_true",
        help="no GPU: the NumPy reference vs the CPU kernels",
    )
    args = ap.parse_args(argv)
    bases, labels = kc.requested(args.neurons)
    if args.compile_only:
        t0 = time.time()
        compiled = kc.compile_neurons(bases, tuple(kc.COPIES))
        print(
            "train_kernel_checks: %d compiles in %.0f s (cache %s)"
            % (len(compiled), time.time() - t0, kc.flexsn.cache_dir())
        )
        return 0

    kernels = kc.KernelSet(
        bases, tuple(kc.COPIES), load=not args.reference_only
    )
    env = (
        kc.NumpyEnv(None)
        if args.reference_only
        else kc.make_env(args.quick, "train_kernel_checks")
    )
    neurons = kc.select(kernels, labels, ("forward", "backward"))
    mode = (
        "reference-only"
        if args.reference_only
        else ("quick" if args.quick else "full")
    )
    print(
        "train_kernel_checks: %s; %s; %s mode"
        % (
            "no GPU" if args.reference_only else env.describe(),
            kernels.describe(),
            mode,
        )
    )
    sys.stdout.flush()

    c = TrainChecker(env, kernels, args, make_ad(env))
    run_groups(c, neurons, mode)
    extra = dict(
        device=None if args.reference_only else env.describe(),
        mode=mode,
        neurons=neurons,
        cache=str(kc.flexsn.cache_dir()),
        tolerances=dict(
            near=NEAR,
            max_cut=MAX_CUT,
            f32_rtol=F32_RTOL,
            f32_atol=F32_ATOL,
            grad_ulps=GRAD_ULPS,
            param_rtol=PARAM_RTOL,
        ),
    )
    return kc.summarize(
        c, args.out, extra, args.allow_skip, prog="train_kernel_checks"
    )


if __name__ == "__main__":
    sys.exit(main())
