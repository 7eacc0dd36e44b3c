"""The devices the PyTorch-layer tests run on: the CPU cases run
everywhere (CI); the CUDA ones, marked `cuda`, where a GPU is present. Both
compile with flexsn.compile's default targets (CPU, plus CUDA where the
toolkit is), so a cache filled by the CPU run on a machine with the tools
serves the CUDA cases on a GPU machine without them."""

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU"),
        ],
    ),
]
AVAILABLE_DEVICES = ("cpu", "cuda") if HAS_CUDA else ("cpu",)
