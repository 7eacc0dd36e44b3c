"""Tests of flexsn._dialect, the registry of the dialect's enums and
surrogates that the Python layer is made from.

Everything is checked against sources written independently of the
registry: reference.py's textbook formulas and antiderivatives written out
here (finite differences), values worked out by hand, the constraints as the
verifiers word them, and FlexSNAttrs.td itself (parsed here, not by the
registry's generator).
"""

import inspect
import math
import os
import re
import subprocess
import sys

import pytest
import torch

import reference as ref
from flexsn import _dialect, surrogate

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
ATTRS_TD = os.path.join(
    REPO, "include", "flexsn", "Dialect", "FlexSN", "IR", "FlexSNAttrs.td"
)

SPECS = _dialect.SURROGATES
BY_MNEMONIC = {spec.mnemonic: spec for spec in SPECS}
F64 = torch.float64

# Parameters other than the defaults, within every range: one set per
# surrogate, so that each parameter is seen to reach the formula.
OTHER_PARAMS = {
    "sigmoid": {"alpha": 1.5},
    "atan": {"alpha": 0.7},
    "piecewise_quadratic": {"alpha": 2.5},
    "piecewise_exp": {"alpha": 3.0},
    "soft_sign": {"alpha": 0.5},
    "super_spike": {"alpha": 2.0},
    "erf": {"alpha": 0.6},
    "nonzero_sign_log_abs": {"alpha": 4.0},
    "piecewise_leaky_relu": {"w": 0.5, "c": -0.2},
    "squarewave_fourier_series": {"n": 6, "T_period": 3.0},
    "s2nn": {"alpha": 2.0, "beta": 0.5},
    "q_pseudo_spike": {"alpha": 4.0},
    "leaky_k_relu": {"leak": -0.3, "k": 2.0},
    "fake_numerical_gradient": {"alpha": 1.0},
    "log_tailed_relu": {"alpha": 0.2},
    "rect": {"alpha": 0.4},
    "multi_gaussian": {"sigma": 1.0, "h": -0.5, "s": 2.0},
    "straight_through": {},
}


def _derivative(mnemonic, x, **params):
    """The registry's g(x), defaults for the parameters not given."""
    spec = BY_MNEMONIC[mnemonic]
    values = dict((p.name, p.default) for p in spec.params)
    values.update(params)
    return spec.derivative(x, *(values[p.name] for p in spec.params))


def _cases():
    for spec in SPECS:
        yield spec.mnemonic, {}
        if OTHER_PARAMS[spec.mnemonic]:
            yield spec.mnemonic, OTHER_PARAMS[spec.mnemonic]


CASES = list(_cases())
CASE_IDS = ["%s%s" % (m, p or "") for m, p in CASES]


# --- The registry's shape -------------------------------------------------


def test_eighteen_surrogates_with_distinct_names():
    assert len(SPECS) == 18
    assert set(OTHER_PARAMS) == {spec.mnemonic for spec in SPECS}
    names = []
    for spec in SPECS:
        assert isinstance(spec, _dialect.SurrogateSpec)
        assert isinstance(spec.aliases, tuple)
        assert isinstance(spec.params, tuple)
        own = {spec.mnemonic, spec.python_name, spec.cpp_name, *spec.aliases}
        names += sorted(own)
    assert len(names) == len(set(names)), "a name denotes two surrogates"


def test_only_straight_through_has_other_names():
    st = BY_MNEMONIC["straight_through"]
    assert (st.python_name, st.cpp_name, st.aliases, st.params) == (
        "DeterministicPass",
        "StraightThrough",
        ("deterministic_pass",),
        (),
    )
    for spec in SPECS:
        if spec is not st:
            assert spec.aliases == ()
            assert spec.python_name == spec.cpp_name


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.mnemonic)
def test_params_are_well_formed(spec):
    for p in spec.params:
        assert isinstance(p, _dialect.SurrogateParam)
        assert p.name.isidentifier() and p.description
        if p.type == "real":
            assert type(p.default) is float
            assert p.range in ("finite", "positive", "greater_than_one")
        else:
            assert p.type == "int" and type(p.default) is int
            low, high = p.range
            assert type(low) is int and type(high) is int
            assert low <= p.default <= high
    # The derivative takes x, then the parameters in the attribute's order.
    assert list(inspect.signature(spec.derivative).parameters) == ["x"] + [
        p.name for p in spec.params
    ]


