"""What this machine's CPU can do that changes how we run torch on it."""

from __future__ import annotations

from pathlib import Path


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX, from /proc/cpuinfo; False elsewhere).
    Without it bf16 matmuls are emulated and slower than float32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("avx512_bf16", "amx_bf16"))
