"""A neuron's time loop in PyTorch operations, for torch.compile.

Eagerly a FlexSN neuron runs its compiled kernels. Under torch.compile
those are one opaque op to Inductor: the batch norm before a neuron
writes its output, the kernel reads it, and nothing fuses across. So
there the neuron runs its step as PyTorch operations instead, generated
from its configured MLIR by `flexsn-translate --flexsn-to-torch` when it
was compiled (the cache entry's torch_step.py): Inductor then fuses the
step, unrolled over T, with its neighbours, as it fuses hand-written
neurons. The step computes in float32 (inputs and states are widened,
results narrowed to the storage type, as the kernels load and store);
its spike is a Heaviside with the surrogate's derivative as its gradient
(the formulas of flexsn._dialect, those of the kernels).

`F` gives the generated code what is not a Python operator; a value may
be a tensor or a Python number (a parameter), and a condition a tensor
or a bool (a flag parameter).
"""

import math
import re
import types
from typing import Callable, Dict, Optional

import torch

from .. import _dialect
from .._compile_tool import TORCH_STEP


def _tensor_like(value, like):
    return (
        value
        if isinstance(value, torch.Tensor)
        else torch.as_tensor(value, dtype=torch.float32, device=like.device)
    )


def _either(a, b):
    return a if isinstance(a, torch.Tensor) else b


def select(condition, a, b):
    if isinstance(condition, bool):
        return a if condition else b
    like = _either(a, _either(b, condition))
    return torch.where(condition, _tensor_like(a, like), _tensor_like(b, like))


def _nan(x):
    return torch.isnan(x) if isinstance(x, torch.Tensor) else (x != x)


_ORDERED = {
    "eq": lambda a, b: a == b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "ne": lambda a, b: a != b,
}


def cmpf(predicate: str, a, b):
    """arith.cmpf: ordered predicates (o...) are false where an operand is
    NaN, unordered ones (u...) true."""
    if predicate in ("false", "true"):
        return predicate == "true"
    unordered = _nan(a) | _nan(b)
    if predicate == "ord":
        return (
            ~unordered
            if isinstance(unordered, torch.Tensor)
            else not unordered
        )
    if predicate == "uno":
        return unordered
    result = _ORDERED[predicate[1:]](a, b)
    if predicate[0] == "o":
        if predicate == "one":  # != is true for NaN: exclude it
            return (
                result & ~unordered
                if isinstance(result, torch.Tensor)
                else result and not unordered
            )
        return result
    return (
        result | unordered
        if isinstance(result, torch.Tensor)
        else result or unordered
    )


def _unary(tensor_function, scalar_function):
    def apply(x):
        return (
            tensor_function(x)
            if isinstance(x, torch.Tensor)
            else scalar_function(x)
        )

    return apply


class _Spike(torch.autograd.Function):
    """H(x) = (x >= 0), with gradient g(x) · incoming gradient."""

    @staticmethod
    def forward(ctx, x, mnemonic, params):
        ctx.save_for_backward(x)
        ctx.mnemonic, ctx.params = mnemonic, params
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        derivative = _SURROGATES[ctx.mnemonic].derivative
        return grad * derivative(x, *ctx.params), None, None


_SURROGATES = {s.mnemonic: s for s in _dialect.SURROGATES}
_ATTRIBUTE = re.compile(r"#flexsn\.(\w+)(?:<(.*)>)?$")
_parsed: Dict[str, tuple] = {}


def _surrogate(text: str):
    """(mnemonic, parameter values in the attribute's order) of a
    surrogate attribute's text, defaults filled in."""
    found = _parsed.get(text)
    if found is None:
        match = _ATTRIBUTE.match(text.strip())
        if match is None or match.group(1) not in _SURROGATES:
            raise ValueError(f"not a FlexSN surrogate attribute: {text!r}")
        given = {}
        for item in filter(None, (match.group(2) or "").split(",")):
            name, value = (part.strip() for part in item.split("="))
            given[name] = float(value.split(":")[0])
        spec = _SURROGATES[match.group(1)]
        found = _parsed[text] = (
            spec.mnemonic,
            tuple(given.get(p.name, p.default) for p in spec.params),
        )
    return found


