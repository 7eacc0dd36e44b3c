#!/usr/bin/env bash
# Installs the wheel into a fresh virtual environment (over this machine's
# torch and numpy: --system-site-packages, or the site-packages of the venv
# $PYTHON runs in) and, with no FlexSN variables, no
# build tree on any path and an empty compile cache, runs
# utils/wheel_smoke.py there: flexsn finds its bundled tools and runtime,
# compiles a neuron written in Python and the shipped LIF, and runs them on
# the CPU (and CUDA, where there is a GPU) against the formula. Prints the
# wheel's size, the import time and the first compile's time.
#
#   bash utils/check_wheel.sh [dist/flexsn-*.whl]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-/usr/bin/python3}
wheel=${1:-$(ls -t dist/flexsn-*.whl | head -n 1)}
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$PY" -m venv --system-site-packages --without-pip "$work/venv"
# A python that is itself a venv's (torch in its site-packages) lends them
# through a .pth file: --system-site-packages reaches only the base install.
"$PY" - "$work/venv" <<'PYEOF'
import pathlib, site, sys
if sys.prefix != sys.base_prefix:
    venv = pathlib.Path(sys.argv[1])
    inner = next(venv.glob("lib/python3*/site-packages"))
    (inner / "_outer_site.pth").write_text("\n".join(site.getsitepackages()) + "\n")
PYEOF
"$work/venv/bin/python" -m pip install --no-index --no-deps -q "$wheel"
echo "wheel: $(basename "$wheel"), $(du -m "$wheel" | cut -f1) MiB"
cp utils/wheel_smoke.py "$work/"
cd "$work"
env -i PATH=/usr/bin:/bin HOME="$work/home" \
  "$work/venv/bin/python" wheel_smoke.py "$ROOT"
