"""The coordinator's HTTP rollouts ride through an API that is restarting: 503s and refused connections are retried
with backoff and a log line until they have lasted `outage_s`; a 4xx is the caller's error and is raised at once.

A real uvicorn server on loopback, answering 503 for its first seconds as a proposer API does while the inference
server behind it loads its model."""

from __future__ import annotations

import logging
import time

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from throwaway_servers import LoopbackServer, free_port

from services.rollouts.http_rollouts import HttpRollouts, RolloutApiError

TOKEN = "t-0123456789abcdef"


def restarting_api(unavailable_s: float) -> tuple[FastAPI, list[float]]:
    """`POST /v1/prompt_tokens` answers 503 until `unavailable_s` after the first request, then counts tokens; it
    records when each request came."""
    app, seen = FastAPI(), []

    @app.post("/v1/prompt_tokens")
    def prompt_tokens(body: dict) -> JSONResponse:
        seen.append(time.monotonic())
        if seen[-1] - seen[0] < unavailable_s:
            return JSONResponse({"detail": "inference server not ready"}, status_code=503)
        return JSONResponse({"tokens": [len(text) for text in body["instructions"]]})

    @app.post("/v1/solve")
    def refused() -> JSONResponse:
        seen.append(time.monotonic())
        return JSONResponse({"detail": "task_shape_error"}, status_code=422)

    return app, seen


def test_a_restarting_api_is_waited_for_with_a_log_line_per_retry(caplog: pytest.LogCaptureFixture) -> None:
    app, seen = restarting_api(unavailable_s=2.5)
    with LoopbackServer(app) as url:
        rollouts = HttpRollouts(url, url, TOKEN, outage_s=30, backoff_s=0.2, max_backoff_s=1.0)
        try:
            with caplog.at_level(logging.WARNING, logger="services.rollouts.http_rollouts"):
                assert rollouts.prompt_tokens(["abc", "hello"]) == [3, 5]
        finally:
            rollouts.close()
    assert seen[-1] - seen[0] >= 2.5 and len(seen) >= 4  # 0.2, 0.4, 0.8, 1.0 ... s apart
    retries = [r.getMessage() for r in caplog.records if r.name == "services.rollouts.http_rollouts"]
    assert len(retries) == len(seen) - 1 and all("HTTP 503" in m and "gives up after" in m for m in retries)


def test_an_outage_longer_than_the_budget_fails_the_request_after_it() -> None:
    app, seen = restarting_api(unavailable_s=60)
    with LoopbackServer(app) as url:
        rollouts = HttpRollouts(url, url, TOKEN, outage_s=1.5, backoff_s=0.2, max_backoff_s=0.5)
        try:
            started = time.monotonic()
            with pytest.raises(RolloutApiError, match=r"failed for 1\.\d s \(\d+ tries\): HTTP 503"):
                rollouts.prompt_tokens(["abc"])
        finally:
            rollouts.close()
    assert 1.5 <= time.monotonic() - started < 10 and len(seen) >= 3


def test_a_refused_connection_is_retried_and_outage_zero_does_not_wait() -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    rollouts = HttpRollouts(closed, closed, TOKEN, outage_s=0)
    try:
        started = time.monotonic()
        with pytest.raises(RolloutApiError, match=r"\(1 tries\): ConnectError"):
            rollouts.prompt_tokens(["abc"])
        assert time.monotonic() - started < 5
    finally:
        rollouts.close()


def test_a_client_error_is_raised_at_once_without_retry() -> None:
    app, seen = restarting_api(unavailable_s=0)
    with LoopbackServer(app) as url:
        rollouts = HttpRollouts(url, url, TOKEN, outage_s=30)
        try:
            with pytest.raises(RolloutApiError, match="answered 422"):
                rollouts._post(f"{url}/v1/solve", {})
        finally:
            rollouts.close()
    assert len(seen) == 1
