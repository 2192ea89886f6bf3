"""Peak memory of the trainer: CUDA's allocator peak per update, or the process's peak RSS on CPU.

On Linux the CPU peak (VmHWM) is reset at the start of each update by writing 5 to /proc/self/clear_refs, so the
figure is the update's own high-water mark (model, optimizer state and activations resident during it). Where that
file is absent or not writable the figure falls back to the process's peak since it started (getrusage), reported
with kind `cpu_peak_rss_since_start`.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import torch

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _reset_cpu_peak() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def _cpu_peak_kib() -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


_cpu_peak_resettable = False


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak window: CUDA's peak stats, or the Linux RSS high-water mark."""
    global _cpu_peak_resettable
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        _cpu_peak_resettable = _reset_cpu_peak()


def peak_memory_mb(device: torch.device) -> tuple[float, str]:
    """(peak MiB, what was measured) since the last `reset_peak_memory`, where the platform allows a reset."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    kib = _cpu_peak_kib() if _cpu_peak_resettable else None
    if kib is not None:
        return kib / 1024, "cpu_peak_rss"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux KiB
    return peak * scale / 2**20, "cpu_peak_rss_since_start"