def spike(x, surrogate: str):
    mnemonic, params = _surrogate(surrogate)
    return _Spike.apply(x, mnemonic, params)


def _tofloat(x):
    return x.float() if isinstance(x, torch.Tensor) else float(x)


F = types.SimpleNamespace(
    select=select,
    cmpf=cmpf,
    spike=spike,
    detach=_unary(torch.Tensor.detach, lambda x: x),
    remf=lambda a, b: torch.fmod(a, b)
    if isinstance(_either(a, b), torch.Tensor)
    else math.fmod(a, b),
    maximumf=lambda a, b: torch.maximum(*_both(a, b)),
    minimumf=lambda a, b: torch.minimum(*_both(a, b)),
    maxnumf=lambda a, b: torch.fmax(*_both(a, b)),
    minnumf=lambda a, b: torch.fmin(*_both(a, b)),
    andi=lambda a, b: a & b,
    ori=lambda a, b: a | b,
    xori=lambda a, b: a ^ b,
    tofloat=_tofloat,
    absf=_unary(torch.abs, abs),
    exp=_unary(torch.exp, math.exp),
    exp2=_unary(torch.exp2, lambda x: 2.0**x),
    expm1=_unary(torch.expm1, math.expm1),
    log=_unary(torch.log, math.log),
    log1p=_unary(torch.log1p, math.log1p),
    log2=_unary(torch.log2, math.log2),
    tanh=_unary(torch.tanh, math.tanh),
    sqrt=_unary(torch.sqrt, math.sqrt),
    rsqrt=_unary(torch.rsqrt, lambda x: 1.0 / math.sqrt(x)),
    sin=_unary(torch.sin, math.sin),
    cos=_unary(torch.cos, math.cos),
    atan=_unary(torch.atan, math.atan),
    erf=_unary(torch.erf, math.erf),
    floor=_unary(torch.floor, math.floor),
    ceil=_unary(torch.ceil, math.ceil),
    atan2=lambda a, b: torch.atan2(*_both(a, b)),
    powf=lambda a, b: torch.pow(a, b),
    copysign=lambda a, b: torch.copysign(*_both(a, b)),
    fma=lambda a, b, c: a * b + c,
)


def _both(a, b):
    like = _either(a, b)
    return _tensor_like(a, like), _tensor_like(b, like)


_loaded: Dict[str, Optional[Callable]] = {}


def load(compiled) -> Optional[Callable]:
    """The step function of `compiled`'s neuron from its cache entry, or
    None where it has none (an op without a PyTorch form, or an entry
    compiled before there were any)."""
    path = compiled.directory / TORCH_STEP
    key = str(path)
    if key not in _loaded:
        step = None
        if path.is_file():
            namespace = {}
            exec(compile(path.read_text(), key, "exec"), namespace)
            step = namespace["NEURONS"].get(compiled.name)
        _loaded[key] = step
    return _loaded[key]


def run(step: Callable, inputs, inits, params: dict, store_state_seqs: bool):
    """(outputs, states) of the neuron over `inputs` ([T, N...] each, T >
    0) from `inits` (None: zeros), as `scan` returns them: state sequences
    with `store_state_seqs`, else final states."""
    x0 = inputs[0]
    dtype = x0.dtype
    states = [
        torch.zeros(x0.shape[1:], dtype=torch.float32, device=x0.device)
        if s is None
        else s.float()
        for s in inits
    ]
    outputs, sequences = [], []
    for t in range(x0.shape[0]):
        outs, states = step(F, [x[t].float() for x in inputs], states, params)
        outputs.append(
            [_tensor_like(o, x0).expand(x0.shape[1:]).to(dtype) for o in outs]
        )
        if store_state_seqs:
            sequences.append([s.to(dtype) for s in states])
    outputs = [torch.stack(list(seq)) for seq in zip(*outputs)]
    if store_state_seqs:
        return outputs, [torch.stack(list(seq)) for seq in zip(*sequences)]
    return outputs, [s.to(dtype) for s in states]
