"""What every AZR HTTP service has: `/healthz`, `/readyz`, Prometheus `/metrics`, a request-body size cap, a guard
against text no store holds, and the bearer-token guard of write routes.

`/readyz` answers from its checks' results of the last READINESS_TTL_S seconds (it is unauthenticated: a flood of
probes costs the dependencies one check each per interval, and no check runs model code). A ready service may add
`notes`, e.g. that its executor runs model code unconfined (`executor_sandbox = "none"`)."""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

import redis
from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from pydantic import BaseModel, SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.http.errors import install_error_handlers, safe_text
from services.json_types import JsonValue
from services.ports import CodeExecutor, Pingable
from services.settings import DEFAULT_API_TOKEN

ReadinessCheck = Callable[[], "str | None"]
"""Returns None when the dependency answers, else a reason."""
ReadinessNote = Callable[[], "str | None"]
"""Returns what a client should know about a ready dependency (e.g. 'not isolated'), else None."""

T = TypeVar("T")

READINESS_TTL_S = 2.0
"""How long /readyz reuses its checks' results."""

PROMETHEUS_TEXT = {"description": "Prometheus text exposition format (version 1.0.0 or 0.0.4).",
                   "content": {"text/plain": {"schema": {"type": "string"}}}}
"""The `responses=` entry of a `/metrics` route: text, not JSON."""


class Liveness(BaseModel):
    """`GET /healthz`: the process serves requests."""

    status: Literal["alive"]
    service: str


class Readiness(BaseModel):
    """`GET /readyz`: 200 ready, or 503 with each failing dependency and why; `notes` on dependencies that work but
    that a client should know about (an executor that is not isolated)."""

    status: Literal["ready", "not_ready"]
    service: str
    failures: dict[str, str]
    notes: dict[str, str] = {}


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


