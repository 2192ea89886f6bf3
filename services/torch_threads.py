"""How many CPU threads torch uses in a process that generates or trains (`Settings.torch_threads`).

Why it matters: torch's intra-op pool defaults to one thread per core and its threads spin while they wait. Beside
the executor's sandbox workers (and a second pool for the update) that oversubscribes the cores; on the 2-core
machines the README measures, generation ran several times slower with two threads than with one. `auto` (0) leaves
the executor's workers their cores. Call once, early, before the process starts torch work (later calls still apply
to the intra-op pool; the inter-op pool is fixed once used, so it is left alone).
"""

from __future__ import annotations

import os

import torch


def auto_threads(cores: int, executor_workers: int) -> int:
    """One thread per core not left to the executor's workers, at least one."""
    return max(1, cores - executor_workers)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. a container's cpuset), not the host's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def configure_torch_threads(torch_threads: int, executor_workers: int) -> int:
    """Set torch's intra-op threads (`torch_threads`, or `auto_threads` when 0) and return the number set."""
    threads = torch_threads or auto_threads(available_cores(), executor_workers)
    torch.set_num_threads(threads)
    return threads
