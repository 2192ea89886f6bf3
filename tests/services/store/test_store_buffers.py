"""Contract tests of the buffer store (TripletStore port) on SQLite and PostgreSQL: insert, de-duplication, cap,
lookup, pagination and stats."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from services.algorithm.task_types import ZERO_TRIPLET_INPUT, ZERO_TRIPLET_OUTPUT, ZERO_TRIPLET_PROGRAM, TaskType
from services.records import InductionTask, Triplet, TripletSource
from services.store import SqlTripletStore


def triplet(program: str, input: str = "1", *, buffer: TaskType = TaskType.DEDUCTION, output: str = "1",
            source: TripletSource = TripletSource.PROPOSED, step: int = 0, policy_version: int = 0) -> Triplet:
    return Triplet(buffer=buffer, program=program, input=input, output=output, source=source, step=step,
                   policy_version=policy_version)


def numbered(index: int, **fields: object) -> Triplet:
    return triplet(f"def f(x):\n    return x + {index}", output=str(1 + index), **fields)  # type: ignore[arg-type]


def test_initialise_puts_the_zero_triplet_in_abduction_and_deduction_once(store: SqlTripletStore) -> None:
    store.initialise()
    store.initialise()
    assert [store.count(buffer) for buffer in TaskType] == [1, 1, 0]
    for buffer in (TaskType.DEDUCTION, TaskType.ABDUCTION):
        entries, total = store.list_entries(buffer)
        assert total == 1
        zero = entries[0]
        assert isinstance(zero, Triplet)
        assert (zero.program, zero.input, zero.output) == (ZERO_TRIPLET_PROGRAM, ZERO_TRIPLET_INPUT,
                                                           ZERO_TRIPLET_OUTPUT)
        assert zero.source == TripletSource.ZERO and zero.id is not None and zero.program_hash


def test_a_reformatted_program_with_the_same_input_is_a_duplicate(store: SqlTripletStore) -> None:
    first = store.insert_triplet(triplet("def f(x):\n  return x  # hi", "[1,2]"))
    again = store.insert_triplet(triplet('def f(x):\n    """Identity."""\n    return x', "[1, 2]"))
    assert first.created and not again.created
    assert again.id == first.id
    assert store.count(TaskType.DEDUCTION) == 1


def test_different_input_buffer_or_names_make_a_new_entry(store: SqlTripletStore) -> None:
    base = store.insert_triplet(triplet("def f(x): return x", "1"))
    other_input = store.insert_triplet(triplet("def f(x): return x", "2"))
    other_buffer = store.insert_triplet(triplet("def f(x): return x", "1", buffer=TaskType.ABDUCTION))
    renamed = store.insert_triplet(triplet("def f(y): return y", "1"))  # documented limit: renaming is new
    assert all(outcome.created for outcome in (base, other_input, other_buffer, renamed))
    assert len({base.id, other_input.id, other_buffer.id, renamed.id}) == 4
    assert (store.count(TaskType.DEDUCTION), store.count(TaskType.ABDUCTION)) == (3, 1)


def test_induction_tasks_round_trip_and_deduplicate_on_program_and_inputs(store: SqlTripletStore) -> None:
    task = InductionTask(program="def f(a):\n    return a * 2", inputs=["1", "2", "3", "4", "'x'"],
                         outputs=["2", "4", "6", "8", "'xx'"], message="doubles", imports=[], step=3,
                         policy_version=2, source=TripletSource.USER)
    stored = store.insert_induction(task)
    duplicate = store.insert_induction(task.model_copy(update={"program": "def f(a): return a*2  # same"}))
    reordered = store.insert_induction(task.model_copy(update={"inputs": ["2", "1", "3", "4", "'x'"],
                                                               "outputs": ["4", "2", "6", "8", "'xx'"]}))
    assert stored.created and not duplicate.created and duplicate.id == stored.id and reordered.created
    loaded = store.get(TaskType.INDUCTION, stored.id)
    assert isinstance(loaded, InductionTask)
    assert (loaded.inputs, loaded.outputs, loaded.message) == (task.inputs, task.outputs, "doubles")
    assert loaded.given_pairs == [("1", "2"), ("2", "4")] and len(loaded.hidden_pairs) == 3
    assert (loaded.step, loaded.policy_version, loaded.source) == (3, 2, TripletSource.USER)


def test_a_triplet_for_the_induction_buffer_is_refused(store: SqlTripletStore) -> None:
    with pytest.raises(ValueError, match="insert_induction"):
        store.insert_triplet(triplet("def f(x): return x", buffer=TaskType.INDUCTION))
    assert store.count(TaskType.INDUCTION) == 0


def test_cap_evicts_the_oldest_non_seed_entries(make_store: Callable[..., SqlTripletStore]) -> None:
    store = make_store(buffer_cap=5)
    store.initialise()
    seeds = [store.insert_triplet(numbered(i, source=TripletSource.SEED)).id for i in range(2)]
    outcomes = [store.insert_triplet(numbered(100 + i, step=i)) for i in range(6)]
    assert [outcome.evicted for outcome in outcomes] == [0, 0, 1, 1, 1, 1]
    assert store.count(TaskType.DEDUCTION) == 5
    entries, total = store.list_entries(TaskType.DEDUCTION, limit=10)
    kept = {entry.id for entry in entries}
    assert total == 5
    assert set(seeds) <= kept
    assert {outcomes[4].id, outcomes[5].id} <= kept  # the two newest proposals survive
    assert not kept & {outcome.id for outcome in outcomes[:4]}
    sampled = store.sample_references(TaskType.DEDUCTION, 5, random.Random(0))
    assert {entry.id for entry in sampled} == kept  # slots stayed dense: every entry is reachable


def test_cap_never_evicts_seeds_and_never_the_entry_just_inserted(make_store: Callable[..., SqlTripletStore]) -> None:
    store = make_store(buffer_cap=2)
    for i in range(3):
        store.insert_triplet(numbered(i, source=TripletSource.SEED))
    first = store.insert_triplet(numbered(10))
    second = store.insert_triplet(numbered(11))
    assert (first.created, first.evicted) == (True, 0)
    assert (second.created, second.evicted) == (True, 1)
    assert store.get(TaskType.DEDUCTION, first.id) is None
    assert store.get(TaskType.DEDUCTION, second.id) is not None
    assert store.count(TaskType.DEDUCTION) == 4  # three seeds above the cap stay


def test_get_returns_none_for_unknown_ids_and_other_buffers(store: SqlTripletStore) -> None:
    outcome = store.insert_triplet(numbered(1))
    assert store.get(TaskType.DEDUCTION, outcome.id) is not None
    assert store.get(TaskType.ABDUCTION, outcome.id) is None
    assert store.get(TaskType.DEDUCTION, "abc") is None
    assert store.get(TaskType.DEDUCTION, "999999999") is None


def test_list_entries_pages_newest_first_with_filters(store: SqlTripletStore) -> None:
    ids = [store.insert_triplet(numbered(i, step=i // 3,
                                        source=TripletSource.SEED if i < 2 else TripletSource.PROPOSED)).id
           for i in range(10)]
    page, total = store.list_entries(TaskType.DEDUCTION, limit=4, offset=0)
    assert total == 10 and [entry.id for entry in page] == ids[::-1][:4]
    page, _ = store.list_entries(TaskType.DEDUCTION, limit=4, offset=8)
    assert [entry.id for entry in page] == ids[::-1][8:]
    seeds, seed_total = store.list_entries(TaskType.DEDUCTION, source=TripletSource.SEED)
    assert seed_total == 2 and {entry.id for entry in seeds} == set(ids[:2])
    late, late_total = store.list_entries(TaskType.DEDUCTION, min_step=2)
    assert late_total == 4 and all(entry.step >= 2 for entry in late)
    assert store.list_entries(TaskType.ABDUCTION) == ([], 0)
    with pytest.raises(ValueError):
        store.list_entries(TaskType.DEDUCTION, limit=-1)


def test_stats_count_sources_steps_and_versions(store: SqlTripletStore) -> None:
    store.initialise()
    store.insert_triplet(numbered(1, source=TripletSource.SEED))
    store.insert_triplet(numbered(2, step=4, policy_version=3))
    store.insert_triplet(numbered(3, step=7, policy_version=5, buffer=TaskType.ABDUCTION))
    stats = {entry.buffer: entry for entry in store.stats()}
    assert [entry.buffer for entry in store.stats()] == list(TaskType)
    deduction = stats[TaskType.DEDUCTION]
    assert deduction.count == 3 and deduction.by_source == {"zero": 1, "seed": 1, "proposed": 1}
    assert (deduction.min_step, deduction.max_step, deduction.max_policy_version) == (0, 4, 3)
    assert stats[TaskType.ABDUCTION].max_step == 7 and stats[TaskType.ABDUCTION].count == 2
    assert stats[TaskType.INDUCTION].count == 0 and stats[TaskType.INDUCTION].latest_created_at is None
    assert deduction.latest_created_at is not None and deduction.latest_created_at.tzinfo is not None
    assert deduction.cap == 16_384


def test_a_lower_cap_evicts_many_at_once_and_keeps_slots_dense(make_store: Callable[..., SqlTripletStore]) -> None:
    roomy = make_store(buffer_cap=100)
    ids = [roomy.insert_triplet(numbered(i)).id for i in range(10)]
    tight = make_store(buffer_cap=4)
    outcome = tight.insert_triplet(numbered(99))
    assert (outcome.created, outcome.evicted) == (True, 7)
    kept = {entry.id for entry in tight.sample_references(TaskType.DEDUCTION, 10, random.Random(1))}
    assert kept == {ids[7], ids[8], ids[9], outcome.id}
    assert tight.count(TaskType.DEDUCTION) == 4


def test_the_authors_induction_seeds_round_trip_and_deduplicate(store: SqlTripletStore,
                                                               induction_seed_rows: list[dict]) -> None:
    tasks = [InductionTask(program=row["snippet"], inputs=row["inputs"], outputs=row["outputs"],
                           message=row["message"], imports=row["imports"], source=TripletSource.SEED)
             for row in induction_seed_rows[:30]]
    outcomes = [store.insert_induction(task) for task in tasks]
    distinct = len({(task.program, tuple(task.inputs)) for task in tasks})
    assert sum(outcome.created for outcome in outcomes) == distinct == store.count(TaskType.INDUCTION)
    assert not any(store.insert_induction(task).created for task in tasks)
    for task, outcome in zip(tasks, outcomes):
        loaded = store.get(TaskType.INDUCTION, outcome.id)
        assert isinstance(loaded, InductionTask)
        assert (loaded.program, loaded.inputs, loaded.outputs, loaded.message) == \
            (task.program, task.inputs, task.outputs, task.message)
