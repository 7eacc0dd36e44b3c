"""Run by utils/check_wheel.sh inside a fresh venv holding only the wheel:
flexsn must come from the venv, find its bundled tools, runtime and
neurons, compile into ~/.cache/flexsn, and compute what the formula says."""
import pathlib
import subprocess
import sys
import time

repository = pathlib.Path(sys.argv[1]).resolve()
t0 = time.perf_counter()
import flexsn  # noqa: E402

import_s = time.perf_counter() - t0
import torch  # noqa: E402
from flexsn import _tools  # noqa: E402
from flexsn.torch import FlexSN, LIFNode  # noqa: E402

package = pathlib.Path(flexsn.__file__).resolve().parent
assert repository not in package.parents, f"flexsn from {package}"
multicall = package / "_bundled" / "bin" / "flexsn"
assert _tools.tool_command("flexsn-compile") == [str(multicall), "compile"]
assert _tools.find_runtime_library().parent == package / "_bundled" / "lib"
assert flexsn.cache_dir() == pathlib.Path.home() / ".cache" / "flexsn"
print(f"flexsn {flexsn.__version__} from {package}; import {import_s:.2f} s")


def step(x, v, tau=2.0):
    h = v + (x - v) / tau
    s = flexsn.spike(h - 1.0)
    return s, h * (1.0 - s)


def reference(x, tau=2.0):
    """The formula in float32, in the kernels' order of operations."""
    v, spikes = torch.zeros_like(x[0]), []
    for xt in x:
        h = v + (xt - v) / tau
        s = (h >= 1.0).float()
        v = h * (1.0 - s)
        spikes.append(s)
    return torch.stack(spikes).double()


devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
t0 = time.perf_counter()
python_neuron = FlexSN(step, num_inputs=1, num_states=1, num_outputs=1)
first_compile_s = time.perf_counter() - t0
print(
    f"first compile (a neuron written in Python, every variant): "
    f"{first_compile_s:.2f} s"
)
torch.manual_seed(0)
x = torch.rand(8, 1000) * 2.5
want = reference(x)
for device in devices:
    for name, module in (
        ("Python step", python_neuron),
        ("LIFNode", LIFNode(step_mode="m", tau=2.0)),
    ):
        module = module.to(device)
        module.reset()
        got = module(x.to(device)).cpu().double()
        wrong = int((got != want).sum())
        print(f"{device}, {name}: {int(want.sum())} spikes, {wrong} wrong")
        assert wrong == 0
        # Training runs too: gradients are finite and reach the input.
        module.reset()
        xg = x.to(device).detach().requires_grad_()  # a leaf on each device
        module(xg).sum().backward()
        assert torch.isfinite(xg.grad).all() and xg.grad.abs().sum() > 0
# The console scripts run the bundled binary as the tool they are named.
scripts = pathlib.Path(sys.executable).parent
version = subprocess.run(
    [scripts / "flexsn-opt", "--version"],
    capture_output=True,
    text=True,
    check=True,
).stdout
assert version.startswith(f"flexsn-opt (FlexSN {flexsn.__version__})"), version
lowered = subprocess.run(
    [
        scripts / "flexsn-opt",
        package / "_bundled" / "share" / "flexsn" / "neurons" / "lif.mlir",
        "--flexsn-lower-to-cpu=variants=inference",
    ],
    capture_output=True,
    text=True,
    check=True,
).stdout
assert "_mlir_ciface_lif_inference_f32" in lowered
print("console scripts: flexsn-opt runs the bundled binary")
entries = list((pathlib.Path.home() / ".cache" / "flexsn").iterdir())
print(f"cache: {len(entries)} entries in ~/.cache/flexsn")
print("wheel smoke test passed")
