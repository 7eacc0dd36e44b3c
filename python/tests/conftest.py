"""pytest setup: the package from this tree (or, with
FLEXSN_TEST_INSTALLED=1, the installed one: utils/check_wheel.sh --suite),
a private compile cache, and the `cuda` marker (tests on CUDA tensors skip
without a GPU)."""

import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
if not os.environ.get("FLEXSN_TEST_INSTALLED"):
    sys.path.insert(0, str(HERE.parent))  # python/: the flexsn package
sys.path.insert(0, str(HERE))  # reference.py

# A cache of the test session's own unless the caller chose one (the GPU
# machine runs with a cache compiled elsewhere).
os.environ.setdefault(
    "FLEXSN_CACHE_DIR", tempfile.mkdtemp(prefix="flexsn-test-cache-")
)


def pytest_configure(config):
    if os.environ.get("FLEXSN_TEST_INSTALLED"):
        import flexsn

        package = pathlib.Path(flexsn.__file__).resolve().parent
        if HERE.parent in package.parents or package.parent == HERE.parent:
            raise RuntimeError(
                f"FLEXSN_TEST_INSTALLED: flexsn comes from "
                f"this tree ({package}), not an install"
            )
        print(
            f"testing the installed flexsn {flexsn.__version__} "
            f"({package})"
        )
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU")


def pytest_collection_modifyitems(config, items):
    import pytest

    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    skip = pytest.mark.skip(reason="no CUDA GPU")
    for item in items:
        if "cuda" in item.keywords and not has_cuda:
            item.add_marker(skip)
