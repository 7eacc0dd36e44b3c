"""The numerics oracle: the shipped neurons' equations, parameter defaults
and test drives, written once, from docs/Semantics.md (not from the bodies
of lib/Neurons, and not from the flexsn package), for every numerics test:

* test/Integration/CPU/reference.py: NumPy float32 references (lit);
* python/tests/reference.py: eager PyTorch references with autograd;
* python/tests/kernel_checks.py, train_kernel_checks.py: the kernels'
  checks on NumPy or torch (the GPU machine).

One step of every neuron:

    h  = charge(x, states)                     (neuron specific)
    s  = H(h - v_threshold),  H(z) = 1 if z >= 0 else 0
    sd = detach(s) if detach_reset else s      (forward: sd == s)
    hard reset: v' = sd v_reset + (1 - sd) h
    soft reset: v' = h - sd v_threshold

and for Izhikevich w' = w + (a (h - v_rest) - w) / tau_w + b s (the spike
itself, never the detached one); for CUBA-LIF the synaptic current
c' = c c_decay + x is part of the charge.

The step runs on whatever `ops` the caller gives, so the same lines serve
NumPy arrays, torch tensors and the checks' own tape:

    ops.scalar(value)  a constant of the computation's dtype
    ops.exp(a)
    ops.sigmoid(w)     1 / (1 + exp(-w))
    ops.spike(z)       H(z) (with the caller's surrogate backward)
    ops.detach(s)      s without a gradient

Besides those, the formulas use + - * / alone, associated as the neuron
files associate them, so that a float32 run compares closely with the
kernels. This file imports nothing.
"""

# Parameter defaults (i1 flags as bool).
DEFAULTS = {
    "if": dict(
        v_threshold=1.0, v_reset=0.0, soft_reset=False, detach_reset=False
    ),
    "lif": dict(
        tau=2.0,
        v_threshold=1.0,
        v_reset=0.0,
        soft_reset=False,
        detach_reset=False,
        decay_input=True,
    ),
    # PLIF: 1/tau = sigmoid(w), w0 = -ln(init_tau - 1) = 0 for init_tau = 2.
    "plif": dict(
        w=0.0,
        v_threshold=1.0,
        v_reset=0.0,
        soft_reset=False,
        detach_reset=False,
        decay_input=True,
    ),
    "qif": dict(
        tau=2.0,
        v_c=0.8,
        a0=1.0,
        v_rest=0.0,
        v_threshold=1.0,
        v_reset=-0.1,
        soft_reset=False,
        detach_reset=False,
    ),
    "eif": dict(
        tau=2.0,
        delta_T=1.0,
        theta_rh=0.8,
        v_rest=0.0,
        v_threshold=1.0,
        v_reset=-0.1,
        soft_reset=False,
        detach_reset=False,
    ),
    "izhikevich": dict(
        tau=2.0,
        v_c=0.8,
        a0=1.0,
        v_rest=-0.1,
        tau_w=2.0,
        a=0.0,
        b=0.0,
        v_threshold=1.0,
        v_reset=0.0,
        soft_reset=False,
        detach_reset=False,
    ),
    "cuba_lif": dict(
        c_decay=0.5,
        v_decay=0.75,
        v_threshold=0.5,
        v_reset=0.0,
        soft_reset=False,
        detach_reset=False,
    ),
}

# State names in declaration order; every neuron has one input and one
# output (the spike).
STATES = {
    "if": ["v"],
    "lif": ["v"],
    "plif": ["v"],
    "qif": ["v"],
    "eif": ["v"],
    "izhikevich": ["v", "w"],
    "cuba_lif": ["c", "v"],
}

# The i1 parameters.
FLAGS = ("soft_reset", "detach_reset", "decay_input")

# Test inputs: x ~ normal(mean, std) per neuron, chosen so that a good
# fraction of the neurons spike and no state runs away for the defaults
# and the tests' custom parameters; initial states ~ uniform(low, high), by
# state name.
DRIVE = {
    "if": (0.6, 0.8),
    "lif": (0.8, 0.9),
    "plif": (0.8, 0.9),
    "qif": (0.5, 0.6),
    "eif": (0.6, 0.8),
    "izhikevich": (0.6, 0.6),
    "cuba_lif": (0.3, 0.6),
}
INIT = {"v": (-0.2, 0.9), "w": (-0.2, 0.3), "c": (-0.3, 0.5)}


def flags_of(neuron):
    """The i1 parameters of `neuron`, in a fixed order."""
    return [f for f in FLAGS if f in DEFAULTS[neuron]]


def charge(ops, neuron, p, x, st):
    """(h, the states other than v and w the step updates) of one step;
    `p` the parameters by name (flags as bools), `st` the states by
    name."""
    if neuron == "if":
        return st["v"] + x, {}
    if neuron in ("lif", "plif"):
        v = st["v"]
        # V_r = v_reset for a hard reset, 0 for a soft one.
        v_r = ops.scalar(0.0) if p["soft_reset"] else p["v_reset"]
        if neuron == "lif":
            if p["decay_input"]:
                return v + (x - (v - v_r)) / p["tau"], {}
            return v - (v - v_r) / p["tau"] + x, {}
        k = ops.sigmoid(p["w"])  # 1 / tau
        if p["decay_input"]:
            return v + (x - (v - v_r)) * k, {}
        return v - (v - v_r) * k + x, {}
    if neuron == "qif":
        v = st["v"]
        return (
            v + (x + p["a0"] * (v - p["v_rest"]) * (v - p["v_c"])) / p["tau"],
            {},
        )
    if neuron == "eif":
        v = st["v"]
        dT = p["delta_T"]
        spike_current = dT * ops.exp((v - p["theta_rh"]) / dT)
        return v + (x + (p["v_rest"] - v) + spike_current) / p["tau"], {}
    if neuron == "izhikevich":
        v, w = st["v"], st["w"]
        return (
            v
            + (x + p["a0"] * (v - p["v_rest"]) * (v - p["v_c"]) - w)
            / p["tau"],
            {},
        )
    if neuron == "cuba_lif":
        c_next = st["c"] * p["c_decay"] + x
        return st["v"] * p["v_decay"] + c_next, {"c": c_next}
    raise KeyError("no docs/Semantics.md step for neuron %r" % neuron)


def fire_and_reset(neuron, p, st, updated, h, s, s_d):
    """The new states by name after a step whose charge gave `h` (and the
    `updated` states), spike `s` and reset spike `s_d`."""
    new = dict(st)
    new.update(updated)
    if p["soft_reset"]:
        new["v"] = h - s_d * p["v_threshold"]
    else:
        new["v"] = s_d * p["v_reset"] + (1.0 - s_d) * h
    if neuron == "izhikevich":
        w = st["w"]
        new["w"] = (
            w + (p["a"] * (h - p["v_rest"]) - w) / p["tau_w"] + p["b"] * s
        )
    return new


def step(ops, neuron, p, x, st):
    """One time step: (spike, the new states by name, h - v_threshold)."""
    h, updated = charge(ops, neuron, p, x, st)
    over = h - p["v_threshold"]
    s = ops.spike(over)
    s_d = ops.detach(s) if p["detach_reset"] else s
    return s, fire_and_reset(neuron, p, st, updated, h, s, s_d), over
