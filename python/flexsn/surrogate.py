"""Surrogate gradients for FlexSN spikes, named as SpikingJelly names them.

A spike's forward pass is the Heaviside step H(x) = 1 if x >= 0 else 0; its
backward pass multiplies the incoming gradient by the surrogate's g(x). The
classes here only *describe* a surrogate: they take SpikingJelly's
constructor arguments, check them the way the dialect's attribute verifiers
do (so a bad value fails in Python, with a Python traceback, rather than in
the compiler), and print the ``#flexsn.<mnemonic><...>`` attribute that a
neuron's ``flexsn.spike`` carries. The formulas themselves are compiled from
the attribute; none are evaluated here.

    >>> from flexsn import surrogate
    >>> surrogate.PiecewiseLeakyReLU().mlir()
    '#flexsn.piecewise_leaky_relu<w=1.0,c=0.01>'
    >>> surrogate.by_name("atan", alpha=3.0)
    ATan(alpha=3.0)
"""

import collections
import math
import numbers
import re

__all__ = [
    "Surrogate", "Sigmoid", "ATan", "PiecewiseQuadratic", "PiecewiseExp",
    "SoftSign", "SuperSpike", "Erf", "NonzeroSignLogAbs", "PiecewiseLeakyReLU",
    "SquarewaveFourierSeries", "S2NN", "QPseudoSpike", "LeakyKReLU",
    "FakeNumericalGradient", "LogTailedReLU", "Rect", "DeterministicPass",
    "ALL", "by_name", "coerce",
]

# Parameter constraints, as the attribute verifiers state them. Every real
# parameter must be finite; some must also be positive, or greater than one.
_FINITE = "finite"
_POSITIVE = "> 0"
_GREATER_THAN_ONE = "> 1"
# The integer `n` of the Fourier series: beyond 64 terms the unrolled series
# stops being a sensible kernel, so the verifier caps it.
_FOURIER_TERMS = "fourier_terms"
_MAX_FOURIER_TERMS = 64


def _format_float(value):
    """Shortest round-trip text of a float, as MLIR's float literal needs it.

    Python's repr already gives the shortest text that reads back to the same
    double; MLIR's grammar additionally wants a '.', so "1e-05" becomes
    "1.0e-05" (the spelling the dialect's own printer uses).
    """
    if not math.isfinite(value):
        return repr(value)  # 'inf', '-inf', 'nan': only in error messages
    text = repr(value)
    if "." not in text:
        mantissa, e, exponent = text.partition("e")
        text = mantissa + ".0" + e + exponent
    return text


def _check_real(mnemonic, name, value, constraint):
    """Returns `value` as a float, or raises as the attribute verifier does."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("surrogate '%s' needs %s to be a real number, got %r"
                        % (mnemonic, name, value))
    try:
        value = float(value)
    except OverflowError:  # an int too large for a double
        value = math.inf if value > 0 else -math.inf
    if constraint == _POSITIVE:
        ok, need = math.isfinite(value) and value > 0, "%s > 0" % name
    elif constraint == _GREATER_THAN_ONE:
        ok, need = math.isfinite(value) and value > 1, "%s > 1" % name
    else:
        ok, need = math.isfinite(value), "%s to be a finite value" % name
    if not ok:
        raise ValueError("surrogate '%s' needs %s, got %s"
                         % (mnemonic, need, _format_float(value)))
    return value


def _check_fourier_terms(mnemonic, name, value):
    """Returns `value` as an int in [1, 64], or raises."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("surrogate '%s' needs %s to be an int, got %r"
                        % (mnemonic, name, value))
    value = int(value)
    if not 1 <= value <= _MAX_FOURIER_TERMS:
        raise ValueError("surrogate '%s' needs 1 <= %s <= %d, got %d"
                         % (mnemonic, name, _MAX_FOURIER_TERMS, value))
    return value


