#!/usr/bin/env python3
"""Checks flexsn-run --spike-storage=u8 on the CPU path.

    spike_storage.py --neuron-file=lib/Neurons/lif.mlir --workdir=DIR

For LIF, inference and final-state, float32 and float16 inputs, and a few
shapes, it runs flexsn-run with --spike-storage=u8 and checks that out0.npy
is uint8 holding exactly the reference's spikes (0 or 1; reference.py, run
on the inputs rounded to the storage type, whose states stay away from the
threshold) and that the states match the dense run bit for bit. Exits 1
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
    subprocess.run(["flexsn-run", args.neuron_file, f"--variant={variant}",
                    f"--input=@{xpath}", f"--spike-storage={spikes}",
                    f"--output-dir={out}"], check=True,
                   stdout=subprocess.DEVNULL)
    state = "state_seq0.npy" if variant == "inference" else "final_state0.npy"
    return (np.load(os.path.join(out, "out0.npy")),
            np.load(os.path.join(out, state)))


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
            for shape in ((5, 33), (3, 2, 7), (1, 1)):
                name = f"{variant}-{np.dtype(dtype).name}-{len(shape)}"
                x = (rng.standard_normal(shape) * 1.5).astype(dtype)
                ref = reference.simulate("lif", {}, x.astype(np.float32))
                spikes_u8, state_u8 = run(args, args.workdir, name, variant,
                                          x, "u8")
                spikes, state = run(args, args.workdir, name, variant, x,
                                    "dense")
                runs += 1
                where = f"{name} {shape}"
                if spikes_u8.dtype != np.uint8:
                    failures.append(f"{where}: out0 is {spikes_u8.dtype}")
                    continue
                # Compare only neurons that never came near the threshold.
                far = ref["min_margin"] >= 1e-2
                if not np.array_equal(spikes_u8[:, far],
                                      ref["spikes"][:, far].astype(np.uint8)):
                    failures.append(f"{where}: u8 spikes differ from the "
                                    f"reference")
                if not np.array_equal(spikes_u8, spikes.astype(np.uint8)) or \
                        not set(np.unique(spikes_u8)) <= {0, 1}:
                    failures.append(f"{where}: u8 spikes differ from the "
                                    f"dense run's")
                if state_u8.tobytes() != state.tobytes():
                    failures.append(f"{where}: states differ from the dense "
                                    f"run's")
                if shape[0] > 1 and not spikes_u8.any():
                    failures.append(f"{where}: no spike at all: the inputs "
                                    f"test nothing")
    for f in failures:
        print(f)
    print(f"spike storage u8: {runs} runs, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
