"""The error bodies of AZR's HTTP APIs, one model per status, and the `responses=` entries that document them.

Every route states each status it can answer with its body model (`documented(...)`), so a client generated from
the OpenAPI document (or schemathesis) can trust it. The shapes:

- 400, 401, 403, 404, 409, 413: `ErrorDetail` (`{"detail": "<reason>"}`, FastAPI's HTTPException body);
- 422 for a malformed request: `InvalidRequest`, FastAPI's validation list plus the discriminator
  `problem: "invalid_request"` (a route whose 422 has another meaning too gives that one its own `problem` value,
  e.g. proposer_api's `SeedRejected`, `problem: "seed_rejected"`). It never echoes the request: no `input`, and every
  text in it (a `loc` may hold a key of the request) is short, with lone surrogates escaped, so any bad body gets a
  small, encodable answer. Text holding a NUL character or a lone surrogate anywhere in a JSON body is such a 422
  (`type: "text_not_storable"`): no store holds it (services/http/ops.py, TextGuard);
- 503/504, a dependency that did not answer: `DependencyUnavailable` (which dependency, why, and that nothing was
  stored).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from services.json_types import JsonObject


class ErrorDetail(BaseModel):
    """A refusal with its reason (FastAPI's HTTPException body)."""

    detail: str


class ValidationIssue(BaseModel):
    """One field at fault in a malformed request (pydantic's error entry, without the input it judged)."""

    type: str
    loc: list[str | int]
    msg: str
    ctx: dict[str, str] | None = None


MAX_ISSUES = 20
"""Most issues a 422 lists (the rest are counted in the last one)."""
MAX_ISSUE_TEXT = 200
"""Longest text of an issue (a location, a message, a context value)."""


def safe_text(value: object, limit: int = MAX_ISSUE_TEXT) -> str:
    """`value` as short text that always encodes: lone surrogates (and other unencodable code points) escaped."""
    text = value if isinstance(value, str) else str(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def issues_of(errors: Sequence[JsonObject]) -> list[JsonObject]:
    """pydantic's error list as `ValidationIssue` bodies: no input echoed, every text short and encodable."""
    issues = []
    for error in list(errors)[:MAX_ISSUES]:
        loc = [part if isinstance(part, int) else safe_text(part) for part in error.get("loc", ())]
        ctx = error.get("ctx")
        issues.append({"type": safe_text(error.get("type", "invalid")), "loc": loc,
                       "msg": safe_text(error.get("msg", "")),
                       "ctx": {safe_text(key): safe_text(val) for key, val in ctx.items()} if ctx else None})
    if len(errors) > MAX_ISSUES:
        issues.append({"type": "too_many_issues", "loc": ["body"], "ctx": None,
                       "msg": f"{len(errors) - MAX_ISSUES} more issues not listed"})
    return issues


class InvalidRequest(BaseModel):
    """`422`: the request does not match the documented schema; `detail` lists each field at fault."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    problem: Literal["invalid_request"] = "invalid_request"
    detail: list[ValidationIssue]


class DependencyUnavailable(BaseModel):
    """`503` (or `504` for a deadline): a dependency did not answer; nothing was stored."""

    detail: str
    dependency: str = Field(description="database, redis, executor or inference")
    reason: str


class DependencyFailure(Exception):
    """Raised by a route when a dependency failed: answered with `DependencyUnavailable` and `status`."""

    def __init__(self, dependency: str, reason: str, status: int = 503) -> None:
        super().__init__(f"{dependency} unavailable: {reason}")
        self.dependency, self.reason, self.status = dependency, reason, status


def unavailable_response(dependency: str, reason: str, status: int = 503) -> JSONResponse:
    """The `DependencyUnavailable` answer."""
    body = DependencyUnavailable(detail=f"{dependency} unavailable; nothing was stored", dependency=dependency,
                                 reason=reason)
    return JSONResponse(body.model_dump(), status_code=status)


_DESCRIPTIONS: dict[int, tuple[type[BaseModel], str]] = {
    400: (ErrorDetail, "The body could not be decoded (not UTF-8 text)."),
    401: (ErrorDetail, "No bearer token (`Authorization: Bearer <AZR_API_TOKEN>`)."),
    403: (ErrorDetail, "Wrong bearer token."),
    404: (ErrorDetail, "Not found; `detail` says what."),
    409: (ErrorDetail, "The request cannot be served in the current state; `detail` says why."),
    413: (ErrorDetail, "Body larger than max_request_bytes."),
    422: (InvalidRequest, "Malformed request: `detail` lists each field at fault."),
    503: (DependencyUnavailable, "A dependency is unavailable; nothing was stored."),
    504: (DependencyUnavailable, "A dependency gave no answer in time; nothing was stored."),
}


def documented(*statuses: int, **overrides: str) -> dict[int | str, JsonObject]:
    """`responses=` entries for `statuses` with their models; `overrides` (`s404="no such run"`) replace a
    description."""
    entries: dict[int | str, JsonObject] = {}
    for status in statuses:
        model, description = _DESCRIPTIONS[status]
        entries[status] = {"model": model, "description": overrides.get(f"s{status}", description)}
    return entries


WRITE_STATUSES = (400, 401, 403, 413, 422)
"""What every token-guarded route with a JSON body may answer besides its own statuses."""


def install_error_handlers(app: FastAPI) -> None:
    """Answer malformed requests with `InvalidRequest` and `DependencyFailure` with `DependencyUnavailable`."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"problem": "invalid_request", "detail": issues_of(error.errors())}, status_code=422)

    @app.exception_handler(DependencyFailure)
    async def dependency_failed(_request: Request, error: DependencyFailure) -> JSONResponse:
        return unavailable_response(error.dependency, error.reason, error.status)
