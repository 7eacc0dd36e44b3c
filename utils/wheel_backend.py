"""The build backend of pyproject.toml: `pip install .` and `pip wheel .`
run utils/build_wheel.sh, which builds the statically linked tools
(build-wheel/) and writes the wheel. A wheel only: the tools are built
from this checkout, so there is no source distribution to build from."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def build_wheel(
    wheel_directory, config_settings=None, metadata_directory=None
):
    out = pathlib.Path(wheel_directory).resolve()
    # The script's progress goes to pip's log (stderr), not its result.
    subprocess.run(
        ["bash", str(ROOT / "utils" / "build_wheel.sh")],
        env=dict(os.environ, FLEXSN_WHEEL_DIR=str(out)),
        stdout=sys.stderr,
        check=True,
    )
    return max(out.glob("flexsn-*.whl"), key=lambda p: p.stat().st_mtime).name


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError(
        "flexsn has no source distribution: its wheel holds tools built "
        "from a checkout (pip install . there, or bash utils/build_wheel.sh)"
    )
