"""What the benchmarks share about FlexSN's kernels: the compile arguments,
buffer lists and launches for GpuKernel and CpuKernel, workspaces, seeded
inputs, and the eager PyTorch LIF that every peer is checked and timed
against."""

import functools
import zlib

DTYPES = ("f32", "f16", "bf16")
ELEM = {"f32": 4, "f16": 2, "bf16": 2}
TAU, V_TH = 2.0, 1.0  # lib/Neurons/lif.mlir's defaults (hard reset to 0)
# The benchmarks' variant names -> the kernels'.
KERNEL_VARIANT = {"inference": "inference", "final_state": "final-state"}

# Every flexsn.compile of a GPU run has fixed arguments whatever the flags:
# the GPU machine has no tools and finds the entries that --compile-only
# made by a key of them. The targets are explicit because their default
# depends on the machine (a CUDA toolkit or not). --smoke compiles for the
# CPU only: no toolkit needed.
COMPILE_OPTIONS = dict(targets=("cpu", "cuda"), chip="sm_90")
SMOKE_OPTIONS = dict(targets=("cpu",))


def compile_options(smoke=False):
    return dict(SMOKE_OPTIONS if smoke else COMPILE_OPTIONS)


def lif_compile(smoke=False):
    """flexsn.compile("lif", ...)'s arguments: all four variants in every
    storage type."""
    return dict(
        variants=("inference", "final-state", "forward", "backward"),
        storage_types=DTYPES,
        **compile_options(smoke),
    )


def tdtypes(torch):
    return {
        "f32": torch.float32,
        "f16": torch.float16,
        "bf16": torch.bfloat16,
        "f64": torch.float64,
    }


def addresses(kernel, tensors):
    """The launch's buffer list: the addresses of the kernel's buffers
    (workspace parts left out) in manifest order, from a buffer name ->
    tensor map; names not given are NULL."""
    names = [b.name for b in kernel.spec.buffers if not b.in_workspace]
    unknown = set(tensors) - set(names)
    if unknown:
        raise KeyError(
            "%s has no buffer %s (it has %s)"
            % (kernel.spec.name, ", ".join(sorted(unknown)), ", ".join(names))
        )
    return [
        0 if tensors.get(n) is None else tensors[n].data_ptr() for n in names
    ]


def new_workspace(torch, kernels, T, N, device="cuda"):
    """An f32 workspace for all of `kernels`; NaN, so unwritten parts show."""
    nbytes = max(k.spec.workspace_size(T, N, 0) for k in kernels)
    return torch.full(
        ((nbytes + 3) // 4,), float("nan"), dtype=torch.float32, device=device
    )


def binder(torch, device):
    """bind(kernel, T, N, buffers, workspace=0, params=(), channels=None)
    -> a callable launching it: a GpuKernel on torch's current stream, a
    CpuKernel (the same arguments, no stream) in this thread."""
    if torch.device(device).type != "cuda":

        def bind(kernel, T, N, buffers, workspace=0, params=(), channels=None):
            return lambda: kernel.launch(
                T, N, buffers, workspace, params, channels=channels
            )

        return bind
    stream = torch.cuda.current_stream().cuda_stream

    def bind(kernel, T, N, buffers, workspace=0, params=(), channels=None):
        return lambda: kernel.launch(
            stream, T, N, 0, buffers, workspace, params, channels=channels
        )

    return bind


def make_inputs(torch, variant, dtype, T, N, device="cuda"):
    """Seeded random inputs: x ~ 0.9 normal + 0.8, v0 ~ U(-0.2, 0.9) (many
    neurons spike, never all zeros); train also a spike gradient."""
    g = torch.Generator(device=device)
    g.manual_seed(
        zlib.crc32(("%d/%d/%s/%s" % (N, T, dtype, variant)).encode())
    )
    tdt = tdtypes(torch)[dtype]
    x = (torch.randn((T, N), generator=g, device=device) * 0.9 + 0.8).to(tdt)
    v0 = (torch.rand((N,), generator=g, device=device) * 1.1 - 0.2).to(tdt)
    gs = None
    if variant == "train":
        gs = torch.randn((T, N), generator=g, device=device).to(tdt)
    return x, v0, gs


@functools.lru_cache(maxsize=None)
def spike_fn(torch):
    """The spike as a torch.autograd.Function: Heaviside forward, the
    sigmoid(alpha = 4) surrogate gradient (as SpikingJelly's torch
    backend)."""

    class SpikeFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, over):
            ctx.save_for_backward(over)
            return (over >= 0).to(over.dtype)

        @staticmethod
        def backward(ctx, grad):
            (over,) = ctx.saved_tensors
            sg = torch.sigmoid(4.0 * over)
            return grad * (4.0 * sg * (1.0 - sg))

    return SpikeFn


# The loop every peer runs: LIF (docs/Semantics.md; decay_input, v_reset =
# 0, hard reset not detached) written the way a PyTorch user would, in the
# storage dtype. One copy of the source per (variant, dtype, T, N), so that
# each has its own code object (its own Dynamo cache).
LOOP_SRC = {
    "inference": """
def lif_loop(x, v):
    spikes = []
    vs = []
    for t in range({T}):
        h = v + (x[t] - v) / {tau}
        s = (h >= {v_th}).to(x.dtype)
        v = h * (1.0 - s)
        spikes.append(s)
        vs.append(v)
    return torch.stack(spikes), torch.stack(vs)
""",
    "final_state": """
def lif_loop(x, v):
    spikes = []
    for t in range({T}):
        h = v + (x[t] - v) / {tau}
        s = (h >= {v_th}).to(x.dtype)
        v = h * (1.0 - s)
        spikes.append(s)
    return torch.stack(spikes), v
""",
    "train": """
def lif_loop(x, v):
    spikes = []
    for t in range({T}):
        h = v + (x[t] - v) / {tau}
        s = SpikeFn.apply(h - {v_th})
        v = h * (1.0 - s)
        spikes.append(s)
    return torch.stack(spikes)
""",
}


def make_loop(torch, variant, dtype, T, N=None):
    src = LOOP_SRC[variant].format(T=T, tau=TAU, v_th=V_TH)
    name = "<flexsn-bench lif_loop %s %s T=%d N=%s>" % (variant, dtype, T, N)
    ns = {"torch": torch, "SpikeFn": spike_fn(torch)}
    exec(compile(src, name, "exec"), ns)
    return ns["lif_loop"]


def peer_call(torch, fn, variant, x, v0, gs):
    """The peer's unit of work: inference / final-state without autograd;
    train forward + autograd.grad (x and v0 require grad)."""
    if variant != "train":

        def run():
            with torch.no_grad():
                return fn(x, v0)

        return run
    xr = x.detach().requires_grad_(True)
    vr = v0.detach().requires_grad_(True)

    def run():
        s = fn(xr, vr)
        return torch.autograd.grad(s, (xr, vr), gs)

    return run


def entry_name(compiled):
    """A cache entry as <key>/<toolchain>: no machine path in the results."""
    d = compiled.directory
    return "%s/%s" % (d.parent.name, d.name)