def unstorable_text(value: JsonValue, path: tuple[str | int, ...] = ("body",)) -> tuple[str | int, ...] | None:
    """The location of the first string (value or key) in a decoded JSON value holding a NUL character or a lone
    surrogate, else None."""
    stack: list[tuple[JsonValue, tuple[str | int, ...]]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item or not _encodable(item):
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key or not _encodable(key):
                    return (*where, key)
                stack.append((child, (*where, key)))
        elif isinstance(item, list):
            stack.extend((child, (*where, index)) for index, child in enumerate(item))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


class TextGuard:
    """ASGI middleware: a JSON body holding a NUL character or a lone surrogate anywhere gets 422 (no store holds
    such text: PostgreSQL refuses NUL, UTF-8 cannot carry a lone surrogate) before any route sees it. Bodies that do
    not decode go on to the route, which answers them its own way. Sits inside BodySizeLimit: bodies are capped."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        where = None
        if b"\\u" in body or b"\x00" in body:  # cheap pre-check: NUL and surrogates in JSON come as \u escapes
            try:
                where = unstorable_text(json.loads(body))
            except (ValueError, RecursionError):
                where = None
        if where is not None:
            issue = {"type": "text_not_storable", "loc": [part if isinstance(part, int) else safe_text(part)
                                                          for part in where],
                     "msg": "text holds a NUL character or a lone surrogate, which no store holds", "ctx": None}
            response = JSONResponse({"problem": "invalid_request", "detail": [issue]}, status_code=422)
            await response({"type": "http"}, _no_receive, send)
            return
        await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}], receive), send)


def _replay(messages: list[Message], then: Receive) -> Receive:
    """`messages` first, then the connection's own (a client that leaves is still seen leaving)."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await then()

    return replayed


async def run_watching_client(request: Request, work: Callable[[threading.Event], T]) -> T:
    """`work(abort)` in a worker thread; `abort` is set as soon as the client has gone away (then the result is
    nobody's: the route returns it to no one). Generation routes pass it to services.rollouts.AbortableEngine.

    The client's leaving is read as the connection's next ASGI message (`http.disconnect`; the body is read by then),
    awaited beside the work: `Request.is_disconnected()` never sees it behind a BaseHTTPMiddleware, whose receive
    always awaits."""
    abort = threading.Event()
    task = asyncio.ensure_future(run_in_threadpool(work, abort))
    watcher = asyncio.ensure_future(request.receive())
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if watcher in done and not watcher.cancelled() and watcher.exception() is None \
                and watcher.result().get("type") == "http.disconnect":
            abort.set()
        return await task
    finally:
        if not watcher.done():
            watcher.cancel()


def install_operational_routes(app: FastAPI, service: str, checks: dict[str, ReadinessCheck], max_body_bytes: int,
                               registry: CollectorRegistry | None = None,
                               notes: dict[str, ReadinessNote] | None = None) -> CollectorRegistry:
    """Add health, readiness, metrics, the body cap, the text guard and the error bodies of `services.http.errors` to
    `app`; returns the metrics registry `/metrics` serves (a new one unless `registry` is given, e.g. to serve a
    coordinator's metrics beside the app's own). `notes`: what /readyz adds about working dependencies."""
    registry = registry if registry is not None else CollectorRegistry()
    install_error_handlers(app)
    requests = Counter("azr_http_requests", "HTTP requests served", ["service", "route", "status"], registry=registry)
    latency = Histogram("azr_http_request_seconds", "HTTP request latency", ["service", "route", "status"],
                        registry=registry)
    app.add_middleware(TextGuard)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)  # added last: runs first, so the guard reads capped
    readiness = _CachedReadiness(checks, notes or {})

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
        """Readiness: every dependency answers (503 with the reasons otherwise); cached for READINESS_TTL_S."""
        failures, found = readiness.results()
        body = Readiness(status="ready" if not failures else "not_ready", service=service, failures=failures,
                         notes=found)
        return JSONResponse(body.model_dump(), status_code=200 if not failures else 503)

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse, responses={200: PROMETHEUS_TEXT})
    def metrics() -> Response:
        """Prometheus metrics of this service."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return registry


class _CachedReadiness:
    """The checks' and notes' results, recomputed at most every READINESS_TTL_S (one probe at a time computes)."""

    def __init__(self, checks: dict[str, ReadinessCheck], notes: dict[str, ReadinessNote]) -> None:
        self.checks, self.notes = checks, notes
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._value: tuple[dict[str, str], dict[str, str]] = ({}, {})

    def results(self) -> tuple[dict[str, str], dict[str, str]]:
        with self._lock:
            if time.monotonic() - self._at >= READINESS_TTL_S:
                failures = {name: reason for name, check in self.checks.items() if (reason := check()) is not None}
                found = {name: note for name, read in self.notes.items() if (note := read()) is not None}
                self._value, self._at = (failures, found), time.monotonic()
            return self._value


def bearer_token_guard(token: SecretStr) -> Callable[..., Awaitable[None]]:
    """A FastAPI dependency for write routes: 401 without `Authorization: Bearer …`, 403 with a wrong token.

    The comparison is constant-time (hmac.compare_digest) so response timing does not leak the token. An empty or
    placeholder token (`change-me`) is never accepted, whatever the profile: every request gets 403.
    """
    expected = token.get_secret_value().encode()
    if token.get_secret_value() in ("", DEFAULT_API_TOKEN):
        expected = b""
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
    live `azr worker executor` on its queue; in-process, the sandbox's state from its start and its last requests
    (never a sandbox job per probe)."""
    return executor.readiness_problem


def executor_note(executor: CodeExecutor) -> ReadinessNote:
    """What /readyz says about the executor's isolation: 'not isolated: ...' for an in-process executor running
    model code unconfined (`isolation_note()`, executor_svc), else nothing."""
    note = getattr(executor, "isolation_note", None)
    return note if callable(note) else (lambda: None)