def test_squarewave_fourier_series_entry():
    n, period = BY_MNEMONIC["squarewave_fourier_series"].params
    assert n == ("n", "int", 2, (1, 64), n.description)
    assert period[:4] == ("T_period", "real", 8.0, "positive")


def test_enums():
    assert _dialect.KERNEL_VARIANTS == (
        "inference",
        "final-state",
        "forward",
        "backward",
    )
    assert _dialect.STORAGE_TYPES == ("f32", "f16", "bf16")
    assert _dialect.SPIKE_STORAGES == ("dense", "u8", "bits")
    assert _dialect.PARAM_KINDS == ("const", "runtime", "trainable")
    assert _dialect.PARAM_SHAPES == ("scalar", "per_neuron", "per_channel")


def test_package_uses_the_registry_enums():
    import flexsn
    from flexsn import compiler, fx

    assert flexsn.ALL_VARIANTS is _dialect.KERNEL_VARIANTS
    assert flexsn.STORAGE_TYPES is _dialect.STORAGE_TYPES
    assert flexsn.SPIKE_STORAGES is _dialect.SPIKE_STORAGES
    assert compiler.PARAM_SHAPES is _dialect.PARAM_SHAPES
    assert fx.PARAM_SHAPES is _dialect.PARAM_SHAPES


def test_importing_the_registry_needs_no_torch():
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('d', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert len(module.SURROGATES) == 18\n"
        "assert not {'torch', 'numpy'} & set(sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, _dialect.__file__],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# --- The classes made from it ----------------------------------------------


def test_every_spec_is_a_class_of_flexsn_surrogate():
    assert [cls.__name__ for cls in surrogate.ALL] == [
        spec.python_name for spec in SPECS
    ]
    for spec in SPECS:
        cls = getattr(surrogate, spec.python_name)
        assert isinstance(cls, type) and issubclass(cls, surrogate.Surrogate)
        assert cls.__name__ == spec.python_name
        assert cls.__module__ == "flexsn.surrogate"
        assert cls.mnemonic == spec.mnemonic
        assert spec.python_name in surrogate.__all__
        for name in (
            spec.mnemonic,
            spec.python_name,
            spec.cpp_name,
            *spec.aliases,
        ):
            assert type(surrogate.by_name(name)) is cls, name


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.mnemonic)
def test_constructor_defaults_and_signature(spec):
    cls = getattr(surrogate, spec.python_name)
    got = cls().params
    assert list(got.items()) == [(p.name, p.default) for p in spec.params]
    for p in spec.params:
        # Exactly the default's type: a real's value is a float, never an int.
        got_type, want_type = type(got[p.name]), type(p.default)
        assert got_type is want_type
    signature = inspect.signature(cls)
    assert [(q.name, q.default) for q in signature.parameters.values()] == [
        (p.name, p.default) for p in spec.params
    ] + [("spiking", True)]
    assert all(
        q.kind is q.POSITIONAL_OR_KEYWORD
        for q in signature.parameters.values()
    )
    # Positionally, in the attribute's order, as SpikingJelly takes them.
    values = [
        3 if p.type == "int" else 1.5 + i for i, p in enumerate(spec.params)
    ]
    assert list(cls(*values).params.values()) == values
    assert spec.formula in cls.__doc__


def _range_probes(p):
    """(value, accepted, the verifier's words when refused) at the edges of
    `p`'s range, spelled out by hand."""
    if p.type == "int":
        low, high = p.range
        need = "%d <= %s <= %d" % (low, p.name, high)
        return [
            (low, True, None),
            (high, True, None),
            (low - 1, False, "needs %s, got %d" % (need, low - 1)),
            (high + 1, False, "needs %s, got %d" % (need, high + 1)),
        ]
    if p.range == "finite":
        need = "needs %s to be a finite value, got " % p.name
        return [
            (0.0, True, None),
            (-2.5, True, None),
            (1e300, True, None),
            (math.inf, False, need + "inf"),
            (-math.inf, False, need + "-inf"),
            (math.nan, False, need + "nan"),
        ]
    bound = {"positive": 0, "greater_than_one": 1}[p.range]
    need = "needs %s > %d, got " % (p.name, bound)
    return [
        (bound + 1e-9, True, None),
        (bound + 7.0, True, None),
        (float(bound), False, need + "%s.0" % bound),
        (bound - 0.5, False, need + repr(bound - 0.5)),
        (math.inf, False, need + "inf"),
        (math.nan, False, need + "nan"),
    ]


