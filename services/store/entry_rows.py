"""Conversions between `services.records` buffer entries and `buffer_entries` rows, and the rows' text search."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypedDict

from sqlalchemy import ColumnElement, RowMapping, Text, cast, func, or_

from services.algorithm.program_identity import program_and_entry_keys
from services.algorithm.task_types import TaskType
from services.records import InductionTask, Triplet, TripletSource
from services.store.schema import buffer_entries

BufferEntry = Triplet | InductionTask

class EntryRow(TypedDict):
    """Column values of a `buffer_entries` row, by column name (slot excluded: the store assigns it)."""

    buffer: str
    program: str
    input: str | None
    output: str | None
    inputs: list[str] | None
    outputs: list[str] | None
    message: str | None
    given_count: int | None
    imports: list[str]
    source: str
    step: int
    policy_version: int
    program_hash: str
    entry_key: str
    created_at: datetime


def as_utc(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; every stored time is UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def triplet_row(triplet: Triplet) -> EntryRow:
    """Column values of a deduction/abduction triplet (slot excluded: the store assigns it)."""
    if triplet.buffer == TaskType.INDUCTION:
        raise ValueError("a Triplet belongs to the deduction or abduction buffer; use insert_induction for induction")
    program_key, key = program_and_entry_keys(triplet.program, [triplet.input])
    return {
        "buffer": triplet.buffer.value,
        "program": triplet.program,
        "input": triplet.input,
        "output": triplet.output,
        "inputs": None,
        "outputs": None,
        "message": None,
        "given_count": None,
        "imports": list(triplet.imports),
        "source": triplet.source.value,
        "step": triplet.step,
        "policy_version": triplet.policy_version,
        "program_hash": program_key,
        "entry_key": key,
        "created_at": as_utc(triplet.created_at),
    }


def induction_row(task: InductionTask) -> EntryRow:
    """Column values of an induction task (slot excluded)."""
    if task.buffer != TaskType.INDUCTION:
        raise ValueError(f"an InductionTask belongs to the induction buffer, not {task.buffer.value!r}")
    if len(task.inputs) != len(task.outputs) or not task.inputs:
        raise ValueError(f"an induction task needs as many outputs as inputs (got {len(task.inputs)} inputs, "
                         f"{len(task.outputs)} outputs) and at least one pair")
    program_key, key = program_and_entry_keys(task.program, task.inputs)
    return {
        "buffer": TaskType.INDUCTION.value,
        "program": task.program,
        "input": None,
        "output": None,
        "inputs": list(task.inputs),
        "outputs": list(task.outputs),
        "message": task.message,
        "given_count": task.split,
        "imports": list(task.imports),
        "source": task.source.value,
        "step": task.step,
        "policy_version": task.policy_version,
        "program_hash": program_key,
        "entry_key": key,
        "created_at": as_utc(task.created_at),
    }


def entry_from_row(row: RowMapping) -> BufferEntry:
    """The record a stored row holds, with `id` and `program_hash` filled in."""
    common = {
        "id": str(row["id"]),
        "program": row["program"],
        "imports": list(row["imports"] or []),
        "source": TripletSource(row["source"]),
        "step": row["step"],
        "policy_version": row["policy_version"],
        "program_hash": row["program_hash"],
        "created_at": as_utc(row["created_at"]),
    }
    if row["buffer"] == TaskType.INDUCTION.value:
        return InductionTask(inputs=list(row["inputs"]), outputs=list(row["outputs"]), message=row["message"] or "",
                             **common)
    return Triplet(buffer=TaskType(row["buffer"]), input=row["input"], output=row["output"], **common)


SEARCHED_COLUMNS = ("program", "input", "output", "message")
"""Text columns a buffer search looks in (plus induction inputs/outputs as their stored JSON text)."""


def text_matches(text: str) -> ColumnElement[bool]:
    """A condition: `text` occurs in an entry's program, input(s), output(s) or message, ignoring case.

    LIKE wildcards in `text` match themselves (autoescape). Both sides are lowered in SQL so PostgreSQL (whose LIKE
    is case-sensitive) and SQLite agree; NULL columns (e.g. `input` of induction rows) simply do not match."""
    needle = text.lower()
    columns: list[ColumnElement[str]] = [buffer_entries.c[name] for name in SEARCHED_COLUMNS]
    columns += [cast(buffer_entries.c.inputs, Text), cast(buffer_entries.c.outputs, Text)]
    return or_(*(func.lower(column).contains(needle, autoescape=True) for column in columns))


def parse_entry_id(entry_id: str) -> int | None:
    """The integer row id of a textual entry id, or None when it cannot be one."""
    text = str(entry_id).strip()
    if not text.isdigit() or len(text) > 18:
        return None
    return int(text)
