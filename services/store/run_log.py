"""Runs, their steps' metrics and the episodes they trained on: stored for inspection and the dashboard."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, Connection, Engine, func, select

from services.algorithm.task_types import Role, TaskType
from services.json_types import JsonObject
from services.ports import RunSummary, StepRecord
from services.records import Episode
from services.store.entry_rows import as_utc
from services.store.schema import TASK_ID_LENGTH, episodes, runs, steps
from services.store.statements import DialectInsert

MAX_EPISODE_PAGE = 1000
"""Largest page `list_episodes` and `solve_history` return."""

__all__ = ["MAX_EPISODE_PAGE", "RunLog", "RunSummary", "StepRecord"]


def _indexed_task_id(episode: Episode) -> str | None:
    """The `task_id` column value: the episode's task id unless too long to be a buffer entry id."""
    task_id = episode.task_id
    return task_id if task_id is not None and len(task_id) <= TASK_ID_LENGTH else None


def _check_page(limit: int, offset: int) -> None:
    if not 0 <= limit <= MAX_EPISODE_PAGE or offset < 0:
        raise ValueError(f"limit must be in 0..{MAX_EPISODE_PAGE} and offset >= 0 (got {limit}, {offset})")


def _now() -> datetime:
    return datetime.now(UTC)


class RunLog:
    """Run, step and episode tables behind `SqlTripletStore` (same engine, same transaction rules)."""

    def __init__(self, reader: Engine, writer: Engine, insert: DialectInsert) -> None:
        self._reader = reader
        self._writer = writer
        self._insert = insert  # the dialect's INSERT (it has on_conflict_do_nothing / _do_update)

    def _ensure_runs(self, connection: Connection, run_ids: Sequence[str]) -> None:
        rows = [{"run_id": run_id, "settings": {}, "created_at": _now()} for run_id in dict.fromkeys(run_ids)]
        if rows:
            connection.execute(self._insert(runs).on_conflict_do_nothing(index_elements=["run_id"]), rows)

    def ensure_run(self, run_id: str, settings: JsonObject) -> None:
        """Create the run, or replace its recorded settings with these."""
        statement = self._insert(runs).values(run_id=run_id, settings=settings, created_at=_now())
        statement = statement.on_conflict_do_update(index_elements=["run_id"],
                                                    set_={"settings": statement.excluded.settings})
        with self._writer.begin() as connection:
            connection.execute(statement)

    def record_step(self, run_id: str, step: int, policy_version: int, metrics: JsonObject) -> None:
        """Upsert one step's policy version and metrics."""
        statement = self._insert(steps).values(run_id=run_id, step=step, policy_version=policy_version,
                                               metrics=metrics, recorded_at=_now())
        statement = statement.on_conflict_do_update(
            index_elements=["run_id", "step"],
            set_={"policy_version": statement.excluded.policy_version, "metrics": statement.excluded.metrics,
                  "recorded_at": statement.excluded.recorded_at})
        with self._writer.begin() as connection:
            self._ensure_runs(connection, [run_id])
            connection.execute(statement)

    def list_steps(self, run_id: str, *, since_step: int | None = None, limit: int | None = None) -> list[StepRecord]:
        """A run's recorded steps in step order: those after `since_step` (all when None), at most `limit`."""
        statement = select(steps).where(steps.c.run_id == run_id).order_by(steps.c.step)
        if since_step is not None:
            statement = statement.where(steps.c.step > since_step)
        if limit is not None:
            if limit < 0:
                raise ValueError(f"limit must be >= 0, got {limit}")
            statement = statement.limit(limit)
        with self._reader.connect() as connection:
            rows = connection.execute(statement).mappings()
            return [StepRecord(run_id=row["run_id"], step=row["step"], policy_version=row["policy_version"],
                               metrics=row["metrics"], recorded_at=as_utc(row["recorded_at"])) for row in rows]

    def list_runs(self) -> list[RunSummary]:
        """Every run with its step count, first/last step and last record time; the most recently active first."""
        progress = (select(steps.c.run_id, func.count().label("steps"), func.min(steps.c.step).label("first_step"),
                           func.max(steps.c.step).label("last_step"),
                           func.max(steps.c.recorded_at).label("last_recorded_at"))
                    .group_by(steps.c.run_id).subquery())
        statement = (select(runs.c.run_id, runs.c.created_at, progress.c.steps, progress.c.first_step,
                            progress.c.last_step, progress.c.last_recorded_at)
                     .select_from(runs.outerjoin(progress, progress.c.run_id == runs.c.run_id))
                     .order_by(func.coalesce(progress.c.last_recorded_at, runs.c.created_at).desc(),
                               runs.c.run_id.desc()))
        with self._reader.connect() as connection:
            rows = connection.execute(statement).mappings().all()
        return [RunSummary(run_id=row["run_id"], created_at=as_utc(row["created_at"]), steps=row["steps"] or 0,
                           first_step=row["first_step"], last_step=row["last_step"],
                           last_recorded_at=as_utc(row["last_recorded_at"]) if row["last_recorded_at"] else None)
                for row in rows]

    def record_episodes(self, batch: Sequence[Episode]) -> int:
        """Insert episodes whose id is not stored yet; returns how many were new."""
        unique = list({episode.id: episode for episode in batch}.values())
        if not unique:
            return 0
        rows = [{"id": episode.id, "run_id": episode.run_id, "step": episode.step,
                 "task_type": episode.task_type.value, "role": episode.role.value,
                 "policy_version": episode.policy_version, "reward": episode.reward,
                 "task_id": _indexed_task_id(episode), "payload": episode.model_dump(mode="json"),
                 "created_at": _now()} for episode in unique]
        statement = self._insert(episodes).on_conflict_do_nothing(index_elements=["id"]).returning(episodes.c.id)
        with self._writer.begin() as connection:
            self._ensure_runs(connection, [episode.run_id for episode in unique])
            return len(connection.execute(statement, rows).all())

    def list_episodes(self, run_id: str, *, step: int | None = None, task_type: TaskType | None = None,
                      role: Role | str | None = None, limit: int = 50, offset: int = 0) -> tuple[list[Episode], int]:
        """A page of a run's episodes, ordered by step then id, and the total matching the filters."""
        _check_page(limit, offset)
        conditions = [episodes.c.run_id == run_id]
        if step is not None:
            conditions.append(episodes.c.step == step)
        if task_type is not None:
            conditions.append(episodes.c.task_type == TaskType(task_type).value)
        if role is not None:
            conditions.append(episodes.c.role == Role(role).value)
        return self._episode_page(conditions, limit, offset)

    def solve_history(self, buffer: TaskType, entry_id: str, *, limit: int = 100,
                      offset: int = 0) -> tuple[list[Episode], int]:
        """Solver episodes of every run whose task was this buffer entry, by step then id, and how many there are."""
        _check_page(limit, offset)
        conditions = [episodes.c.task_id == str(entry_id), episodes.c.task_type == TaskType(buffer).value,
                      episodes.c.role == Role.SOLVE.value]
        return self._episode_page(conditions, limit, offset)

    def _episode_page(self, conditions: list[ColumnElement[bool]], limit: int,
                      offset: int) -> tuple[list[Episode], int]:
        with self._reader.connect() as connection:
            total = connection.execute(select(func.count()).select_from(episodes).where(*conditions)).scalar_one()
            page = (select(episodes.c.payload).where(*conditions)
                    .order_by(episodes.c.step, episodes.c.id).limit(limit).offset(offset))
            payloads = connection.execute(page).scalars()
            return [Episode.model_validate(payload) for payload in payloads], total
