"""Neurons written as Python step functions, imported as `flexsn.neuron` text.

A step function computes one time step of one neuron, as an eager PyTorch
loop would call it::

    import torch, flexsn
    from flexsn.fx import import_step, Trainable

    def lif(x, v, tau=2.0, v_threshold=1.0):
        h = v + (x - v) / tau
        s = flexsn.spike(h - v_threshold, surrogate=flexsn.surrogate.ATan())
        return s, h * (1.0 - s)           # outputs..., new states...

    text = import_step(lif, num_inputs=1, num_states=1)
    kernels = flexsn.compile(text)

`import_step` traces the function with torch.fx (no example values are
needed: every value is a scalar of one neuron) and translates each traced op
into `arith`, `math` and `flexsn` ops, which `_step_text` writes as IR.
An op outside the table, Python control flow on a traced value, or an op
that is not elementwise raises `StepImportError` naming the op and the line
of the step function: there is no eager fallback. See docs/PythonNeurons.md
for the op table.

Calling convention of `core(*inputs, *states, **params)`:

* the first `num_inputs` positional arguments are the inputs, the next
  `num_states` the states; their Python names name them in the neuron;
* every other argument of `core` is a parameter, passed by keyword. Its
  default (or the value in `params=`) gives its type and kind: a float or
  int is an `f32` const parameter, a bool an `i1` const parameter (use it
  through `torch.where(flag, a, b)`, never `if flag:`), `Runtime(v)` a
  runtime parameter, `Trainable(v)` or an `nn.Parameter` a trainable `f32`
  parameter; `Runtime(v, shape="per_channel")` / `"per_neuron"` (and the
  same for `Trainable`) gives the neuron one value per channel or neuron,
  which `core` still sees as one number per neuron;
* Python numbers captured from the enclosing scope are constants;
  `nn.Parameter`s captured by `core` (closure or global), or held by `core`
  when it is an `nn.Module`, become trainable parameters named after the
  variable (or attribute path); captured tensors that need no gradient are
  constants. All tensors used this way hold one element;
* `core` returns the outputs, then the new states: a tuple, or one value
  when the neuron has exactly one result.
"""

import contextlib
import dataclasses
import functools
import inspect
import linecache
import math
import numbers
import operator
import os
import re
import sys
import traceback
import types
from typing import Mapping, Optional, Sequence, Tuple

import torch
import torch.fx
from torch import nn

from . import _dialect
from . import surrogate as _surrogates
from ._step_text import BodyWriter, Unsupported, Value, neuron_text

__all__ = [
    "spike",
    "surrogate_grad",
    "import_step",
    "trace_step",
    "StepNeuron",
    "StepParam",
    "Const",
    "Runtime",
    "Trainable",
    "StepImportError",
    "UnsupportedOpError",
    "ControlFlowError",
]


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class StepImportError(ValueError):
    """A step function that cannot become a neuron. `op` names the traced op
    (or None), `filename`/`lineno`/`source` the line of the step function
    that produced it (None when unknown)."""

    def __init__(self, message, op=None, frame=None):
        self.op = op
        self.filename, self.lineno, self.function = frame or (None, None, None)
        self.source = (
            linecache.getline(self.filename, self.lineno).strip()
            if self.filename and self.lineno
            else None
        )
        where = ""
        if self.filename:
            where = "\n  at %s:%d in %s" % (
                self.filename,
                self.lineno,
                self.function,
            )
            if self.source:
                where += ": %s" % self.source
        super().__init__(message + where)


class UnsupportedOpError(StepImportError):
    """An op outside the importer's table (or not elementwise on scalars)."""


class ControlFlowError(StepImportError):
    """Python control flow (if/while/and/or/bool()/iteration) on a traced
    value: its outcome differs per neuron and time step."""


# ---------------------------------------------------------------------------
# Eager spikes
# ---------------------------------------------------------------------------


def _as_surrogate(surrogate):
    if surrogate is None:
        return _surrogates.Sigmoid()
    return _surrogates.coerce(surrogate)


# The registry's entries by mnemonic: their `derivative` is each g(x).
_SURROGATE_SPECS = {spec.mnemonic: spec for spec in _dialect.SURROGATES}


def surrogate_grad(surrogate, x):
    """g(x) of `surrogate` (docs/Semantics.md's table), elementwise, in x's
    floating dtype: the dialect registry's formula."""
    s = _as_surrogate(surrogate)
    spec = _SURROGATE_SPECS.get(s.mnemonic)
    if spec is None:
        raise ValueError("no gradient formula for surrogate %r" % s.mnemonic)
    params = s.params
    return spec.derivative(x, *(params[p.name] for p in spec.params))


class _Spike(torch.autograd.Function):
    """Heaviside forward (H(0) = 1), grad * g(x) backward."""

    @staticmethod
    def forward(ctx, x, surrogate):
        ctx.save_for_backward(x)
        ctx.surrogate = surrogate
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        g = surrogate_grad(ctx.surrogate, x.float()).to(grad.dtype)
        return grad * g, None


def spike(x, surrogate=None):
    """The spike H(x) = 1.0 where x >= 0 else 0.0, whose backward multiplies
    the incoming gradient by the surrogate's g(x) (default: sigmoid with
    alpha = 4). Eagerly an autograd function; inside a step function traced
    by `import_step`, one `flexsn.spike` op."""
    s = _as_surrogate(surrogate)
    if isinstance(x, torch.fx.Proxy):
        return x.tracer.create_proxy(
            "call_function", spike, (x,), {"surrogate": s.mlir()}
        )
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            "flexsn.spike takes a tensor, not %s" % type(x).__name__
        )
    return _Spike.apply(x, s)


# ---------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------


PARAM_SHAPES = _dialect.PARAM_SHAPES


class _Kind:
    kind = None
    __slots__ = ("value", "shape")

    def __init__(self, value, shape: str = "scalar"):
        if isinstance(value, torch.Tensor):
            value = value.item()
        if not isinstance(value, (bool, numbers.Real)):
            raise TypeError(
                "%s takes a float or bool, not %r"
                % (type(self).__name__, value)
            )
        if shape not in PARAM_SHAPES:
            raise ValueError(
                "%s: unknown shape %r (one of: %s)"
                % (type(self).__name__, shape, ", ".join(PARAM_SHAPES))
            )
        if shape != "scalar" and (
            self.kind == "const" or isinstance(value, bool)
        ):
            raise TypeError(
                "a %s parameter is a runtime or trainable float" % shape
            )
        self.value, self.shape = value, shape

    def __repr__(self):
        shape = "" if self.shape == "scalar" else ", shape=%r" % self.shape
        return "%s(%r%s)" % (type(self).__name__, self.value, shape)


