"""Read routes of the run log (the dashboard's curves): `GET /v1/runs`, `GET /v1/runs/{run_id}/steps`."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Path, Query
from fastapi.concurrency import run_in_threadpool

from proposer_api.schemas import MAX_INTEGER, MAX_STEPS_PAGE, RunList, StepsPage
from services.http.errors import documented
from services.ports import TripletStore

RUN_ID_LENGTH = 64
"""Longest run id the run log stores (`runs.run_id`)."""


def run_router(store: TripletStore) -> APIRouter:
    """The run log's read routes over `store`; no token (read-only, like the buffer reads)."""
    router = APIRouter(prefix="/v1/runs", tags=["runs"])

    @router.get("", response_model=RunList, responses=documented(503))
    async def list_runs() -> RunList:
        """Every run with its step count and last step, the most recently active first."""
        return RunList(runs=await run_in_threadpool(store.list_runs))

    @router.get("/{run_id}/steps", response_model=StepsPage, responses=documented(404, 422, 503, s404="No such run."))
    async def run_steps(
        run_id: str = Path(min_length=1, max_length=RUN_ID_LENGTH, description="The run's id."),
        since_step: int | None = Query(None, ge=-1, le=MAX_INTEGER,
                                       description="Only steps after this one (poll incrementally)."),
        limit: int = Query(MAX_STEPS_PAGE, ge=1, le=MAX_STEPS_PAGE, description="Most steps to return."),
    ) -> StepsPage:
        """The run's metrics lines after `since_step` in step order; `has_more` says another page follows."""
        steps = await run_in_threadpool(store.list_steps, run_id, since_step=since_step, limit=limit + 1)
        if not steps:  # only now ask whether the run exists: a poll that finds new steps costs one query
            known = {run.run_id for run in await run_in_threadpool(store.list_runs)}
            if run_id not in known:
                raise HTTPException(404, f"no run {run_id!r}; GET /v1/runs lists the runs")
        return StepsPage(run_id=run_id, since_step=since_step, steps=steps[:limit], has_more=len(steps) > limit)

    return router
