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
