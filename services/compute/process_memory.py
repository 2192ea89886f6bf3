"""Free what a large transient allocation left behind: garbage in reference cycles, then the heap's free pages.

glibc's malloc raises its mmap threshold each time a large block is freed (up to 32 MiB), so after the first weight
reload most tensors of a 0.5B model come from the heap, and the freed ones stay resident: the learning run's process
grew ~1.8 GB a step (a bf16 export, a float32 load and int8 quantization of the model every step) to 17–19 GB;
and an export and reload leave objects in reference cycles that only Python's rare full collection frees. So: a
collection, then `malloc_trim(0)`, glibc-only (skipped elsewhere), thread-safe, milliseconds to a second.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import platform
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Collect cyclic garbage, then return the C heap's free pages to the OS (glibc `malloc_trim(0)`); whether the
    trim ran (False where the C library has no such call)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
