"""Read routes of the buffers: stats, pages with filters, one entry."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool

from services.algorithm.task_types import TaskType
from services.ports import BufferEntry, BufferStats, TripletStore
from services.records import InductionTask, Triplet, TripletSource

from proposer_api.schemas import MAX_PAGE, BufferPage


def parse_buffer(name: str) -> TaskType:
    """The buffer a path names; 404 for anything but deduction, abduction, induction."""
    try:
        return TaskType(name)
    except ValueError:
        raise HTTPException(404, f"unknown buffer {name!r}; buffers: {', '.join(t.value for t in TaskType)}") from None


def buffer_router(store: TripletStore) -> APIRouter:
    """`GET /v1/buffers`, `GET /v1/buffers/{buffer}`, `GET /v1/buffers/{buffer}/{entry_id}`."""
    router = APIRouter(prefix="/v1/buffers", tags=["buffers"])

    @router.get("", response_model=list[BufferStats])
    async def buffer_stats() -> list[BufferStats]:
        """Counts and summary statistics of each buffer."""
        return await run_in_threadpool(store.stats)

    @router.get("/{buffer}", response_model=BufferPage)
    async def buffer_page(
        buffer: str,
        limit: int = Query(50, ge=1, le=MAX_PAGE, description=f"Entries per page (at most {MAX_PAGE})."),
        offset: int = Query(0, ge=0, description="Entries to skip, newest first."),
        source: TripletSource | None = Query(None, description="Only entries from this source."),
        min_step: int | None = Query(None, ge=0, description="Only entries produced at this step or later."),
    ) -> BufferPage:
        """A page of one buffer, newest first, with the total matching the filters."""
        task_type = parse_buffer(buffer)
        entries, total = await run_in_threadpool(store.list_entries, task_type, limit=limit, offset=offset,
                                                 source=source, min_step=min_step)
        return BufferPage(buffer=task_type, total=total, limit=limit, offset=offset, entries=entries)

    @router.get("/{buffer}/{entry_id}", response_model=Triplet | InductionTask)
    async def buffer_entry(buffer: str, entry_id: str) -> BufferEntry:
        """One entry by id (404 when absent)."""
        task_type = parse_buffer(buffer)
        entry = await run_in_threadpool(store.get, task_type, entry_id)
        if entry is None:
            raise HTTPException(404, f"no {task_type.value} entry with id {entry_id!r}")
        return entry

    return router
