#!/usr/bin/env python3
"""Checks flexsn-run --spike-storage=u8 and =bits on the CPU path.

    spike_storage.py --neuron-file=lib/Neurons/lif.mlir --workdir=DIR

For LIF, inference and final-state, float32 and float16 inputs, and a few
shapes, it runs flexsn-run with --spike-storage=u8 and =bits and checks
that out0.npy holds exactly the reference's spikes (reference.py, run on
the inputs rounded to the storage type, whose states stay away from the
threshold) and the dense run's: for u8, uint8 0/1 of the inputs' shape;
for bits, uint8 [T, ceil(N / 8)] equal to numpy.packbits of the dense
spikes over the flattened neurons, least significant bit first, the bits
past N zero. The states must match the dense run bit for bit. Exits 1
with one message per failure.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def run(args, workdir, name, variant, x, spikes):
    out = os.path.join(workdir, f"{name}-{spikes}")
    os.makedirs(out, exist_ok=True)
    xpath = os.path.join(workdir, f"{name}-x.npy")
    np.save(xpath, x)
    subprocess.run(
        [
            "flexsn-run",
            args.neuron_file,
            f"--variant={variant}",
            f"--input=@{xpath}",
            f"--spike-storage={spikes}",
            f"--output-dir={out}",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    state = "state_seq0.npy" if variant == "inference" else "final_state0.npy"
    return (
        np.load(os.path.join(out, "out0.npy")),
        np.load(os.path.join(out, state)),
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--neuron-file", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(7)
    failures, runs = [], 0
    for variant in ("inference", "final-state"):
        for dtype in (np.float32, np.float16):
            for shape in ((5, 33), (3, 2, 7), (1, 1), (4, 2, 8), (2, 50)):
                name = (
                    f"{variant}-{np.dtype(dtype).name}-"
                    f"{'x'.join(map(str, shape))}"
                )
                x = (rng.standard_normal(shape) * 1.5).astype(dtype)
                ref = reference.simulate("lif", {}, x.astype(np.float32))
                spikes, state = run(
                    args, args.workdir, name, variant, x, "dense"
                )
                T, N = shape[0], int(np.prod(shape[1:]))
                # Compare only neurons that never came near the threshold.
                far = (ref["min_margin"] >= 1e-2).reshape(N)
                expected = ref["spikes"].reshape(T, N)[:, far]
                where = f"{name} {shape}"
                if T > 1 and not spikes.any():
                    failures.append(
                        f"{where}: no spike at all: the inputs "
                        f"test nothing"
                    )
                for storage in ("u8", "bits"):
                    out, compact_state = run(
                        args, args.workdir, name, variant, x, storage
                    )
                    runs += 1
                    what = f"{where} {storage}"
                    if out.dtype != np.uint8:
                        failures.append(f"{what}: out0 is {out.dtype}")
                        continue
                    if storage == "u8":
                        got = out.reshape(T, N)
                        ok = (
                            out.shape == shape
                            and np.array_equal(out, spikes.astype(np.uint8))
                            and set(np.unique(out)) <= {0, 1}
                        )
                    else:
                        # numpy's own packing, independent of the kernel.
                        packed = np.packbits(
                            spikes.reshape(T, N).astype(bool),
                            axis=-1,
                            bitorder="little",
                        )
                        ok = out.shape == (T, (N + 7) // 8) and np.array_equal(
                            out, packed
                        )
                        got = np.unpackbits(
                            out, axis=-1, count=N, bitorder="little"
                        )
                    if not ok:
                        failures.append(
                            f"{what}: spikes differ from the " f"dense run's"
                        )
                    if not np.array_equal(
                        got[:, far], expected.astype(np.uint8)
                    ):
                        failures.append(
                            f"{what}: spikes differ from the " f"reference"
                        )
                    if compact_state.tobytes() != state.tobytes():
                        failures.append(
                            f"{what}: states differ from the " f"dense run's"
                        )
    for f in failures:
        print(f)
    print(f"spike storage u8, bits: {runs} runs, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