class Surrogate:
    """A surrogate gradient: an MLIR mnemonic and checked parameter values.

    Subclasses set `mnemonic` (the attribute's, such as ``"rect"``) and
    `_spec`, the parameters in the attribute's order as (name,
    constraint) pairs; their constructors take SpikingJelly's arguments.
    Instances are immutable, hashable, and equal when they denote the same
    attribute (same mnemonic, bit-identical parameter values).
    """

    mnemonic = None
    _spec = ()

    __slots__ = ("_values",)

    def __init__(self, spiking=True, **values):
        if self.mnemonic is None:
            raise TypeError("Surrogate is abstract; use one of surrogate.ALL")
        if not spiking:
            raise ValueError(
                "%s(spiking=False) is not supported: FlexSN compiles only the "
                "spiking form (Heaviside forward, surrogate backward)"
                % type(self).__name__)
        if set(values) != {name for name, _ in self._spec}:
            raise TypeError("%s takes parameters %s, got %s"
                            % (type(self).__name__,
                               [name for name, _ in self._spec],
                               sorted(values)))
        checked = []
        for name, constraint in self._spec:
            if constraint == _FOURIER_TERMS:
                value = _check_fourier_terms(self.mnemonic, name, values[name])
            else:
                value = _check_real(self.mnemonic, name, values[name],
                                    constraint)
            checked.append(value)
        object.__setattr__(self, "_values", tuple(checked))

    @property
    def params(self):
        """The parameters, by their MLIR names, in the attribute's order."""
        return collections.OrderedDict(
            (name, value) for (name, _), value in zip(self._spec,
                                                        self._values))

    def __getattr__(self, name):
        # Parameters read as attributes too: Sigmoid().alpha == 4.0.
        if name != "_values":
            for (param, _), value in zip(self._spec, self._values):
                if param == name:
                    return value
        raise AttributeError("%r object has no attribute %r"
                             % (type(self).__name__, name))

    def __setattr__(self, name, value):
        raise AttributeError("surrogates are immutable; build a new %s"
                             % type(self).__name__)

    def mlir(self):
        """The attribute text: every parameter spelled out, no spaces, reals
        in shortest round-trip form with a '.' (``1.0e-05``; MLIR reads them
        back bit for bit), integers as integers. A surrogate without
        parameters prints no ``<>``."""
        if not self._spec:
            return "#flexsn." + self.mnemonic
        fields = []
        for (name, _), value in zip(self._spec, self._values):
            text = str(value) if isinstance(value, int) else \
                _format_float(value)
            fields.append("%s=%s" % (name, text))
        return "#flexsn.%s<%s>" % (self.mnemonic, ",".join(fields))

    def _key(self):
        # The attribute text distinguishes exactly what MLIR's bitwise
        # comparison does (e.g. c = 0.0 and c = -0.0), unlike float ==.
        return self.mlir()

    def __eq__(self, other):
        if not isinstance(other, Surrogate):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join(
            "%s=%r" % item for item in self.params.items()))

    def __reduce__(self):
        # Pickle through the constructor (slots and the immutability guard
        # defeat the default protocol).
        return (_rebuild, (self.mnemonic, tuple(self.params.items())))


def _rebuild(mnemonic, items):
    return by_name(mnemonic, **dict(items))


class Sigmoid(Surrogate):
    """g(x) = a·σ(ax)·(1−σ(ax)); alpha > 0."""

    mnemonic = "sigmoid"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=4.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class ATan(Surrogate):
    """g(x) = (a/2) / (1 + (π/2·a·x)²); alpha > 0."""

    mnemonic = "atan"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=2.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class PiecewiseQuadratic(Surrogate):
    """g(x) = max(0, a − a²·|x|); alpha > 0."""

    mnemonic = "piecewise_quadratic"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=1.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class PiecewiseExp(Surrogate):
    """g(x) = (a/2)·exp(−a·|x|); alpha > 0."""

    mnemonic = "piecewise_exp"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=1.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class SoftSign(Surrogate):
    """g(x) = 1 / (2a·(1/a + |x|)²); alpha > 0."""

    mnemonic = "soft_sign"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=2.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class SuperSpike(Surrogate):
    """g(x) = a / (|x| + 1)²; alpha > 0."""

    mnemonic = "super_spike"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=1.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class Erf(Surrogate):
    """g(x) = (a/√π)·exp(−(ax)²); alpha > 0."""

    mnemonic = "erf"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=2.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class NonzeroSignLogAbs(Surrogate):
    """g(x) = 1 / (1/a + |x|); alpha > 0."""

    mnemonic = "nonzero_sign_log_abs"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=1.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class PiecewiseLeakyReLU(Surrogate):
    """g(x) = 1/(2w) if |x| < w else c; w > 0, c finite."""

    mnemonic = "piecewise_leaky_relu"
    _spec = (("w", _POSITIVE), ("c", _FINITE))
    __slots__ = ()

    def __init__(self, w=1.0, c=0.01, spiking=True):
        super().__init__(spiking, w=w, c=c)


