"""solver_api: the solver service: `/healthz`, `/readyz`, `/metrics`, OpenAPI at `/docs`, and `POST /v1/solve`
(solver_api/solve_routes.py, the self-play issue) when an inference engine is given.
"""

from __future__ import annotations

from fastapi import FastAPI

from services.http.ops import (
    ReadinessCheck,
    bearer_token_guard,
    executor_check,
    executor_note,
    install_operational_routes,
)
from services.ports import CodeExecutor, InferenceEngine, SamplingParams
from services.settings import ApiSettings, RolloutSettings
from solver_api.prometheus_metrics import SolverMetrics
from solver_api.solve_routes import solve_router


def create_solver_app(settings: ApiSettings, rollout: RolloutSettings, executor: CodeExecutor | None = None,
                      extra_checks: dict[str, ReadinessCheck] | None = None,
                      engine: InferenceEngine | None = None) -> FastAPI:
    """The solver service; readiness checks the executor it judges answers with (when given) and `extra_checks`.
    With `engine`, `POST /v1/solve` too, sampling as the rollouts do unless a request says otherwise (answers are
    checked only when `executor` is given)."""
    app = FastAPI(title="AZR solver", version="1", summary="Solves proposed tasks and checks the answers.")
    checks: dict[str, ReadinessCheck] = {"executor": executor_check(executor)} if executor is not None else {}
    notes = {"executor": executor_note(executor)} if executor is not None else {}
    registry = install_operational_routes(app, "solver", {**checks, **(extra_checks or {})},
                                          settings.max_request_bytes, notes=notes)
    if engine is not None:
        default_sampling = SamplingParams(max_new_tokens=rollout.max_response_tokens,
                                          temperature=rollout.temperature, top_p=rollout.top_p)
        app.include_router(solve_router(engine, executor, default_sampling, bearer_token_guard(settings.api_token),
                                        SolverMetrics(registry)), tags=["self-play"])
    return app
