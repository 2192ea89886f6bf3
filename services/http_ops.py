"""What every AZR HTTP service has: `/healthz`, `/readyz`, Prometheus `/metrics`, and a request-body size cap."""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ReadinessCheck = Callable[[], "str | None"]
"""Returns None when the dependency answers, else a reason."""


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
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, counting_receive, send)
        except _BodyTooLarge:
            await self._reject(send)

    async def _reject(self, send: Send) -> None:
        response = JSONResponse({"detail": f"request body exceeds {self.max_bytes} bytes"}, status_code=413)
        await response({"type": "http"}, _no_receive, send)


class _BodyTooLarge(Exception):
    pass


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def install_operational_routes(app: FastAPI, service: str, checks: dict[str, ReadinessCheck], max_body_bytes: int) -> CollectorRegistry:
    """Add health, readiness, metrics and the body cap to `app`; returns the app's own metrics registry."""
    registry = CollectorRegistry()
    requests = Counter("azr_http_requests", "HTTP requests served", ["service", "route", "status"], registry=registry)
    latency = Histogram("azr_http_request_seconds", "HTTP request latency", ["service", "route"], registry=registry)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        requests.labels(service, route, str(response.status_code)).inc()
        latency.labels(service, route).observe(time.perf_counter() - started)
        return response

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        """Liveness: the process serves requests."""
        return {"status": "alive", "service": service}

    @app.get("/readyz", tags=["ops"])
    def readyz() -> JSONResponse:
        """Readiness: every dependency answers (503 with the reasons otherwise)."""
        failures = {name: reason for name, check in checks.items() if (reason := check()) is not None}
        body: dict[str, Any] = {"status": "ready" if not failures else "not_ready", "service": service, "failures": failures}
        return JSONResponse(body, status_code=200 if not failures else 503)

    @app.get("/metrics", tags=["ops"])
    def metrics() -> Response:
        """Prometheus metrics of this service."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return registry
