"""Reading drawn slots in one round trip: the statement returns the buffers' sizes with the rows at the slots.

Slots are drawn (by the caller's `random.Random`) against the size this process last saw. The one statement
returns the current sizes and the rows in one snapshot; if a size differs, the generator's state is restored and
the draw repeated against the true size. So the result, and how much randomness it consumed, depend only on the
database's state, never on what this process had cached: runs stay reproducible from their seed. At the cap (the
steady state of training) sizes no longer change, and a K-sample is one round trip.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from sqlalchemy import Engine, and_, bindparam, select

from services.store.entry_rows import BufferEntry, entry_from_row
from services.store.schema import buffer_entries, buffer_sizes

DRAW_ATTEMPTS = 5
"""Draws tried while the buffers keep changing size under us (each retry means a concurrent insert committed)."""

Chooser = Callable[[dict[str, int]], tuple[str, list[int]]]
"""Given the buffers' sizes: which buffer to read and which slots of it (repeats allowed), in result order."""

SIZED_SLOTS = (
    select(buffer_sizes.c.buffer.label("sized_buffer"), buffer_sizes.c.size.label("sized_size"), buffer_entries)
    .select_from(buffer_sizes.outerjoin(buffer_entries, and_(
        buffer_entries.c.buffer == buffer_sizes.c.buffer,
        buffer_entries.c.buffer == bindparam("pick"),
        buffer_entries.c.slot.in_(bindparam("slots", expanding=True)))))
    .where(buffer_sizes.c.buffer.in_(bindparam("buffers", expanding=True)))
)
"""One row per buffer size (entry columns NULL) or per entry found at a drawn slot of the picked buffer."""


class SlotsMoved(RuntimeError):
    """The buffers changed size on every attempt, or a slot was empty: sampling could not complete."""


class SlotReader:
    """Draws and reads slots, remembering the last size seen per buffer (a hint only, see the module docstring)."""

    def __init__(self, reader: Engine) -> None:
        self._reader = reader
        self._known_sizes: dict[str, int] = {}

    def draw(self, buffers: Sequence[str], choose: Chooser, rng: random.Random) -> list[BufferEntry]:
        """The entries `choose` picks given the buffers' true sizes, in its order."""
        state = rng.getstate()
        for _ in range(DRAW_ATTEMPTS):
            assumed = {buffer: self._known_sizes.get(buffer, 0) for buffer in buffers}
            pick, slots = choose(assumed)
            try:
                with self._reader.connect() as connection:
                    rows = connection.execute(SIZED_SLOTS, {"buffers": list(buffers), "pick": pick,
                                                            "slots": sorted(set(slots))}).mappings().all()
            except BaseException:
                rng.setstate(state)  # a failed read consumes no randomness: a retried call draws the same
                raise
            actual = {row["sized_buffer"]: row["sized_size"] for row in rows}
            self._known_sizes.update(actual)
            if actual == assumed:
                by_slot = {row["slot"]: entry_from_row(row) for row in rows if row["id"] is not None}
                missing = [slot for slot in slots if slot not in by_slot]
                if missing:  # one snapshot, dense slots: a hole means the invariant is broken; never hide it
                    raise SlotsMoved(f"buffer {pick!r} has no entries at slots {missing[:5]} (size {actual[pick]})")
                return [by_slot[slot] for slot in slots]
            rng.setstate(state)  # redraw against the true sizes as if we had known them
        raise SlotsMoved(f"buffers {list(buffers)} changed size on each of {DRAW_ATTEMPTS} attempts")
