"""Which slots to read when sampling a buffer (pure; the `random.Random` passed in decides everything).

A buffer of size n keeps its entries at dense slots 0..n-1, so a uniform sample of entries is a uniform sample of
slot numbers, drawn here without touching the database.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Collection


def distinct_slots(size: int, k: int, rng: random.Random) -> list[int]:
    """min(k, size) distinct slots, uniformly without replacement, in draw order."""
    return rng.sample(range(size), min(k, size)) if size > 0 and k > 0 else []


def fill_slots(size: int, count: int, excluded: Collection[int], rng: random.Random) -> list[int]:
    """`count` slots to fill a solver batch, never one of `excluded` while enough others exist.

    Uniform without replacement over the size - len(excluded) other slots; when there are fewer of them than
    `count`, all of them (in random order) and then the rest drawn uniformly WITH replacement from the whole buffer
    (excluded slots included): a buffer holding only the zero triplet still yields a full batch of it.
    """
    if count <= 0 or size <= 0:
        return []
    skipped = sorted(set(slot for slot in excluded if 0 <= slot < size))
    free = size - len(skipped)
    draws = rng.sample(range(free), min(count, free))
    chosen = [_nth_free_slot(index, skipped) for index in draws]
    chosen += [rng.randrange(size) for _ in range(count - len(chosen))]
    return chosen


def _nth_free_slot(index: int, skipped: list[int]) -> int:
    """The index-th slot (0-based) that is not in the sorted `skipped` list."""
    slot = index
    while True:  # shift past every skipped slot at or below the candidate; converges in <= len(skipped) rounds
        shifted = index + bisect.bisect_right(skipped, slot)
        if shifted == slot:
            return slot
        slot = shifted