@pytest.mark.parametrize(
    "spec", [s for s in SPECS if s.params], ids=lambda s: s.mnemonic
)
def test_constructor_checks_the_ranges(spec):
    cls = getattr(surrogate, spec.python_name)
    for p in spec.params:
        for value, accepted, words in _range_probes(p):
            if accepted:
                assert cls(**{p.name: value}).params[p.name] == value
            else:
                with pytest.raises(ValueError) as info:
                    cls(**{p.name: value})
                assert str(info.value) == "surrogate '%s' %s" % (
                    spec.mnemonic,
                    words,
                ), (p, value)


# --- The derivatives --------------------------------------------------------


def _points(dtype=F64):
    grid = [-3.95 + 0.0731 * k for k in range(109)]
    special = [
        0.0,
        -0.0,
        1e-300,
        -1e-300,
        0.5,
        -0.5,
        1.0,
        -1.0,
        0.25,
        -0.25,
        1.25,
        -1.25,
        2.0,
        -2.0,
        0.4,
        -0.4,
        1 / 0.3,
        -1 / 0.3,
    ]
    return torch.tensor(grid + special, dtype=dtype)


@pytest.mark.parametrize("mnemonic,params", CASES, ids=CASE_IDS)
def test_derivative_matches_the_reference_formulas(mnemonic, params):
    x = _points()
    got = _derivative(mnemonic, x, **params)
    want = ref.surrogate_grad(mnemonic, x, **params)
    assert got.dtype == F64 and got.shape == x.shape
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-14), (
        x[(got - want).abs().argmax()],
        got,
        want,
    )


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.mnemonic)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_derivative_keeps_dtype_and_shape(spec, dtype):
    # (Not float16: torch 1.13 has no CPU clamp or sigmoid for it; the eager
    # spike evaluates g in float32.)
    x = torch.linspace(-2, 2, 12, dtype=dtype).reshape(3, 4)
    g = _derivative(spec.mnemonic, x)
    assert g.dtype == dtype and g.shape == x.shape
    assert torch.isfinite(g).all()


def _sign(x):
    return -1.0 if x < 0 else 1.0


def _normal_cdf(z):
    """The standard normal distribution function."""
    return (1 + math.erf(z / math.sqrt(2))) / 2


def _sigm(z):
    return 1 / (1 + math.exp(-z))


