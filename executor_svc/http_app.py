"""`POST /v1/execute`: the executor over HTTP, for debugging (the pipeline itself uses RQ). Same result shapes.

Behind the API token like every route that makes the executor work (it runs model code on request); `/readyz` reports
the executor's cached state (never a sandbox job per probe) and, when it runs unconfined, says so in `notes`.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI
from fastapi.concurrency import run_in_threadpool
from prometheus_client import Counter
from pydantic import SecretStr

from executor_svc.dispatch import execute_request
from services.execution import ExecutionRequest
from services.http.errors import WRITE_STATUSES, documented
from services.http.ops import (
    ReadinessCheck,
    bearer_token_guard,
    executor_check,
    executor_note,
    install_operational_routes,
)
from services.json_types import JsonObject
from services.ports import CodeExecutor


def create_executor_app(executor: CodeExecutor, token: SecretStr, max_body_bytes: int = 262_144,
                        checks: dict[str, ReadinessCheck] | None = None) -> FastAPI:
    """An app serving `executor`, its route guarded by `token` (the placeholder or an empty token lets no request
    in); readiness is the executor's own (`readiness_problem`) plus `checks`."""
    app = FastAPI(title="AZR executor", version="1", summary="Sandboxed validation and answer checks (debugging API).")
    registry = install_operational_routes(app, "executor", {"sandbox": executor_check(executor), **(checks or {})},
                                          max_body_bytes, notes={"sandbox": executor_note(executor)})
    statuses = Counter("azr_executor_results", "Executor results by operation and status", ["op", "status"],
                       registry=registry)

    @app.post("/v1/execute", tags=["executor"], dependencies=[Depends(bearer_token_guard(token))],
              responses=documented(*WRITE_STATUSES))
    async def execute(request: ExecutionRequest) -> JsonObject:
        """Run one validation or answer check in the sandbox. Malformed bodies get 422 with the field at fault."""
        result = await run_in_threadpool(execute_request, executor, request)
        statuses.labels(request.op, result.status.value).inc()
        return result.model_dump(mode="json")

    return app
