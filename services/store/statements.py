"""The store's hot statements, built once per dialect with bind parameters: SQLAlchemy then only looks up their
compiled form, which keeps an insert or a K-sample to a few database round trips and little Python."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable

from services.store.schema import buffer_entries, buffer_sizes

PROTECTED_SOURCES = ("zero", "seed")
"""Sources never evicted by the cap (TripletSource.ZERO, TripletSource.SEED)."""

DialectInsert = Callable[[Table], postgresql.Insert | sqlite.Insert]
"""The dialect's INSERT construct of a table: PostgreSQL's or SQLite's, each with on_conflict_do_nothing /
on_conflict_do_update."""

entries = buffer_entries.c
sizes = buffer_sizes.c


@dataclass(frozen=True)
class BufferStatements:
    """Parameterised statements of the buffer store (parameter names in each docstring line)."""

    size: Executable  # buffer
    size_for_update: Executable  # buffer; locks the row (PostgreSQL; SQLite holds the write lock already)
    set_size: Executable  # target_buffer, new_size
    existing_id: Executable  # buffer, entry_key
    insert_entry: Executable  # every buffer_entries column but id; nothing on a duplicate entry_key
    evict_oldest: Executable  # buffer, keep_id, excess; deletes, returns the freed slots
    move_slot: Executable  # target_buffer, from_slot, to_slot
    at_slots: Executable  # buffer, slots (a list)
    by_ids: Executable  # buffer, ids (a list)
    by_id: Executable  # buffer, entry_id
    insert: DialectInsert  # the dialect's INSERT construct (on_conflict_do_nothing / _do_update)


def build_statements(dialect_name: str) -> BufferStatements:
    """The statements for `postgresql` or `sqlite`."""
    insert = postgresql.insert if dialect_name == "postgresql" else sqlite.insert
    return BufferStatements(
        size=select(sizes.size).where(sizes.buffer == bindparam("buffer")),
        size_for_update=select(sizes.size).where(sizes.buffer == bindparam("buffer")).with_for_update(),
        set_size=update(buffer_sizes).where(sizes.buffer == bindparam("target_buffer"))
        .values(size=bindparam("new_size")),
        existing_id=select(entries.id).where(entries.buffer == bindparam("buffer"),
                                             entries.entry_key == bindparam("entry_key")),
        insert_entry=insert(buffer_entries).on_conflict_do_nothing(index_elements=["buffer", "entry_key"])
        .returning(entries.id),
        evict_oldest=delete(buffer_entries).where(entries.id.in_(
            select(entries.id)
            .where(entries.buffer == bindparam("buffer"), entries.source.not_in(PROTECTED_SOURCES),
                   entries.id != bindparam("keep_id"))
            .order_by(entries.id).limit(bindparam("excess"))
        )).returning(entries.slot),
        move_slot=update(buffer_entries)
        .where(entries.buffer == bindparam("target_buffer"), entries.slot == bindparam("from_slot"))
        .values(slot=bindparam("to_slot")),
        at_slots=select(buffer_entries).where(entries.buffer == bindparam("buffer"),
                                              entries.slot.in_(bindparam("slots", expanding=True))),
        by_ids=select(buffer_entries).where(entries.buffer == bindparam("buffer"),
                                            entries.id.in_(bindparam("ids", expanding=True))),
        by_id=select(buffer_entries).where(entries.buffer == bindparam("buffer"), entries.id == bindparam("entry_id")),
        insert=insert,
    )
