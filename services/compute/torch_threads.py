"""How many CPU threads torch uses in a process that generates or trains (`Settings.torch_threads`).

Why it matters: torch's intra-op pool defaults to one thread per core and its threads spin while they wait. Beside
busy sandbox workers that oversubscribes the cores: on 2 cores with one process spinning beside it, generation with
two threads ran at 0.43x the speed of one thread on the idle machine (docs/benchmarks.md, `bench/inference.py
threads`). On idle cores two threads are faster: 1.15x for decoding, 1.84x for the update (compute-bound, like
prefill). So `auto` (0) is `auto_threads` (the cores the executor's workers leave) where the executor runs in another
process or its load is unknown, and, in the embedded run, `SharedCoreThreads`: every core while no sandbox job runs,
`auto_threads` while one does. Only the intra-op pool changes (the inter-op pool is fixed once used, so it is left
alone).

Updates always run with `update_threads`: on some CPUs an update's result depends in its last bits on the thread
count (kernels split their sums over the threads; seen on an Intel Xeon with AVX512/AMX, not on an AMD EPYC with
AVX2), so a resumed run remakes the updates lost with a killed process bit for bit only at the same count.
`torch.set_num_threads` acts on the calling OS thread only (OpenMP's and MKL's counts are per thread once that
thread has run a parallel op), so every count is set in the thread that then computes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

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


def update_threads(torch_threads: int) -> int:
    """The intra-op threads an update runs with in a process configured with `torch_threads` (AZR_TORCH_THREADS):
    that number, or every core when 0. One rule for the embedded run (`SharedCoreThreads.for_update`) and `azr
    trainer` (`configure_torch_threads` with no sandbox workers); a reference trainer that must equal a run's bit
    for bit updates with it too."""
    return torch_threads or auto_threads(available_cores(), executor_workers=0)


def configure_torch_threads(torch_threads: int, executor_workers: int) -> int:
    """Set torch's intra-op threads (`torch_threads`, or `auto_threads` when 0) and return the number set."""
    threads = torch_threads or auto_threads(available_cores(), executor_workers)
    torch.set_num_threads(threads)
    return threads


class SharedCoreThreads:
    """Torch threads for a process that also drives the executor's sandbox workers (the embedded run).

    `before_generation_forward` runs before every forward pass of generation: `idle_threads` (every core) while no
    sandbox job runs, `busy_threads` (the cores the workers leave) while one does; checks start and end between
    decoding steps, so the count follows them within one token. `for_update` sets every core (`update_threads`):
    the embedded update runs between steps, when every check has been awaited. The count is remembered per OS
    thread, as torch keeps it."""

    def __init__(self, *, cores: int, executor_workers: int, jobs_running: Callable[[], int]) -> None:
        self.idle_threads = max(1, cores)
        self.busy_threads = auto_threads(cores, executor_workers)
        self.jobs_running = jobs_running
        self._set_here = threading.local()  # `current`: what this OS thread's torch count was last set to here

    @property
    def current(self) -> int:
        """What torch's count was last set to here, in the calling thread (0: not yet)."""
        return int(getattr(self._set_here, "current", 0))

    def before_generation_forward(self) -> None:
        threads = self.busy_threads if self.jobs_running() else self.idle_threads
        if threads != self.current:  # set_num_threads is cheap, but called once per token: skip no-op calls
            self._use(threads)

    def generation_threads(self) -> int:
        """The thread count for the next forward of an engine that takes it as a number (the llama.cpp engine):
        the same rule as `before_generation_forward`."""
        return self.busy_threads if self.jobs_running() else self.idle_threads

    def for_update(self) -> None:
        """Every core, set unconditionally: whatever else set this thread's count since, the update's count (and so
        its result, bit for bit) must be the one every update of the run used."""
        self._use(self.idle_threads)

    def _use(self, threads: int) -> None:
        torch.set_num_threads(threads)
        self._set_here.current = threads


def threads_beside_executor(torch_threads: int, executor_workers: int,
                            jobs_running: Callable[[], int]) -> SharedCoreThreads | None:
    """The thread rule of a process that generates beside its own sandbox workers: `torch_threads` > 0 fixes the
    count (set now; None returned); 0 returns a `SharedCoreThreads` over `jobs_running`, set to every core now, whose
    `before_generation_forward` the engine must call (`LocalEngine.before_forward`)."""
    if torch_threads:
        configure_torch_threads(torch_threads, executor_workers)
        return None
    threads = SharedCoreThreads(cores=available_cores(), executor_workers=executor_workers,
                                jobs_running=jobs_running)
    threads.for_update()
    return threads
