"""flexsn.CompileOptions: one frozen value for how a neuron is compiled,
normalized and checked when made; flexsn.compile and the FlexSN modules
take it, and keywords change its fields."""

import copy
import dataclasses
import pickle

import pytest
import torch

import flexsn
from flexsn import CompileOptions
from flexsn.torch import FlexSN, LIFNode


def test_normalized_equal_hashable_and_picklable():
    a = CompileOptions(
        variants=["inference", "forward", "inference"],
        chip="sm_80",
        kinds={"tau": "runtime", "v_threshold": "trainable"},
        shapes=[("v_threshold", "per_neuron")],
        storage_types=("f16", "f32"),
    )
    assert a.variants == ("inference", "forward")
    assert a.chip == ("sm_80",)
    assert a.kinds == (("tau", "runtime"), ("v_threshold", "trainable"))
    assert a.shapes == (("v_threshold", "per_neuron"),)
    assert a.storage_types == ("f16", "f32")  # the order given
    b = CompileOptions(
        variants=("inference", "forward"),
        chip=("sm_80",),
        kinds=[("v_threshold", "trainable"), ("tau", "runtime")],
        shapes={"v_threshold": "per_neuron"},
        storage_types=["f16", "f32"],
    )
    assert a == b and hash(a) == hash(b)
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.chip = ("sm_90",)
    assert a.replace(chip="sm_90").chip == ("sm_90",) and a.chip == ("sm_80",)
    assert CompileOptions.of(a, neuron=None) is a  # None changes nothing
    assert CompileOptions.of(None) == CompileOptions()


@pytest.mark.parametrize(
    "fields, error, message",
    [
        (dict(variants=("train",)), ValueError, "unknown variant 'train'"),
        (dict(storage_types=("f64",)), ValueError, "unknown storage type"),
        (dict(targets=("rocm",)), ValueError, "unknown target 'rocm'"),
        (dict(spike_storage=("u4",)), ValueError, "unknown spike storage"),
        (dict(spike_storage=()), ValueError, "lists no storage"),
        (dict(kinds={"tau": "learned"}), ValueError, "parameter kind"),
        (dict(shapes={"tau": "row"}), ValueError, "unknown shape 'row'"),
        (dict(save_in_storage_type=1), TypeError, "is a bool"),
        (dict(neuron=3), TypeError, "neuron is a name"),
        (dict(variants=3), TypeError, "sequence of names"),
    ],
)
def test_bad_fields_are_clear_errors(fields, error, message):
    with pytest.raises(error, match=message):
        CompileOptions(**fields)


def test_unknown_keywords_name_the_options():
    with pytest.raises(TypeError, match="unknown compile option.*chips.*"):
        CompileOptions.of(chips=("sm_90",))
    with pytest.raises(TypeError, match="is a flexsn.CompileOptions"):
        CompileOptions.of({"chip": "sm_90"})


def test_compile_takes_the_options_or_their_fields():
    options = CompileOptions(targets=("cpu",), variants=("inference",))
    by_value = flexsn.compile("lif", options=options)
    by_keywords = flexsn.compile(
        "lif", targets=("cpu",), variants=("inference",)
    )
    assert by_value.directory == by_keywords.directory
    assert by_value.variants == ("inference",)
    # A keyword changes that field of the options.
    both = flexsn.compile("lif", options=options, variants=("final-state",))
    assert both.variants == ("final-state",)
    assert both.directory != by_value.directory
    with pytest.raises(TypeError, match="unknown compile option"):
        flexsn.compile("lif", vector_width=4)


def test_a_module_keeps_its_options():
    options = CompileOptions(targets=("cpu",), storage_types=("f32",))
    lif = LIFNode(options=options)
    assert lif.options == options
    assert lif.compiled.storage_types == ("f32",)
    # Keywords change the module's options; without options a module
    # compiles every storage type.
    other = LIFNode(targets=("cpu",), save_in_storage_type=False)
    assert other.options.storage_types == flexsn.STORAGE_TYPES
    assert other.options.save_in_storage_type is False
    # A const write compiles with the same options; a copy keeps them.
    lif.tau = 3.0
    assert lif.compiled.storage_types == ("f32",)
    assert copy.deepcopy(lif).options == options
    assert pickle.loads(pickle.dumps(lif)).options == options
    with pytest.raises(TypeError, match="unknown compile option"):
        FlexSN("lif", targets=("cpu",), vector_width=4)


def test_a_module_pickled_before_compile_options_loads():
    """A module pickled by the version that kept its options as a dict of
    flexsn.compile's keywords loads with those options."""
    lif = LIFNode(targets=("cpu",), storage_types=("f32",), step_mode="m")
    x = torch.rand(3, 4) * 2
    want = lif(x)
    lif.reset()
    state = copy.deepcopy(lif.__getstate__())
    del state["_options"]
    state["_compile_options"] = dict(
        storage_types=("f32",),
        kinds=None,
        shapes=None,
        neuron=None,
        targets=("cpu",),
    )
    old = LIFNode.__new__(LIFNode)
    old.__setstate__(state)
    assert old.options == lif.options
    assert torch.equal(old(x), want)


# --- The compile request: what flexsn-compile --request reads -------------


def _request_of(params=None, **fields):
    from flexsn import compiler
    from flexsn._compile_tool import compile_request

    options = CompileOptions.of(**fields)
    key = compiler._cache_key(options, params, None)
    return compile_request(key)


