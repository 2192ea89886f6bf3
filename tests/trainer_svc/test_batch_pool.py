"""Batch filling: B per group makes a batch, extras wait in order, re-deliveries fold, stale split."""

from __future__ import annotations

import pytest
from trainer_episodes import episode

from services.algorithm.task_types import TASK_GROUPS, Role, TaskType
from trainer_svc.batch_pool import BatchPool
from trainer_svc.staleness import split_stale


def group_episodes(per_group: int, start_version: int = 0):
    return [episode([1, 2], [3], 0.0, task_type=t, role=r, policy_version=start_version)
            for _ in range(per_group) for (t, r) in TASK_GROUPS]


def test_a_batch_needs_b_of_every_group_and_extras_wait_in_arrival_order() -> None:
    pool = BatchPool(per_group=2)
    eps = group_episodes(3)  # three rounds of the six groups
    for i, e in enumerate(eps[:-1]):  # the last group's third episode never arrives
        pool.add(e, f"d{i}")
    batch = pool.take_batch()
    assert batch is not None and len(batch.episodes) == 12
    assert [e.id for e in batch.episodes[:2]] == [eps[0].id, eps[6].id]  # oldest first within a group
    assert sorted(batch.delivery_ids) == sorted(f"d{i}" for i in range(12))
    assert len(pool) == 5 and pool.take_batch() is None
    assert pool.counts()["induction/solve"] == 0 and pool.counts()["deduction/propose"] == 1


def test_a_redelivered_episode_is_kept_once_with_both_delivery_ids() -> None:
    pool = BatchPool(per_group=1)
    eps = group_episodes(1)
    assert pool.add(eps[0], "a") is True
    assert pool.add(eps[0], "b") is False
    for i, e in enumerate(eps[1:]):
        pool.add(e, f"x{i}")
    batch = pool.take_batch()
    assert batch is not None and len(batch.episodes) == 6
    assert {"a", "b"} <= set(batch.delivery_ids) and len(batch.delivery_ids) == 7


def test_remove_returns_every_delivery_id() -> None:
    pool = BatchPool(per_group=1)
    e = episode([1], [2], 0.0, task_type=TaskType.ABDUCTION, role=Role.PROPOSE)
    pool.add(e, "1")
    pool.add(e, "2")
    assert pool.remove(e.id) == ["1", "2"] and len(pool) == 0 and e.id not in pool


def test_per_group_must_be_positive() -> None:
    with pytest.raises(ValueError):
        BatchPool(per_group=0)


def test_split_stale_keeps_versions_within_max_staleness() -> None:
    eps = [episode([1], [2], 0.0, policy_version=v) for v in (0, 1, 2, 3)]
    fresh, stale = split_stale(eps, current_version=3, max_staleness=1)
    assert [e.policy_version for e in fresh] == [2, 3] and [e.policy_version for e in stale] == [0, 1]
    assert split_stale(eps, current_version=3, max_staleness=3) == (eps, [])


def test_take_removes_exactly_the_named_episodes_in_id_order_with_all_their_deliveries() -> None:
    pool = BatchPool(per_group=4)
    eps = group_episodes(1)
    for i, e in enumerate(eps):
        pool.add(e, f"d{i}")
    pool.add(eps[2], "again")  # a redelivery of one of them
    wanted = {eps[4].id, eps[2].id, "never-delivered"}
    batch = pool.take(wanted)
    assert [e.id for e in batch.episodes] == sorted([eps[2].id, eps[4].id])
    assert sorted(batch.delivery_ids) == sorted(["d2", "again", "d4"])
    assert len(pool) == 4 and eps[2].id not in pool and eps[0].id in pool
