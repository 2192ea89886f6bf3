"""`POST /v1/solve`: solver rollouts (Figs 37-39), parsed; with `check` the executor judges every answer.

Induction prompts show only the first N//2 pairs and the message; the hidden pairs are used for checking only.
`sampling.max_new_tokens` is clamped to `max_response_tokens`, and generation stops when the client goes away
(services/rollouts/bounded_generation.py).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from fastapi import APIRouter, Depends, Request

from services.http.errors import WRITE_STATUSES, DependencyFailure, documented
from services.http.ops import run_watching_client
from services.ports import CodeExecutor, InferenceEngine, InferenceError, SamplingParams
from services.records import Solution
from services.rollouts.bounded_generation import AbortableEngine, clamped
from services.rollouts.http_schemas import SolveRequest, SolveResponse
from services.rollouts.solving import check_solution, checked_or_fault, solve
from solver_api.prometheus_metrics import SolverMetrics


def _solve_and_check(engine: InferenceEngine, executor: CodeExecutor | None, request: SolveRequest,
                     sampling: SamplingParams, abort: threading.Event) -> list[list[Solution]]:
    groups = solve(AbortableEngine(engine, abort), {request.task_type: request.tasks}, sampling)[request.task_type]
    if not request.check or abort.is_set():  # nobody waits for the verdicts of a client that left
        return groups
    if executor is None:
        raise DependencyFailure("executor", "this solver has no executor: check=true is unavailable")
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="azr-solve-check") as pool:
        futures = [[pool.submit(check_solution, executor, request.task_type, task, s) for s in group]
                   for task, group in zip(request.tasks, groups)]
        return [[checked_or_fault(future.result(), s) for future, s in zip(futures_group, group)]
                for futures_group, group in zip(futures, groups)]


def solve_router(engine: InferenceEngine, executor: CodeExecutor | None, default_sampling: SamplingParams,
                 require_token: Callable[..., Awaitable[None]], metrics: SolverMetrics | None = None) -> APIRouter:
    """The router holding `POST /v1/solve` (bearer token: it spends GPU time); `default_sampling` for requests that
    give none (`n` is the request's), whose `max_new_tokens` (the settings' `max_response_tokens`) no request may
    pass; with `metrics`, checked answers are counted by task type and outcome."""
    router = APIRouter()

    @router.post("/v1/solve", response_model=SolveResponse, dependencies=[Depends(require_token)],
                 summary="Generate (and optionally check) solutions for tasks of one type",
                 responses=documented(*WRITE_STATUSES, 503, s503=(
                     "Inference failed, or `check` was asked of a solver without an executor.")))
    async def solve_route(request: SolveRequest, connection: Request) -> SolveResponse:
        base = clamped(request.sampling or default_sampling, default_sampling.max_new_tokens)
        sampling = base.model_copy(update={"n": request.n})
        try:
            solutions = await run_watching_client(
                connection, lambda abort: _solve_and_check(engine, executor, request, sampling, abort))
        except InferenceError as exc:
            raise DependencyFailure("inference", str(exc)) from exc
        if metrics is not None and request.check:
            metrics.observe_checked(solutions)
        return SolveResponse(solutions=solutions, weight_version=engine.weight_version())

    return router