# An antiderivative of g on each piece, integrated by hand (constants of
# integration are left out: finite differences are taken away from kinks).
# Each is (function of x and the parameters, kinks of those parameters).
PIECES = {
    "sigmoid": (lambda x, alpha: _sigm(alpha * x), lambda alpha: []),
    "atan": (
        lambda x, alpha: math.atan(math.pi / 2 * alpha * x) / math.pi,
        lambda alpha: [],
    ),
    "piecewise_quadratic": (
        lambda x, alpha: 0.0
        if abs(x) > 1 / alpha
        else alpha * x - alpha**2 * x * abs(x) / 2,
        lambda alpha: [0.0, -1 / alpha, 1 / alpha],
    ),
    "piecewise_exp": (
        lambda x, alpha: math.exp(alpha * x) / 2
        if x < 0
        else -math.exp(-alpha * x) / 2,
        lambda alpha: [0.0],
    ),
    "soft_sign": (
        lambda x, alpha: alpha * x / (2 * (1 + alpha * abs(x))),
        lambda alpha: [0.0],
    ),
    "super_spike": (
        lambda x, alpha: alpha * x / (abs(x) + 1),
        lambda alpha: [0.0],
    ),
    "erf": (lambda x, alpha: math.erf(alpha * x) / 2, lambda alpha: []),
    "nonzero_sign_log_abs": (
        lambda x, alpha: _sign(x) * math.log(1 + alpha * abs(x)),
        lambda alpha: [0.0],
    ),
    "piecewise_leaky_relu": (
        lambda x, w, c: x / (2 * w) if abs(x) < w else c * x,
        lambda w, c: [-w, w],
    ),
    "squarewave_fourier_series": (
        lambda x, n, T_period: sum(
            2
            / (math.pi * (2 * i - 1))
            * math.sin((2 * i - 1) * 2 * math.pi / T_period * x)
            for i in range(1, n)
        ),
        lambda n, T_period: [],
    ),
    "s2nn": (
        lambda x, alpha, beta: _sigm(alpha * x)
        if x < 0
        else beta * math.log(1 + x),
        lambda alpha, beta: [0.0],
    ),
    "q_pseudo_spike": (
        lambda x, alpha: -_sign(x)
        / 2
        * (1 + 2 * abs(x) / (alpha - 1)) ** (1 - alpha),
        lambda alpha: [0.0],
    ),
    "leaky_k_relu": (
        lambda x, leak, k: k * x if x >= 0 else leak * x,
        lambda leak, k: [0.0],
    ),
    "fake_numerical_gradient": (
        lambda x, alpha: alpha * x
        if abs(x) < 1 / alpha
        else _sign(x) * math.log(abs(x)),
        lambda alpha: [-1 / alpha, 1 / alpha],
    ),
    "log_tailed_relu": (
        lambda x, alpha: alpha * x if x <= 0 else x if x <= 1 else math.log(x),
        lambda alpha: [0.0, 1.0],
    ),
    "rect": (
        lambda x, alpha: min(max(alpha * x, -0.5), 0.5),
        lambda alpha: [-0.5 / alpha, 0.5 / alpha],
    ),
    "multi_gaussian": (
        lambda x, sigma, h, s: (1 + h) * _normal_cdf(x / sigma)
        - h * _normal_cdf((x - sigma) / (s * sigma))
        - h * _normal_cdf((x + sigma) / (s * sigma)),
        lambda sigma, h, s: [],
    ),
    "straight_through": (lambda x: x, lambda: []),
}


@pytest.mark.parametrize("mnemonic,params", CASES, ids=CASE_IDS)
def test_derivative_matches_finite_differences(mnemonic, params):
    spec = BY_MNEMONIC[mnemonic]
    values = dict((p.name, p.default) for p in spec.params)
    values.update(params)
    primitive, kinks = PIECES[mnemonic]
    eps = 1e-6
    xs = [
        x
        for x in _points().tolist()
        if all(abs(x - k) > 1e-3 for k in kinks(**values))
    ]
    fd = [
        (primitive(x + eps, **values) - primitive(x - eps, **values))
        / (2 * eps)
        for x in xs
    ]
    g = _derivative(mnemonic, torch.tensor(xs, dtype=F64), **params)
    assert torch.allclose(
        g, torch.tensor(fd, dtype=F64), rtol=1e-6, atol=1e-7
    ), max(abs(a - b) for a, b in zip(g.tolist(), fd))


