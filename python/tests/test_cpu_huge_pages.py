"""CPU kernels ask Linux for transparent huge pages under the big buffers
they write (MADV_HUGEPAGE), so that a fresh output takes 512 times fewer
page faults. Checked in /proc/self/smaps: the mapping holding the output of
a LIFNode call carries the `hg` flag, one holding a small output does not,
and the results equal those computed without the advice."""

import os
import re

import pytest
import torch

from flexsn import _runtime
from flexsn.torch import LIFNode

pytestmark = pytest.mark.skipif(
    not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled")
    or not os.path.exists("/proc/self/smaps"),
    reason="needs Linux with transparent huge pages",
)


def vm_flags(address: int) -> set:
    """The VmFlags of the mapping of this process that holds `address`."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            span = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
            if span:
                start, end = (int(v, 16) for v in span.groups())
                inside = start <= address < end
            elif inside and line.startswith("VmFlags:"):
                return set(line.split()[1:])
    raise AssertionError("no mapping holds %#x" % address)


def spikes(x):
    with torch.no_grad():
        return LIFNode(step_mode="m")(x)


def test_big_outputs_are_advised():
    x = torch.rand(8, 1 << 20) * 2.5  # 32 MiB in, 32 MiB out
    out = spikes(x)
    # The output's interior 2 MiB pages are advised; its first whole one:
    page = (out.data_ptr() + (2 << 20) - 1) // (2 << 20) * (2 << 20)
    assert "hg" in vm_flags(page)
    assert 0 < int(out.sum()) < out.numel()


def test_small_outputs_are_not_advised():
    out = spikes(torch.rand(4, 1024) * 2.5)  # 16 KiB: on the heap
    assert "hg" not in vm_flags(out.data_ptr())


def test_the_advice_changes_no_result(monkeypatch):
    x = torch.rand(8, 1 << 20) * 2.5
    advised = spikes(x)
    monkeypatch.setattr(
        _runtime, "_advise_huge_pages", lambda address, nbytes: None
    )
    assert torch.equal(spikes(x), advised)
