"""pytest setup: the package from this tree, a private compile cache, and
the `cuda` marker (tests on CUDA tensors skip without a GPU)."""

import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # python/: the flexsn package
sys.path.insert(0, str(HERE))  # reference.py

# A cache of the test session's own unless the caller chose one (the GPU
# machine runs with a cache compiled elsewhere).
os.environ.setdefault("FLEXSN_CACHE_DIR",
                      tempfile.mkdtemp(prefix="flexsn-test-cache-"))


def pytest_configure(config):
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
