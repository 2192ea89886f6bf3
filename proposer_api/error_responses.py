"""How failures of the proposer's dependencies reach the client: a status code and a reason, never a bare 500."""

from __future__ import annotations

import logging

import redis
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError

from proposer_api.seed_submission import ExecutorUnavailableError, QuotaReachedError, SeedRejectedError
from services.execution import ExecutorJobFailed, ExecutorTimeout
from services.http.errors import safe_text, unavailable_response

log = logging.getLogger(__name__)


def install_error_responses(app: FastAPI) -> None:
    """Map rejections to 422 (`SeedRejected`), a full submission quota to 409 (`ErrorDetail`), dependency outages to
    503, executor deadlines to 504 (both `DependencyUnavailable`)."""

    @app.exception_handler(SeedRejectedError)
    async def rejected(_request: Request, error: SeedRejectedError) -> JSONResponse:
        return JSONResponse(error.rejection.model_dump(mode="json"), status_code=422)

    @app.exception_handler(QuotaReachedError)
    async def quota_reached(_request: Request, error: QuotaReachedError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=409)

    @app.exception_handler(ExecutorUnavailableError)
    async def executor_down(_request: Request, error: ExecutorUnavailableError) -> JSONResponse:
        return _unavailable("executor", str(error), 503)

    @app.exception_handler(ExecutorJobFailed)
    async def job_failed(_request: Request, error: ExecutorJobFailed) -> JSONResponse:
        return _unavailable("executor", str(error), 503)

    @app.exception_handler(ExecutorTimeout)
    async def job_timeout(_request: Request, error: ExecutorTimeout) -> JSONResponse:
        return _unavailable("executor", str(error), 504)

    @app.exception_handler(DataError)
    async def data_refused(_request: Request, error: DataError) -> JSONResponse:
        reason = safe_text(str(error.orig).splitlines()[0] if error.orig else "invalid data")
        issue = {"type": "data_refused", "loc": ["body"], "msg": f"the database refused the data: {reason}",
                 "ctx": None}
        return JSONResponse({"problem": "invalid_request", "detail": [issue]}, status_code=422)

    @app.exception_handler(DBAPIError)
    async def database_down(_request: Request, error: DBAPIError) -> JSONResponse:
        first_line = str(error.orig).splitlines()[0] if error.orig else ""
        return _unavailable("database", f"{error.__class__.__name__}: {first_line}", 503)

    @app.exception_handler(redis.RedisError)
    async def redis_down(_request: Request, error: redis.RedisError) -> JSONResponse:
        return _unavailable("redis", f"{error.__class__.__name__}: {error}", 503)


def _unavailable(dependency: str, reason: str, status: int) -> JSONResponse:
    log.warning("%s unavailable: %s", dependency, reason)
    return unavailable_response(dependency, reason, status)
