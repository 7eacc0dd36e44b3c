"""Surrogate gradients for FlexSN spikes, named as SpikingJelly names them.

A spike's forward pass is the Heaviside step H(x) = 1 if x >= 0 else 0; its
backward pass multiplies the incoming gradient by the surrogate's g(x). The
classes here only *describe* a surrogate: they take SpikingJelly's
constructor arguments, check them the way the dialect's attribute verifiers
do (so a bad value fails in Python, with a Python traceback, rather than in
the compiler), and print the ``#flexsn.<mnemonic><...>`` attribute that a
neuron's ``flexsn.spike`` carries. The formulas themselves are compiled from
the attribute; none are evaluated here.

Every class is made from the dialect's registry, `flexsn._dialect.SURROGATES`
(generated from the ODS): its name, mnemonic, parameters (names, order,
defaults, ranges) and documentation are the ones the compiler declares, so
nothing here restates them.

    >>> from flexsn import surrogate
    >>> surrogate.PiecewiseLeakyReLU().mlir()
    '#flexsn.piecewise_leaky_relu<w=1.0,c=0.01>'
    >>> surrogate.by_name("atan", alpha=3.0)
    ATan(alpha=3.0)
"""

import collections
import inspect
import keyword
import math
import numbers
import re


def _load_dialect():
    """flexsn._dialect; also when this file is loaded on its own, outside
    the package (it needs neither torch nor the rest of flexsn)."""
    try:
        from . import _dialect

        return _dialect
    except ImportError:
        if __package__:
            raise
    import importlib.util
    import os

    path = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "_dialect.py"
    )
    spec = importlib.util.spec_from_file_location("_flexsn_dialect", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_dialect = _load_dialect()


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


# The ranges of a real parameter, as the attribute verifiers state them:
# range -> (test, what a failure says is needed, how the docs write it).
# Every real parameter must be finite; some must also be positive, or
# greater than one.
_REAL_RANGES = {
    "finite": (math.isfinite, "%s to be a finite value", "%s finite"),
    "positive": (lambda v: math.isfinite(v) and v > 0, "%s > 0", "%s > 0"),
    "greater_than_one": (
        lambda v: math.isfinite(v) and v > 1,
        "%s > 1",
        "%s > 1",
    ),
}


def _check_real(mnemonic, name, value, range_):
    """Returns `value` as a float, or raises as the attribute verifier does."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            "surrogate '%s' needs %s to be a real number, got %r"
            % (mnemonic, name, value)
        )
    try:
        value = float(value)
    except OverflowError:  # an int too large for a double
        value = math.inf if value > 0 else -math.inf
    ok, need, _ = _REAL_RANGES[range_]
    if not ok(value):
        raise ValueError(
            "surrogate '%s' needs %s, got %s"
            % (mnemonic, need % name, _format_float(value))
        )
    return value


def _check_int(mnemonic, name, value, range_):
    """Returns `value` as an int in [minimum, maximum], or raises."""
    minimum, maximum = range_
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            "surrogate '%s' needs %s to be an int, got %r"
            % (mnemonic, name, value)
        )
    value = int(value)
    if not minimum <= value <= maximum:
        raise ValueError(
            "surrogate '%s' needs %d <= %s <= %d, got %d"
            % (mnemonic, minimum, name, maximum, value)
        )
    return value


def _check_param(mnemonic, param, value):
    """`value` of the `_dialect.SurrogateParam` `param`, checked."""
    check = _check_int if param.type == "int" else _check_real
    return check(mnemonic, param.name, value, param.range)


def _constraint_text(param):
    """How the docs state `param`'s range: "alpha > 0", "c finite",
    "1 <= n <= 64"."""
    if param.type == "int":
        return "%d <= %s <= %d" % (param.range[0], param.name, param.range[1])
    return _REAL_RANGES[param.range][2] % param.name


def _bind(cls, args, kwargs):
    """The parameter values (in the attribute's order) and `spiking` of a
    call cls(*args, **kwargs), refused as Python refuses a call of a
    function with cls's signature."""
    names = [name for name, _ in cls._spec] + ["spiking"]
    defaults = [param.default for _, param in cls._spec] + [True]
    where = "%s.__init__()" % cls.__qualname__
    bound = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(
                "%s got an unexpected keyword argument %r" % (where, name)
            )
        if name in bound:
            raise TypeError(
                "%s got multiple values for argument %r" % (where, name)
            )
        bound[name] = value
    if len(args) > len(names):
        raise TypeError(
            "%s takes from 1 to %d positional arguments but %d "
            "were given" % (where, len(names) + 1, len(args) + 1)
        )
    values = [
        bound.get(name, default) for name, default in zip(names, defaults)
    ]
    return values[:-1], values[-1]


class Surrogate:
    """A surrogate gradient: an MLIR mnemonic and checked parameter values.

    Subclasses (one per entry of `flexsn._dialect.SURROGATES`) set
    `mnemonic` (the attribute's, such as ``"rect"``) and `_spec`, the
    parameters in the attribute's order as (name, `_dialect.SurrogateParam`)
    pairs; their constructors take SpikingJelly's arguments: the parameters
    in that order, then ``spiking``. Instances are immutable, hashable, and
    equal when they denote the same attribute (same mnemonic, bit-identical
    parameter values).
    """

    mnemonic = None
    _spec = ()
    _dialect_spec = None

    __slots__ = ("_values",)

    def __init__(self, *args, **kwargs):
        if self.mnemonic is None:
            raise TypeError("Surrogate is abstract; use one of surrogate.ALL")
        values, spiking = _bind(type(self), args, kwargs)
        if not spiking:
            raise ValueError(
                "%s(spiking=False) is not supported: FlexSN compiles only the "
                "spiking form (Heaviside forward, surrogate backward)"
                % type(self).__name__
            )
        checked = tuple(
            _check_param(self.mnemonic, param, value)
            for (_, param), value in zip(self._spec, values)
        )
        object.__setattr__(self, "_values", checked)

    @property
    def params(self):
        """The parameters, by their MLIR names, in the attribute's order."""
        return collections.OrderedDict(
            (name, value) for (name, _), value in zip(self._spec, self._values)
        )

    def __getattr__(self, name):
        # Parameters read as attributes too: Sigmoid().alpha == 4.0.
        if name != "_values":
            for (param, _), value in zip(self._spec, self._values):
                if param == name:
                    return value
        raise AttributeError(
            "%r object has no attribute %r" % (type(self).__name__, name)
        )

    def __setattr__(self, name, value):
        raise AttributeError(
            "surrogates are immutable; build a new %s" % type(self).__name__
        )

    def mlir(self):
        """The attribute text: every parameter spelled out, no spaces, reals
        in shortest round-trip form with a '.' (``1.0e-05``; MLIR reads them
        back bit for bit), integers as integers. A surrogate without
        parameters prints no ``<>``."""
        if not self._spec:
            return "#flexsn." + self.mnemonic
        fields = []
        for (name, _), value in zip(self._spec, self._values):
            text = (
                str(value) if isinstance(value, int) else _format_float(value)
            )
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
        return "%s(%s)" % (
            type(self).__name__,
            ", ".join("%s=%r" % item for item in self.params.items()),
        )

    def __reduce__(self):
        # Pickle through the constructor (slots and the immutability guard
        # defeat the default protocol).
        return (_rebuild, (self.mnemonic, tuple(self.params.items())))


def _rebuild(mnemonic, items):
    return by_name(mnemonic, **dict(items))


_SPIKING_DOC = (
    "``spiking``: must be True: FlexSN compiles only the spiking "
    "form (Heaviside forward, surrogate backward)."
)


def _docstring(spec):
    constraints = ", ".join(
        ("%s an int with " % p.name if p.type == "int" else "")
        + _constraint_text(p)
        for p in spec.params
    )
    lines = [
        "g(x) = %s%s."
        % (spec.formula, "; " + constraints if constraints else ""),
        "",
        "The attribute ``#flexsn.%s`` (C++ ``%sAttr``)%s."
        % (
            spec.mnemonic,
            spec.cpp_name,
            "; also called %s" % ", ".join("``%s``" % a for a in spec.aliases)
            if spec.aliases
            else "",
        ),
        "",
        "Arguments (the parameters in the attribute's order, then "
        "``spiking``):",
        "",
    ]
    for p in spec.params:
        lines.append(
            "* ``%s``: %s (%s, default %r; %s)."
            % (
                p.name,
                p.description,
                "an int" if p.type == "int" else "a real",
                p.default,
                _constraint_text(p),
            )
        )
    lines.append("* " + _SPIKING_DOC)
    return "\n".join(lines) + "\n"


def _check_spec(spec):
    """Refuses a registry entry this module cannot make a class of."""

    def fail(what):
        raise ValueError(
            "flexsn._dialect: surrogate %r: %s" % (spec.mnemonic, what)
        )

    names = [p.name for p in spec.params]
    if len(set(names)) != len(names):
        fail("parameter names repeat: %s" % names)
    for p in spec.params:
        if (
            not p.name.isidentifier()
            or keyword.iskeyword(p.name)
            or p.name == "spiking"
        ):
            fail("%r cannot be a constructor argument" % (p.name,))
        if p.type == "int":
            if not (
                isinstance(p.range, tuple)
                and len(p.range) == 2
                and all(isinstance(b, int) for b in p.range)
            ):
                fail(
                    "int parameter %s has range %r, not (minimum, maximum)"
                    % (p.name, p.range)
                )
        elif p.type == "real":
            if p.range not in _REAL_RANGES:
                fail(
                    "real parameter %s has unknown range %r"
                    % (p.name, p.range)
                )
        else:
            fail("parameter %s has unknown type %r" % (p.name, p.type))
        _check_param(spec.mnemonic, p, p.default)  # the default is valid


def _make_class(spec):
    """The Surrogate subclass of a `_dialect.SurrogateSpec`."""
    _check_spec(spec)
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    arguments = [
        inspect.Parameter(p.name, kind, default=p.default) for p in spec.params
    ]
    arguments.append(inspect.Parameter("spiking", kind, default=True))

    def __init__(self, *args, **kwargs):
        Surrogate.__init__(self, *args, **kwargs)

    __init__.__qualname__ = spec.python_name + ".__init__"
    __init__.__module__ = __name__
    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", kind)] + arguments
    )
    __init__.__doc__ = (
        "Checks the parameters as the attribute's verifier "
        "does; see the class."
    )
    return type(
        spec.python_name,
        (Surrogate,),
        {
            "__module__": __name__,
            "__qualname__": spec.python_name,
            "__doc__": _docstring(spec),
            "__slots__": (),
            "__signature__": inspect.Signature(arguments),
            "__init__": __init__,
            "mnemonic": spec.mnemonic,
            "_spec": tuple((p.name, p) for p in spec.params),
            "_dialect_spec": spec,
        },
    )


# Every surrogate, in the order of the dialect's registry (that of its
# documentation table).
ALL = tuple(_make_class(spec) for spec in _dialect.SURROGATES)

__all__ = (
    ["Surrogate"]
    + [cls.__name__ for cls in ALL]
    + ["ALL", "by_name", "coerce"]
)

for _cls in ALL:
    if _cls.__name__ in globals():
        raise ValueError(
            "flexsn._dialect: surrogate class name %r is taken" % _cls.__name__
        )
    globals()[_cls.__name__] = _cls

# Lookup by MLIR mnemonic, by Python (SpikingJelly) class name, by the
# attribute's C++ name, and by the registry's aliases.
_BY_NAME = {}
for _cls in ALL:
    _entry = _cls._dialect_spec
    for _name in (
        _entry.mnemonic,
        _entry.python_name,
        _entry.cpp_name,
    ) + tuple(_entry.aliases):
        if _BY_NAME.setdefault(_name, _cls) is not _cls:
            raise ValueError(
                "flexsn._dialect: two surrogates are called %r" % _name
            )
_BY_CLASS_NAME = {cls.__name__: cls for cls in ALL}
del _cls, _entry, _name


def by_name(name, **params):
    """The surrogate called `name` (an MLIR mnemonic such as
    ``"piecewise_leaky_relu"``, a class name such as
    ``"PiecewiseLeakyReLU"``, the attribute's C++ name or an alias the
    registry lists), built with `params` (defaults for the rest)."""
    try:
        cls = _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(
            "unknown surrogate %r; known: %s"
            % (name, ", ".join(cls.mnemonic for cls in ALL))
        ) from None
    return cls(**params)


def coerce(surrogate):
    """`surrogate` as a flexsn surrogate: a flexsn.surrogate object as is, a
    surrogate class instantiated with its defaults, a name through
    `by_name`, attribute text as `mlir()` prints it
    (``#flexsn.atan<alpha=3.0>``), or a SpikingJelly surrogate object
    (`spikingjelly.activation_based.surrogate.ATan(alpha=2.0)`) by duck
    typing: its class name picks the surrogate and its attributes of the
    same names give the parameters (SpikingJelly need not be importable). A
    SpikingJelly surrogate with `spiking=False` (a smooth forward) is
    refused: FlexSN compiles the spiking form only."""
    if isinstance(surrogate, Surrogate):
        return surrogate
    if isinstance(surrogate, type) and issubclass(surrogate, Surrogate):
        return surrogate()
    if isinstance(surrogate, str):
        return (
            _parse_attribute(surrogate)
            if surrogate.startswith("#")
            else by_name(surrogate)
        )
    cls = _BY_CLASS_NAME.get(type(surrogate).__name__)
    if cls is None:
        raise TypeError(
            "a surrogate is a flexsn.surrogate object (e.g. flexsn.surrogate."
            "ATan(alpha=2.0)), a SpikingJelly surrogate object of the same "
            "name, or a name; got %r (known: %s)"
            % (surrogate, ", ".join(c.__name__ for c in ALL))
        )
    values = {}
    for name, _ in cls._spec:
        if not hasattr(surrogate, name):
            raise TypeError(
                "%r looks like SpikingJelly's %s but has no "
                "attribute %r" % (surrogate, cls.__name__, name)
            )
        value = getattr(surrogate, name)
        if (
            hasattr(value, "item")
            and getattr(value, "numel", lambda: 1)() == 1
        ):
            value = value.item()  # a one-element tensor parameter
        values[name] = value
    return cls(spiking=bool(getattr(surrogate, "spiking", True)), **values)


def _parse_attribute(text):
    """The surrogate an attribute's text denotes (``#flexsn.atan<alpha=3.0>``,
    spaces allowed as MLIR prints them)."""
    match = re.fullmatch(r"#flexsn\.(\w+)\s*(?:<(.*)>)?", text.strip())
    if not match:
        raise ValueError(
            "%r is not a surrogate attribute such as "
            "'#flexsn.atan<alpha=2.0>'" % (text,)
        )
    params = {}
    for field in filter(
        None, (f.strip() for f in (match.group(2) or "").split(","))
    ):
        name, _, value = (part.strip() for part in field.partition("="))
        try:
            params[name] = (
                int(value) if re.fullmatch(r"-?\d+", value) else float(value)
            )
        except ValueError:
            raise ValueError(
                "%r: %r is not a number" % (text, value)
            ) from None
    return by_name(match.group(1), **params)
