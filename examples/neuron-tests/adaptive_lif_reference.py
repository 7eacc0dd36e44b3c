"""The adaptive LIF of adaptive_lif.mlir, written out by hand with numpy:
`write DIR` writes an input sequence DIR/x.npy; `check DIR` compares what
flexsn-run wrote there (out0 = spikes, state_seq0 = v, state_seq1 = a)
with this reference and exits 1 on any difference."""
import sys

import numpy as np

T, N = 16, 1000
TAU, V_TH, BETA, TAU_A = 2.0, 1.0, 0.2, 10.0


def reference(x):
    v = np.zeros(x.shape[1], np.float64)
    a = np.zeros_like(v)
    spikes, vs, As, near = [], [], [], np.zeros_like(v, bool)
    for t in range(x.shape[0]):
        h = v + (x[t] - v) / TAU
        over = h - (V_TH + a)
        # Within float rounding of the threshold the kernel may decide
        # either way: such neurons are not compared from there on.
        near |= np.abs(over) < 1e-5
        s = (over >= 0).astype(np.float64)
        v = (1 - s) * h
        a = a - a / TAU_A + s * BETA
        spikes.append(s), vs.append(v), As.append(a)
    return np.stack(spikes), np.stack(vs), np.stack(As), near


def main(command, directory):
    if command == "write":
        rng = np.random.default_rng(0)
        x = rng.uniform(0.0, 3.0, (T, N)).astype(np.float32)
        np.save(f"{directory}/x.npy", x)
        return 0
    x = np.load(f"{directory}/x.npy")
    spikes, v, a, near = reference(x.astype(np.float64))
    got = [
        np.load(f"{directory}/{name}.npy")
        for name in ("out0", "state_seq0", "state_seq1")
    ]
    keep = ~near
    wrong = 0
    for name, want, have in zip(("spike", "v", "a"), (spikes, v, a), got):
        bad = ~np.isclose(have[:, keep], want[:, keep], rtol=1e-5, atol=1e-5)
        print(f"{name}: {int(bad.sum())} of {bad.size} differ")
        wrong += int(bad.sum())
    print(f"spikes: {int(spikes[:, keep].sum())}")
    return 1 if wrong or not spikes[:, keep].any() else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
