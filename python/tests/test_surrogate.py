"""Tests of flexsn.surrogate: attribute text, validation, lookup, equality.

The expected attribute texts are written out by hand. The class list and
parameter defaults are also checked against the dialect's TableGen file, and,
when a built flexsn-opt is at hand, the texts and the range errors against
the real parser and verifiers.
"""

import copy
import os
import pickle
import re
import shutil
import subprocess
import sys

import pytest

from flexsn import surrogate
from flexsn.surrogate import (
    ALL,
    ATan,
    DeterministicPass,
    Erf,
    FakeNumericalGradient,
    LeakyKReLU,
    LogTailedReLU,
    MultiGaussian,
    NonzeroSignLogAbs,
    PiecewiseExp,
    PiecewiseLeakyReLU,
    PiecewiseQuadratic,
    QPseudoSpike,
    Rect,
    S2NN,
    Sigmoid,
    SoftSign,
    SquarewaveFourierSeries,
    SuperSpike,
    Surrogate,
    by_name,
    coerce,
)

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
ATTRS_TD = os.path.join(
    REPO, "include", "flexsn", "Dialect", "FlexSN", "IR", "FlexSNAttrs.td"
)

DEFAULT_TEXT = {
    Sigmoid: "#flexsn.sigmoid<alpha=4.0>",
    ATan: "#flexsn.atan<alpha=2.0>",
    PiecewiseQuadratic: "#flexsn.piecewise_quadratic<alpha=1.0>",
    PiecewiseExp: "#flexsn.piecewise_exp<alpha=1.0>",
    SoftSign: "#flexsn.soft_sign<alpha=2.0>",
    SuperSpike: "#flexsn.super_spike<alpha=1.0>",
    Erf: "#flexsn.erf<alpha=2.0>",
    NonzeroSignLogAbs: "#flexsn.nonzero_sign_log_abs<alpha=1.0>",
    PiecewiseLeakyReLU: "#flexsn.piecewise_leaky_relu<w=1.0,c=0.01>",
    SquarewaveFourierSeries: (
        "#flexsn.squarewave_fourier_series<n=2,T_period=8.0>"
    ),
    S2NN: "#flexsn.s2nn<alpha=4.0,beta=1.0>",
    QPseudoSpike: "#flexsn.q_pseudo_spike<alpha=2.0>",
    LeakyKReLU: "#flexsn.leaky_k_relu<leak=0.0,k=1.0>",
    FakeNumericalGradient: "#flexsn.fake_numerical_gradient<alpha=0.3>",
    LogTailedReLU: "#flexsn.log_tailed_relu<alpha=0.0>",
    Rect: "#flexsn.rect<alpha=1.0>",
    MultiGaussian: "#flexsn.multi_gaussian<sigma=0.5,h=0.15,s=6.0>",
    DeterministicPass: "#flexsn.straight_through",
}

