"""services/compute/process_memory.py: after glibc has raised its mmap threshold, freed tensors stay resident until
`release_free_memory` hands them back (what made the learning run's process grow ~2 GB a step)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from services.compute.process_memory import release_free_memory

MIB = 2**20


def resident_mib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS line")


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's; elsewhere release_free_memory is a no-op")
def test_freed_heap_tensors_stay_resident_until_released() -> None:
    raised = torch.ones(16 * MIB // 4)  # freeing an mmapped 16 MiB block raises glibc's mmap threshold to 16 MiB
    del raised
    blocks = [torch.ones(2 * MIB // 4) for _ in range(100)]  # 200 MiB, now from the heap, every page touched
    last = blocks.pop()  # still in use, above the others: the heap cannot simply shrink from its top
    blocks.clear()
    held = resident_mib()
    assert release_free_memory() is True
    released = resident_mib()
    assert held - released > 100, (held, released)
    assert float(last[0]) == 1.0


def test_it_says_whether_it_could_run() -> None:
    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert release_free_memory() is expected