class Const(_Kind):
    """A const parameter (the default for plain numbers): specialized into
    the kernel at compile time."""

    kind = "const"
    __slots__ = ()

    def __init__(self, value):
        super().__init__(value)


class Runtime(_Kind):
    """A runtime parameter: a kernel argument (an attribute of FlexSN).
    `shape="per_neuron"` or `"per_channel"` makes it one float per neuron
    or per channel (a buffer of FlexSN)."""

    kind = "runtime"
    __slots__ = ()


class Trainable(_Kind):
    """A trainable f32 parameter: a kernel argument with a gradient.
    `shape="per_neuron"` or `"per_channel"` makes it one value per neuron
    or per channel (an nn.Parameter of that shape in FlexSN)."""

    kind = "trainable"
    __slots__ = ()

    def __init__(self, value, shape: str = "scalar"):
        super().__init__(value, shape)
        if isinstance(self.value, bool):
            raise TypeError("a trainable parameter is a float, not a bool")


@dataclasses.dataclass(frozen=True)
class StepParam:
    """One neuron parameter: `type` is "f32" or "i1", `kind` "const",
    "runtime" or "trainable", `shape` "scalar", "per_neuron" or
    "per_channel"; `parameter` is the nn.Parameter it came from (a
    captured one, or one given in params=), else None."""

    name: str
    type: str
    default: object
    kind: str
    parameter: Optional[nn.Parameter] = None
    shape: str = "scalar"


@dataclasses.dataclass(frozen=True)
class StepNeuron:
    """An imported step function: the neuron text and its interface."""

    name: str
    mlir: str
    inputs: Tuple[str, ...]
    states: Tuple[str, ...]
    outputs: Tuple[str, ...]
    params: Tuple[StepParam, ...]


def _param_spec(name, value, frame=None):
    """StepParam for `value` (a number, bool, marker, Parameter, tensor)."""
    if isinstance(value, nn.Parameter):
        if value.numel() != 1:
            raise StepImportError(
                "parameter '%s' is an nn.Parameter of shape %s: parameters "
                "are scalars (one element)" % (name, tuple(value.shape)),
                frame=frame,
            )
        return StepParam(
            name, "f32", float(value.detach().reshape(())), "trainable", value
        )
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise StepImportError(
                "parameter '%s' is a tensor of shape %s: "
                "parameters are scalars" % (name, tuple(value.shape)),
                frame=frame,
            )
        value = value.item()
    marker = (
        value
        if isinstance(value, _Kind)
        else Const(value)
        if isinstance(value, (bool, numbers.Real))
        else None
    )
    if marker is None:
        raise StepImportError(
            "parameter '%s' has value %r: use a float, bool, Runtime(v) or "
            "Trainable(v)" % (name, value),
            frame=frame,
        )
    v = marker.value
    if isinstance(v, bool):
        return StepParam(name, "i1", v, marker.kind)
    v = float(v)
    if not math.isfinite(v):
        raise StepImportError(
            "parameter '%s' has non-finite default %r" % (name, v), frame=frame
        )
    return StepParam(name, "f32", v, marker.kind, shape=marker.shape)


# ---------------------------------------------------------------------------
# Tracing
# ---------------------------------------------------------------------------

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_THIS_FILE = os.path.abspath(__file__)
_GENERATED = "<flexsn.fx step>"


def _internal(filename):
    if filename.startswith("<"):  # <stdin>, <string>, notebooks: user code
        return filename == _GENERATED or filename.startswith("<frozen")
    path = os.path.abspath(filename)
    return path.startswith(_TORCH_DIR) or path == _THIS_FILE


def _user_frame(frame):
    """(file, line, function) of the innermost frame outside torch and this
    module: the step function's line that is being traced."""
    while frame is not None:
        code = frame.f_code
        if not _internal(code.co_filename):
            return (code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def _user_frame_of(exc):
    for entry in reversed(traceback.extract_tb(exc.__traceback__)):
        if not _internal(entry.filename):
            return (entry.filename, entry.lineno, entry.name)
    return None


_SURROGATE_CLASS_NAMES = frozenset(cls.__name__ for cls in _surrogates.ALL)


class _Tracer(torch.fx.Tracer):
    """Traces everything down to torch functions (no leaf modules) and
    stamps each node with the step function's line."""

    def is_leaf_module(self, m, module_qualified_name):
        return False

    def call_module(self, m, forward, args, kwargs):
        # A SpikingJelly surrogate module called on a value is a spike (its
        # forward, an autograd Function, cannot be traced).
        if (
            type(m).__name__ in _SURROGATE_CLASS_NAMES
            and len(args) == 1
            and not kwargs
            and not isinstance(m, _surrogates.Surrogate)
        ):
            return spike(args[0], surrogate=_surrogates.coerce(m))
        return super().call_module(m, forward, args, kwargs)

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta["flexsn_frame"] = _user_frame(sys._getframe(1))
        return node


#: Random-number functions: called on no traced value they draw once, at
#: import, and the draw would become a constant of the neuron (another one
#: in every process). FlexSN has no stochastic neurons yet: each is refused
#: by name while a step function is traced.
_RANDOM_FUNCTIONS = (
    "rand",
    "randn",
    "randint",
    "randperm",
    "normal",
    "bernoulli",
    "poisson",
    "multinomial",
    "rand_like",
    "randn_like",
    "randint_like",
)
_RANDOM_METHODS = (
    "normal_",
    "uniform_",
    "bernoulli_",
    "exponential_",
    "geometric_",
    "log_normal_",
    "cauchy_",
    "random_",
)


@contextlib.contextmanager
def _no_random_numbers():
    def refuse(name):
        def random_function(*args, **kwargs):
            raise UnsupportedOpError(
                "%s: a step function cannot draw random numbers (they would "
                "be drawn once, at import, and become constants); FlexSN "
                "has no stochastic neurons yet" % name,
                op=name,
                frame=_user_frame(sys._getframe(1)),
            )

        return random_function

    saved = []
    for owner, prefix, names in (
        (torch, "torch.", _RANDOM_FUNCTIONS),
        (torch.Tensor, "Tensor.", _RANDOM_METHODS),
    ):
        for name in names:
            if hasattr(owner, name):
                saved.append((owner, name, getattr(owner, name)))
                setattr(owner, name, refuse(prefix + name))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _definition_frame(core):
    fn = core.forward if isinstance(core, nn.Module) else core
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return (code.co_filename, code.co_firstlineno, code.co_name)


def _captured_parameters(fn):
    """{variable name: (where, key, Parameter)} of the nn.Parameters a plain
    function reads from its closure or its globals."""
    found = {}
    if not isinstance(fn, types.FunctionType):
        return found
    code = fn.__code__
    for index, (name, cell) in enumerate(
        zip(code.co_freevars, fn.__closure__ or ())
    ):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, nn.Parameter):
            found[name] = ("cell", index, value)
    for name in code.co_names:
        value = fn.__globals__.get(name)
        if isinstance(value, nn.Parameter) and name not in found:
            found[name] = ("global", name, value)
    return found


