"""pytest setup for the benchmarks' smoke tests: a compile cache of the
test run's own unless the caller chose one (as python/tests does)."""

import os
import tempfile

os.environ.setdefault(
    "FLEXSN_CACHE_DIR", tempfile.mkdtemp(prefix="flexsn-bench-cache-")
)
