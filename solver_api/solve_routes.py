"""`POST /v1/solve`: solver rollouts (Figs 37-39), parsed; with `check` the executor judges every answer.

Induction prompts show only the first N//2 pairs and the message; the hidden pairs are used for checking only.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import APIRouter, Depends
from starlette.concurrency import run_in_threadpool

from services.http_errors import WRITE_STATUSES, DependencyFailure, documented
from services.ports import CodeExecutor, InferenceEngine, InferenceError, SamplingParams
from services.records import Solution
from services.rollouts.http_schemas import SolveRequest, SolveResponse
from services.rollouts.solving import check_solution, checked_or_fault, solve
from solver_api.prometheus_metrics import SolverMetrics


def _solve_and_check(engine: InferenceEngine, executor: CodeExecutor | None, request: SolveRequest,
                     sampling: SamplingParams) -> list[list[Solution]]:
    groups = solve(engine, {request.task_type: request.tasks}, sampling)[request.task_type]
    if not request.check:
        return groups
    if executor is None:
        raise DependencyFailure("executor", "this solver has no executor: check=true is unavailable")
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="azr-solve-check") as pool:
        futures = [[pool.submit(check_solution, executor, request.task_type, task, s) for s in group]
                   for task, group in zip(request.tasks, groups)]
        return [[checked_or_fault(future.result(), s) for future, s in zip(futures_group, group)]
                for futures_group, group in zip(futures, groups)]


def solve_router(engine: InferenceEngine, executor: CodeExecutor | None, default_sampling: SamplingParams,
                 require_token: Callable[..., Any], metrics: SolverMetrics | None = None) -> APIRouter:
    """The router holding `POST /v1/solve` (bearer token: it spends GPU time); `default_sampling` for requests that
    give none (`n` is the request's); with `metrics`, checked answers are counted by task type and outcome."""
    router = APIRouter()

    @router.post("/v1/solve", response_model=SolveResponse, dependencies=[Depends(require_token)],
                 summary="Generate (and optionally check) solutions for tasks of one type",
                 responses=documented(*WRITE_STATUSES, 503, s503=(
                     "Inference failed, or `check` was asked of a solver without an executor.")))
    async def solve_route(request: SolveRequest) -> SolveResponse:
        base = request.sampling or default_sampling
        sampling = base.model_copy(update={"n": request.n})
        try:
            solutions = await run_in_threadpool(_solve_and_check, engine, executor, request, sampling)
        except InferenceError as exc:
            raise DependencyFailure("inference", str(exc)) from exc
        if metrics is not None and request.check:
            metrics.observe_checked(solutions)
        return SolveResponse(solutions=solutions, weight_version=engine.weight_version())

    return router
