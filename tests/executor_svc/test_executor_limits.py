"""Limits are honoured with the matching status, and the worker serves the next task afterwards."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from executor_svc.executor import Executor
from services.execution import ExecStatus, ExecutionLimits

LIMITS = ExecutionLimits(timeout_s=1.0, memory_mb=256, max_output_bytes=1000, max_processes=8)


@pytest.fixture(scope="module")
def executor(executor_backend: str, executor_factory: Callable[..., Executor]) -> Iterator[Executor]:
    with executor_factory(executor_backend, workers=1, limits=LIMITS) as running:
        yield running


@pytest.fixture(scope="module")
def patient(executor_backend: str, executor_factory: Callable[..., Executor]) -> Iterator[Executor]:
    """LIMITS with a long wall limit: filling 256 MiB page by page takes over a second on a loaded machine, and the
    memory tests must see the memory limit, not the clock."""
    with executor_factory(executor_backend, workers=1, limits=LIMITS.model_copy(update={"timeout_s": 20.0})) as running:
        yield running


def assert_worker_still_answers(executor: Executor) -> None:
    result = executor.validate_proposal("def f(x):\n    return x * 2", "21")
    assert (result.status, result.output) == (ExecStatus.OK, "42")


@pytest.mark.parametrize("program", [
    "def f(x):\n    while True:\n        pass",
    "import select\ndef f(x):\n    select.select([], [], [], 60)",
])
def test_timeout_status_within_the_limit_plus_a_second(executor: Executor, program: str) -> None:
    started = time.monotonic()
    result = executor.validate_proposal(program, "1")
    assert result.status is ExecStatus.TIMEOUT
    assert time.monotonic() - started < LIMITS.timeout_s + 1.0
    assert_worker_still_answers(executor)


@pytest.mark.parametrize("program", [
    "def f(x):\n    return bytearray(300 * 2**20)",
    "def f(x):\n    chunks = []\n    while True:\n        chunks.append(bytearray(2**20))",
])
def test_memory_status(patient: Executor, program: str) -> None:
    assert patient.validate_proposal(program, "1").status is ExecStatus.MEMORY
    assert_worker_still_answers(patient)


def test_memory_below_the_limit_is_fine(executor: Executor) -> None:
    result = executor.validate_proposal("def f(x):\n    return len(bytearray(100 * 2**20))", "1")
    assert result.output == str(100 * 2**20)


def test_output_limit_counts_bytes_of_the_repr(executor: Executor) -> None:
    # 998 characters: 1000 bytes with the quotes
    assert executor.validate_proposal("def f(n):\n    return 'x' * n", "998").status is ExecStatus.OK
    assert executor.validate_proposal("def f(n):\n    return 'x' * n", "999").status is ExecStatus.OUTPUT_TOO_LARGE
    assert executor.validate_proposal("def f(n):\n    return 'é' * n", "600").status is ExecStatus.OUTPUT_TOO_LARGE
    assert_worker_still_answers(executor)


PER_TASK_CAP_NEEDS = (
    "RLIMIT_NPROC counts every process of the workers' uid (65534 under root, else the caller's: other workers, a "
    "desktop session) and does not bind root with CAP_SYS_RESOURCE/CAP_SYS_ADMIN, so only bubblewrap's user namespace "
    "or Docker's pids cgroup gives each task its own process cap")
"""Why the process-cap test needs isolation: without it there is no per-task cap to test."""


def test_process_cap(executor: Executor, isolation_required: Callable[..., None]) -> None:
    isolation_required(executor, needed_for=PER_TASK_CAP_NEEDS)
    program = ("import os\ndef f(n):\n    pids = []\n    for _ in range(n):\n        pid = os.fork()\n"
               "        if pid == 0:\n            os._exit(0)\n        pids.append(pid)\n"
               "    for pid in pids:\n        os.waitpid(pid, 0)\n    return len(pids)")
    assert executor.validate_proposal(program, "3").output == "3"
    result = executor.validate_proposal(program, "50")
    assert result.status is ExecStatus.RUNTIME_ERROR and "BlockingIOError" in (result.error or ""), result
    assert_worker_still_answers(executor)


def test_runtime_error_is_reported_briefly(executor: Executor) -> None:
    result = executor.validate_proposal("def f(x):\n    raise KeyError('k' * 10000)", "1")
    assert result.status is ExecStatus.RUNTIME_ERROR and result.error is not None
    assert result.error.startswith("KeyError") and len(result.error) <= 300


def test_limits_per_executor() -> None:
    program = "import select\ndef f(x):\n    select.select([], [], [], 1.5)\n    return 1"
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=3.0)) as patient:
        assert patient.validate_proposal(program, "1").status is ExecStatus.OK