def test_requests_follow_the_compilers_schema():
    """Every field of a request the Python layer writes is one the
    compiler declares (the schema `flexsn-compile --print-request-schema`
    prints, copied into _dialect), of its type and values."""
    from flexsn import _dialect

    request = _request_of(
        variants=("inference", "forward", "backward"),
        storage_types=("f32", "bf16"),
        targets=("cpu", "cuda"),
        chip=("sm_80", "sm_90"),
        kinds={"tau": "runtime"},
        shapes={"v_threshold": "per_neuron"},
        spike_storage=("dense", "u8"),
        save_in_storage_type=False,
        approximate_surrogates=True,
    )
    objects = _dialect.COMPILE_REQUEST["objects"]
    assert request["version"] == _dialect.COMPILE_REQUEST["version"]
    assert request["kernels"]["storage_types"] == ["f32", "bf16"]
    assert request["kernels"]["save_in_storage_type"] is False
    assert request["configure"]["shapes"] == {"v_threshold": "per_neuron"}
    cuda = request["targets"]["cuda"]
    assert cuda["chips"] == ["sm_80", "sm_90"] and cuda["fatbin"] is True
    assert cuda["approximate_surrogates"] is True
    for name in request["kernels"]:
        assert name in objects["kernels"], name
    for name in cuda:
        assert name in objects["targets.cuda"], name


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r.update(kernel={}), "request.kernel: no such field"),
        (
            lambda r: r["kernels"].update(variants=["sideways"]),
            "request.kernels.variants[0]: 'sideways' is not one of",
        ),
        (
            lambda r: r["targets"]["cpu"].update(vector_width="8"),
            "request.targets.cpu.vector_width: expected a count",
        ),
        (
            lambda r: r["configure"]["values"].update(tau="2"),
            "request.configure.values.tau: expected a number or a bool",
        ),
        (
            lambda r: r["configure"].update(kinds={"tau": "fixed"}),
            "request.configure.kinds.tau: 'fixed' is not one of",
        ),
    ],
)
def test_a_request_off_the_schema_is_refused_by_name(change, message):
    from flexsn._compile_tool import check_request

    request = _request_of(targets=("cpu",), params={"tau": 2.0})
    check_request(request)
    change(request)
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        check_request(request)


def test_a_surrogate_with_spaces_compiles_as_written_without():
    """The request carries the surrogate as a typed string, so MLIR's own
    printing (spaces around `=`) compiles: the same configured neuron, and
    the same kernels, as the text without spaces."""
    compiled = [
        flexsn.compile(
            "lif",
            surrogate=text,
            targets=("cpu",),
            variants=("forward", "backward"),
        )
        for text in ("#flexsn.atan<alpha=3.0>", "#flexsn.atan<alpha = 3.0>")
    ]
    assert compiled[0].directory != compiled[1].directory
    configured = [
        (c.directory / "configured.mlir").read_text() for c in compiled
    ]
    assert "#flexsn.atan<alpha = 3.0>" in configured[0]
    assert configured[0] == configured[1]
    assert compiled[0].cpu_library.read_bytes() == (
        compiled[1].cpu_library.read_bytes()
    )


def test_a_parameter_value_that_is_not_finite_is_refused():
    with pytest.raises(ValueError, match="must be finite, got nan"):
        _request_of(targets=("cpu",), params={"tau": float("nan")})


def test_every_option_is_its_request_field_and_part_of_the_cache_key():
    """A CompileOptions field names one request field of the compiler's
    schema; the request (which is the cache key) holds the option's value
    there, so an option changed is a key changed, and the CUDA fields are
    there only when CUDA is built."""
    from flexsn import _dialect, compiler

    objects = _dialect.COMPILE_REQUEST["objects"]
    changed = dict(
        variants=("forward", "backward"),
        storage_types=("f16",),
        chip=("sm_80",),
        kinds={"tau": "runtime"},
        shapes={"tau": "per_neuron"},
        spike_storage=("dense", "u8"),
        save_in_storage_type=False,
        approximate_surrogates=True,
        coupled=True,
    )
    both = ("cpu", "cuda")
    base = compiler._cache_key(CompileOptions(targets=both), None, None)
    declared = [
        f
        for f in dataclasses.fields(CompileOptions)
        if "request" in f.metadata
    ]
    assert sorted(f.name for f in declared) == sorted(changed)
    for field in declared:
        path = field.metadata["request"]
        obj, name = path.rsplit(".", 1)
        assert name in objects[obj], path
        options = CompileOptions(
            targets=both, **{field.name: changed[field.name]}
        )
        key = compiler._cache_key(options, None, None)
        assert key != base, field.name
        node = key["request"]
        for part in path.split("."):
            node = node[part]
        value = changed[field.name]
        want = (
            dict(value)
            if isinstance(value, dict)
            else (list(value) if isinstance(value, tuple) else value)
        )
        assert node == want, (path, node)
    cpu_only = compiler._cache_key(
        CompileOptions(targets=("cpu",), approximate_surrogates=True),
        None,
        None,
    )
    assert cpu_only["request"]["targets"] == {"cpu": {}}
    # The machine's toolkit is no part of the key, only of the request.
    assert "toolkit" not in base["request"]["targets"]["cuda"]