CUSTOM_TEXT = [
    (Sigmoid(alpha=2), "#flexsn.sigmoid<alpha=2.0>"),
    (Sigmoid(0.5), "#flexsn.sigmoid<alpha=0.5>"),
    (Sigmoid(alpha=1e-5), "#flexsn.sigmoid<alpha=1.0e-05>"),
    (Sigmoid(alpha=1e20), "#flexsn.sigmoid<alpha=1.0e+20>"),
    (Sigmoid(alpha=2.5e-7), "#flexsn.sigmoid<alpha=2.5e-07>"),
    (Sigmoid(alpha=0.1), "#flexsn.sigmoid<alpha=0.1>"),
    (Sigmoid(alpha=1 / 3), "#flexsn.sigmoid<alpha=0.3333333333333333>"),
    (ATan(alpha=0.25), "#flexsn.atan<alpha=0.25>"),
    (PiecewiseQuadratic(alpha=3), "#flexsn.piecewise_quadratic<alpha=3.0>"),
    (PiecewiseExp(1.5), "#flexsn.piecewise_exp<alpha=1.5>"),
    (SoftSign(alpha=10), "#flexsn.soft_sign<alpha=10.0>"),
    (SuperSpike(alpha=100.0), "#flexsn.super_spike<alpha=100.0>"),
    (Erf(alpha=0.75), "#flexsn.erf<alpha=0.75>"),
    (NonzeroSignLogAbs(alpha=5), "#flexsn.nonzero_sign_log_abs<alpha=5.0>"),
    (
        PiecewiseLeakyReLU(w=2, c=-0.05),
        "#flexsn.piecewise_leaky_relu<w=2.0,c=-0.05>",
    ),
    (
        PiecewiseLeakyReLU(0.5, 0.0),
        "#flexsn.piecewise_leaky_relu<w=0.5,c=0.0>",
    ),
    (PiecewiseLeakyReLU(c=-0.0), "#flexsn.piecewise_leaky_relu<w=1.0,c=-0.0>"),
    (
        SquarewaveFourierSeries(n=5, T_period=4.0),
        "#flexsn.squarewave_fourier_series<n=5,T_period=4.0>",
    ),
    (
        SquarewaveFourierSeries(64, 0.5),
        "#flexsn.squarewave_fourier_series<n=64,T_period=0.5>",
    ),
    (
        SquarewaveFourierSeries(n=1),
        "#flexsn.squarewave_fourier_series<n=1,T_period=8.0>",
    ),
    (S2NN(alpha=2, beta=0.5), "#flexsn.s2nn<alpha=2.0,beta=0.5>"),
    (QPseudoSpike(alpha=1.5), "#flexsn.q_pseudo_spike<alpha=1.5>"),
    (LeakyKReLU(leak=0.1, k=2), "#flexsn.leaky_k_relu<leak=0.1,k=2.0>"),
    (LeakyKReLU(-0.5, 0.0), "#flexsn.leaky_k_relu<leak=-0.5,k=0.0>"),
    (FakeNumericalGradient(0.5), "#flexsn.fake_numerical_gradient<alpha=0.5>"),
    (LogTailedReLU(alpha=-0.25), "#flexsn.log_tailed_relu<alpha=-0.25>"),
    (Rect(alpha=4), "#flexsn.rect<alpha=4.0>"),
]


def test_all_lists_every_class_once():
    assert len(ALL) == 18
    assert len({cls.mnemonic for cls in ALL}) == 18
    assert set(ALL) == set(DEFAULT_TEXT)
    assert all(issubclass(cls, Surrogate) for cls in ALL)


def test_module_exports_and_abstract_base():
    assert surrogate.ALL is ALL
    assert all(hasattr(surrogate, name) for name in surrogate.__all__)
    with pytest.raises(TypeError, match="abstract"):
        Surrogate()