class SquarewaveFourierSeries(Surrogate):
    """g(x) = (4/T)·Σ_{i=1}^{n−1} cos((2i−1)·(2π/T)·x);
    n an int with 1 <= n <= 64, T_period > 0."""

    mnemonic = "squarewave_fourier_series"
    _spec = (("n", _FOURIER_TERMS), ("T_period", _POSITIVE))
    __slots__ = ()

    def __init__(self, n=2, T_period=8, spiking=True):
        super().__init__(spiking, n=n, T_period=T_period)


class S2NN(Surrogate):
    """g(x) = a·σ(ax)(1−σ(ax)) if x < 0 else β/(x+1); alpha > 0, beta > 0."""

    mnemonic = "s2nn"
    _spec = (("alpha", _POSITIVE), ("beta", _POSITIVE))
    __slots__ = ()

    def __init__(self, alpha=4.0, beta=1.0, spiking=True):
        super().__init__(spiking, alpha=alpha, beta=beta)


class QPseudoSpike(Surrogate):
    """g(x) = (1 + 2·|x|/(a−1))^(−a); alpha > 1."""

    mnemonic = "q_pseudo_spike"
    _spec = (("alpha", _GREATER_THAN_ONE),)
    __slots__ = ()

    def __init__(self, alpha=2.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class LeakyKReLU(Surrogate):
    """g(x) = k if x >= 0 else leak; leak and k finite.

    The argument order is SpikingJelly 2.0's, ``(leak, k, spiking)``
    (releases before it put ``spiking`` first).
    """

    mnemonic = "leaky_k_relu"
    _spec = (("leak", _FINITE), ("k", _FINITE))
    __slots__ = ()

    def __init__(self, leak=0.0, k=1.0, spiking=True):
        super().__init__(spiking, leak=leak, k=k)


class FakeNumericalGradient(Surrogate):
    """g(x) = min((2H(x)−1)/x, a), and a at x = 0; alpha > 0.

    SpikingJelly's constructor has no ``spiking`` argument (the surrogate
    only exists in spiking form); it is accepted here, by keyword, for
    uniformity.
    """

    mnemonic = "fake_numerical_gradient"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=0.3, spiking=True):
        super().__init__(spiking, alpha=alpha)