def _with_replacements(fn, captured, values):
    """A copy of `fn` reading `values[name]` where it read the captured
    Parameter `name` (its closure cell or global)."""
    cells = list(fn.__closure__ or ())
    globals_ = fn.__globals__
    replaced_globals = {}
    for name, (where, key, _) in captured.items():
        if where == "cell":
            cells[key] = types.CellType(values[name])
        else:
            replaced_globals[key] = values[name]
    if replaced_globals:
        globals_ = dict(globals_)
        globals_.update(replaced_globals)
    copy = types.FunctionType(
        fn.__code__,
        globals_,
        fn.__name__,
        fn.__defaults__,
        tuple(cells) or None,
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _check_identifier(name, what):
    if not _IDENTIFIER.match(name):
        raise StepImportError(
            "%s name %r is not a C identifier" % (what, name)
        )


# ---------------------------------------------------------------------------
# Translation: fx nodes -> ops of a BodyWriter (_step_text writes the IR)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _DType:
    type: str  # what `x.dtype` stands for


_DTYPES = {torch.float32: "f32", torch.bool: "i1"}


_REDUCTIONS = {
    "sum",
    "mean",
    "prod",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "norm",
    "std",
    "var",
    "logsumexp",
    "cumsum",
    "cumprod",
    "softmax",
    "log_softmax",
    "all",
    "any",
    "median",
    "mode",
    "nansum",
    "nanmean",
    "count_nonzero",
    "std_mean",
    "var_mean",
    "max",
    "min",
}
_SHAPE_OPS = {
    "getitem",
    "setitem",
    "view",
    "reshape",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "permute",
    "transpose",
    "t",
    "expand",
    "expand_as",
    "repeat",
    "cat",
    "concat",
    "stack",
    "split",
    "chunk",
    "size",
    "shape",
    "numel",
    "dim",
    "narrow",
    "select",
    "index_select",
    "gather",
    "scatter",
    "roll",
    "flip",
    "unbind",
    "tolist",
    "item",
    "masked_select",
    "nonzero",
    "T",
}
_MATRIX_OPS = {
    "matmul",
    "mm",
    "bmm",
    "mv",
    "dot",
    "linear",
    "conv1d",
    "conv2d",
    "einsum",
    "outer",
    "addmm",
    "tensordot",
    "bilinear",
}


def _op_name(node):
    target = node.target
    if node.op == "call_method":
        return "Tensor.%s" % target
    if node.op == "call_module":
        return "module %s" % target
    if node.op == "get_attr":
        return "attribute %s" % target
    if target is getattr and len(node.args) > 1:
        return "Tensor.%s" % node.args[1]
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", repr(target))
    if module in ("_operator", "operator"):
        return "operator.%s" % name
    if module.startswith("torch") or not module:
        if module.startswith("torch._C._nn"):
            module = "torch.nn.functional"
        elif module.startswith("torch._C") or not module:
            module = "torch"
        return "%s.%s" % (module, name)
    return "%s.%s" % (module, name)


def _bare_name(node):
    if node.op == "call_method":
        return node.target
    if node.target is getattr and len(node.args) > 1:
        return node.args[1]
    return getattr(node.target, "__name__", "")


def _bind(args, kwargs, names, defaults=None):
    """{name: value} of an op's arguments by `names`; unknown ones raise."""
    defaults = defaults or {}
    if len(args) > len(names):
        raise Unsupported("takes at most %d arguments here" % len(names))
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            raise Unsupported("argument '%s' is not supported" % key)
        bound[key] = value
    for name in names:
        if name not in bound:
            if name not in defaults:
                raise Unsupported("argument '%s' is missing" % name)
            bound[name] = defaults[name]
    return bound


# Op handlers: (BodyWriter, args, kwargs, hint) -> Value. Each takes the torch
# function's arguments (a method's self first).


def _arith(op, reverse=False):
    def handler(em, args, kwargs, hint):
        b = _bind(args, kwargs, ("input", "other", "alpha"), {"alpha": 1})
        x, y = b["input"], b["other"]
        _no_two_bools(x, y)
        if reverse:  # rsub(input, other, alpha) = other - alpha * input
            x, y = y, x
        if b["alpha"] != 1:
            if op not in ("addf", "subf"):
                raise Unsupported("alpha is not supported")
            y = em.binary("mulf", y, b["alpha"], hint + "_alpha")
        return em.binary(op, x, y, hint)

    return handler


def _no_two_bools(x, y):
    if all(isinstance(v, Value) and v.type == "i1" for v in (x, y)):
        raise Unsupported(
            "arithmetic on two bool values (torch keeps it "
            "bool); convert one with .float() first"
        )


def _div(em, args, kwargs, hint):
    b = _bind(
        args,
        kwargs,
        ("input", "other", "rounding_mode"),
        {"rounding_mode": None},
    )
    if b["rounding_mode"] is not None:
        raise Unsupported(
            "rounding_mode=%r is not supported" % b["rounding_mode"]
        )
    _no_two_bools(b["input"], b["other"])
    return em.binary("divf", b["input"], b["other"], hint)


def _operator_binary(op):
    def handler(em, args, kwargs, hint):
        x, y = _bind(args, kwargs, ("a", "b")).values()
        _no_two_bools(x, y)
        return em.binary(op, x, y, hint)

    return handler


def _neg(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    if isinstance(x, Value) and x.type == "i1":
        raise Unsupported("negation of a bool value")
    return em.unary("arith.negf", x, hint)


def _pos(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    return em.f32(x)


def _compare(predicate):
    def handler(em, args, kwargs, hint):
        b = _bind(args, kwargs, ("input", "other"))
        return em.cmp(predicate, b["input"], b["other"], hint)

    return handler


def _logical(op):
    def handler(em, args, kwargs, hint):
        b = _bind(args, kwargs, ("input", "other"))
        return em.logical(
            op, _truth(em, b["input"]), _truth(em, b["other"]), hint
        )

    return handler


def _truth(em, value):
    # torch.logical_* read a float as value != 0.
    if (
        isinstance(value, Value)
        and value.type == "f32"
        or (isinstance(value, numbers.Real) and not isinstance(value, bool))
    ):
        return em.cmp("une", value, 0.0, "nonzero")
    return value


def _bitwise(op):
    def handler(em, args, kwargs, hint):
        x, y = _bind(args, kwargs, ("a", "b")).values()
        return em.logical(op, x, y, hint)

    return handler


def _logical_not(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    return em.logical("xori", _truth(em, x), True, hint)


def _invert(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    return em.logical("xori", x, True, hint)


def _where(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("condition", "input", "other"))
    return em.select(b["condition"], b["input"], b["other"], hint)


def _tensor_where(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("self", "condition", "other"))
    return em.select(b["condition"], b["self"], b["other"], hint)


def _masked_fill(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("input", "mask", "value"))
    return em.select(b["mask"], b["value"], b["input"], hint)


def _math(op):
    def handler(em, args, kwargs, hint):
        (x,) = _bind(args, kwargs, ("input",)).values()
        return em.unary(op, x, hint)

    return handler


def _rsqrt(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    # No math.rsqrt derivative rule in the compiler: 1 / sqrt(x).
    root = em.unary("math.sqrt", x, hint + "_sqrt")
    return em.binary("divf", 1.0, root, hint)


def _reciprocal(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    return em.binary("divf", 1.0, x, hint)


def _square(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    return em.binary("mulf", x, x, hint)


def _sigmoid(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    x = em.f32(x)
    # e = exp(-|x|) <= 1 never overflows, in either branch or its gradient.
    ax = em.unary("math.absf", x, hint + "_abs")
    e = em.unary(
        "math.exp", em.unary("arith.negf", ax, hint + "_nabs"), hint + "_exp"
    )
    denom = em.binary("addf", 1.0, e, hint + "_den")
    positive = em.binary("divf", 1.0, denom, hint + "_pos")
    negative = em.binary("divf", e, denom, hint + "_neg")
    ge = em.cmp("oge", x, 0.0, hint + "_ge")
    return em.select(ge, positive, negative, hint)


def _relu(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("input", "inplace"), {"inplace": False})
    # 0 first: at x = 0 the tie goes to the constant, so x gets no gradient
    # (torch's relu backward is 0 there).
    return em.binary("maximumf", 0.0, b["input"], hint)


def _sign(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    pos = em.cmp("ogt", x, 0.0, hint + "_gt")
    neg = em.cmp("olt", x, 0.0, hint + "_lt")
    inner = em.select(neg, -1.0, 0.0, hint + "_n")
    return em.select(pos, 1.0, inner, hint)


def _heaviside(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("input", "values"))
    x = b["input"]
    # Non-differentiable, as in torch: comparisons carry no gradient.
    gt = em.cmp("ogt", x, 0.0, hint + "_gt")
    eq = em.cmp("oeq", x, 0.0, hint + "_eq")
    at_zero = em.select(eq, b["values"], 0.0, hint + "_z")
    return em.select(gt, 1.0, at_zero, hint)


def _clamp(em, args, kwargs, hint):
    b = _bind(
        args, kwargs, ("input", "min", "max"), {"min": None, "max": None}
    )
    lo, hi = b["min"], b["max"]
    if lo is None and hi is None:
        raise Unsupported("needs min or max")
    result = b["input"]
    # x first: at a tie x keeps the gradient, as torch's clamp does.
    if lo is not None:
        result = em.binary(
            "maximumf", result, lo, hint + ("_lo" if hi is not None else "")
        )
    if hi is not None:
        result = em.binary("minimumf", result, hi, hint)
    return result


def _clamp_one(which):
    def handler(em, args, kwargs, hint):
        b = _bind(args, kwargs, ("input", which))
        return _clamp(em, (b["input"],), {which: b[which]}, hint)

    return handler


def _extremum(op):
    def handler(em, args, kwargs, hint):
        b = _bind(args, kwargs, ("input", "other"), {"other": None})
        if not isinstance(b["other"], Value):
            raise Unsupported(
                "without a second tensor it is a "
                "reduction; the elementwise form of two "
                "tensors (torch.%s(a, b)) is supported"
                % ("maximum" if op.startswith("max") else "minimum")
            )
        return em.binary(op, b["input"], b["other"], hint)

    return handler


def _elementwise_extremum(op):
    def handler(em, args, kwargs, hint):
        b = _bind(args, kwargs, ("input", "other"))
        return em.binary(op, b["input"], b["other"], hint)

    return handler


def _pow(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("input", "exponent"))
    x, y = b["input"], b["exponent"]
    if isinstance(y, Value):
        return em.powf(x, y, hint)
    if not isinstance(y, numbers.Real):
        raise Unsupported("exponent %r is not a scalar" % (y,))
    if not isinstance(x, Value):
        raise Unsupported("needs a tensor operand")
    y = float(y)
    # torch's own special cases for a scalar exponent (same values, and the
    # same derivatives without pow's log term).
    if y == 0.0:
        return em.const(1.0)
    if y == 1.0:
        return em.f32(x)
    if y == 2.0:
        return em.binary("mulf", x, x, hint)
    if y == 3.0:
        return em.binary(
            "mulf", em.binary("mulf", x, x, hint + "_sq"), x, hint
        )
    if y == 0.5:
        return em.unary("math.sqrt", x, hint)
    if y == -0.5:
        return em.binary(
            "divf", 1.0, em.unary("math.sqrt", x, hint + "_sqrt"), hint
        )
    if y == -1.0:
        return em.binary("divf", 1.0, x, hint)
    if y == -2.0:
        return em.binary(
            "divf", 1.0, em.binary("mulf", x, x, hint + "_sq"), hint
        )
    return em.powf(x, y, hint)


def _detach(em, args, kwargs, hint):
    (x,) = _bind(args, kwargs, ("input",)).values()
    if isinstance(x, Value) and x.type == "i1":
        return x  # a bool carries no gradient anyway
    return em.unary("flexsn.detach", x, hint)


def _spike(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("input", "surrogate"))
    return em.spike(b["input"], b["surrogate"], hint)


def _convert(em, value, target, hint):
    if target == "f32":
        return em.f32(value)
    if isinstance(value, Value) and value.type == "i1":
        return value
    return em.cmp("une", value, 0.0, hint)


def _dtype_of(value):
    if isinstance(value, _DType):
        return value.type
    if isinstance(value, Value):
        return value.type
    if isinstance(value, torch.dtype):
        if value not in _DTYPES:
            raise Unsupported(
                "dtype %s: a neuron body computes in float32 "
                "(bools for conditions)" % value
            )
        return _DTYPES[value]
    raise Unsupported("argument %r is not a dtype" % (value,))


def _to(em, args, kwargs, hint):
    kwargs = {
        k: v for k, v in kwargs.items() if k not in ("non_blocking", "copy")
    }
    if len(args) > 2:
        raise Unsupported("takes one dtype (or tensor) here")
    if "dtype" in kwargs:
        if len(args) != 1 or set(kwargs) != {"dtype"}:
            raise Unsupported("takes one dtype (or tensor) here")
        target = kwargs["dtype"]
    elif len(args) == 2 and not kwargs:
        target = args[1]
    else:
        raise Unsupported("takes one dtype (or tensor) here")
    return _convert(em, args[0], _dtype_of(target), hint)


def _to_float(em, args, kwargs, hint):
    b = _bind(
        args, kwargs, ("input", "memory_format"), {"memory_format": None}
    )
    return em.f32(b["input"])


def _to_bool(em, args, kwargs, hint):
    b = _bind(
        args, kwargs, ("input", "memory_format"), {"memory_format": None}
    )
    return _convert(em, b["input"], "i1", hint)


def _type_as(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("input", "other"))
    return _convert(em, b["input"], _dtype_of(b["other"]), hint)


def _type(em, args, kwargs, hint):
    b = _bind(args, kwargs, ("input", "dtype"))
    return _convert(em, b["input"], _dtype_of(b["dtype"]), hint)


def _identity(em, args, kwargs, hint):
    b = _bind(
        args, kwargs, ("input", "memory_format"), {"memory_format": None}
    )
    return b["input"] if isinstance(b["input"], Value) else em.f32(b["input"])


def _like(fill):
    def handler(em, args, kwargs, hint):
        names = ("input", "fill_value") if fill is None else ("input",)
        kwargs = dict(kwargs)
        dtype = kwargs.pop("dtype", None)
        for k in (
            "device",
            "layout",
            "requires_grad",
            "memory_format",
            "pin_memory",
        ):
            kwargs.pop(k, None)
        b = _bind(args, kwargs, names)
        value = b.get("fill_value", fill)
        if isinstance(value, Value) or not isinstance(value, numbers.Real):
            raise Unsupported("the fill value must be a Python number")
        target = (
            _dtype_of(dtype)
            if dtype is not None
            else (
                "i1"
                if isinstance(b["input"], Value)
                and b["input"].type == "i1"
                and fill is not None
                else "f32"
            )
        )
        if target == "i1":
            return em.const(bool(value), "i1")
        return em.const(float(value))

    return handler


def _getattr(em, args, kwargs, hint):
    value, attr = args
    if attr == "dtype" and isinstance(value, Value):
        return _DType(value.type)
    if attr in _SHAPE_OPS:
        raise Unsupported(
            "no shape in a step body, which sees one " "neuron's scalars"
        )
    raise Unsupported(
        "tensor attributes other than .dtype are not " "supported"
    )


def _table():
    """(functions: {callable: handler}, methods: {name: handler})."""
    F = torch.nn.functional
    specs = [
        # name, handler, torch functions, method names
        (_arith("addf"), ["add"], ["add", "__add__", "__radd__"]),
        (_arith("subf"), ["sub", "subtract"], ["sub", "subtract", "__sub__"]),
        (_arith("subf", reverse=True), ["rsub"], ["__rsub__"]),
        (
            _arith("mulf"),
            ["mul", "multiply"],
            ["mul", "multiply", "__mul__", "__rmul__"],
        ),
        (
            _div,
            ["div", "divide", "true_divide"],
            ["div", "divide", "true_divide", "__truediv__"],
        ),
        (_neg, ["neg", "negative"], ["neg", "negative", "__neg__"]),
        (_compare("olt"), ["lt", "less"], ["lt", "less", "__lt__"]),
        (
            _compare("ole"),
            ["le", "less_equal"],
            ["le", "less_equal", "__le__"],
        ),
        (_compare("ogt"), ["gt", "greater"], ["gt", "greater", "__gt__"]),
        (
            _compare("oge"),
            ["ge", "greater_equal"],
            ["ge", "greater_equal", "__ge__"],
        ),
        (_compare("oeq"), ["eq"], ["eq", "__eq__"]),
        (_compare("une"), ["ne", "not_equal"], ["ne", "not_equal", "__ne__"]),
        (_logical("andi"), ["logical_and"], ["logical_and"]),
        (_logical("ori"), ["logical_or"], ["logical_or"]),
        (_logical("xori"), ["logical_xor"], ["logical_xor"]),
        (_logical_not, ["logical_not"], ["logical_not"]),
        (_where, ["where"], []),
        (_tensor_where, [], ["where"]),
        (_masked_fill, ["masked_fill"], ["masked_fill"]),
        (_clamp, ["clamp", "clip"], ["clamp", "clip"]),
        (_clamp_one("min"), ["clamp_min"], ["clamp_min"]),
        (_clamp_one("max"), ["clamp_max"], ["clamp_max"]),
        (_extremum("maximumf"), ["max"], ["max"]),
        (_extremum("minimumf"), ["min"], ["min"]),
        (_elementwise_extremum("maximumf"), ["maximum"], ["maximum"]),
        (_elementwise_extremum("minimumf"), ["minimum"], ["minimum"]),
        (_elementwise_extremum("maxnumf"), ["fmax"], ["fmax"]),
        (_elementwise_extremum("minnumf"), ["fmin"], ["fmin"]),
        (
            _math("math.absf"),
            ["abs", "absolute"],
            ["abs", "absolute", "__abs__"],
        ),
        (_math("math.exp"), ["exp"], ["exp"]),
        (_math("math.log"), ["log"], ["log"]),
        (_math("math.log1p"), ["log1p"], ["log1p"]),
        (_math("math.sqrt"), ["sqrt"], ["sqrt"]),
        (_rsqrt, ["rsqrt"], ["rsqrt"]),
        (_math("math.tanh"), ["tanh"], ["tanh"]),
        (_math("math.atan"), ["atan", "arctan"], ["atan", "arctan"]),
        (_math("math.erf"), ["erf"], ["erf"]),
        (_math("math.sin"), ["sin"], ["sin"]),
        (_math("math.cos"), ["cos"], ["cos"]),
        (_sigmoid, ["sigmoid"], ["sigmoid"]),
        (_reciprocal, ["reciprocal"], ["reciprocal"]),
        (_square, ["square"], ["square"]),
        (_relu, ["relu"], ["relu"]),
        (_sign, ["sign"], ["sign"]),
        (_heaviside, ["heaviside"], ["heaviside"]),
        (_pow, ["pow"], ["pow", "__pow__"]),
        (_detach, ["detach"], ["detach"]),
        (_to_float, [], ["float"]),
        (_to_bool, [], ["bool"]),
        (_to, [], ["to"]),
        (_type_as, [], ["type_as"]),
        (_type, [], ["type"]),
        (_identity, ["clone"], ["clone", "contiguous"]),
        (_like(0.0), ["zeros_like"], []),
        (_like(1.0), ["ones_like"], []),
        (_like(None), ["full_like"], []),
    ]
    functions, methods = {}, {}
    for handler, function_names, method_names in specs:
        for name in function_names:
            for namespace in (torch, torch.special):
                fn = getattr(namespace, name, None)
                if fn is not None:
                    functions[fn] = handler
        for name in method_names:
            methods[name] = handler
    aliases = {
        operator.add: _operator_binary("addf"),
        operator.sub: _operator_binary("subf"),
        operator.mul: _operator_binary("mulf"),
        operator.truediv: _operator_binary("divf"),
        operator.neg: _neg,
        operator.pos: _pos,
        operator.abs: functions[torch.abs],
        operator.pow: _pow,
        operator.lt: _compare("olt"),
        operator.le: _compare("ole"),
        operator.gt: _compare("ogt"),
        operator.ge: _compare("oge"),
        operator.eq: _compare("oeq"),
        operator.ne: _compare("une"),
        operator.and_: _bitwise("andi"),
        operator.or_: _bitwise("ori"),
        operator.xor: _bitwise("xori"),
        operator.invert: _invert,
        getattr: _getattr,
        spike: _spike,
        F.relu: _relu,
        math.exp: _math("math.exp"),
        math.log: _math("math.log"),
        math.log1p: _math("math.log1p"),
        math.sqrt: _math("math.sqrt"),
        math.tanh: _math("math.tanh"),
        math.atan: _math("math.atan"),
        math.erf: _math("math.erf"),
        math.sin: _math("math.sin"),
        math.cos: _math("math.cos"),
        math.fabs: _math("math.absf"),
        math.pow: _pow,
    }
    for name in ("sigmoid", "tanh"):
        fn = getattr(F, name, None)
        if fn is not None:
            aliases[fn] = functions[getattr(torch, name)]
    expit = getattr(torch.special, "expit", None)
    if expit is not None:
        aliases[expit] = _sigmoid
    functions.update(aliases)
    return functions, methods


_FUNCTIONS, _METHODS = _table()


def _category(node):
    name = _bare_name(node)
    if name in _REDUCTIONS:
        return (
            "is a reduction: a step body computes one neuron's scalars, "
            "it cannot combine neurons"
        )
    if name in _SHAPE_OPS or node.target is operator.getitem:
        return (
            "indexes or reshapes a tensor: a step body sees one "
            "neuron's scalars, which have no shape"
        )
    if name in _MATRIX_OPS or node.target is operator.matmul:
        return (
            "is a matrix op: a step body computes one neuron's scalars; "
            "apply weights outside the neuron"
        )
    return "is not in the importer's op table (see docs/PythonNeurons.md)"


# ---------------------------------------------------------------------------
# import_step
# ---------------------------------------------------------------------------


def trace_step(
    core,
    num_inputs: int,
    num_states: int,
    num_outputs: Optional[int] = None,
    params: Optional[Mapping[str, object]] = None,
    name: str = "neuron",
    output_names: Optional[Sequence[str]] = None,
) -> StepNeuron:
    """Like `import_step`, returning the text with the neuron's interface
    (a StepNeuron) instead of the text alone."""
    if not callable(core):
        raise TypeError("core must be a function or an nn.Module")
    for what, count in (
        ("num_inputs", num_inputs),
        ("num_states", num_states),
    ):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError("%s must be an int >= 0, got %r" % (what, count))
    if num_inputs < 1:
        raise ValueError("a neuron takes at least one input")
    if num_outputs is not None and (
        isinstance(num_outputs, bool)
        or not isinstance(num_outputs, int)
        or num_outputs < 0
    ):
        raise ValueError(
            "num_outputs must be an int >= 0 or None, got %r" % (num_outputs,)
        )
    _check_identifier(name, "neuron")
    params = dict(params or {})
    definition = _definition_frame(core)
    is_module = isinstance(core, nn.Module)
    function = core.forward if is_module else core
    # A module, or a method of one: its Parameters are found by attribute.
    owner = core if is_module else getattr(core, "__self__", None)
    if not isinstance(owner, nn.Module):
        owner = None

    # The signature: inputs, states, then parameters.
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as error:
        raise StepImportError("cannot read the signature of core: %s" % error)
    positional, keyword_names = [], []
    var_positional = var_keyword = False
    defaults = {}
    for p in signature.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            var_positional = True
        elif p.kind == p.KEYWORD_ONLY:
            keyword_names.append(p.name)
        else:
            var_keyword = True
        if p.default is not p.empty:
            defaults[p.name] = p.default
    count = num_inputs + num_states
    if len(positional) < count and not var_positional:
        raise StepImportError(
            "core takes %d positional argument(s) (%s), but num_inputs + "
            "num_states = %d"
            % (len(positional), ", ".join(positional), count),
            frame=definition,
        )
    arg_names = positional[:count]
    arg_names += ["x%d" % i for i in range(len(arg_names), num_inputs)]
    arg_names += [
        "s%d" % i for i in range(len(arg_names) - num_inputs, num_states)
    ]
    input_names = tuple(arg_names[:num_inputs])
    state_names = tuple(arg_names[num_inputs:])
    for n in arg_names:
        _check_identifier(n, "input/state")

    param_names = positional[count:] + keyword_names
    for key in params:
        if key in arg_names:
            raise StepImportError(
                "params names '%s', an input or state of " "core" % key,
                frame=definition,
            )
        if key not in param_names and not var_keyword:
            raise StepImportError(
                "params names '%s', which core does not " "take" % key,
                frame=definition,
            )
    specs = []
    for key in param_names:
        if key in params:
            specs.append(_param_spec(key, params[key], definition))
        elif key in defaults:
            try:
                specs.append(_param_spec(key, defaults[key]))
            except StepImportError as error:
                raise StepImportError(
                    "core's argument '%s' is neither an input nor a state, "
                    "and its default %r is not a parameter value (a float, "
                    "bool, Runtime(v) or Trainable(v))" % (key, defaults[key]),
                    frame=definition,
                ) from error
        else:
            raise StepImportError(
                "core's argument '%s' is neither an input nor a state, and "
                "has no value: give it a default or pass params={'%s': ...}"
                % (key, key),
                frame=definition,
            )
    specs += [
        _param_spec(key, params[key], definition)
        for key in params
        if key not in param_names
    ]
    for spec in specs:
        _check_identifier(spec.name, "parameter")

    # Parameters read from the closure or globals (functions), or held by
    # the module (modules): trainable parameters.
    taken = set(arg_names) | {s.name for s in specs}

    def unique(base):
        base = re.sub(r"[^A-Za-z0-9_]", "_", base)
        candidate, i = base, 0
        while candidate in taken:
            i += 1
            candidate = "%s_%d" % (base, i)
        taken.add(candidate)
        return candidate

    captured = {} if owner is not None else _captured_parameters(function)
    captured_specs = {}  # root attribute -> StepParam
    captured_attrs = {}  # variable -> root attribute
    # fx traces type(root).forward: a forward taking (inputs, states,
    # params) positionally, so that fx makes one placeholder per value.
    ordered = list(arg_names) + [s.name for s in specs]
    placeholders = ["a%d" % i for i in range(len(ordered))]
    source = "def forward(self, %s):\n    return _call(self, [%s])\n" % (
        ", ".join(placeholders),
        ", ".join(placeholders),
    )
    namespace = {}
    exec(compile(source, _GENERATED, "exec"), namespace)
    root = type(
        "FlexSNStep", (nn.Module,), {"forward": namespace["forward"]}
    )()
    for var, (_, _, parameter) in captured.items():
        spec = _param_spec(unique(var), parameter, definition)
        attr = "captured_" + spec.name
        root.register_parameter(attr, parameter)
        captured_specs[attr] = spec
        captured_attrs[var] = attr
    if owner is not None:
        root.core = owner
        for path, parameter in owner.named_parameters():
            spec = _param_spec(
                unique(path.replace(".", "_")), parameter, definition
            )
            captured_specs["core." + path] = spec

    n_args = count

    def call(self, values):
        args = values[:n_args]
        kwargs = {s.name: v for s, v in zip(specs, values[n_args:])}
        if is_module:
            return self.core.forward(*args, **kwargs)
        fn = function
        if captured:
            # Reading the root's attribute gives the get_attr proxy.
            fn = _with_replacements(
                function,
                captured,
                {
                    var: getattr(self, attr)
                    for var, attr in captured_attrs.items()
                },
            )
        return fn(*args, **kwargs)

    namespace["_call"] = call

    tracer = _Tracer()
    try:
        with _no_random_numbers():
            graph = tracer.trace(root)
    except StepImportError:
        raise
    except torch.fx.proxy.TraceError as error:
        raise ControlFlowError(
            "data-dependent Python control flow: a traced value is used as a "
            "Python bool or iterated (if/while/and/or/not/assert/for, "
            "bool(), builtin max/min). A neuron step computes every branch; "
            "select with torch.where(cond, a, b) instead (%s)" % error,
            op="Python control flow",
            frame=_user_frame_of(error),
        ) from error
    except Exception as error:  # noqa: BLE001 - re-raised with the line
        text = "%s: %s" % (type(error).__name__, error)
        frame = _user_frame_of(error)
        if "item assignment" in text:
            raise UnsupportedOpError(
                "operator.setitem (x[i] = ...) indexes a tensor: a step "
                "body sees one neuron's scalars (%s)" % text,
                op="operator.setitem",
                frame=frame,
            ) from error
        if "operand type for abs()" in text:
            raise UnsupportedOpError(
                "abs(): Python's abs() of a traced value is not traced by "
                "this torch version: use torch.abs(x) or x.abs()",
                op="abs()",
                frame=frame,
            ) from error
        if "Proxy" in text or "len" in text:
            raise UnsupportedOpError(
                "a traced value is used as a Python value (float(), int(), "
                "len(), a math function the tracer does not see, ...), "
                "which has no value per neuron (%s)" % text,
                op="Python value",
                frame=frame,
            ) from error
        raise StepImportError(
            "tracing core failed: %s" % text, frame=frame
        ) from error

    return _translate(
        graph,
        tracer.root,
        core,
        definition,
        name,
        input_names,
        state_names,
        specs,
        captured_specs,
        num_outputs,
        output_names,
    )


def _translate(
    graph,
    root,
    core,
    definition,
    name,
    input_names,
    state_names,
    specs,
    captured_specs,
    num_outputs,
    output_names,
):
    nodes = list(graph.nodes)
    block_args = (
        list(input_names) + list(state_names) + [s.name for s in specs]
    )
    em = BodyWriter(block_args + [s.name for s in captured_specs.values()])
    values = {}
    used_params = {}  # attr -> StepParam (captured ones that are used)
    placeholder_index = 0
    output = None
    arg_types = ["f32"] * (len(input_names) + len(state_names)) + [
        s.type for s in specs
    ]
    for node in nodes:
        frame = node.meta.get("flexsn_frame")
        # The file's base name only: the same step function gives the same
        # text (and compile cache key) in any checkout.
        em.locate(
            os.path.basename(frame[0]) if frame else None,
            frame[1] if frame else 0,
        )
        if node.op == "placeholder":
            values[node] = Value(
                block_args[placeholder_index], arg_types[placeholder_index]
            )
            placeholder_index += 1
            continue
        if node.op == "output":
            output = node
            continue
        if node.op == "get_attr":
            values[node] = _get_attr(
                em, node, root, captured_specs, used_params, frame
            )
            continue

        def lookup(a):
            if isinstance(a, torch.fx.Node):
                return values[a]
            return a

        args = torch.fx.node.map_aggregate(node.args, lookup)
        kwargs = torch.fx.node.map_aggregate(node.kwargs, lookup)
        if node.op == "call_function":
            handler = (
                _FUNCTIONS.get(node.target) if _hashable(node.target) else None
            )
        elif node.op == "call_method":
            handler = _METHODS.get(node.target)
        else:
            handler = None
        if handler is None:
            raise UnsupportedOpError(
                "%s %s" % (_op_name(node), _category(node)),
                op=_op_name(node),
                frame=frame,
            )
        try:
            # SSA names from the op's torch name, not fx's node names: the
            # text stays the same across torch versions.
            hint = str(_bare_name(node)).strip("_") or "v"
            values[node] = handler(em, tuple(args), dict(kwargs), hint)
        except Unsupported as error:
            reason = str(error)
            raise UnsupportedOpError(
                "%s: %s" % (_op_name(node), reason),
                op=_op_name(node),
                frame=frame,
            ) from None
    em.locate(None)

    # Results: outputs, then new states.
    result = output.args[0]
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    expected_states = len(state_names)
    if num_outputs is None:
        num_outputs = len(results) - expected_states
        if num_outputs < 1:
            # No output is legal (num_outputs=0) but rarely meant.
            raise StepImportError(
                "core returns %d value(s) for its %d state(s), so no output: "
                "it returns the outputs, then the new states (pass "
                "num_outputs=0 for a neuron without outputs)"
                % (len(results), expected_states),
                frame=definition,
            )
    if len(results) != num_outputs + expected_states:
        raise StepImportError(
            "core returns %d value(s), expected %d: %d output(s), then %d "
            "new state(s)"
            % (
                len(results),
                num_outputs + expected_states,
                num_outputs,
                expected_states,
            ),
            frame=definition,
        )
    if num_outputs + expected_states == 0:
        raise StepImportError(
            "a neuron needs at least one output or state", frame=definition
        )
    yielded = []
    for i, r in enumerate(results):
        if isinstance(r, torch.fx.Node):
            yielded.append(em.f32(values[r]))
        elif isinstance(r, (bool, numbers.Real)):
            yielded.append(em.f32(r))
        else:
            what = (
                "output %d" % i
                if i < num_outputs
                else "new state '%s'" % state_names[i - num_outputs]
            )
            raise StepImportError(
                "core's %s is %r, not a tensor or number" % (what, r),
                frame=definition,
            )

    taken = set(input_names) | set(state_names)
    if output_names is None:
        if num_outputs == 1:
            spiking = (
                isinstance(results[0], torch.fx.Node)
                and results[0].target is spike
            )
            output_names = ["spike" if spiking else "y"]
        else:
            output_names = ["y%d" % i for i in range(num_outputs)]
        # Keep them apart from the input and state names.
        for i, n in enumerate(output_names):
            while output_names[i] in taken:
                output_names[i] += "_out"
            taken.add(output_names[i])
    output_names = list(output_names)
    if len(output_names) != num_outputs:
        raise ValueError(
            "%d output names for %d outputs" % (len(output_names), num_outputs)
        )
    if len(set(output_names)) != len(output_names):
        raise ValueError("output names %s are not distinct" % output_names)
    for n in output_names:
        _check_identifier(n, "output")

    all_params = list(specs) + list(used_params.values())
    origin = getattr(core, "__qualname__", type(core).__qualname__)
    text = neuron_text(
        name,
        input_names,
        state_names,
        output_names,
        all_params,
        em,
        yielded,
        "Imported by flexsn.fx from %s%s."
        % (
            origin,
            " (%s:%d)" % (os.path.basename(definition[0]), definition[1])
            if definition
            else "",
        ),
    )
    return StepNeuron(
        name,
        text,
        tuple(input_names),
        tuple(state_names),
        tuple(output_names),
        tuple(all_params),
    )


def _hashable(target):
    try:
        hash(target)
        return True
    except TypeError:
        return False


def _get_attr(em, node, root, captured_specs, used_params, frame):
    target = node.target
    if target in captured_specs:
        spec = captured_specs[target]
        # Declared after the other parameters, in first-use order.
        used_params[target] = spec
        return Value(spec.name, "f32")
    value = functools.reduce(getattr, target.split("."), root)
    if isinstance(value, nn.Parameter):
        raise UnsupportedOpError(
            "nn.Parameter %s is read in a way the importer cannot follow: "
            "read it in core itself (a closure or global variable), or pass "
            "it in params=" % target,
            op="attribute " + target,
            frame=frame,
        )
    if not isinstance(value, torch.Tensor):
        raise UnsupportedOpError(
            "attribute %s is not a tensor" % target,
            op="attribute " + target,
            frame=frame,
        )
    if value.requires_grad:
        raise UnsupportedOpError(
            "a tensor that requires grad (computed from an nn.Parameter "
            "outside the traced ops, e.g. torch.sigmoid(w) evaluated in a "
            "helper) would become a constant and lose its gradient: use the "
            "nn.Parameter itself in core",
            op="tensor constant",
            frame=frame,
        )
    if value.numel() != 1:
        raise UnsupportedOpError(
            "a tensor constant of shape %s: a step body works on scalars "
            "(tensors used in core hold one element)" % (tuple(value.shape),),
            op="tensor constant",
            frame=frame,
        )
    if value.dtype == torch.bool:
        return em.const(bool(value.item()), "i1")
    if value.is_complex():
        raise UnsupportedOpError(
            "complex tensor constant", op="tensor constant", frame=frame
        )
    return em.const(float(value.item()))


def import_step(
    core,
    num_inputs: int,
    num_states: int,
    num_outputs: Optional[int] = None,
    params: Optional[Mapping[str, object]] = None,
    name: str = "neuron",
    output_names: Optional[Sequence[str]] = None,
) -> str:
    """The `flexsn.neuron` text of the step function `core`.

    `core(*inputs, *states, **params)` returns `(*outputs, *new_states)`
    (one value when that is a single result). `num_outputs` defaults to the
    number of returned values minus `num_states`. `params` maps parameter
    names to values: a float (or int) is an f32 const parameter, a bool an
    i1 const parameter, `Runtime(v)` / `Trainable(v)` (or an nn.Parameter)
    a runtime / trainable one; arguments of `core` not named in `params`
    take their defaults the same way. `output_names` defaults to "spike"
    for a single flexsn.spike output, "y" for another single output, else
    "y0", "y1", ... The text can be given to `flexsn.compile`.

    Raises StepImportError (UnsupportedOpError for an op outside the table,
    ControlFlowError for Python control flow on traced values) naming the
    op and the line of `core`.
    """
    return trace_step(
        core, num_inputs, num_states, num_outputs, params, name, output_names
    ).mlir
