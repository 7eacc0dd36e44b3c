"""Fusion's contract as a property: a model fused by `flexsn.torch.fuse`
computes what the same model unfused computes, in every layout, precision
and mode, eagerly and through torch.compile.

`compare(make_model, make_input, case)` builds the model from one seed
twice (one copy fused; in a half precision also a float32 reference),
runs them on the same inputs and random numbers through a sequence of
calls (training, eval, or switching between them), and compares, call by
call: the output, the input's gradient, every parameter's gradient, every
buffer (running statistics, `num_batches_tracked`) and every neuron's
states after the call. Each tensor is compared as a whole, by its relative
difference in norm, ||fused - unfused|| / ||unfused|| (a 100% error on a
small bias gradient fails; no elementwise atol hides it), against the
tolerance of the case's precision (docs/Semantics.md, "Fusion").

A gradient that is zero in exact arithmetic (a bias whose output only a
training batch norm reads: the batch norm subtracts it again) is rounding
noise in both models, and two noises need not agree: such parameters are
named by the model (`zero_gradients`) and checked to be noise, both
fused and unfused: small against the sum of its terms' magnitudes. In a
half precision a bias gradient that nearly cancels (the input of a
residual block's batch norm, whose mean the next batch norm removes) is
judged the same way as well: its error against float32 may also be the
zero-gradient tolerance of its terms' magnitudes (`bias_terms`), the
rounding a sum of that many half-precision terms can carry whatever its
value.
"""

import contextlib
import dataclasses
import json
import os
from typing import Callable, Dict, List, Optional, Sequence

import torch
from torch import nn

from flexsn.torch import (
    FlexSN,
    compile_policy,
    fuse,
    set_recompute,
)

#: The tolerance on the relative difference in norm of whole tensors, per
#: precision: values (outputs, states, statistics) and gradients; and, for
#: a gradient that is zero in exact arithmetic, its norm relative to the
#: norm of its terms' magnitudes.
TOLERANCES = {
    "f32": {"value": 1e-4, "grad": 1e-3, "zero_grad": 1e-5},
    "amp": {"value": 2e-2, "grad": 5e-2, "zero_grad": 3e-2},
    "bf16": {"value": 2e-2, "grad": 5e-2, "zero_grad": 3e-2},
}
#: In a half precision, how many times the unfused model's error against
#: float32 the fused model's may be.
HALF_ERROR_FACTOR = 2.0
#: For a spiking model in a half precision: the fused model's errors
#: against float32, all tensors and calls together (root of the sum of
#: squares), at most this many times the unfused model's plus one flipped
#: spike's share of a small tensor. Rounding flips spikes near the
#: threshold in both models, each flip shows as a few percent of a tensor,
#: and which model a given seed flips is chance: one tensor against another
#: would compare luck.
SPIKING_HALF_FACTOR, SPIKING_HALF_FLOOR = 3.0, 0.1


@dataclasses.dataclass(frozen=True)
class Case:
    """One configuration: device, layout ("row_major" or
    "channels_last"), precision ("f32"; "amp": autocast, float16 on CUDA
    and bfloat16 on the CPU; "bf16": the model and inputs in bfloat16)
    and the modes of its calls ("train" or "eval" each); `compiled`: ""
    runs the fused model eagerly, a compile policy
    (flexsn.torch.set_compile_policy: "by_size", "kernels", "torch_step")
    runs it through torch.compile(fullgraph=True) under that policy, and
    "<policy>+cudagraphs" with mode="reduce-overhead". `reference`:
    "eager" runs the unfused model eagerly, the reference of fusion and
    compilation together; "compiled" compiles it as the fused one, which
    checks fusion alone under torch.compile (Inductor's rounding differs
    from eager's, and in a deep spiking model flips spikes near the
    threshold: compiled against eager is then no longer per tensor).
    `recompute`: the fused model's neurons recompute their saves in the
    backward (flexsn.torch.set_recompute), the unfused model's save."""

    device: str = "cpu"
    layout: str = "row_major"
    precision: str = "f32"
    modes: Sequence[str] = ("train", "train")
    compiled: str = ""
    reference: str = "eager"
    recompute: bool = False

    def __str__(self):
        return (
            f"{self.device}-{self.layout}-{self.precision}-"
            f"{'+'.join(self.modes)}"
            + (f"-compiled({self.compiled})" if self.compiled else "")
            + ("-against-compiled" if self.reference == "compiled" else "")
            + ("-recompute" if self.recompute else "")
        )


