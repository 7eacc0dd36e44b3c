#!/usr/bin/env python3
"""Checks FlexSN's GPU kernels that store spikes bit-packed.

    python3 python/tests/bit_spike_checks.py [--quick] [--out DIR]
    python3 python/tests/bit_spike_checks.py --compile-only

The shipped LIF's inference and final-state kernels, dense and `bits`
(flexsn._runtime.GpuKernel, launched through flexsn_launch), run on the same
inputs; the bits kernel's spike buffer must hold exactly numpy.packbits
(axis=-1, bitorder="little") of the dense kernel's spikes, row t at byte
t * ceil(ld / 8), and its states must equal the dense kernel's bit for bit.
The spike buffer is filled with a sentinel byte first, with margins before
and after: every byte outside the rows' first ceil(N / 8) bytes (the gap
of a strided row, the margins) must still hold it. Paths reached:

  N = 8, 4096, 8192     whole bytes: the vector kernel (8 neurons a thread)
  N = 1, 7, 33, 1003    a partial last byte: the scalar kernel (a ballot
                        over each warp's live lanes; partial warps)
  ld = N rounded up to 8, plus 16 (strided): the vector kernel, whose last
                        group is partial when N % 8 != 0
  float buffers 8 bytes (f32) or 4 (f16) off 16-byte alignment: the
                        scalar kernel
  spike buffer at an odd address: allowed, either kernel

each at T = 1 and 5 in f32 and f16 storage; T = 0, which writes no spike
byte and copies the initial state to the final one; and the runtime's
extent rule, (T - 1) * ceil(ld / 8) + ceil(N / 8) bytes, against a plain
2 MiB allocation that holds exactly T = 1024 rows of N = 16384 (accepted)
and not those of N = 16385 (FLEXSN_ERROR_BUFFER_TOO_SMALL, blaming the
spike buffer).

Exit status 0 when every case passes; one line per case on stdout.
"""

import pathlib
import sys

import numpy as np

# The package of this checkout, wherever it is installed.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import flexsn  # noqa: E402
import check_cli  # noqa: E402  (beside this script)

NEURONS = (1, 7, 8, 33, 1003, 4096, 8192)
DTYPES = ("f32", "f16")
SENTINEL = 0xA5
MARGIN = 16


def compile_neuron():
    return flexsn.compile(
        "lif",
        variants=("inference", "final-state"),
        storage_types=DTYPES,
        targets=("cuda",),
        spike_storage=("dense", "bits"),
    )


def packbits(spikes):
    """numpy's packing of [T, N] 0/1 spikes: [T, ceil(N / 8)] bytes."""
    return np.packbits(spikes.cpu().numpy() != 0, axis=-1, bitorder="little")


