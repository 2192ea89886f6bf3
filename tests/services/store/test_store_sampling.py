"""Sampling contract on SQLite and PostgreSQL: K references, one program for induction, the solver batch."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from services.algorithm.task_types import TaskType
from services.records import InductionTask, Triplet
from services.store import SqlTripletStore


def fill(store: SqlTripletStore, buffer: TaskType, count: int, offset: int = 0) -> list[str]:
    return [store.insert_triplet(Triplet(buffer=buffer, program=f"def f(x):\n    return x * {offset + i}",
                                         input="2", output=str(2 * (offset + i)))).id for i in range(count)]


def test_sample_references_is_distinct_reproducible_and_uniform(store: SqlTripletStore) -> None:
    ids = fill(store, TaskType.DEDUCTION, 20)
    rng = random.Random(1234)
    counts: Counter[str] = Counter()
    draws = 600
    for _ in range(draws):
        sample = store.sample_references(TaskType.DEDUCTION, 6, rng)
        assert len(sample) == 6 and len({entry.id for entry in sample}) == 6
        counts.update(entry.id for entry in sample)
    assert set(counts) == set(ids)
    expected = draws * 6 / 20
    chi_square = sum((counts[entry_id] - expected) ** 2 / expected for entry_id in ids)
    assert chi_square < 45.3  # 19 degrees of freedom: p < 0.001 above this; the seed makes it deterministic
    again = [entry.id for entry in store.sample_references(TaskType.DEDUCTION, 6, random.Random(7))]
    assert again == [entry.id for entry in store.sample_references(TaskType.DEDUCTION, 6, random.Random(7))]


def test_sample_references_returns_everything_when_the_buffer_is_small(store: SqlTripletStore) -> None:
    ids = fill(store, TaskType.ABDUCTION, 3)
    sample = store.sample_references(TaskType.ABDUCTION, 6, random.Random(0))
    assert sorted(entry.id for entry in sample) == sorted(ids)
    assert store.sample_references(TaskType.DEDUCTION, 6, random.Random(0)) == []


def test_sample_program_draws_from_abduction_and_deduction_only(store: SqlTripletStore) -> None:
    assert store.sample_program(random.Random(0)) is None
    abduction = set(fill(store, TaskType.ABDUCTION, 1))
    deduction = set(fill(store, TaskType.DEDUCTION, 3, offset=10))
    store.insert_induction(InductionTask(program="def f(x): return -x", inputs=["1", "2"], outputs=["-1", "-2"],
                                         message="negate"))
    rng = random.Random(5)
    picks = [store.sample_program(rng) for _ in range(400)]
    assert all(isinstance(pick, Triplet) and pick.buffer != TaskType.INDUCTION for pick in picks)
    from_abduction = sum(pick.id in abduction and pick.buffer == TaskType.ABDUCTION for pick in picks)  # type: ignore[union-attr]
    from_deduction = sum(pick.id in deduction for pick in picks)  # type: ignore[union-attr]
    assert from_abduction + from_deduction == 400
    assert 60 <= from_abduction <= 140  # expected 100 (1 of 4 entries); binomial sd ~8.7


def test_sample_batch_puts_new_entries_first_then_fills_without_replacement(store: SqlTripletStore) -> None:
    old = fill(store, TaskType.DEDUCTION, 30)
    new = fill(store, TaskType.DEDUCTION, 3, offset=100)
    other = fill(store, TaskType.ABDUCTION, 1)
    batch = store.sample_batch(TaskType.DEDUCTION, 8, [new[2], "nope", other[0], new[0], new[1]], random.Random(3))
    ids = [entry.id for entry in batch]
    assert ids[:3] == [new[2], new[0], new[1]]  # in the order given; unknown and other-buffer ids skipped
    assert len(ids) == 8 and len(set(ids)) == 8 and set(ids[3:]) <= set(old)
    capped = store.sample_batch(TaskType.DEDUCTION, 2, new, random.Random(3))
    assert [entry.id for entry in capped] == new[:2]


def test_sample_batch_repeats_entries_only_when_the_buffer_is_too_small(store: SqlTripletStore) -> None:
    store.initialise()
    zero_id = store.list_entries(TaskType.ABDUCTION)[0][0].id
    batch = store.sample_batch(TaskType.ABDUCTION, 5, [], random.Random(0))
    assert [entry.id for entry in batch] == [zero_id] * 5  # only the zero triplet exists
    ids = fill(store, TaskType.ABDUCTION, 3)
    for seed in range(20):  # the with-replacement tail may repeat the new entry; that is no reason to redraw
        batch = store.sample_batch(TaskType.ABDUCTION, 9, [ids[0]], random.Random(seed))
        assert batch[0].id == ids[0] and len(batch) == 9
        assert sorted(entry.id for entry in batch[1:4]) == sorted([zero_id, ids[1], ids[2]])  # others before repeats
    assert store.sample_batch(TaskType.INDUCTION, 4, [], random.Random(0)) == []


def test_samples_depend_on_the_buffer_not_on_what_the_process_saw_before(
        make_store: Callable[..., SqlTripletStore]) -> None:
    warm = make_store()
    fill(warm, TaskType.DEDUCTION, 5)
    warm.sample_references(TaskType.DEDUCTION, 3, random.Random(0))  # remembers size 5
    fill(warm, TaskType.DEDUCTION, 20, offset=50)  # the buffer grows behind its back
    fresh = make_store()
    for seed in range(5):
        warm_rng, fresh_rng = random.Random(seed), random.Random(seed)
        assert [e.id for e in warm.sample_references(TaskType.DEDUCTION, 6, warm_rng)] == \
            [e.id for e in fresh.sample_references(TaskType.DEDUCTION, 6, fresh_rng)]
        assert warm_rng.random() == fresh_rng.random()  # and the generators consumed the same draws
        assert warm.sample_program(warm_rng) == fresh.sample_program(fresh_rng)
        assert [e.id for e in warm.sample_batch(TaskType.DEDUCTION, 8, [], warm_rng)] == \
            [e.id for e in fresh.sample_batch(TaskType.DEDUCTION, 8, [], fresh_rng)]
