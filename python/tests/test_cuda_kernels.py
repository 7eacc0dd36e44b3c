"""The GPU kernels through the package, on a CUDA GPU: every group of
kernel_checks.py (inference, final-state) and train_kernel_checks.py
(training forward / backward) at their --quick sizes with PyTorch
references on the GPU, one test per group and shipped neuron (its soft and
detach copies included). Without a GPU they skip (the `cuda` marker), and
collecting them compiles nothing.

A machine without the FlexSN tools takes the kernels from the cache that
`kernel_checks.py --compile-only` and `train_kernel_checks.py
--compile-only` filled ($FLEXSN_CACHE_DIR; see utils/gpu_bundle.sh).
"""

import argparse
import contextlib
import io

import pytest

import flexsn
import kernel_checks as kc
import train_kernel_checks as tkc

pytestmark = pytest.mark.cuda

NEURONS = sorted(flexsn.shipped_neurons())  # a directory listing
INFERENCE_GROUPS = ("spec-defaults", "grid", "absent", "strided", "misaligned")
SHARED_GROUPS = ("badargs", "streams", "unload")  # on lif and plif
TRAIN_GROUPS = (
    "reference",
    "cpu-path",
    "workspace",
    "deterministic",
    "absent",
    "misaligned",
    "strided",
    "grid",
)


@pytest.fixture(scope="module")
def env():
    import torch

    return kc.TorchEnv(torch)


def run_group(env, module, bases, suffixes, variants, group):
    """Runs one group at the --quick sizes; fails with the summary lines of
    its failing checks, skips when the neurons have nothing to check."""
    kernels = kc.KernelSet(bases, suffixes)
    neurons = kc.select(kernels, None, variants)
    args = argparse.Namespace(deadline=None, seed=0)
    if module is tkc:
        checker = tkc.TrainChecker(env, kernels, args, tkc.make_ad(env))
    else:
        checker = kc.Checker(env, kernels, args)
    module.run_groups(checker, neurons, "quick", only=group)
    if not checker.records:
        pytest.skip("no %s checks for %s" % (group, ", ".join(neurons)))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = kc.summarize(checker, None, {}, prog=group)
    lines = out.getvalue().splitlines()
    failing = [line for line in lines if line.startswith(("FAIL", "     "))]
    assert rc == 0, "\n".join(failing + lines[-1:])


@pytest.mark.parametrize("neuron", NEURONS)
@pytest.mark.parametrize("group", INFERENCE_GROUPS)
def test_inference_kernels(env, group, neuron):
    run_group(env, kc, [neuron], kc.INFERENCE_COPIES, kc.VARIANTS, group)


@pytest.mark.parametrize("group", SHARED_GROUPS)
def test_inference_kernels_runtime(env, group):
    run_group(
        env, kc, ["lif", "plif"], kc.INFERENCE_COPIES, kc.VARIANTS, group
    )


@pytest.mark.parametrize("neuron", NEURONS)
@pytest.mark.parametrize("group", TRAIN_GROUPS)
def test_training_kernels(env, group, neuron):
    run_group(
        env, tkc, [neuron], tuple(kc.COPIES), ("forward", "backward"), group
    )
