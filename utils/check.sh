#!/usr/bin/env bash
# Sets FlexSN up if needed, then runs every test: the check-flexsn target
# (lit + FileCheck tests and the GoogleTest unit tests), then the Python
# layer's pytest suite, then flake8 over every Python file, the format
# checks (clang-format over every C and C++ file, black over every Python
# file, codespell) and clang-tidy over lib/.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}

bash utils/setup.sh build
log_file="$BUILD_DIR/check-flexsn.log"
status=0
cmake --build "$BUILD_DIR" --target check-flexsn 2>&1 | tee "$log_file" || status=$?

passed=$(sed -n 's/^ *Passed *: *\([0-9]*\).*/\1/p' "$log_file" | tail -n 1)
failed=$(sed -n 's/^ *Failed *: *\([0-9]*\).*/\1/p' "$log_file" | tail -n 1)
echo "check-flexsn: ${passed:-0} passed, ${failed:-0} failed"
if [ "$status" -eq 0 ] && [ "${passed:-0}" -eq 0 ]; then
  echo "check-flexsn ran no test" >&2
  status=1
fi

# The Python layer (python/tests) and the benchmarks' CPU smoke runs
# (bench/tests), with Debian's python3 and torch; tests on CUDA tensors skip
# without a GPU.
# With pytest-xdist (setup.sh installs it), one process per core, each
# taking whole files (--dist loadfile): a file's module fixtures, which
# compile its neurons, then run once (the processes share conftest.py's
# compile cache).
py_log="$BUILD_DIR/pytest.log"
py_status=0
py_workers=()
if /usr/bin/python3 -c "import xdist" 2>/dev/null; then
  py_workers=(-n "$(nproc)" --dist loadfile)
fi
FLEXSN_BUILD_DIR="$BUILD_DIR" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
  "${py_workers[@]}" python/tests bench/tests 2>&1 | tee "$py_log" || py_status=$?
py_passed=$(grep -Eo '[0-9]+ passed' "$py_log" | tail -n 1 | cut -d' ' -f1 || true)
py_failed=$(grep -Eo '[0-9]+ failed' "$py_log" | tail -n 1 | cut -d' ' -f1 || true)
if [ "$py_status" -eq 0 ] && [ "${py_passed:-0}" -eq 0 ]; then
  echo "pytest ran no test" >&2
  py_status=1
fi

# Python lint: every Python file of the repository, as .flake8 says.
lint_status=0
/usr/bin/python3 -m flake8 || lint_status=$?
if [ "$lint_status" -eq 0 ]; then
  echo "flake8: clean"
else
  echo "flake8: the violations above" >&2
fi

# Formatting: every tracked C and C++ file as clang-format 22 writes it,
# every Python file as black does, no misspelling (utils/check_format.sh).
format_status=0
bash utils/check_format.sh || format_status=$?

# C++ lint: clang-tidy over lib/ on this build's compile commands.
tidy_status=0
bash utils/check_tidy.sh "$BUILD_DIR" || tidy_status=$?

# One closing line that any CI can read.
echo "all: $(( ${passed:-0} + ${py_passed:-0} )) passed, $(( ${failed:-0} + ${py_failed:-0} )) failed"
[ "$status" -eq 0 ] || exit "$status"
[ "$py_status" -eq 0 ] || exit "$py_status"
[ "$lint_status" -eq 0 ] || exit "$lint_status"
[ "$format_status" -eq 0 ] || exit "$format_status"
exit "$tidy_status"