def run_case(torch, compiled, N, T, dtype, variant, layout):
    dev = torch.device("cuda")
    tdtype = {"f32": torch.float32, "f16": torch.float16}[dtype]
    ld = N if layout != "strided" else (N + 7) // 8 * 8 + 16
    off = 2 if layout == "misaligned" else 0  # elements: 4 or 8 bytes off
    gen = torch.Generator(device=dev).manual_seed(N * 31 + T)
    rows = (ld + 7) // 8

    def floats(shape_len):
        base = torch.full(
            (shape_len + off + 8,), float("nan"), dtype=tdtype, device=dev
        )
        return base[off : off + shape_len]

    x = floats(T * ld)
    x.copy_(
        (torch.randn(T * ld, generator=gen, device=dev) * 1.5 + 0.4).to(tdtype)
    )
    v_init = floats(N)
    v_init.copy_((torch.randn(N, generator=gen, device=dev) * 0.5).to(tdtype))
    states = T * ld if variant == "inference" else N
    dense_spike, dense_state = floats(T * ld), floats(states)
    bits_state = floats(states)
    # The packed buffer at an odd address, inside sentinel margins.
    packed = torch.full(
        (MARGIN + T * rows + MARGIN + 1,),
        SENTINEL,
        dtype=torch.uint8,
        device=dev,
    )
    start = MARGIN + 1
    dense = compiled.kernel("cuda", variant, dtype)
    bits = compiled.kernel(
        "cuda", variant, dtype, options={"spike_storage": "bits"}
    )
    stream = torch.cuda.current_stream().cuda_stream
    state_name = "v_seq" if variant == "inference" else "v_final"

    def launch(kernel, spike, state):
        # T = 0 launches nothing, but x must not be NULL: any address.
        values = {
            "x": x.data_ptr() if T else v_init.data_ptr(),
            "v_init": v_init.data_ptr(),
            "spike": spike,
            state_name: state,
        }
        kernel.launch(
            stream, T, N, ld, [values[b.name] for b in kernel.spec.buffers], 0
        )

    launch(dense, dense_spike.data_ptr(), dense_state.data_ptr())
    launch(bits, packed.data_ptr() + start, bits_state.data_ptr())
    torch.cuda.synchronize()

    got = packed.cpu().numpy()
    written = np.zeros(got.shape, dtype=bool)
    for t in range(T):
        written[start + t * rows : start + t * rows + (N + 7) // 8] = True
    if not np.all(got[~written] == SENTINEL):
        where = np.flatnonzero((got != SENTINEL) & ~written)
        return (
            False,
            f"{where.size} byte(s) outside the rows written, "
            f"first at offset {int(where[0]) - start}",
        )
    if T:
        spikes = dense_spike.view(T, ld)[:, :N]
        want = packbits(spikes)
        have = got[start : start + T * rows].reshape(T, rows)[
            :, : (N + 7) // 8
        ]
        if not np.array_equal(have, want):
            bad = np.argwhere(have != want)[0]
            return False, (
                f"row {bad[0]} byte {bad[1]}: "
                f"{have[tuple(bad)]:#04x}, want "
                f"{want[tuple(bad)]:#04x}"
            )
        if not spikes.any() and T > 1 and N >= 8:
            return False, "no spike: the inputs test nothing"
    if variant == "inference":
        same = torch.equal(
            bits_state.view(T, ld)[:, :N], dense_state.view(T, ld)[:, :N]
        )
    else:
        same = torch.equal(bits_state, dense_state)
        if T == 0 and not torch.equal(bits_state, v_init):
            return False, "T = 0: the final state is not the initial one"
    if not same:
        return False, "states differ from the dense kernel's, bitwise"
    count = int(torch.count_nonzero(dense_spike.view(T, ld)[:, :N]))
    return True, f"{count} spikes"


def check_extent(torch, compiled):
    """The spike buffer's extent is (T - 1) * ceil(ld / 8) + ceil(N / 8)
    bytes: a plain 2 MiB allocation holds 1024 rows of 16384 neurons, not
    of 16385."""
    from kernel_checks import CudaDriverLite
    from flexsn._runtime import RuntimeStatusError

    drv = CudaDriverLite()
    raw = drv.alloc(2 << 20)
    try:
        kernel = compiled.kernel(
            "cuda", "final-state", "f32", options={"spike_storage": "bits"}
        )
        dense = compiled.kernel("cuda", "final-state", "f32")
        stream = torch.cuda.current_stream().cuda_stream
        T = 1024
        x = torch.randn(T * 16385, device="cuda") + 0.5
        v = torch.empty(16385, device="cuda")
        spikes = torch.empty(T * 16384, device="cuda")
        kernel.launch(
            stream, T, 16384, 0, [x.data_ptr(), 0, raw, v.data_ptr()], 0
        )
        dense.launch(
            stream,
            T,
            16384,
            0,
            [x.data_ptr(), 0, spikes.data_ptr(), v.data_ptr()],
            0,
        )
        torch.cuda.synchronize()
        packed = read_device(raw, 2 << 20)
        want = packbits(spikes.view(T, 16384))
        if not np.array_equal(packed.reshape(T, 2048), want):
            return False, "the exactly fitting buffer holds other bits"
        try:
            kernel.launch(
                stream, T, 16385, 0, [x.data_ptr(), 0, raw, v.data_ptr()], 0
            )
            return False, "N = 16385 fit in 2 MiB"
        except RuntimeStatusError as e:
            if (e.status, e.argument) != (
                "FLEXSN_ERROR_BUFFER_TOO_SMALL",
                "spike",
            ):
                return False, f"got {e}"
    finally:
        torch.cuda.synchronize()
        drv.free(raw)
    return True, "2 MiB holds exactly 1024 rows of 16384, not of 16385"


def read_device(ptr, nbytes):
    """`nbytes` bytes at device address `ptr`, copied to the host."""
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuMemcpyDtoH_v2.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_size_t,
    ]
    host = np.empty(nbytes, dtype=np.uint8)
    r = lib.cuMemcpyDtoH_v2(host.ctypes.data, ptr, nbytes)
    if r != 0:
        raise RuntimeError(f"cuMemcpyDtoH failed with CUresult {r}")
    return host


def checks(torch, compiled, quick):
    cases = []
    for N in NEURONS:
        for dtype in DTYPES:
            for variant in ("inference", "final-state"):
                for T in (5,) if quick else (0, 1, 5):
                    layouts = (
                        ("dense", "strided")
                        if quick
                        else ("dense", "strided", "misaligned")
                    )
                    cases += [
                        (N, T, dtype, variant, layout) for layout in layouts
                    ]
    return [
        (
            "N=%d T=%d %s %s %s" % case,
            lambda case=case: run_case(torch, compiled, *case),
        )
        for case in cases
    ] + [("extent", lambda: check_extent(torch, compiled))]


if __name__ == "__main__":
    sys.exit(
        check_cli.main(
            __doc__,
            "T = 5, dense and strided layouts only",
            compile_neuron,
            checks,
        )
    )
