"""proposer_api: owns the triplet buffers (docs/design.md §2): buffer inspection and seed submission over HTTP.

Routes under /v1: `GET /v1/buffers`, `GET /v1/buffers/{buffer}`, `GET /v1/buffers/{buffer}/{id}` (and its `/history`),
`GET /v1/runs`, `GET /v1/runs/{run_id}/steps`, `POST /v1/seeds`; the live dashboard at `GET /dashboard`.
`POST /v1/propose` (proposer_api/propose_routes.py, the self-play issue) is included when an inference engine is given.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Gauge

from proposer_api.buffer_routes import buffer_router
from proposer_api.dashboard_routes import dashboard_router
from proposer_api.error_responses import install_error_responses
from proposer_api.prometheus_metrics import ProposerMetrics
from proposer_api.propose_routes import ProposeDefaults, propose_router
from proposer_api.run_routes import run_router
from proposer_api.seed_routes import seed_router
from services.algorithm.task_types import TaskType
from services.http.ops import (
    ReadinessCheck,
    bearer_token_guard,
    database_check,
    executor_check,
    executor_note,
    install_operational_routes,
)
from services.ports import CodeExecutor, InferenceEngine, TripletStore
from services.settings import ApiSettings, RolloutSettings


def create_proposer_app(settings: ApiSettings, rollout: RolloutSettings, store: TripletStore, executor: CodeExecutor,
                        extra_checks: dict[str, ReadinessCheck] | None = None,
                        engine: InferenceEngine | None = None, registry: CollectorRegistry | None = None) -> FastAPI:
    """The proposer service over `store` and `executor`; readiness checks the database and the executor (and
    whatever `extra_checks` adds, e.g. Redis in the distributed profile). With `engine`, `POST /v1/propose` too, with
    the rollouts' sizes and sampling as its defaults. `registry`: serve these metrics too on `/metrics` (`azr run`
    passes its coordinator's)."""
    app = FastAPI(title="AZR proposer", version="1",
                  summary="Triplet buffers, seed submission, self-play proposals, runs and the live dashboard.")
    checks: dict[str, ReadinessCheck] = {"database": database_check(store), "executor": executor_check(executor)}
    registry = install_operational_routes(app, "proposer", {**checks, **(extra_checks or {})},
                                          settings.max_request_bytes, registry,
                                          notes={"executor": executor_note(executor)})
    sizes = Gauge("azr_buffer_entries", "Entries per buffer (read at scrape time; NaN when the database is down)",
                  ["buffer"], registry=registry)
    for buffer in TaskType:
        sizes.labels(buffer.value).set_function(_counter(store, buffer))
    install_error_responses(app)
    app.include_router(buffer_router(store))
    app.include_router(run_router(store))
    app.include_router(dashboard_router())
    require_token = bearer_token_guard(settings.api_token)
    app.include_router(seed_router(store, executor, require_token, settings.seed_submission_quota))
    if engine is not None:
        app.include_router(propose_router(engine, store, ProposeDefaults.from_settings(rollout), require_token,
                                          ProposerMetrics(registry)),
                           tags=["self-play"])
    return app


def _counter(store: TripletStore, buffer: TaskType) -> Callable[[], float]:
    """The gauge callback of one buffer's size."""

    def count() -> float:
        try:
            return float(store.count(buffer))
        except Exception:  # a scrape must not fail because the database is down; NaN shows it
            return float("nan")

    return count
