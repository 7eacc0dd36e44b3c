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
# With --suite OUT (on the GPU machine), the installed package then trains
# the digits model (python3 -m bench device-torch) and runs the CUDA tests
# (pytest -m cuda with FLEXSN_TEST_INSTALLED=1, so that they import the
# venv's flexsn, not python/), logs under OUT. The tests compile into a
# cache of their own, or into $FLEXSN_CACHE_DIR when set (a run cut short
# by its time limit, $FLEXSN_SUITE_PYTEST_LIMIT seconds, default 280, then
# goes on where it stopped); --skip-smoke and --skip-digits leave those
# steps out.
#
#   bash utils/check_wheel.sh [dist/flexsn-*.whl] [--suite OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-/usr/bin/python3}
wheel="" suite="" smoke=1 digits=1
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
    --skip-smoke) smoke=0; shift ;;
    --skip-digits) digits=0; shift ;;
    *) wheel=$1; shift ;;
  esac
done
wheel=${wheel:-$(ls -t dist/flexsn-*.whl | head -n 1)}
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
if [ $smoke = 1 ]; then
  env -i PATH=/usr/bin:/bin HOME="$work/home" \
    "$work/venv/bin/python" wheel_smoke.py "$ROOT"
fi
[ -n "$suite" ] || exit 0

# The suite, from the checkout (bench/ and python/tests/) with the venv's
# flexsn. CUDA_HOME: ptxas for the GPU kernels it compiles.
cd "$ROOT"
# in_venv SECONDS ARGS...: the venv's python, with a time limit.
in_venv() {
  local limit=$1
  shift
  timeout "$limit" env -i PATH=/usr/bin:/bin HOME="$work/home" \
    FLEXSN_TEST_INSTALLED=1 CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" \
    ${FLEXSN_CACHE_DIR:+FLEXSN_CACHE_DIR="$FLEXSN_CACHE_DIR"} \
    "$work/venv/bin/python" "$@"
}
status=0
if [ $digits = 1 ]; then
  in_venv 280 -m bench device-torch --out "$suite/digits" \
    > "$suite/digits.log" 2>&1 || status=1
  tail -n 8 "$suite/digits.log"
fi
in_venv "${FLEXSN_SUITE_PYTEST_LIMIT:-280}" -m pytest -q -p no:cacheprovider \
  -m cuda python/tests > "$suite/pytest.log" 2>&1 || status=1
tail -n 3 "$suite/pytest.log"
exit $status
