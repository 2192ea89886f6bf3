"""CPU peak memory: the window restarts at each update, so one process can measure several configurations."""

from __future__ import annotations

import mmap
import sys

import pytest
import torch

from trainer_svc.memory import peak_memory_mb, reset_peak_memory

CPU = torch.device("cpu")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resettable RSS peak is Linux-only")
def test_cpu_peak_is_measured_from_the_last_reset() -> None:
    # Fresh anonymous mappings, touched page by page: a tensor could reuse heap pages that earlier tests freed but
    # the allocator kept resident, and then raise nothing.
    big = _touched_mapping(64)
    big.close()  # unmapped: RSS drops again
    reset_peak_memory(CPU)
    low, kind = peak_memory_mb(CPU)
    assert kind == "cpu_peak_rss"
    held = _touched_mapping(32)
    high, _ = peak_memory_mb(CPU)
    assert high - low >= 30, f"32 MiB of new resident pages must raise the peak: {low:.1f} -> {high:.1f}"
    held.close()


def _touched_mapping(mib: int) -> mmap.mmap:
    block = mmap.mmap(-1, mib * 2**20)
    for offset in range(0, mib * 2**20, mmap.PAGESIZE):
        block[offset] = 1
    return block
