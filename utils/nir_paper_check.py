"""FlexSN against the NIR paper's own graphs (a checkout of
github.com/neuromorphs/NIR: its `paper/` folder): every `.nir` file there
read with flexsn.nir and built with flexsn.torch.from_nir (dt = 1e-4 s,
the paper's), or the error that refuses it; then the single-LIF graph,
exported by Norse and by Rockpool, run on the paper's input (column 0 of
`paper/01_lif/lif_exact.csv`), its spike steps against each framework's
trace in `paper/01_lif/*.csv` (column 2: spikes). Further `.nir` files
named after the checkout (other frameworks' files) are read and built
too.

    PYTHONPATH=python python3 utils/nir_paper_check.py PATH/TO/NIR [FILE...]

docs/NIR.md holds a run ("Files from other frameworks").
"""

import glob
import os
import sys

import numpy as np
import torch

import flexsn.nir
from flexsn.torch import from_nir

DT = 1e-4


def spike_steps(column) -> list:
    return np.nonzero(np.asarray(column))[0].tolist()


def main(root: str, others=()) -> int:
    paper = os.path.join(root, "paper")
    files = sorted(
        glob.glob(os.path.join(paper, "**", "*.nir"), recursive=True)
    )
    if not files:
        print(f"no .nir files under {paper}")
        return 2
    print("| file | read and built |\n|---|---|")
    for path in files + list(others):
        name = os.path.relpath(path, paper) if path in files else path
        try:
            graph = flexsn.nir.read(path)
            from_nir(graph, dt=DT)
            verdict = f"yes ({len(graph.nodes)} nodes)"
        except Exception as error:  # noqa: BLE001: the message is the result
            verdict = f"refused: {type(error).__name__}: {error}"
        print(f"| {name} | {verdict} |")
    traces = os.path.join(paper, "01_lif")
    exact = np.loadtxt(os.path.join(traces, "lif_exact.csv"), delimiter=",")
    x = torch.tensor(exact[:, 0], dtype=torch.float32).view(-1, 1, 1)
    print("\n| trace | spike steps |\n|---|---|")
    for exporter in ("lif_norse.nir", "lif_rockpool.nir"):
        model = from_nir(os.path.join(traces, exporter), dt=DT)
        with torch.no_grad():
            steps = spike_steps(model(x).view(-1))
        print(f"| FlexSN, from {exporter} | {steps} |")
    for path in sorted(glob.glob(os.path.join(traces, "*.csv"))):
        trace = np.loadtxt(path, delimiter=",")
        print(f"| {os.path.basename(path)} | {spike_steps(trace[:, 2])} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