# (mnemonic, params, x, g(x)) worked out by hand, at the points where the
# pieces meet (which finite differences skip).
HAND_VALUES = [
    ("sigmoid", {}, 0.0, 1.0),  # alpha/4
    ("atan", {"alpha": 3.0}, 0.0, 1.5),
    ("piecewise_quadratic", {}, 1.0, 0.0),
    ("piecewise_quadratic", {"alpha": 2.0}, 0.25, 1.0),
    ("piecewise_exp", {}, 0.0, 0.5),
    ("soft_sign", {}, 0.0, 1.0),  # alpha/2
    ("super_spike", {}, 1.0, 0.25),
    ("erf", {"alpha": 1.0}, 0.0, 1 / math.sqrt(math.pi)),
    ("nonzero_sign_log_abs", {}, -1.0, 0.5),
    ("piecewise_leaky_relu", {}, 1.0, 0.01),  # |x| < w is strict
    ("piecewise_leaky_relu", {}, 0.999, 0.5),
    ("piecewise_leaky_relu", {"w": 0.5, "c": -0.2}, -0.5, -0.2),
    ("squarewave_fourier_series", {}, 0.0, 0.5),
    ("squarewave_fourier_series", {"n": 3, "T_period": 8.0}, 0.0, 1.0),
    ("squarewave_fourier_series", {"n": 1}, 0.3, 0.0),  # no terms
    ("squarewave_fourier_series", {"n": 2, "T_period": 4.0}, 1.0, 0.0),
    ("s2nn", {}, 0.0, 1.0),  # beta/(0+1)
    ("s2nn", {"alpha": 4.0, "beta": 3.0}, -1e-300, 1.0),  # alpha/4
    ("s2nn", {"beta": 3.0}, 2.0, 1.0),
    ("q_pseudo_spike", {}, 0.0, 1.0),
    ("q_pseudo_spike", {}, -1.0, 1 / 9),
    ("leaky_k_relu", {"leak": 0.1, "k": 2.0}, 0.0, 2.0),
    ("leaky_k_relu", {"leak": 0.1, "k": 2.0}, -0.0, 2.0),
    ("leaky_k_relu", {"leak": 0.1, "k": 2.0}, -1e-300, 0.1),
    ("fake_numerical_gradient", {}, 0.0, 0.3),
    ("fake_numerical_gradient", {}, -0.0, 0.3),
    ("fake_numerical_gradient", {}, -10.0, 0.1),
    ("log_tailed_relu", {"alpha": 0.5}, 0.0, 0.5),
    ("log_tailed_relu", {"alpha": 0.5}, 1.0, 1.0),
    ("log_tailed_relu", {}, 4.0, 0.25),
    ("rect", {}, 0.5, 0.0),  # |x| < 0.5/a is strict
    ("rect", {"alpha": 2.0}, -0.2, 2.0),
    # (1 + h)/(sigma·√(2π)) − 2h·exp(−1/(2s²))/(s·sigma·√(2π)) at x = 0.
    (
        "multi_gaussian",
        {"sigma": 1.0, "h": 0.5, "s": 1.0},
        0.0,
        (1.5 - math.exp(-0.5)) / math.sqrt(2 * math.pi),
    ),
    ("multi_gaussian", {"h": 0.0}, 0.0, 2 / math.sqrt(2 * math.pi)),
    ("straight_through", {}, -5.0, 1.0),
]


@pytest.mark.parametrize("mnemonic,params,x,expected", HAND_VALUES)
def test_derivative_hand_values(mnemonic, params, x, expected):
    g = _derivative(mnemonic, torch.tensor([x], dtype=F64), **params)
    assert math.isclose(
        g.item(), expected, rel_tol=1e-12, abs_tol=1e-15
    ), g.item()


def test_fx_surrogate_grad_is_the_registry_derivative():
    from flexsn import fx

    x = _points(torch.float32)
    for mnemonic, params in CASES:
        s = surrogate.by_name(mnemonic, **params)
        assert torch.equal(
            fx.surrogate_grad(s, x), _derivative(mnemonic, x, **params)
        ), s


# --- Agreement with FlexSNAttrs.td -------------------------------------------


def _split_top_level(text):
    """`text` split at the commas outside strings and brackets."""
    items, depth, start, i, quoted = [], 0, 0, 0, False
    while i < len(text):
        ch = text[i]
        if quoted:
            quoted = ch != '"'
        elif ch == '"':
            quoted = True
        elif ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
        i += 1
    items.append(text[start:].strip())
    return [item for item in items if item]


def _template_args(text, open_at):
    """The text between the '<' at `open_at` and its '>'."""
    depth, i, quoted = 0, open_at, False
    while True:
        ch = text[i]
        if quoted:
            quoted = ch != '"'
        elif ch == '"':
            quoted = True
        elif ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
        i += 1


def _unquote(item):
    assert item.startswith('"') and item.endswith('"'), item
    return item[1:-1]


_TD_RANGES = {
    "SurrogateFinite": "finite",
    "SurrogatePositive": "positive",
    "SurrogateAboveOne": "greater_than_one",
}


