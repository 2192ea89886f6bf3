"""`SharedCoreThreads`: torch's thread count follows the sandbox workers' load (every core while none runs)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import torch

from services.compute.torch_threads import (
    SharedCoreThreads,
    auto_threads,
    configure_torch_threads,
    threads_beside_executor,
    update_threads,
)

pytestmark = pytest.mark.precision


@pytest.fixture(autouse=True)
def restore_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_every_core_while_no_job_runs_and_the_workers_cores_left_while_one_does() -> None:
    running = [0]
    threads = SharedCoreThreads(cores=4, executor_workers=3, jobs_running=lambda: running[0])
    threads.before_generation_forward()
    assert torch.get_num_threads() == 4
    running[0] = 2
    threads.before_generation_forward()
    assert torch.get_num_threads() == 1 == auto_threads(4, 3)
    threads.for_update()  # the update runs after every check was awaited: all cores whatever the snapshot says
    assert torch.get_num_threads() == 4
    running[0] = 0
    threads.before_generation_forward()
    assert torch.get_num_threads() == 4


def test_set_only_when_the_count_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Called before every token's forward pass: a no-op while the load stays the same."""
    set_to: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    running = [0]
    threads = SharedCoreThreads(cores=2, executor_workers=2, jobs_running=lambda: running[0])
    for load in (0, 0, 0, 1, 1, 0, 0):
        running[0] = load
        threads.before_generation_forward()
    assert set_to == [2, 1, 2]


def test_a_fixed_count_is_kept() -> None:
    assert configure_torch_threads(3, executor_workers=2) == 3 == torch.get_num_threads()
    assert configure_torch_threads(0, executor_workers=10) == 1  # auto: at least one thread


def test_beside_an_executor_a_fixed_count_is_set_and_auto_shares_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    assert threads_beside_executor(3, executor_workers=1, jobs_running=lambda: 0) is None
    assert torch.get_num_threads() == 3
    monkeypatch.setattr("services.compute.torch_threads.available_cores", lambda: 2)
    running = [1]
    shared = threads_beside_executor(0, executor_workers=1, jobs_running=lambda: running[0])
    assert shared is not None and (shared.idle_threads, shared.busy_threads) == (2, 1)
    assert torch.get_num_threads() == 2, "every core until a generation step sees a job running"
    shared.before_generation_forward()
    assert torch.get_num_threads() == 1


def test_every_update_of_either_process_uses_update_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded run's updates and `azr trainer`'s run with one count, the one a bitwise reference must use."""
    monkeypatch.setattr("services.compute.torch_threads.available_cores", lambda: 3)
    assert update_threads(2) == 2
    assert update_threads(0) == 3 == configure_torch_threads(0, executor_workers=0)  # azr trainer
    shared = threads_beside_executor(0, executor_workers=2, jobs_running=lambda: 1)
    assert shared is not None
    shared.before_generation_forward()
    assert torch.get_num_threads() == 1
    shared.for_update()
    assert torch.get_num_threads() == update_threads(0)


def test_the_update_gets_its_count_in_its_own_thread_whatever_generation_set_in_another() -> None:
    """torch's count is per OS thread: generation setting every core in one thread leaves another thread's count as
    it was, so the update's thread must set it itself (a count remembered across threads skipped that)."""
    threads = SharedCoreThreads(cores=2, executor_workers=1, jobs_running=lambda: 0)
    generation = threading.Thread(target=threads.before_generation_forward)
    generation.start()
    generation.join()
    torch.set_num_threads(1)  # this thread's count, set by something else since
    threads.for_update()
    assert torch.get_num_threads() == 2
