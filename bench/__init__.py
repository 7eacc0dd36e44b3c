"""FlexSN's benchmarks and device-run drivers, one package with one entry
point: `python3 -m bench NAME [options]` (bench/README.md)."""

import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The package's only sys.path change: the flexsn package of this tree
# (python/) when none is installed, for `-m bench` and the tests alike.
if importlib.util.find_spec("flexsn") is None:
    sys.path.insert(0, str(ROOT / "python"))