def _td_param(item, range_doc):
    """A SurrogateParam of one `(ins ...)` entry of the .td file."""
    match = re.fullmatch(r"(\w+)\s*<(.*)>\s*:\s*\$(\w+)", item, re.S)
    kind, args, name = match.groups()
    args = _split_top_level(args)
    if kind == "SurrogateIntParam":  # <"2", 1, 64, "description">
        return _dialect.SurrogateParam(
            name,
            "int",
            int(_unquote(args[0])),
            (int(args[1]), int(args[2])),
            _unquote(args[3]),
        )
    if kind == "DefaultValuedParameter":  # an older spelling of an int
        low, high = re.search(
            r"(-?\d+) <= %s <= (-?\d+)" % name, range_doc
        ).groups()
        description = re.sub(r" \(default [^)]*\)$", "", _unquote(args[2]))
        return _dialect.SurrogateParam(
            name,
            "int",
            int(_unquote(args[1])),
            (int(low), int(high)),
            description,
        )
    assert kind == "SurrogateParam", item
    if len(args) > 2:
        range_ = _TD_RANGES[args[2]]
    elif range_doc is None or re.search(r"\b%s > 0" % name, range_doc):
        range_ = "positive"
    elif re.search(r"\b%s > 1" % name, range_doc):
        range_ = "greater_than_one"
    else:
        assert re.search(r"\b%s\b.*finite" % name, range_doc), range_doc
        range_ = "finite"
    return _dialect.SurrogateParam(
        name, "real", float(_unquote(args[0])), range_, _unquote(args[1])
    )


def _td_surrogates():
    """{mnemonic: (C++ name, formula, [SurrogateParam], Python name,
    aliases)} from FlexSNAttrs.td."""
    text = open(ATTRS_TD, encoding="utf-8").read()
    # Ranges as a SurrogateRange argument, or (an older spelling) as text
    # after the formula ("alpha > 0").
    ranges_as_records = "class SurrogateRange" in text
    found = {}
    for match in re.finditer(
        r"def FlexSN_\w+Attr\s*:\s*FlexSN_Surrogate\s*<", text
    ):
        args = _split_top_level(_template_args(text, match.end() - 1))
        name, mnemonic = _unquote(args[0]), _unquote(args[1])
        dag = re.fullmatch(r"\(ins(.*)\)", args[2], re.S).group(1)
        formula = _unquote(args[3])
        range_doc = None if ranges_as_records else _unquote(args[4])
        params = [_td_param(item, range_doc) for item in _split_top_level(dag)]
        python_name = _unquote(args[5]) if len(args) > 5 else name
        aliases = (
            tuple(_unquote(a) for a in _split_top_level(args[6].strip("[]")))
            if len(args) > 6
            else ()
        )
        found[mnemonic] = (name, formula, params, python_name, aliases)
    return found


def test_surrogates_match_the_tablegen_definitions():
    if not os.path.exists(ATTRS_TD):
        pytest.skip("FlexSNAttrs.td not found")
    td = _td_surrogates()
    assert list(td) == [spec.mnemonic for spec in SPECS]
    for spec in SPECS:
        name, formula, params, python_name, aliases = td[spec.mnemonic]
        assert spec.cpp_name == name
        assert spec.formula == formula
        assert list(spec.params) == params, spec.mnemonic
        if python_name != name or aliases:  # spelled out in the .td file
            assert (spec.python_name, spec.aliases) == (python_name, aliases)


def _td_enum(enum):
    text = open(ATTRS_TD, encoding="utf-8").read()
    match = re.search(r'I32EnumAttr<"%s",(.*?)\]' % enum, text, re.S)
    cases = re.findall(
        r'I32EnumAttrCase<"\w+",\s*(\d+),\s*"([^"]+)">', match.group(1)
    )
    return tuple(
        spelling
        for _, spelling in sorted(cases, key=lambda case: int(case[0]))
    )


@pytest.mark.parametrize(
    "enum,values",
    [
        ("KernelVariant", "KERNEL_VARIANTS"),
        ("StorageType", "STORAGE_TYPES"),
        ("SpikeStorage", "SPIKE_STORAGES"),
        ("ParamKind", "PARAM_KINDS"),
        ("ParamShape", "PARAM_SHAPES"),
    ],
)
def test_enums_match_the_tablegen_definitions(enum, values):
    if not os.path.exists(ATTRS_TD):
        pytest.skip("FlexSNAttrs.td not found")
    assert getattr(_dialect, values) == _td_enum(enum)