class LogTailedReLU(Surrogate):
    """g(x) = a if x <= 0; 1 if 0 < x <= 1; 1/x if x > 1; alpha finite."""

    mnemonic = "log_tailed_relu"
    _spec = (("alpha", _FINITE),)
    __slots__ = ()

    def __init__(self, alpha=0.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class Rect(Surrogate):
    """g(x) = a if |x| < 0.5/a else 0; alpha > 0."""

    mnemonic = "rect"
    _spec = (("alpha", _POSITIVE),)
    __slots__ = ()

    def __init__(self, alpha=1.0, spiking=True):
        super().__init__(spiking, alpha=alpha)


class DeterministicPass(Surrogate):
    """g(x) = 1: the straight-through estimator, ``#flexsn.straight_through``.
    """

    mnemonic = "straight_through"
    _spec = ()
    __slots__ = ()

    def __init__(self, spiking=True):
        super().__init__(spiking)


# Every surrogate, in the order of the dialect's documentation table.
ALL = (
    Sigmoid, ATan, PiecewiseQuadratic, PiecewiseExp, SoftSign, SuperSpike,
    Erf, NonzeroSignLogAbs, PiecewiseLeakyReLU, SquarewaveFourierSeries, S2NN,
    QPseudoSpike, LeakyKReLU, FakeNumericalGradient, LogTailedReLU, Rect,
    DeterministicPass,
)

# Lookup by MLIR mnemonic or by class name; DeterministicPass also answers to
# SpikingJelly's function name and to the attribute's C++ class name.
_BY_NAME = {}
for _cls in ALL:
    _BY_NAME[_cls.mnemonic] = _cls
    _BY_NAME[_cls.__name__] = _cls
_BY_CLASS_NAME = {cls.__name__: cls for cls in ALL}
_BY_NAME["deterministic_pass"] = DeterministicPass
_BY_NAME["StraightThrough"] = DeterministicPass
del _cls


def by_name(name, **params):
    """The surrogate called `name` (an MLIR mnemonic such as
    ``"piecewise_leaky_relu"`` or a class name such as
    ``"PiecewiseLeakyReLU"``), built with `params` (defaults for the rest)."""
    try:
        cls = _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError("unknown surrogate %r; known: %s" % (
            name, ", ".join(cls.mnemonic for cls in ALL))) from None
    return cls(**params)


def coerce(surrogate):
    """`surrogate` as a flexsn surrogate: a flexsn.surrogate object as is, a
    surrogate class instantiated with its defaults, a name through
    `by_name`, attribute text as `mlir()` prints it
    (``#flexsn.atan<alpha=3.0>``), or a SpikingJelly surrogate object
    (`spikingjelly.activation_based.surrogate.ATan(alpha=2.0)`) by duck
    typing: its class name picks the surrogate and its attributes of the same names give the
    parameters (SpikingJelly need not be importable). A SpikingJelly
    surrogate with `spiking=False` (a smooth forward) is refused: FlexSN
    compiles the spiking form only."""
    if isinstance(surrogate, Surrogate):
        return surrogate
    if isinstance(surrogate, type) and issubclass(surrogate, Surrogate):
        return surrogate()
    if isinstance(surrogate, str):
        return (_parse_attribute(surrogate) if surrogate.startswith("#")
                else by_name(surrogate))
    cls = _BY_CLASS_NAME.get(type(surrogate).__name__)
    if cls is None:
        raise TypeError(
            "a surrogate is a flexsn.surrogate object (e.g. flexsn.surrogate."
            "ATan(alpha=2.0)), a SpikingJelly surrogate object of the same "
            "name, or a name; got %r (known: %s)" % (
                surrogate, ", ".join(c.__name__ for c in ALL)))
    values = {}
    for name, _ in cls._spec:
        if not hasattr(surrogate, name):
            raise TypeError("%r looks like SpikingJelly's %s but has no "
                            "attribute %r" % (surrogate, cls.__name__, name))
        value = getattr(surrogate, name)
        if hasattr(value, "item") and getattr(value, "numel",
                                              lambda: 1)() == 1:
            value = value.item()  # a one-element tensor parameter
        values[name] = value
    return cls(spiking=bool(getattr(surrogate, "spiking", True)), **values)


def _parse_attribute(text):
    """The surrogate an attribute's text denotes (``#flexsn.atan<alpha=3.0>``,
    spaces allowed as MLIR prints them)."""
    match = re.fullmatch(r"#flexsn\.(\w+)\s*(?:<(.*)>)?", text.strip())
    if not match:
        raise ValueError("%r is not a surrogate attribute such as "
                         "'#flexsn.atan<alpha=2.0>'" % (text,))
    params = {}
    for field in filter(None, (f.strip() for f in
                               (match.group(2) or "").split(","))):
        name, _, value = (part.strip() for part in field.partition("="))
        try:
            params[name] = int(value) if re.fullmatch(r"-?\d+", value) \
                else float(value)
        except ValueError:
            raise ValueError("%r: %r is not a number"
                             % (text, value)) from None
    return by_name(match.group(1), **params)
