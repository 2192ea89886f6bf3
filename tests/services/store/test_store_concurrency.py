"""Eight writer processes, each with its own engine, on SQLite (WAL) and PostgreSQL: no duplicate, no lost
entry, no "database is locked", and the cap plus dense slots hold under concurrent eviction."""

from __future__ import annotations

import multiprocessing
import random
from typing import Any

import pytest
from sqlalchemy import select

from services.algorithm.task_types import TaskType
from services.records import Triplet, TripletSource
from services.store import SqlTripletStore, open_store
from services.store.schema import buffer_entries

WRITERS = 8


def _insert_all(database_url: str, rows: list[dict[str, Any]], order_seed: int, buffer_cap: int) -> list[bool]:
    """Child process: insert every row (in its own shuffled order) through a fresh engine; report `created`."""
    order = list(range(len(rows)))
    random.Random(order_seed).shuffle(order)
    with open_store(database_url, buffer_cap=buffer_cap) as store:
        return [store.insert_triplet(Triplet.model_validate(rows[index])).created for index in order]


def _run_writers(database_url: str, batches: list[list[dict[str, Any]]], buffer_cap: int = 16_384) -> list[list[bool]]:
    context = multiprocessing.get_context("fork")  # children build their own engines after the fork
    with context.Pool(WRITERS) as pool:
        return pool.starmap(_insert_all,
                            [(database_url, batch, seed, buffer_cap) for seed, batch in enumerate(batches)])


def _slots(store: SqlTripletStore, buffer: TaskType) -> list[int]:
    with store.engine.connect() as connection:
        return sorted(connection.execute(select(buffer_entries.c.slot)
                                         .where(buffer_entries.c.buffer == buffer.value)).scalars())


@pytest.mark.slow
def test_eight_processes_inserting_the_same_200_seeds_store_exactly_200(
        database_url: str, store: SqlTripletStore, seed_rows: list[dict[str, Any]]) -> None:
    seeds = [Triplet(buffer=TaskType.DEDUCTION, program=row["snippet"], input=row["input"], output=row["output"],
                     source=TripletSource.SEED).model_dump(mode="json") for row in seed_rows[:200]]
    distinct = len({(row["program"], row["input"]) for row in seeds})
    results = _run_writers(database_url, [seeds] * WRITERS)
    assert sum(sum(created) for created in results) == distinct == 200
    assert store.count(TaskType.DEDUCTION) == 200
    assert store.list_entries(TaskType.DEDUCTION, limit=0)[1] == 200
    assert _slots(store, TaskType.DEDUCTION) == list(range(200))


@pytest.mark.slow
def test_concurrent_inserts_beyond_the_cap_keep_the_newest_and_the_seeds(
        database_url: str, make_store: Any) -> None:
    store = make_store(buffer_cap=40)
    store.initialise()
    batches = [[Triplet(buffer=TaskType.ABDUCTION, program=f"def f(x):\n    return x * {writer} + {index}",
                        input="3", output=str(3 * writer + index)).model_dump(mode="json") for index in range(25)]
               for writer in range(WRITERS)]
    results = _run_writers(database_url, batches, buffer_cap=40)
    assert all(all(created) for created in results)
    assert store.count(TaskType.ABDUCTION) == 40
    entries, total = store.list_entries(TaskType.ABDUCTION, limit=100)
    assert total == 40 and sum(entry.source == TripletSource.ZERO for entry in entries) == 1
    assert _slots(store, TaskType.ABDUCTION) == list(range(40))
    with store.engine.connect() as connection:  # survivors are exactly the 39 newest proposals by id
        all_ids = sorted(int(entry.id) for entry in entries if entry.source != TripletSource.ZERO)
        newest = connection.execute(select(buffer_entries.c.id).where(buffer_entries.c.buffer == "abduction",
                                    buffer_entries.c.source == "proposed").order_by(buffer_entries.c.id.desc())
                                    .limit(39)).scalars().all()
    assert all_ids == sorted(newest)