def test_module_needs_no_torch():
    # Describing a surrogate must not pull in torch (or the rest of the
    # package): load the file on its own in a fresh interpreter.
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('s', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert module.Sigmoid().mlir() == '#flexsn.sigmoid<alpha=4.0>'\n"
        "assert not {'torch', 'numpy'} & set(sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, surrogate.__file__],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("cls", ALL, ids=lambda cls: cls.__name__)
def test_default_text(cls):
    assert cls().mlir() == DEFAULT_TEXT[cls]


@pytest.mark.parametrize(
    "instance,text", CUSTOM_TEXT, ids=[text for _, text in CUSTOM_TEXT]
)
def test_custom_text(instance, text):
    assert instance.mlir() == text
    assert " " not in instance.mlir()


def test_params_use_attribute_names_in_order():
    assert list(SquarewaveFourierSeries().params.items()) == [
        ("n", 2),
        ("T_period", 8.0),
    ]
    assert list(PiecewiseLeakyReLU(c=0.5).params.items()) == [
        ("w", 1.0),
        ("c", 0.5),
    ]
    assert list(LeakyKReLU(k=3).params.items()) == [("leak", 0.0), ("k", 3.0)]
    assert DeterministicPass().params == {}
    # Reals are floats even when given as ints; n stays an int.
    assert type(Sigmoid(alpha=3).params["alpha"]) is float
    assert type(SquarewaveFourierSeries(n=3).params["n"]) is int
    assert (
        type(SquarewaveFourierSeries(T_period=2).params["T_period"]) is float
    )


def test_params_read_as_attributes_and_are_immutable():
    s = S2NN(alpha=2.0)
    assert (s.alpha, s.beta) == (2.0, 1.0)
    assert SquarewaveFourierSeries().T_period == 8.0
    with pytest.raises(AttributeError):
        s.gamma
    with pytest.raises(AttributeError):
        s.alpha = 3.0
    params = s.params
    params["alpha"] = 7.0  # a copy: the surrogate does not change
    assert s.params["alpha"] == 2.0


def test_mnemonic_is_a_class_attribute():
    assert Sigmoid.mnemonic == "sigmoid"
    assert DeterministicPass.mnemonic == "straight_through"
    assert PiecewiseLeakyReLU(w=2.0).mnemonic == "piecewise_leaky_relu"


RANGE_ERRORS = [
    (
        lambda: Sigmoid(alpha=0.0),
        "surrogate 'sigmoid' needs alpha > 0, got 0.0",
    ),
    (
        lambda: Sigmoid(alpha=-1),
        "surrogate 'sigmoid' needs alpha > 0, got -1.0",
    ),
    (
        lambda: Sigmoid(alpha=float("inf")),
        "surrogate 'sigmoid' needs alpha > 0, got inf",
    ),
    (
        lambda: Sigmoid(alpha=float("nan")),
        "surrogate 'sigmoid' needs alpha > 0, got nan",
    ),
    (lambda: ATan(alpha=-0.5), "surrogate 'atan' needs alpha > 0, got -0.5"),
    (
        lambda: PiecewiseQuadratic(alpha=0),
        "surrogate 'piecewise_quadratic' needs alpha > 0, got 0.0",
    ),
    (
        lambda: PiecewiseExp(alpha=-2),
        "surrogate 'piecewise_exp' needs alpha > 0, got -2.0",
    ),
    (
        lambda: SoftSign(alpha=0),
        "surrogate 'soft_sign' needs alpha > 0, got 0.0",
    ),
    (
        lambda: SuperSpike(alpha=-1e-3),
        "surrogate 'super_spike' needs alpha > 0, got -0.001",
    ),
    (lambda: Erf(alpha=0), "surrogate 'erf' needs alpha > 0, got 0.0"),
    (
        lambda: NonzeroSignLogAbs(alpha=-1),
        "surrogate 'nonzero_sign_log_abs' needs alpha > 0, got -1.0",
    ),
    (
        lambda: PiecewiseLeakyReLU(w=0),
        "surrogate 'piecewise_leaky_relu' needs w > 0, got 0.0",
    ),
    (
        lambda: PiecewiseLeakyReLU(c=float("-inf")),
        "surrogate 'piecewise_leaky_relu' needs c to be a finite value, "
        "got -inf",
    ),
    (
        lambda: SquarewaveFourierSeries(n=0),
        "surrogate 'squarewave_fourier_series' needs 1 <= n <= 64, got 0",
    ),
    (
        lambda: SquarewaveFourierSeries(n=65),
        "surrogate 'squarewave_fourier_series' needs 1 <= n <= 64, got 65",
    ),
    (
        lambda: SquarewaveFourierSeries(T_period=0),
        "surrogate 'squarewave_fourier_series' needs T_period > 0, got 0.0",
    ),
    (lambda: S2NN(alpha=0), "surrogate 's2nn' needs alpha > 0, got 0.0"),
    (lambda: S2NN(beta=-1), "surrogate 's2nn' needs beta > 0, got -1.0"),
    (
        lambda: QPseudoSpike(alpha=1.0),
        "surrogate 'q_pseudo_spike' needs alpha > 1, got 1.0",
    ),
    (
        lambda: QPseudoSpike(alpha=0.5),
        "surrogate 'q_pseudo_spike' needs alpha > 1, got 0.5",
    ),
    (
        lambda: LeakyKReLU(leak=float("nan")),
        "surrogate 'leaky_k_relu' needs leak to be a finite value, got nan",
    ),
    (
        lambda: LeakyKReLU(k=float("inf")),
        "surrogate 'leaky_k_relu' needs k to be a finite value, got inf",
    ),
    (
        lambda: FakeNumericalGradient(alpha=0),
        "surrogate 'fake_numerical_gradient' needs alpha > 0, got 0.0",
    ),
    (
        lambda: LogTailedReLU(alpha=float("inf")),
        "surrogate 'log_tailed_relu' needs alpha to be a finite value, "
        "got inf",
    ),
    (lambda: Rect(alpha=-4), "surrogate 'rect' needs alpha > 0, got -4.0"),
    (
        lambda: Sigmoid(alpha=10**400),
        "surrogate 'sigmoid' needs alpha > 0, got inf",
    ),
]


@pytest.mark.parametrize(
    "make,message", RANGE_ERRORS, ids=[m for _, m in RANGE_ERRORS]
)
def test_range_errors(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message


def test_values_allowed_at_the_edges():
    # Finite-only parameters may be zero or negative.
    assert LeakyKReLU(leak=-3.0, k=0.0).params["k"] == 0.0
    assert LogTailedReLU(alpha=-1.0).params["alpha"] == -1.0
    assert PiecewiseLeakyReLU(c=-1.0).params["c"] == -1.0
    assert QPseudoSpike(alpha=1.0000001).params["alpha"] == 1.0000001
    assert SquarewaveFourierSeries(n=1).params["n"] == 1
    assert SquarewaveFourierSeries(n=64).params["n"] == 64


@pytest.mark.parametrize(
    "make",
    [
        lambda: Sigmoid(alpha="4.0"),
        lambda: Sigmoid(alpha=None),
        lambda: Sigmoid(alpha=True),
        lambda: PiecewiseLeakyReLU(c=1j),
        lambda: SquarewaveFourierSeries(n=2.0),
        lambda: SquarewaveFourierSeries(n=2.5),
        lambda: SquarewaveFourierSeries(n=True),
        lambda: SquarewaveFourierSeries(n="2"),
    ],
    ids=[
        "str",
        "None",
        "bool",
        "complex",
        "n-float",
        "n-fraction",
        "n-bool",
        "n-str",
    ],
)
def test_type_errors(make):
    with pytest.raises(TypeError):
        make()


def test_numpy_numbers_are_accepted():
    np = pytest.importorskip("numpy")
    assert (
        Sigmoid(alpha=np.float32(0.5)).mlir() == "#flexsn.sigmoid<alpha=0.5>"
    )
    assert (
        SquarewaveFourierSeries(n=np.int64(3)).mlir()
        == "#flexsn.squarewave_fourier_series<n=3,T_period=8.0>"
    )


@pytest.mark.parametrize("cls", ALL, ids=lambda cls: cls.__name__)
def test_spiking_false_is_rejected(cls):
    with pytest.raises(ValueError, match="spiking"):
        cls(spiking=False)
    assert cls(spiking=True) == cls()


def test_spikingjelly_positional_order():
    assert PiecewiseLeakyReLU(2.0, 0.1).params == {"w": 2.0, "c": 0.1}
    assert SquarewaveFourierSeries(3, 6.0).params == {"n": 3, "T_period": 6.0}
    assert S2NN(2.0, 3.0).params == {"alpha": 2.0, "beta": 3.0}
    # SpikingJelly 2.0's order: (leak, k, spiking).
    assert LeakyKReLU(0.2, 0.7).params == {"leak": 0.2, "k": 0.7}
    with pytest.raises(ValueError, match="spiking"):
        LeakyKReLU(0.2, 0.7, False)
    with pytest.raises(ValueError):
        Sigmoid(4.0, False)


def _spikingjelly_like(cls_name, spiking=True, **params):
    """An object shaped as SpikingJelly 2.0's surrogate modules are (a class
    of the same name, `spiking` and one attribute per parameter), written
    here: SpikingJelly is not importable with every torch."""
    import torch

    class Base(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.spiking = spiking
            for k, v in params.items():
                setattr(self, k, v)

    return type(cls_name, (Base,), {})()


@pytest.mark.parametrize("cls", ALL, ids=lambda cls: cls.__name__)
def test_spikingjelly_objects_are_accepted(cls):
    # Parameters other than the defaults, so that reading them is checked.
    params = {
        name: (3 if name == "n" else 1.25 + 0.375 * i)
        for i, (name, _) in enumerate(cls._spec)
    }
    got = coerce(_spikingjelly_like(cls.__name__, **params))
    assert type(got) is cls
    assert got.params == {
        k: (v if k == "n" else float(v)) for k, v in params.items()
    }


def test_spikingjelly_objects_checked():
    with pytest.raises(ValueError, match="spiking"):
        coerce(_spikingjelly_like("ATan", spiking=False, alpha=2.0))
    with pytest.raises(TypeError, match="no attribute 'alpha'"):
        coerce(_spikingjelly_like("ATan"))
    with pytest.raises(ValueError, match="alpha > 0"):
        coerce(_spikingjelly_like("Sigmoid", alpha=-1.0))
    with pytest.raises(TypeError, match="known:"):
        coerce(_spikingjelly_like("NotASurrogate", alpha=1.0))
    assert coerce("atan") == ATan()
    assert coerce(ATan) == ATan()
    import torch

    assert coerce(_spikingjelly_like("Erf", alpha=torch.tensor(1.5))) == Erf(
        alpha=1.5
    )


def test_by_name():
    assert by_name("piecewise_leaky_relu") == PiecewiseLeakyReLU()
    assert by_name("PiecewiseLeakyReLU", w=0.5) == PiecewiseLeakyReLU(w=0.5)
    assert (
        by_name("squarewave_fourier_series", n=3, T_period=2.0).mlir()
        == "#flexsn.squarewave_fourier_series<n=3,T_period=2.0>"
    )
    assert by_name("straight_through") == DeterministicPass()
    assert by_name("DeterministicPass") == DeterministicPass()
    assert by_name("deterministic_pass") == DeterministicPass()
    for cls in ALL:
        assert type(by_name(cls.mnemonic)) is cls
        assert type(by_name(cls.__name__)) is cls


def test_by_name_errors():
    with pytest.raises(ValueError, match="unknown surrogate 'sigmoid2'"):
        by_name("sigmoid2")
    with pytest.raises(ValueError, match="unknown surrogate"):
        by_name("Sigmoid ")
    with pytest.raises(TypeError):
        by_name("sigmoid", beta=1.0)
    with pytest.raises(ValueError, match="alpha > 0"):
        by_name("atan", alpha=0.0)
    with pytest.raises(ValueError, match="spiking"):
        by_name("erf", spiking=False)


def test_equality_and_hash():
    assert Sigmoid() == Sigmoid(alpha=4) == by_name("sigmoid", alpha=4.0)
    assert hash(Sigmoid()) == hash(Sigmoid(alpha=4))
    assert Sigmoid(alpha=3.0) != Sigmoid(alpha=4.0)
    # Same parameters, different surrogate.
    assert PiecewiseQuadratic(alpha=1.0) != PiecewiseExp(alpha=1.0)
    assert Sigmoid() != "#flexsn.sigmoid<alpha=4.0>"
    # MLIR tells 0.0 from -0.0 apart, and so do we.
    assert PiecewiseLeakyReLU(c=0.0) != PiecewiseLeakyReLU(c=-0.0)
    table = {Sigmoid(): "a", ATan(): "b"}
    assert table[Sigmoid(alpha=4.0)] == "a"
    assert len({Rect(), Rect(1.0), Rect(alpha=2.0)}) == 2
    assert DeterministicPass() == DeterministicPass()


@pytest.mark.parametrize(
    "instance", [cls() for cls in ALL] + [s for s, _ in CUSTOM_TEXT], ids=repr
)
def test_repr_copy_and_pickle_round_trip(instance):
    namespace = {cls.__name__: cls for cls in ALL}
    assert eval(repr(instance), namespace) == instance
    assert copy.copy(instance) == instance
    assert copy.deepcopy(instance) == instance
    restored = pickle.loads(pickle.dumps(instance))
    assert restored == instance and type(restored) is type(instance)


def test_repr():
    assert repr(Sigmoid()) == "Sigmoid(alpha=4.0)"
    assert (
        repr(SquarewaveFourierSeries())
        == "SquarewaveFourierSeries(n=2, T_period=8.0)"
    )
    assert repr(DeterministicPass()) == "DeterministicPass()"


# --- Agreement with the dialect ------------------------------------------


def _td_surrogates():
    """{mnemonic: (C++ name, [(param, default text)])} from FlexSNAttrs.td."""
    text = open(ATTRS_TD).read()
    found = {}
    pattern = re.compile(
        r'def FlexSN_\w+Attr\s*:\s*FlexSN_Surrogate<\s*"(\w+)",\s*"(\w+)",'
        r'\s*\(ins(.*?)\)\s*,\s*"',
        re.S,
    )
    for name, mnemonic, params in pattern.findall(text):
        found[mnemonic] = (
            name,
            re.findall(
                r"(?:SurrogateParam|SurrogateIntParam)"
                r'\s*<?\s*"([^"]+)"[^$]*:\$(\w+)',
                params,
            ),
        )
    return found


def test_classes_match_the_tablegen_definitions():
    if not os.path.exists(ATTRS_TD):
        pytest.skip("FlexSNAttrs.td not found")
    td = _td_surrogates()
    assert sorted(td) == sorted(cls.mnemonic for cls in ALL)
    for cls in ALL:
        _, params = td[cls.mnemonic]
        defaults = cls().params
        assert list(defaults) == [name for _, name in params], cls
        for default, name in params:
            assert defaults[name] == float(default), (cls, name)


def _flexsn_opt():
    tool = os.environ.get("FLEXSN_OPT") or os.path.join(
        REPO, "build", "bin", "flexsn-opt"
    )
    if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
        tool = shutil.which("flexsn-opt")
    if not tool:
        pytest.skip("no built flexsn-opt (set FLEXSN_OPT)")
    return tool


def _run_opt(attrs, tmp_path):
    """Parses one surrogate_grad per attribute text; returns the process."""
    lines = ["func.func @f(%x: f32) {"]
    lines += [
        "  %%%d = flexsn.surrogate_grad %%x surrogate(%s) : f32" % (i, attr)
        for i, attr in enumerate(attrs)
    ]
    lines += ["  return", "}"]
    path = tmp_path / "surrogates.mlir"
    path.write_text("\n".join(lines) + "\n")
    return subprocess.run(
        [_flexsn_opt(), str(path)], capture_output=True, text=True, timeout=120
    )


def _elide_defaults(instance):
    """The attribute as MLIR prints it, less spaces: defaults are elided."""
    defaults = type(instance)().params
    # repr tells -0.0 from 0.0, as MLIR's bitwise comparison does.
    kept = [
        "%s=%s" % (name, value)
        for name, value in re.findall(r"(\w+)=([^,>]+)", instance.mlir())
        if repr(instance.params[name]) != repr(defaults[name])
    ]
    suffix = "<%s>" % ",".join(kept) if kept else ""
    return "#flexsn." + instance.mnemonic + suffix


def test_flexsn_opt_reads_the_texts_back_exactly(tmp_path):
    instances = (
        [cls() for cls in ALL]
        + [s for s, _ in CUSTOM_TEXT]
        + [
            Sigmoid(alpha=0.1 + 0.2),
            LeakyKReLU(leak=5e-324, k=-1.7976931348623157e308),
            QPseudoSpike(alpha=1.0000000000000002),
        ]
    )
    result = _run_opt([s.mlir() for s in instances], tmp_path)
    assert result.returncode == 0, result.stderr
    printed = re.findall(r"surrogate\((#flexsn\.[^)]*)\)", result.stdout)
    assert len(printed) == len(instances)
    for instance, text in zip(instances, printed):
        assert text.replace(" ", "") == _elide_defaults(instance), instance


@pytest.mark.parametrize(
    "make,message", RANGE_ERRORS, ids=[m for _, m in RANGE_ERRORS]
)
def test_flexsn_opt_rejects_what_python_rejects(make, message, tmp_path):
    # Rebuild the text the Python check refused, from its message.
    mnemonic, name, value = re.match(
        r"surrogate '(\w+)' needs (?:1 <= )?(\w+).*, got (\S+)$", message
    ).groups()
    if value in ("inf", "-inf", "nan"):
        pytest.skip("MLIR has no literal for %s" % value)
    result = _run_opt(
        ["#flexsn.%s<%s = %s>" % (mnemonic, name, value)], tmp_path
    )
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize("cls", ALL, ids=lambda cls: cls.__name__)
def test_coerce_reads_attribute_text(cls):
    """A module's surrogate_function may be attribute text, as the compiler
    takes it: it reads back to the same surrogate, spaces or not."""
    params = {
        name: (3 if name == "n" else 1.25 + 0.5 * i)
        for i, (name, _) in enumerate(cls._spec)
    }
    want = cls(**params)
    assert coerce(want.mlir()) == want
    assert coerce(want.mlir().replace("=", " = ").replace(",", ", ")) == want


def test_coerce_rejects_bad_attribute_text():
    with pytest.raises(ValueError, match="not a number"):
        coerce("#flexsn.atan<alpha=big>")
    with pytest.raises(ValueError, match="not a surrogate attribute"):
        coerce("#flexsn.atan<alpha=1.0")
    with pytest.raises(ValueError, match="unknown surrogate"):
        coerce("#flexsn.nope<alpha=1.0>")
