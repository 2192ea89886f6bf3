"""CPU peak memory: the window restarts at each update, so one process can measure several configurations."""

from __future__ import annotations

import sys

import pytest
import torch

from trainer_svc.memory import peak_memory_mb, reset_peak_memory

CPU = torch.device("cpu")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resettable RSS peak is Linux-only")
def test_cpu_peak_is_measured_from_the_last_reset() -> None:
    big = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    del big
    reset_peak_memory(CPU)
    low, kind = peak_memory_mb(CPU)
    assert kind == "cpu_peak_rss"
    held = torch.ones(32 * 2**20 // 4)
    high, _ = peak_memory_mb(CPU)
    assert high - low >= 30, f"a 32 MiB tensor must raise the peak: {low:.1f} -> {high:.1f}"
    assert float(held[0]) == 1.0
