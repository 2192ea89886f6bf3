"""`SqlTripletStore`: the three buffers (docs/design.md §1, §2 items 5-6) over PostgreSQL or SQLite, plus the run log.

Writes to one buffer are serialised by a lock on its `buffer_sizes` row (SQLite: the database write lock), so
de-duplication, dense slots and eviction stay correct with any number of writer processes; the UNIQUE
(buffer, entry_key) constraint is the last word on duplicates whatever happens.

Reads never load a buffer into Python: sampling draws slot numbers with the caller's `random.Random` and reads
just those rows, with the buffer's size, in one statement (`slot_reader`). On PostgreSQL reads run in autocommit
(no BEGIN/ROLLBACK round trips); one statement is one snapshot. On SQLite a read is one transaction.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from sqlalchemy import Connection, Engine, RowMapping, func, select, text

from services.algorithm.task_types import (
    ZERO_TRIPLET_INPUT,
    ZERO_TRIPLET_OUTPUT,
    ZERO_TRIPLET_PROGRAM,
    TaskType,
)
from services.json_types import JsonObject
from services.ports import BufferStats, InsertOutcome
from services.records import Episode, InductionTask, Triplet, TripletSource
from services.store.engine import WRITE_OPTION, retry_on_disconnect
from services.store.entry_rows import (
    BufferEntry,
    EntryRow,
    as_utc,
    entry_from_row,
    induction_row,
    parse_entry_id,
    text_matches,
    triplet_row,
)
from services.store.run_log import RunLog, RunSummary, StepRecord
from services.store.schema import buffer_entries
from services.store.slot_reader import DRAW_ATTEMPTS, SlotReader, SlotsMoved
from services.store.slot_sampling import distinct_slots, fill_slots
from services.store.statements import build_statements

MAX_PAGE = 1000
"""Largest page `list_entries` returns."""


class SqlTripletStore:
    """The TripletStore port (services/ports/store.py) on SQLAlchemy, with episodes, runs and steps alongside.

    Cap: after an insert takes a buffer beyond `buffer_cap`, its oldest (lowest id) entries whose source is not
    zero/seed are evicted, never the entry just inserted. A buffer holding more zero/seed entries than the cap
    therefore stays above it: seeds are never dropped.
    """

    def __init__(self, engine: Engine, *, buffer_cap: int = 16_384, outage_s: float = 0.0) -> None:
        """`outage_s`: how long an operation rides through a database outage (retries with backoff and a log line)
        before the error goes up; 0 retries only at once (`services.store.engine.retry_on_disconnect`)."""
        if buffer_cap < 1:
            raise ValueError(f"buffer_cap must be at least 1, got {buffer_cap}")
        self.engine = engine
        self.buffer_cap = buffer_cap
        self.outage_s = outage_s
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._reader = (engine.execution_options(isolation_level="AUTOCOMMIT")
                        if engine.dialect.name == "postgresql" else engine)
        self._sql = build_statements(engine.dialect.name)
        self._slots = SlotReader(self._reader)
        self.runs = RunLog(self._reader, self._writer, self._sql.insert)

    # --- lifecycle ---------------------------------------------------------------------------------------------------
    @retry_on_disconnect
    def ping(self) -> None:
        """Run `SELECT 1`; raises (sqlalchemy.exc.OperationalError, ...) when the database does not answer."""
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1")).scalar_one()

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> SqlTripletStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes ------------------------------------------------------------------------------------------------------
    def initialise(self) -> None:
        """Put the zero triplet (Fig 5) in D_abd and D_ded if absent. Idempotent."""
        for buffer in (TaskType.ABDUCTION, TaskType.DEDUCTION):
            self.insert_triplet(Triplet(buffer=buffer, program=ZERO_TRIPLET_PROGRAM, input=ZERO_TRIPLET_INPUT,
                                        output=ZERO_TRIPLET_OUTPUT, source=TripletSource.ZERO))

    @retry_on_disconnect
    def insert_triplet(self, triplet: Triplet) -> InsertOutcome:
        """Store a deduction/abduction triplet unless the same normalised program + input is in that buffer."""
        return self._insert_row(triplet_row(triplet))

    @retry_on_disconnect
    def insert_induction(self, task: InductionTask) -> InsertOutcome:
        """Store an induction task unless the same normalised program + inputs is in D_ind."""
        return self._insert_row(induction_row(task))

    def _existing_id(self, connection: Connection, buffer: str, key: str) -> int | None:
        return connection.execute(self._sql.existing_id, {"buffer": buffer, "entry_key": key}).scalar_one_or_none()

    def _insert_row(self, row: EntryRow) -> InsertOutcome:
        buffer = row["buffer"]
        with self._reader.connect() as reader:  # a duplicate is answered without taking the write lock
            known = self._existing_id(reader, buffer, row["entry_key"])
        if known is not None:
            return InsertOutcome(id=str(known), created=False)
        with self._writer.begin() as connection:
            size = connection.execute(self._sql.size_for_update, {"buffer": buffer}).scalar_one()
            new_id = connection.execute(self._sql.insert_entry, {**row, "slot": size}).scalar_one_or_none()
            if new_id is None:  # another writer stored it since the check above
                return InsertOutcome(id=str(self._existing_id(connection, buffer, row["entry_key"])), created=False)
            evicted = self._evict(connection, buffer, size + 1, keep_id=new_id)
            if evicted != 1:  # at the cap one in, one out: the size stays, no write needed
                connection.execute(self._sql.set_size, {"target_buffer": buffer, "new_size": size + 1 - evicted})
        return InsertOutcome(id=str(new_id), created=True, evicted=evicted)

    def _evict(self, connection: Connection, buffer: str, size: int, keep_id: int) -> int:
        """Delete the oldest evictable entries beyond the cap; move the entries in the last slots into the holes."""
        excess = size - self.buffer_cap
        if excess <= 0:
            return 0
        freed = set(connection.execute(self._sql.evict_oldest,
                                       {"buffer": buffer, "keep_id": keep_id, "excess": excess}).scalars())
        remaining = size - len(freed)
        holes = sorted(slot for slot in freed if slot < remaining)
        movers = [slot for slot in range(remaining, size) if slot not in freed]  # as many as holes
        for hole, mover in zip(holes, movers):
            connection.execute(self._sql.move_slot, {"target_buffer": buffer, "from_slot": mover, "to_slot": hole})
        return len(freed)

    # --- reads -------------------------------------------------------------------------------------------------------
    @retry_on_disconnect
    def get(self, buffer: TaskType, entry_id: str) -> BufferEntry | None:
        """One entry by id, or None (also for an id that cannot exist, like `abc`)."""
        row_id = parse_entry_id(entry_id)
        if row_id is None:
            return None
        with self._reader.connect() as connection:
            row = connection.execute(self._sql.by_id,
                                     {"buffer": TaskType(buffer).value, "entry_id": row_id}).mappings().first()
        return entry_from_row(row) if row is not None else None

    @retry_on_disconnect
    def list_entries(self, buffer: TaskType, *, limit: int = 50, offset: int = 0, source: TripletSource | None = None,
                     min_step: int | None = None, step: int | None = None,
                     text: str | None = None) -> tuple[list[BufferEntry], int]:
        """A page of entries, newest first, and the total matching the filters (limit 0..MAX_PAGE, offset >= 0):
        `source`, `step` exactly, `min_step` or later, `text` a case-insensitive substring of the program,
        input(s), output(s) or message (induction inputs/outputs are searched in their stored JSON form)."""
        if not 0 <= limit <= MAX_PAGE or offset < 0:
            raise ValueError(f"limit must be in 0..{MAX_PAGE} and offset >= 0 (got limit={limit}, offset={offset})")
        conditions = [buffer_entries.c.buffer == TaskType(buffer).value]
        if source is not None:
            conditions.append(buffer_entries.c.source == TripletSource(source).value)
        if min_step is not None:
            conditions.append(buffer_entries.c.step >= min_step)
        if step is not None:
            conditions.append(buffer_entries.c.step == step)
        if text:
            conditions.append(text_matches(text))
        with self._reader.connect() as connection:
            total = connection.execute(select(func.count()).select_from(buffer_entries).where(*conditions)).scalar_one()
            rows = connection.execute(select(buffer_entries).where(*conditions)
                                      .order_by(buffer_entries.c.id.desc()).limit(limit).offset(offset)).mappings()
            return [entry_from_row(row) for row in rows], total

    @retry_on_disconnect
    def count(self, buffer: TaskType) -> int:
        """Entries in one buffer."""
        with self._reader.connect() as connection:
            return self._size(connection, TaskType(buffer).value)

    @retry_on_disconnect
    def stats(self) -> list[BufferStats]:
        """One BufferStats per buffer, in TaskType order."""
        columns = buffer_entries.c
        statement = (select(columns.buffer, columns.source, func.count(), func.min(columns.step),
                            func.max(columns.step), func.max(columns.policy_version), func.max(columns.created_at))
                     .group_by(columns.buffer, columns.source))
        with self._reader.connect() as connection:
            groups = connection.execute(statement).all()
        result = []
        for buffer in TaskType:
            mine = [group for group in groups if group[0] == buffer.value]
            result.append(BufferStats(
                buffer=buffer,
                count=sum(group[2] for group in mine),
                by_source={group[1]: group[2] for group in mine},
                min_step=min((group[3] for group in mine), default=None),
                max_step=max((group[4] for group in mine), default=None),
                max_policy_version=max((group[5] for group in mine), default=None),
                latest_created_at=max((as_utc(group[6]) for group in mine if group[6] is not None), default=None),
                cap=self.buffer_cap,
            ))
        return result

    # --- sampling ----------------------------------------------------------------------------------------------------
    @retry_on_disconnect
    def sample_references(self, buffer: TaskType, k: int, rng: random.Random) -> list[Triplet]:
        """K distinct triplets of D_ded or D_abd, uniformly without replacement (all of them, shuffled, when fewer
        than K)."""
        name = TaskType(buffer).value
        if name == TaskType.INDUCTION.value:
            raise ValueError("references are sampled from D_ded or D_abd; D_ind holds no triplets")
        entries = self._slots.draw([name], lambda sizes: (name, distinct_slots(sizes[name], k, rng)), rng)
        return [entry for entry in entries if isinstance(entry, Triplet)]  # all of them: D_ded and D_abd hold triplets

    @retry_on_disconnect
    def sample_program(self, rng: random.Random) -> Triplet | None:
        """One triplet uniformly from the entries of D_abd and D_ded together (a seed stored in both counts twice)."""
        abduction, deduction = TaskType.ABDUCTION.value, TaskType.DEDUCTION.value

        def choose(sizes: dict[str, int]) -> tuple[str, list[int]]:
            total = sizes[abduction] + sizes[deduction]
            if total == 0:
                return abduction, []
            index = rng.randrange(total)
            return (abduction, [index]) if index < sizes[abduction] else (deduction, [index - sizes[abduction]])

        entries = self._slots.draw([abduction, deduction], choose, rng)
        if not entries:
            return None
        assert isinstance(entries[0], Triplet)  # D_abd and D_ded hold triplets only
        return entries[0]

    @retry_on_disconnect
    def sample_batch(self, buffer: TaskType, size: int, new_ids: Sequence[str],
                     rng: random.Random) -> list[BufferEntry]:
        """A solver batch of `size` (§3.3.2): this step's new entries first (in `new_ids` order, at most `size`;
        ids not in this buffer are skipped), then a uniform fill from the rest of the buffer without replacement,
        with replacement only when the buffer holds fewer distinct entries than the batch needs."""
        name = TaskType(buffer).value
        wanted = list(dict.fromkeys(row_id for row_id in map(parse_entry_id, new_ids) if row_id is not None))
        state = rng.getstate()
        for _ in range(DRAW_ATTEMPTS):
            found: dict[int, RowMapping] = {}
            if wanted and size > 0:
                with self._reader.connect() as connection:
                    rows = connection.execute(self._sql.by_ids, {"buffer": name, "ids": wanted}).mappings()
                    found = {row["id"]: row for row in rows}
            new_rows = [found[row_id] for row_id in wanted if row_id in found][: max(size, 0)]
            new_slots = {row["slot"] for row in new_rows}
            distinct = [0]  # how many fill entries were drawn without replacement (set by the successful draw)

            def choose(sizes: dict[str, int], new_rows: list[RowMapping] = new_rows,
                       new_slots: set[int] = new_slots, distinct: list[int] = distinct) -> tuple[str, list[int]]:
                count = size - len(new_rows)
                distinct[0] = max(0, min(count, sizes[name] - len(new_slots)))
                return name, fill_slots(sizes[name], count, new_slots, rng)

            filled = self._slots.draw([name], choose, rng)
            # An eviction between the two reads can move a new entry into a drawn slot: it would appear twice.
            new_entry_ids = {str(row["id"]) for row in new_rows}
            if not any(entry.id in new_entry_ids for entry in filled[: distinct[0]]):
                return [entry_from_row(row) for row in new_rows] + filled
            rng.setstate(state)
        raise SlotsMoved(f"buffer {name!r} kept moving entries while a batch was drawn")

    def _size(self, connection: Connection, buffer: str) -> int:
        return connection.execute(self._sql.size, {"buffer": buffer}).scalar_one()

    # --- run log -----------------------------------------------------------------------------------------------------
    @retry_on_disconnect
    def ensure_run(self, run_id: str, settings: JsonObject) -> None:
        """Create the run, or replace its recorded settings with these (the latest resolved settings win)."""
        self.runs.ensure_run(run_id, settings)

    @retry_on_disconnect
    def record_step(self, run_id: str, step: int, policy_version: int, metrics: JsonObject) -> None:
        """Upsert one step's metrics (creating the run if needed)."""
        self.runs.record_step(run_id, step, policy_version, metrics)

    @retry_on_disconnect
    def list_steps(self, run_id: str, *, since_step: int | None = None, limit: int | None = None) -> list[StepRecord]:
        """A run's recorded steps in step order: those after `since_step` (all when None), at most `limit`."""
        return self.runs.list_steps(run_id, since_step=since_step, limit=limit)

    @retry_on_disconnect
    def list_runs(self) -> list[RunSummary]:
        """Every run with its step count and last step, the most recently active first."""
        return self.runs.list_runs()

    @retry_on_disconnect
    def solve_history(self, buffer: TaskType, entry_id: str, *, limit: int = 100,
                      offset: int = 0) -> tuple[list[Episode], int]:
        """Solver episodes (of any run) whose task was this buffer entry, by step then id, and how many there are."""
        return self.runs.solve_history(buffer, entry_id, limit=limit, offset=offset)

    @retry_on_disconnect
    def record_episodes(self, episodes: Sequence[Episode]) -> int:
        """Store episodes, idempotent by `Episode.id`; returns how many were new."""
        return self.runs.record_episodes(episodes)

    @retry_on_disconnect
    def list_episodes(self, run_id: str, *, step: int | None = None, task_type: TaskType | None = None,
                      role: str | None = None, limit: int = 50, offset: int = 0) -> tuple[list[Episode], int]:
        """A page of a run's episodes (by step, then id) and the total matching the filters."""
        return self.runs.list_episodes(run_id, step=step, task_type=task_type, role=role, limit=limit, offset=offset)
