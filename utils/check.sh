#!/usr/bin/env bash
# Sets FlexSN up if needed, then runs every test (the check-flexsn target:
# lit + FileCheck tests and the GoogleTest unit tests).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}

bash utils/setup.sh build
log_file="$BUILD_DIR/check-flexsn.log"
status=0
cmake --build "$BUILD_DIR" --target check-flexsn 2>&1 | tee "$log_file" || status=$?

# One closing line that any CI can read.
passed=$(sed -n 's/^ *Passed *: *\([0-9]*\).*/\1/p' "$log_file" | tail -n 1)
failed=$(sed -n 's/^ *Failed *: *\([0-9]*\).*/\1/p' "$log_file" | tail -n 1)
echo "check-flexsn: ${passed:-0} passed, ${failed:-0} failed"
if [ "$status" -eq 0 ] && [ "${passed:-0}" -eq 0 ]; then
  echo "check-flexsn ran no test" >&2
  exit 1
fi
exit "$status"
