"""Read routes of the buffers: stats, pages with filters and text search, one entry, one entry's solve history."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool

from proposer_api.schemas import (
    MAX_HISTORY_PAGE,
    MAX_INTEGER,
    MAX_PAGE,
    MAX_SEARCH,
    BufferPage,
    EntryHistory,
    SolveAttempt,
)
from services.algorithm.task_types import TaskType
from services.http.errors import documented
from services.ports import BufferEntry, BufferStats, TripletStore
from services.records import Episode, InductionTask, Triplet, TripletSource


def parse_buffer(name: str) -> TaskType:
    """The buffer a path names; 404 for anything but deduction, abduction, induction."""
    try:
        return TaskType(name)
    except ValueError:
        raise HTTPException(404, f"unknown buffer {name!r}; buffers: {', '.join(t.value for t in TaskType)}") from None


def solve_attempt(episode: Episode) -> SolveAttempt:
    """What the history of an entry shows of one solver episode on it."""
    return SolveAttempt(episode_id=episode.id, run_id=episode.run_id, step=episode.step,
                        policy_version=episode.policy_version, reward=episode.reward, exec_status=episode.exec_status,
                        response_tokens=len(episode.response_ids), text=episode.text)


def buffer_router(store: TripletStore) -> APIRouter:
    """`GET /v1/buffers`, `GET /v1/buffers/{buffer}`, `GET /v1/buffers/{buffer}/{entry_id}` and its `/history`."""
    router = APIRouter(prefix="/v1/buffers", tags=["buffers"])

    unknown = "No such buffer, or no such entry in it."

    @router.get("", response_model=list[BufferStats], responses=documented(503))
    async def buffer_stats() -> list[BufferStats]:
        """Counts and summary statistics of each buffer."""
        return await run_in_threadpool(store.stats)

    @router.get("/{buffer}", response_model=BufferPage, responses=documented(404, 422, 503, s404="No such buffer."))
    async def buffer_page(
        buffer: str,
        limit: int = Query(50, ge=1, le=MAX_PAGE, description=f"Entries per page (at most {MAX_PAGE})."),
        offset: int = Query(0, ge=0, le=MAX_INTEGER, description="Entries to skip, newest first."),
        source: TripletSource | None = Query(None, description="Only entries from this source."),
        min_step: int | None = Query(None, ge=0, le=MAX_INTEGER,
                                     description="Only entries produced at this step or later."),
        step: int | None = Query(None, ge=0, le=MAX_INTEGER, description="Only entries produced at exactly this step."),
        q: str | None = Query(None, max_length=MAX_SEARCH, description=(
            "Only entries whose program, input(s), output(s) or message contain this text (case-insensitive).")),
    ) -> BufferPage:
        """A page of one buffer, newest first, with the total matching the filters."""
        task_type = parse_buffer(buffer)
        entries, total = await run_in_threadpool(store.list_entries, task_type, limit=limit, offset=offset,
                                                 source=source, min_step=min_step, step=step, text=q or None)
        return BufferPage(buffer=task_type, total=total, limit=limit, offset=offset, entries=entries)

    @router.get("/{buffer}/{entry_id}", response_model=Triplet | InductionTask,
                responses=documented(404, 422, 503, s404=unknown))
    async def buffer_entry(buffer: str, entry_id: str) -> BufferEntry:
        """One entry by id (404 when absent)."""
        task_type = parse_buffer(buffer)
        entry = await run_in_threadpool(store.get, task_type, entry_id)
        if entry is None:
            raise HTTPException(404, f"no {task_type.value} entry with id {entry_id!r}")
        return entry

    @router.get("/{buffer}/{entry_id}/history", response_model=EntryHistory,
                responses=documented(404, 422, 503, s404=unknown))
    async def entry_history(
        buffer: str,
        entry_id: str,
        limit: int = Query(100, ge=1, le=MAX_HISTORY_PAGE,
                           description=f"Attempts per page (at most {MAX_HISTORY_PAGE})."),
        offset: int = Query(0, ge=0, le=MAX_INTEGER, description="Attempts to skip, oldest first."),
    ) -> EntryHistory:
        """The solver episodes (of every run) whose task was this entry, by step; 404 when the entry is absent."""
        task_type = parse_buffer(buffer)
        if await run_in_threadpool(store.get, task_type, entry_id) is None:
            raise HTTPException(404, f"no {task_type.value} entry with id {entry_id!r}")
        episodes, total = await run_in_threadpool(store.solve_history, task_type, entry_id, limit=limit, offset=offset)
        return EntryHistory(buffer=task_type, entry_id=entry_id, total=total, limit=limit, offset=offset,
                            attempts=[solve_attempt(episode) for episode in episodes])

    return router