@dataclasses.dataclass
class Row:
    call: int
    name: str
    error: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance


class Report:
    """Every compared tensor's worst relative difference."""

    def __init__(self, case: Case):
        self.case = case
        self.rows: List[Row] = []

    def add(self, call, name, error, tolerance):
        self.rows.append(Row(call, name, float(error), tolerance))

    def failures(self) -> List[Row]:
        return [row for row in self.rows if not row.ok]

    def worst(self) -> Dict[str, float]:
        """{tensor name: its worst error over the calls}."""
        worst: Dict[str, float] = {}
        for row in self.rows:
            worst[row.name] = max(worst.get(row.name, 0.0), row.error)
        return worst

    def table(self, rows: Optional[List[Row]] = None) -> str:
        rows = self.rows if rows is None else rows
        return "\n".join(
            f"  call {r.call} {r.name:40s} {r.error:10.3g} (tolerance "
            f"{r.tolerance:g}){'' if r.ok else '  FAILED'}"
            for r in rows
        )

    def check(self):
        failures = self.failures()
        assert (
            not failures
        ), f"fused differs from unfused ({self.case}):\n" + self.table(
            failures
        )


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want|| in float64, over the elements that are not
    NaN in both (0 when both are zero; inf for another shape or NaNs in
    other places)."""
    if got.shape != want.shape:
        return float("inf")
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    nan = want.isnan()
    if not torch.equal(got.isnan(), nan):
        return float("inf")
    got, want = got[~nan], want[~nan]
    difference = torch.linalg.vector_norm(got - want).item()
    scale = torch.linalg.vector_norm(want).item()
    if scale == 0.0:
        return 0.0 if difference == 0.0 else float("inf")
    return difference / scale


def _norm(tensor: torch.Tensor) -> float:
    return torch.linalg.vector_norm(tensor.detach().double()).item()


def _neurons(model: nn.Module):
    return [
        (name, m) for name, m in model.named_modules() if isinstance(m, FlexSN)
    ]


def _reset(model: nn.Module):
    for _, neuron in _neurons(model):
        neuron.reset()


def _to_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "row_major" or x.dim() != 5:
        return x
    # [T, B, C, H, W] whose [T·B, C, H, W] view is channels-last.
    flat = x.flatten(0, 1).contiguous(memory_format=torch.channels_last)
    return flat.view(x.shape)


def _autocast(case: Case):
    if case.precision != "amp":
        return torch.autocast("cpu", enabled=False)
    dtype = torch.float16 if case.device == "cuda" else torch.bfloat16
    return torch.autocast(case.device, dtype=dtype)


def _bias_axis(module: nn.Module, y: torch.Tensor) -> int:
    """The axis of a layer's output y its bias adds along: the last for a
    Linear, the channels before the spatial dimensions for a conv or a
    batch norm (a BatchNorm1d's [.., C] or [.., C, L]: the last axis of
    size C)."""
    if isinstance(module, nn.modules.conv._ConvNd):
        return -(len(module.kernel_size) + 1)
    if isinstance(module, (nn.BatchNorm2d, nn.BatchNorm3d)):
        return -4 if isinstance(module, nn.BatchNorm3d) else -3
    if isinstance(module, nn.BatchNorm1d):
        return -1 if y.shape[-1] == module.num_features else -2
    return -1


def bias_terms(model: nn.Module, zero_gradients=()) -> List[str]:
    """The biases of `model`'s convolutions, linear layers and batch norms
    (not those in `zero_gradients`): the sums whose terms' magnitudes a
    half-precision comparison records."""
    kinds = (
        nn.modules.conv._ConvNd,
        nn.Linear,
        nn.modules.batchnorm._NormBase,
    )
    return [
        f"{name}.bias"
        for name, m in model.named_modules()
        if isinstance(m, kinds)
        and getattr(m, "bias", None) is not None
        and f"{name}.bias" not in zero_gradients
    ]


def _record(model, x, mode, case, call, terms=(), run=None):
    """One call (from reset neurons, as a training loop's reset_net
    leaves them): {name: tensor} of everything compared, and for each
    bias in `terms` ("layer.bias") the scale of its gradient's terms,
    Σ|dL/d(layer output)| per channel, under "terms layer.bias". `run`
    calls the model (its compiled form); the names, gradients and states
    are read from `model`."""
    _reset(model)
    model.train(mode == "train")
    # The same random numbers for every model's call (dropout's masks).
    torch.manual_seed(10_000 + call)
    for p in model.parameters():
        p.grad = None
    out, hooks = {}, []
    for name in terms if mode == "train" else ():
        layer = model.get_submodule(name.rsplit(".", 1)[0])

        def keep_terms(module, args, y, name=name, layer=layer):
            axis = _bias_axis(layer, y) % y.dim()
            dims = [d for d in range(y.dim()) if d != axis]

            def terms(grad):
                out[f"terms {name}"] = grad.detach().abs().double().sum(dims)

            y.register_hook(terms)

        hooks.append(layer.register_forward_hook(keep_terms))
    x = x.detach().clone().requires_grad_(mode == "train")
    try:
        if case.compiled.endswith("+cudagraphs"):
            torch.compiler.cudagraph_mark_step_begin()
        with _autocast(case):
            y = (model if run is None else run)(x)
        out["output"] = y.detach().clone()
        if mode == "train":
            (y.float() * _weights(y, call)).sum().backward()
            out["grad input"] = x.grad.clone()
            for name, p in model.named_parameters():
                if p.grad is not None:
                    out[f"grad {name}"] = p.grad.clone()
    finally:
        for hook in hooks:
            hook.remove()
    for name, b in model.named_buffers():
        out[f"buffer {name}"] = b.detach().clone()
    for name, neuron in _neurons(model):
        for k, state in enumerate(neuron.states):
            if isinstance(state, torch.Tensor):
                out[f"state {name}[{k}]"] = state.detach().clone()
    return out


def _weights(y: torch.Tensor, call: int) -> torch.Tensor:
    """The loss is Σ output·weights, the weights a fixed normal draw per
    call (not all ones: a sum's gradient is symmetric enough to hide
    errors that cancel)."""
    gen = torch.Generator().manual_seed(1000 + call)
    return torch.randn(y.shape, generator=gen).to(y.device)


def _build(make_model, seed: int, device: str, dtype, layout: str):
    torch.manual_seed(seed)
    model = make_model().to(device, dtype)
    if layout == "channels_last":
        model.to(memory_format=torch.channels_last)
    return model


def _compiled(model: nn.Module, compiled: str, reset: bool = True):
    """`model` through torch.compile as `compiled` says (Case), or None
    for an eager run. Each case starts from dynamo's empty cache (`reset`):
    cases share forward functions, and a full cache would fall back to
    eager."""
    if not compiled:
        return None
    _, _, graphs = compiled.partition("+")
    if graphs not in ("", "cudagraphs"):
        raise ValueError(f"unknown compiled case {compiled!r}")
    if reset:
        torch._dynamo.reset()
    return torch.compile(
        model,
        fullgraph=True,
        dynamic=False,
        mode="reduce-overhead" if graphs else None,
    )


@contextlib.contextmanager
def _compile_policy(compiled: str):
    """The compile policy of a `compiled` case while its calls trace."""
    if not compiled:
        yield
        return
    with compile_policy(compiled.partition("+")[0]):
        yield


def compare(
    make_model: Callable[[], nn.Module],
    make_input: Callable[[int], torch.Tensor],
    case: Case,
    seed: int = 0,
) -> Report:
    """Runs the unfused and the fused model (`make_model()` under one
    seed; each call's input `make_input(call)`) through `case.modes` and
    reports every compared tensor.

    In float32 the fused tensor is compared with the unfused one. In a
    half precision both are rounded far more than fusion changes them, so
    each is compared with the unfused model run in float32: for a model
    without spikes (`smooth = True`: rounding only) the fused model's
    error must be within the precision's tolerance, or at most
    `HALF_ERROR_FACTOR` times the unfused model's own error, tensor by
    tensor; for a spiking model, all tensors together
    (`SPIKING_HALF_FACTOR`, `SPIKING_HALF_FLOOR`)."""
    half = case.precision != "f32"
    dtype = torch.bfloat16 if case.precision == "bf16" else torch.float32
    unfused = _build(make_model, seed, case.device, dtype, case.layout)
    fused = fuse(_build(make_model, seed, case.device, dtype, case.layout))
    if case.recompute:
        assert set_recompute(fused, True), "no FlexSN neuron to recompute"
    reference = (
        _build(make_model, seed, case.device, torch.float32, case.layout)
        if half
        else None
    )
    if case.reference not in ("eager", "compiled"):
        raise ValueError(f"unknown reference {case.reference!r}")
    # Compiled first: _compiled empties dynamo's cache.
    run_unfused = (
        _compiled(unfused, case.compiled)
        if case.reference == "compiled"
        else None
    )
    run_fused = _compiled(fused, case.compiled, reset=run_unfused is None)
    zero_gradients = tuple(getattr(unfused, "zero_gradients", ()))
    per_tensor = not half or getattr(unfused, "smooth", False)
    summed_biases = zero_gradients + tuple(
        bias_terms(unfused, zero_gradients) if half and per_tensor else ()
    )
    tolerance = TOLERANCES[case.precision]
    report = Report(case)
    squares = {"fused": 0.0, "unfused": 0.0}
    for call, mode in enumerate(case.modes):
        x32 = _to_layout(make_input(call).to(case.device), case.layout)
        x = x32.to(dtype)
        with _compile_policy(case.compiled if run_unfused is not None else ""):
            want = _record(
                unfused, x, mode, case, call, summed_biases, run_unfused
            )
        with _compile_policy(case.compiled):
            got = _record(fused, x, mode, case, call, run=run_fused)
        ref = (
            _record(reference, x32, mode, Case(case.device), call)
            if half
            else None
        )
        for name, w in want.items():
            if name.startswith("terms "):
                continue
            g = got.get(name)
            if g is None:
                report.add(
                    call, f"{name} (missing when fused)", float("inf"), 0.0
                )
                continue
            if name[len("grad ") :] in zero_gradients and mode == "train":
                terms = _norm(want["terms " + name[len("grad ") :]])
                for side, grad in (("fused", g), ("unfused", w)):
                    noise = _norm(grad)
                    report.add(
                        call,
                        f"{name} (zero, {side})",
                        noise / terms
                        if terms
                        else (0.0 if noise == 0.0 else float("inf")),
                        tolerance["zero_grad"],
                    )
                continue
            limit = tolerance["grad" if name.startswith("grad") else "value"]
            if half:
                own, error = relative(w, ref[name]), relative(g, ref[name])
                squares["fused"] += error**2
                squares["unfused"] += own**2
                # A sum of half-precision terms rounds in proportion to
                # its terms' magnitudes, not to its value.
                scale = want.get("terms " + name[len("grad ") :])
                cancelling = (
                    tolerance["zero_grad"] * _norm(scale) / _norm(ref[name])
                    if scale is not None and _norm(ref[name])
                    else 0.0
                )
                report.add(
                    call,
                    f"{name} (vs float32; unfused {own:.3g}"
                    + (
                        f"; terms' scale {cancelling:.3g}"
                        if cancelling
                        else ""
                    )
                    + ")",
                    error,
                    max(limit, HALF_ERROR_FACTOR * own, cancelling)
                    if per_tensor
                    else float("inf"),
                )
            else:
                report.add(call, name, relative(g, w), limit)
        for name in got.keys() - want.keys():
            report.add(call, f"{name} (only when fused)", float("inf"), 0.0)
    if not half and case.device == "cuda" and not case.compiled:
        _judge_without_tf32(report, make_model, make_input, case, seed)
    if not per_tensor:
        own = squares["unfused"] ** 0.5
        report.add(
            len(case.modes) - 1,
            f"all tensors and calls (vs float32; unfused {own:.3g})",
            squares["fused"] ** 0.5,
            SPIKING_HALF_FACTOR * own + SPIKING_HALF_FLOOR,
        )
    _append_to_log(report, make_model)
    return report


def _judge_without_tf32(report, make_model, make_input, case, seed):
    """Float32 on CUDA: a tensor over its tolerance is judged again with
    both models' convolutions in float32 (cuDNN's TF32 off, PyTorch's
    default on). TF32 rounds a convolution's operands to 10 bits, so the
    last-bit difference a fused batch norm's backward makes in the
    gradient a convolution reads comes out of it as a difference of about
    1e-3 in some elements, and a deep model's backward carries that to its
    first layers: on ResNet-50 fused against unfused differ by 5.9e-3 with
    TF32 and by 1.7e-5 without (forward values by 1.4e-7 either way).
    Only where a tensor failed: it costs two more runs."""
    failed = {(row.call, row.name) for row in report.failures()}
    if not failed:
        return
    runs = []
    for fused in (False, True):
        model = _build(
            make_model, seed, case.device, torch.float32, case.layout
        )
        zero_gradients = tuple(getattr(model, "zero_gradients", ()))
        if fused:
            model = fuse(model)
            if case.recompute:
                set_recompute(model, True)
        with without_tf32():
            runs.append(
                [
                    _record(
                        model,
                        _to_layout(
                            make_input(call).to(case.device), case.layout
                        ),
                        mode,
                        case,
                        call,
                        () if fused else zero_gradients,
                    )
                    for call, mode in enumerate(case.modes)
                ]
            )
    rows, report.rows = report.rows, []
    for row in rows:
        want, got = runs[0][row.call], runs[1][row.call]
        if (row.call, row.name) not in failed or row.name not in want:
            report.rows.append(row)
            continue
        error = relative(got.get(row.name, torch.empty(0)), want[row.name])
        report.add(
            row.call,
            f"{row.name} (without TF32; with it {row.error:.3g})",
            error,
            row.tolerance,
        )


@contextlib.contextmanager
def without_tf32():
    """cuDNN's convolutions (and CUDA matmuls) in full float32, as they
    were before, afterwards."""
    flags = (
        torch.backends.cudnn.allow_tf32,
        torch.backends.cuda.matmul.allow_tf32,
    )
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        (
            torch.backends.cudnn.allow_tf32,
            torch.backends.cuda.matmul.allow_tf32,
        ) = flags


def _append_to_log(report: Report, make_model) -> None:
    """With $FLEXSN_FUSION_LOG set, appends the case's worst error per
    tensor (and its tolerance) as a JSON line: the record a GPU run keeps
    (docs/perf/fusion)."""
    path = os.environ.get("FLEXSN_FUSION_LOG")
    if not path:
        return
    worst = {}
    for row in report.rows:
        if row.name not in worst or row.error > worst[row.name][0]:
            worst[row.name] = (row.error, row.tolerance)
    with open(path, "a") as log:
        log.write(
            json.dumps(
                {
                    "case": str(report.case),
                    "model": getattr(make_model, "__name__", repr(make_model)),
                    "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(
                        " "
                    )[0],
                    "device_name": torch.cuda.get_device_name()
                    if report.case.device == "cuda"
                    else "cpu",
                    "ok": not report.failures(),
                    "worst": worst,
                }
            )
            + "\n"
        )


def summarize(log_path: str) -> str:
    """A markdown table of a $FLEXSN_FUSION_LOG: per case, whether it held,
    its tightest tensor (error / tolerance), and the noise of its
    zero-in-exact-arithmetic gradients, fused and unfused."""
    lines = [
        "| test | case | held | tightest tensor: error / tolerance "
        "| zero-gradient noise / terms, fused and unfused |",
        "| --- | --- | --- | --- | --- |",
    ]
    with open(log_path) as log:
        for line in log:
            record = json.loads(line)
            worst = record["worst"]
            checked = [
                (error / limit, name, error, limit)
                for name, (error, limit) in worst.items()
                if 0.0 < limit < float("inf")
            ]
            tight = max(checked) if checked else None
            zero = {
                side: max(
                    (
                        e
                        for n, (e, _) in worst.items()
                        if f"(zero, {side})" in n
                    ),
                    default=None,
                )
                for side in ("fused", "unfused")
            }
            test = record.get("test") or record["model"]
            lines.append(
                f"| {test.split('::')[-1]} | {record['case']} | "
                f"{'yes' if record['ok'] else 'NO'} | "
                + (
                    f"{tight[1]}: {tight[2]:.2g} / {tight[3]:.2g}"
                    if tight
                    else "-"
                )
                + " | "
                + (
                    f"{zero['fused']:.2g}, {zero['unfused']:.2g}"
                    if zero["fused"] is not None
                    else "-"
                )
                + " |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(summarize(sys.argv[1]))
