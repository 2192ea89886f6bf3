"""The pure slot arithmetic behind sampling: distinctness, exclusions, the with-replacement tail, uniformity."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from services.store.slot_sampling import _nth_free_slot, distinct_slots, fill_slots


@given(st.integers(0, 60), st.integers(0, 10), st.integers(0, 2**32))
def test_distinct_slots_are_distinct_and_in_range(size: int, k: int, seed: int) -> None:
    slots = distinct_slots(size, k, random.Random(seed))
    assert len(slots) == min(size, k) and len(set(slots)) == len(slots)
    assert all(0 <= slot < size for slot in slots)


@given(st.integers(1, 40), st.integers(0, 80), st.sets(st.integers(0, 45), max_size=12), st.integers(0, 2**32))
def test_fill_slots_avoids_excluded_slots_until_the_others_run_out(size: int, count: int, excluded: set[int],
                                                                   seed: int) -> None:
    slots = fill_slots(size, count, excluded, random.Random(seed))
    free = [slot for slot in range(size) if slot not in excluded]
    distinct_part = min(count, len(free))
    assert len(slots) == count
    assert sorted(slots[:distinct_part]) == sorted(set(slots[:distinct_part]))
    assert set(slots[:distinct_part]) <= set(free)
    if count >= len(free):
        assert set(slots[:distinct_part]) == set(free)  # every other entry before any repeat
    assert all(0 <= slot < size for slot in slots)


@given(st.integers(0, 50), st.sets(st.integers(0, 60), max_size=20))
def test_nth_free_slot_matches_a_brute_force_count(index: int, skipped: set[int]) -> None:
    free = [slot for slot in range(200) if slot not in skipped]
    assert _nth_free_slot(index, sorted(skipped)) == free[index]


def test_fill_slots_is_uniform_over_the_free_slots() -> None:
    rng = random.Random(99)
    counts: Counter[int] = Counter()
    for _ in range(3000):
        counts.update(fill_slots(12, 3, {0, 5}, rng))
    assert set(counts) == set(range(12)) - {0, 5}
    expected = 3000 * 3 / 10
    assert sum((counts[slot] - expected) ** 2 / expected for slot in counts) < 27.9  # 9 dof, p < 0.001


def test_empty_cases_draw_nothing() -> None:
    rng = random.Random(0)
    assert distinct_slots(0, 6, rng) == [] and distinct_slots(5, 0, rng) == []
    assert fill_slots(0, 4, set(), rng) == [] and fill_slots(5, 0, {1}, rng) == []
