"""What every AZR HTTP service has: `/healthz`, `/readyz`, Prometheus `/metrics`, a request-body size cap, and the
bearer-token guard of write routes."""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable
from typing import Literal

import redis
from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from pydantic import BaseModel, SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.http_errors import install_error_handlers
from services.ports import CodeExecutor, Pingable

ReadinessCheck = Callable[[], "str | None"]
"""Returns None when the dependency answers, else a reason."""

PROMETHEUS_TEXT = {"description": "Prometheus text exposition format (version 1.0.0 or 0.0.4).",
                   "content": {"text/plain": {"schema": {"type": "string"}}}}
"""The `responses=` entry of a `/metrics` route: text, not JSON."""


class Liveness(BaseModel):
    """`GET /healthz`: the process serves requests."""

    status: Literal["alive"]
    service: str


class Readiness(BaseModel):
    """`GET /readyz`: 200 ready, or 503 with each failing dependency and why."""

    status: Literal["ready", "not_ready"]
    service: str
    failures: dict[str, str]


class BodySizeLimit:
    """ASGI middleware: a request body larger than `max_bytes` gets 413 before the route sees it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        too_large = False

        async def counting_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True
                    raise _BodyTooLarge(self.max_bytes)
            return message

        try:
            await self.app(scope, counting_receive, send)
        except _BodyTooLarge:
            await self._reject(send)

    async def _reject(self, send: Send) -> None:
        response = JSONResponse({"detail": f"request body exceeds {self.max_bytes} bytes"}, status_code=413)
        await response({"type": "http"}, _no_receive, send)


class _BodyTooLarge(HTTPException):
    """Raised from `receive` once a streamed (chunked) body passes the cap. An HTTPException, because FastAPI turns
    any other exception met while reading the body into a 400."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(status_code=413, detail=f"request body exceeds {max_bytes} bytes")


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def install_operational_routes(app: FastAPI, service: str, checks: dict[str, ReadinessCheck], max_body_bytes: int,
                               registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """Add health, readiness, metrics, the body cap and the error bodies of `services.http_errors` to `app`; returns
    the metrics registry `/metrics` serves (a new one unless `registry` is given, e.g. to serve a coordinator's
    metrics beside the app's own)."""
    registry = registry if registry is not None else CollectorRegistry()
    install_error_handlers(app)
    requests = Counter("azr_http_requests", "HTTP requests served", ["service", "route", "status"], registry=registry)
    latency = Histogram("azr_http_request_seconds", "HTTP request latency", ["service", "route", "status"],
                        registry=registry)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        requests.labels(service, route, str(response.status_code)).inc()
        latency.labels(service, route, str(response.status_code)).observe(time.perf_counter() - started)
        return response

    @app.get("/healthz", tags=["ops"], response_model=Liveness)
    def healthz() -> Liveness:
        """Liveness: the process serves requests."""
        return Liveness(status="alive", service=service)

    @app.get("/readyz", tags=["ops"], response_model=Readiness,
             responses={503: {"model": Readiness, "description": "A dependency does not answer; `failures` says why."}})
    def readyz() -> JSONResponse:
        """Readiness: every dependency answers (503 with the reasons otherwise)."""
        failures = {name: reason for name, check in checks.items() if (reason := check()) is not None}
        body = Readiness(status="ready" if not failures else "not_ready", service=service, failures=failures)
        return JSONResponse(body.model_dump(), status_code=200 if not failures else 503)

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse, responses={200: PROMETHEUS_TEXT})
    def metrics() -> Response:
        """Prometheus metrics of this service."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return registry


def bearer_token_guard(token: SecretStr) -> Callable[..., Awaitable[None]]:
    """A FastAPI dependency for write routes: 401 without `Authorization: Bearer …`, 403 with a wrong token.

    The comparison is constant-time (hmac.compare_digest) so response timing does not leak the token.
    """
    expected = token.get_secret_value().encode()
    scheme = HTTPBearer(auto_error=False, description="AZR_API_TOKEN")

    async def require_token(credentials: HTTPAuthorizationCredentials | None = Depends(scheme)) -> None:
        if credentials is None:
            raise HTTPException(401, "missing bearer token (Authorization: Bearer <AZR_API_TOKEN>)",
                                headers={"WWW-Authenticate": "Bearer"})
        if not expected or not hmac.compare_digest(credentials.credentials.encode(), expected):
            raise HTTPException(403, "wrong bearer token")

    return require_token


# ------------------------------------------------------------------------------------------------ readiness checks


def database_check(store: Pingable) -> ReadinessCheck:
    """Readiness of the buffer store's database (`SELECT 1` through its engine)."""

    def check() -> str | None:
        try:
            store.ping()
            return None
        except Exception as error:  # any driver error means "not ready"; the reason says which
            first_line = str(error).splitlines()[0] if str(error) else ""
            return f"database does not answer: {error.__class__.__name__}: {first_line}"

    return check


def redis_check(client: redis.Redis) -> ReadinessCheck:
    """Readiness of Redis (PING)."""

    def check() -> str | None:
        try:
            client.ping()
            return None
        except redis.RedisError as error:
            return f"redis does not answer: {error}"

    return check


def executor_check(executor: CodeExecutor) -> ReadinessCheck:
    """Readiness of the executor, as the executor itself judges it (`CodeExecutor.readiness_problem`): through RQ, a
    live `azr worker executor` on its queue; in-process, the sandbox runs the zero triplet."""
    return executor.readiness_problem
