"""solver_api's skeleton over real HTTP: health, readiness (through a real executor), metrics, OpenAPI."""

from __future__ import annotations

import httpx
import pytest
import redis
from throwaway_servers import LoopbackServer

from executor_svc.executor import Executor
from executor_svc.rq_client import RQCodeExecutor
from services.settings import Settings
from solver_api.app import create_solver_app


@pytest.fixture(scope="module")
def sandbox():
    with Executor(workers=1) as executor:
        yield executor


def test_health_readiness_metrics_and_docs(sandbox) -> None:
    settings = Settings()
    with LoopbackServer(create_solver_app(settings.api, settings.rollout, sandbox)) as url:
        assert httpx.get(f"{url}/healthz").json() == {"status": "alive", "service": "solver"}
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 200 and ready.json()["failures"] == {}
        metrics = httpx.get(f"{url}/metrics").text
        assert 'azr_http_requests_total{route="/readyz",service="solver",status="200"} 1.0' in metrics
        assert httpx.get(f"{url}/docs").status_code == 200
        paths = httpx.get(f"{url}/openapi.json").json()["paths"]
    assert "/v1/solve" not in paths  # arrives with the self-play issue
    assert {"/healthz", "/readyz", "/metrics"} <= set(paths)


def test_readiness_is_503_when_no_executor_worker_listens(redis_url) -> None:
    connection = redis.Redis.from_url(redis_url)
    executor = RQCodeExecutor(connection, queue_name="executor-nobody-listens-here")
    settings = Settings()
    try:
        with LoopbackServer(create_solver_app(settings.api, settings.rollout, executor)) as url:
            ready = httpx.get(f"{url}/readyz")
    finally:
        connection.close()
    assert ready.status_code == 503
    assert "no live executor worker" in ready.json()["failures"]["executor"]
