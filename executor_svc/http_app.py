"""`POST /v1/execute`: the executor over HTTP, for debugging (the pipeline itself uses RQ). Same result shapes."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from prometheus_client import Counter

from executor_svc.dispatch import execute_request
from services.execution import ExecutionRequest
from services.http_ops import ReadinessCheck, install_operational_routes
from services.ports import CodeExecutor


def create_executor_app(executor: CodeExecutor, max_body_bytes: int = 262_144,
                        checks: dict[str, ReadinessCheck] | None = None) -> FastAPI:
    """An app serving `executor`; readiness also runs the zero triplet through it."""
    app = FastAPI(title="AZR executor", version="1", summary="Sandboxed validation and answer checks (debugging API).")

    def sandbox_answers() -> str | None:
        result = executor.validate_proposal("def f(x):\n    return x", "'Hello World'")
        if result.status == "ok":
            return None
        return f"sandbox fails the zero triplet: {result.status} {result.error or ''}"

    registry = install_operational_routes(app, "executor", {"sandbox": sandbox_answers, **(checks or {})},
                                          max_body_bytes)
    statuses = Counter("azr_executor_results", "Executor results by operation and status", ["op", "status"],
                       registry=registry)

    @app.post("/v1/execute", tags=["executor"])
    async def execute(request: ExecutionRequest) -> dict[str, Any]:
        """Run one validation or answer check in the sandbox. Malformed bodies get 422 with the field at fault."""
        result = await run_in_threadpool(execute_request, executor, request)
        statuses.labels(request.op, result.status.value).inc()
        return result.model_dump(mode="json")

    return app
