"""What this machine's CPU can do that changes how we run torch on it."""

from __future__ import annotations

import os
from pathlib import Path

NATIVE_BF16_ENV = "AZR_CPU_NATIVE_BF16"
"""Set to 1 or 0 to take the bf16 paths as on a CPU with (or without) native bf16, whatever this CPU has: the local
engine's `auto` dtype and the embedded update's autocast (`trainer_bf16_cpu`). On a CPU without it bf16 is emulated
(slower; the same code paths, though not necessarily the same last bits as that CPU's kernels), so a developer on
any CPU can reproduce what a newcomer's AVX512-BF16/AMX machine runs; CI runs the tests marked `precision` both ways
(`make test-precision`)."""


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX, from /proc/cpuinfo; False elsewhere),
    unless AZR_CPU_NATIVE_BF16 says otherwise. Without it bf16 matmuls are emulated and slower than float32."""
    forced = os.environ.get(NATIVE_BF16_ENV, "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    if forced:
        raise ValueError(f"{NATIVE_BF16_ENV}={forced!r}: use 1 or 0 (or leave it unset to read the CPU)")
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("avx512_bf16", "amx_bf16"))
