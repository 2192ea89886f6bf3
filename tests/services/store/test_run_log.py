"""Episodes, runs and steps on SQLite and PostgreSQL: idempotent by episode id, upserted steps, filters."""

from __future__ import annotations

import pytest

from services.algorithm.task_types import Role, TaskType
from services.records import Episode
from services.store import SqlTripletStore


def episode(index: int, *, run_id: str = "run-a", step: int = 1, task_type: TaskType = TaskType.DEDUCTION,
            role: Role = Role.SOLVE) -> Episode:
    return Episode(id=f"{run_id}-{index}", run_id=run_id, step=step, task_type=task_type, role=role,
                   prompt_ids=[1, 2, index], response_ids=[index, 9], behaviour_logprobs=[-0.5, -1.25],
                   reward=0.25 * index, policy_version=step, text=f"<answer>{index}</answer>", exec_status="ok")


def test_recording_the_same_episodes_again_writes_nothing(store: SqlTripletStore) -> None:
    first = [episode(i) for i in range(5)]
    assert store.record_episodes(first) == 5
    assert store.record_episodes(first + [episode(5), episode(6), episode(6)]) == 2
    stored, total = store.list_episodes("run-a", limit=100)
    assert total == 7 and [e.id for e in stored] == sorted(e.id for e in stored)
    assert stored[3] == first[3]  # the whole record round-trips
    assert store.record_episodes([]) == 0


def test_list_episodes_filters_by_step_task_type_and_role(store: SqlTripletStore) -> None:
    store.record_episodes([episode(0, step=1), episode(1, step=2), episode(2, step=2, role=Role.PROPOSE),
                           episode(3, step=2, task_type=TaskType.INDUCTION), episode(4, run_id="run-b")])
    assert store.list_episodes("run-a", step=2)[1] == 3
    assert [e.id for e in store.list_episodes("run-a", step=2, role=Role.PROPOSE)[0]] == ["run-a-2"]
    assert [e.id for e in store.list_episodes("run-a", task_type=TaskType.INDUCTION)[0]] == ["run-a-3"]
    page, total = store.list_episodes("run-a", limit=2, offset=2)
    assert total == 4 and len(page) == 2
    assert store.list_episodes("run-b")[1] == 1
    with pytest.raises(ValueError):
        store.list_episodes("run-a", limit=-1)


def test_steps_are_upserted_and_listed_in_order(store: SqlTripletStore) -> None:
    store.ensure_run("run-s", {"batch_size": 4})
    store.ensure_run("run-s", {"batch_size": 8})
    store.record_step("run-s", 2, 1, {"reward": 0.5})
    store.record_step("run-s", 1, 0, {"reward": 0.1})
    store.record_step("run-s", 2, 2, {"reward": 0.75, "valid": 3})
    store.record_step("run-other", 1, 0, {})  # creates its run on the way
    recorded = store.list_steps("run-s")
    assert [(s.step, s.policy_version, s.metrics) for s in recorded] == [
        (1, 0, {"reward": 0.1}), (2, 2, {"reward": 0.75, "valid": 3})]
    assert recorded[0].recorded_at.tzinfo is not None
    assert [s.step for s in store.list_steps("run-other")] == [1]
    assert store.list_steps("nobody") == []


def test_list_steps_after_a_step_and_at_most_a_limit(store: SqlTripletStore) -> None:
    for step in range(1, 8):
        store.record_step("run-p", step, step, {"reward/deduction/solve": step / 10})
    assert [s.step for s in store.list_steps("run-p", since_step=4)] == [5, 6, 7]
    assert [s.step for s in store.list_steps("run-p", since_step=0, limit=3)] == [1, 2, 3]
    assert [s.step for s in store.list_steps("run-p", since_step=3, limit=2)] == [4, 5]
    assert store.list_steps("run-p", since_step=7) == []
    with pytest.raises(ValueError):
        store.list_steps("run-p", limit=-1)


def test_list_runs_counts_steps_and_puts_the_latest_activity_first(store: SqlTripletStore) -> None:
    store.record_step("run-old", 3, 1, {})
    store.record_step("run-old", 5, 2, {})
    store.ensure_run("run-idle", {})  # no step yet
    store.record_step("run-new", 1, 0, {})
    runs = store.list_runs()
    assert [run.run_id for run in runs] == ["run-new", "run-idle", "run-old"]
    old = runs[2]
    assert (old.steps, old.first_step, old.last_step) == (2, 3, 5)
    assert old.last_recorded_at is not None and old.last_recorded_at.tzinfo is not None
    idle = runs[1]
    assert (idle.steps, idle.first_step, idle.last_step, idle.last_recorded_at) == (0, None, None, None)


def solve_attempt(index: int, task_id: str | None, *, run_id: str = "run-h", step: int = 1,
                  task_type: TaskType = TaskType.DEDUCTION, role: Role = Role.SOLVE) -> Episode:
    return Episode(id=f"{run_id}-{index}", run_id=run_id, step=step, task_type=task_type, role=role,
                   prompt_ids=[1], response_ids=[2, 3], reward=float(index % 2), policy_version=step,
                   text=f"<answer>{index}</answer>", task_id=task_id, exec_status="ok")


def test_solve_history_is_the_solver_episodes_of_one_entry_across_runs(store: SqlTripletStore) -> None:
    store.record_episodes([
        solve_attempt(0, "17", step=3), solve_attempt(1, "17", step=1), solve_attempt(2, "17", run_id="run-i", step=2),
        solve_attempt(3, "17", role=Role.PROPOSE),  # the proposal that created the entry: not a solve attempt
        solve_attempt(4, "17", task_type=TaskType.ABDUCTION),  # entry 17 of another buffer
        solve_attempt(5, "18"), solve_attempt(6, None),
    ])
    history, total = store.solve_history(TaskType.DEDUCTION, "17")
    assert total == 3 and [(e.step, e.id) for e in history] == [(1, "run-h-1"), (2, "run-i-2"), (3, "run-h-0")]
    assert history[0] == solve_attempt(1, "17", step=1)  # the whole record round-trips
    page, total = store.solve_history(TaskType.DEDUCTION, "17", limit=1, offset=1)
    assert total == 3 and [e.id for e in page] == ["run-i-2"]
    assert [e.id for e in store.solve_history(TaskType.ABDUCTION, "17")[0]] == ["run-h-4"]
    assert store.solve_history(TaskType.INDUCTION, "17") == ([], 0)
    with pytest.raises(ValueError):
        store.solve_history(TaskType.DEDUCTION, "17", limit=-1)


def test_an_overlong_task_id_stays_in_the_payload_only(store: SqlTripletStore) -> None:
    long_id = "9" * 65
    assert store.record_episodes([solve_attempt(0, long_id)]) == 1
    assert store.solve_history(TaskType.DEDUCTION, long_id) == ([], 0)
    assert store.list_episodes("run-h")[0][0].task_id == long_id
