"""The byte model: the bytes a kernel call must move (every input read
once, every output written once), the device-to-device copy bandwidth
measured in the same run, and the ratios the benchmarks report.

es is the storage type's element size in bytes.
"""

COPY_BYTES = 1 << 30  # the copy measured on a GPU: 1 GiB, read + write


def lif_bytes(variant, T, N, es, spike_es=None, saved_es=None, v_init=True):
    """LIF (any one-input, one-state neuron) per call:

    inference    x, spike, v_seq [T, N]; v_init [N]
    final_state  x, spike [T, N]; v_init, v_final [N]
    train        forward: x, spike, h saved ([T, N] each); backward: spike
                 gradient, h, x gradient; v_init and its gradient [N]

    Spikes take spike_es bytes (default es: dense; 1: u8; 1/8: bits), the
    saved h saved_es (default es: the storage type; 4: f32, as kernels
    compiled with save_in_storage_type=False save it);
    v_init=False leaves the initial state out (a NULL buffer)."""
    spike_es = es if spike_es is None else spike_es
    saved_es = es if saved_es is None else saved_es
    init = N * es if v_init else 0
    if variant == "inference":
        return 2 * T * N * es + T * N * spike_es + init
    if variant == "final_state":
        return T * N * es + T * N * spike_es + N * es + init
    if variant == "train":
        return T * N * (4 * es + 2 * saved_es) + N * es + init
    raise ValueError("no byte model for variant %r" % variant)


def plif_backward_bytes(T, N, es=4):
    """PLIF's backward: spike gradient, x and x gradient in the storage
    type, the f32 workspace read (w's gradient is negligible)."""
    return T * N * (3 * es + 4)


def block_bytes(T, N):
    """The fused BN-apply + LIF + residual inference kernel (f32): x read,
    y written [T, N]; the final v written [N]."""
    return (2 * T * N + N) * 4


def block_train_bytes(T, N):
    """Its training pair (f32): the forward reads x and writes y and one
    saved sequence; the backward reads y's gradient, the saved sequence and
    x and writes x's gradient."""
    return 7 * T * N * 4


def gbs(nbytes, ms):
    """GB/s of moving `nbytes` in `ms` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9


def frac_copy(nbytes, ms, copy_gbs):
    """The fraction of the copy bandwidth that moving `nbytes` in `ms`
    reaches."""
    return gbs(nbytes, ms) / copy_gbs


def copy_gbs(torch, timer, nbytes=COPY_BYTES, reps=None):
    """The device-to-device copy bandwidth of a torch copy of `nbytes`
    (bytes = read + write) on timer's device: (GB/s, ms)."""

    def measure():
        src = torch.rand(nbytes // 4, device=timer.device)
        dst = torch.empty_like(src)
        return timer.ms(lambda: dst.copy_(src), reps=reps)[0]

    ms = measure()
    timer.free()  # the buffers went with measure's frame
    return gbs(2 * nbytes, ms), ms
