"""The buffer store's ports: the TripletStore (the three buffers and the run log's reads), the StepStore (the run
log's writes the self-play loop adds), the readiness ping, and the records they exchange.

Adapter: `services.store.SqlTripletStore` (SQLAlchemy; SQLite in the embedded profile, PostgreSQL in the
distributed one).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel

from services.algorithm.task_types import TaskType
from services.json_types import JsonObject
from services.records import RECORD_SCHEMA_VERSION, Episode, InductionTask, Triplet, TripletSource


class InsertOutcome(BaseModel):
    """What `TripletStore.insert_*` did with one entry."""

    id: str  # the stored entry's id: the new one, or the existing one when a duplicate
    created: bool  # False: same normalised program + input(s) already in that buffer; nothing written
    evicted: int = 0  # oldest non-seed entries removed to keep the buffer under its cap


class BufferStats(BaseModel):
    """Counts and summary statistics of one buffer (`GET /v1/buffers`)."""

    buffer: TaskType
    count: int
    by_source: dict[str, int]  # TripletSource value -> entries
    min_step: int | None = None
    max_step: int | None = None
    max_policy_version: int | None = None
    latest_created_at: datetime | None = None
    cap: int


BufferEntry = Triplet | InductionTask

class StepRecord(BaseModel):
    """One step of a run as recorded: its policy version and metrics line (`GET /v1/runs/{run_id}/steps`)."""

    schema_version: int = RECORD_SCHEMA_VERSION
    run_id: str
    step: int
    policy_version: int
    metrics: JsonObject
    recorded_at: datetime


class RunSummary(BaseModel):
    """One run of the run log with how far it got (`GET /v1/runs`)."""

    run_id: str
    created_at: datetime
    steps: int  # recorded steps
    first_step: int | None = None  # None: no step recorded yet
    last_step: int | None = None
    last_recorded_at: datetime | None = None


class TripletStore(Protocol):
    """The three buffers D_ded, D_abd, D_ind (docs/design.md §1, §2 items 5-6); SQLAlchemy over PostgreSQL or SQLite.

    Every sampling call takes a `random.Random` so a run is reproducible from its seed. Entries are returned
    as `services.records` models with `id` and `program_hash` filled in. The last three methods read the run log
    kept beside the buffers (runs, their steps' metrics lines, solver episodes per entry) for the dashboard.
    """

    def initialise(self) -> None:
        """Put the zero triplet (Fig 5) in D_abd and D_ded if absent. Idempotent."""

    def ping(self) -> None:
        """Raise when the database does not answer (readiness, `services.http.ops.database_check`)."""

    def insert_triplet(self, triplet: Triplet) -> InsertOutcome:
        """Store a deduction/abduction triplet unless the same normalised program + input is in that buffer."""

    def insert_induction(self, task: InductionTask) -> InsertOutcome:
        """Store an induction task unless the same normalised program + inputs is in D_ind."""

    def get(self, buffer: TaskType, entry_id: str) -> BufferEntry | None:
        """One entry by id, or None."""

    def list_entries(self, buffer: TaskType, *, limit: int = 50, offset: int = 0, source: TripletSource | None = None,
                     min_step: int | None = None, step: int | None = None,
                     text: str | None = None) -> tuple[list[BufferEntry], int]:
        """A page of entries, newest first, and the total matching the filters: `step` exactly, `min_step` or later,
        `text` a case-insensitive substring of the program, input(s), output(s) or message."""

    def sample_references(self, buffer: TaskType, k: int, rng: random.Random) -> list[Triplet]:
        """K distinct triplets of D_ded or D_abd, uniformly without replacement (all of them when fewer than K)."""

    def sample_program(self, rng: random.Random) -> Triplet | None:
        """One triplet uniformly from D_abd ∪ D_ded, for an induction proposal; None when both are empty."""

    def sample_batch(self, buffer: TaskType, size: int, new_ids: Sequence[str],
                     rng: random.Random) -> list[BufferEntry]:
        """A solver batch of `size`: this step's new entries first, then uniform fill from the buffer (§3.3.2)."""

    def stats(self) -> list[BufferStats]:
        """One BufferStats per buffer, in TaskType order."""

    def count(self, buffer: TaskType) -> int:
        """Entries in one buffer."""

    def list_runs(self) -> list[RunSummary]:
        """Every run of the run log, the most recently active first."""

    def list_steps(self, run_id: str, *, since_step: int | None = None, limit: int | None = None) -> list[StepRecord]:
        """A run's recorded steps in step order: those after `since_step` (all when None), at most `limit`."""

    def solve_history(self, buffer: TaskType, entry_id: str, *, limit: int = 100,
                      offset: int = 0) -> tuple[list[Episode], int]:
        """Solver episodes of one buffer entry (their `task_id`), by step then id, and how many there are."""


class StepStore(TripletStore, Protocol):
    """The TripletStore with the run log's writes: what the self-play loop and the embedded trainer's replay use."""

    def record_step(self, run_id: str, step: int, policy_version: int, metrics: JsonObject) -> None:
        """Upsert one step's metrics line (creating the run if needed)."""

    def record_episodes(self, episodes: Sequence[Episode]) -> int:
        """Store episodes, idempotent by `Episode.id`; returns how many were new."""

    def list_episodes(self, run_id: str, *, step: int | None = None, task_type: TaskType | None = None,
                      role: str | None = None, limit: int = 50, offset: int = 0) -> tuple[list[Episode], int]:
        """A page of a run's episodes (by step, then id) and the total matching the filters."""


class Pingable(Protocol):
    """Anything with a `ping()` that raises when its server does not answer (the buffer store)."""

    def ping(self) -> None:
        """Raise when the dependency does not answer."""
