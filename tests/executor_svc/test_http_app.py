"""`POST /v1/execute` and the operational routes, over a real sandbox pool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from executor_svc.executor import Executor
from executor_svc.http_app import create_executor_app
from services.settings import Settings


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with Executor.from_settings(Settings(executor_workers=1, executor_timeout_s=3)) as executor:
        with TestClient(create_executor_app(executor, max_body_bytes=4096)) as test_client:
            yield test_client


def test_execute_validates_and_checks(client: TestClient) -> None:
    ok = client.post("/v1/execute", json={"op": "validate_proposal", "program": "def f(x):\n    return x[::-1]",
                                          "input": "'abc'"})
    assert ok.status_code == 200 and (ok.json()["status"], ok.json()["output"]) == ("ok", "'cba'")
    wrong = client.post("/v1/execute", json={"op": "check_deduction", "gold_output": "'cba'", "agent_output": "'abc'"})
    assert wrong.status_code == 200 and wrong.json()["correct"] is False


def test_malformed_body_is_422_with_the_field(client: TestClient) -> None:
    response = client.post("/v1/execute", json={"op": "validate_proposal", "program": "def f(x): return x"})
    assert response.status_code == 422
    assert any(error["loc"][-1] == "input" for error in response.json()["detail"])
    unknown = client.post("/v1/execute", json={"op": "format_disk"})
    assert unknown.status_code == 422


def test_oversized_body_is_413(client: TestClient) -> None:
    response = client.post("/v1/execute", json={"op": "validate_proposal", "program": "#" * 10_000, "input": "1"})
    assert response.status_code == 413


def test_health_readiness_and_metrics(client: TestClient) -> None:
    assert client.get("/healthz").json()["status"] == "alive"
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["failures"] == {}
    metrics = client.get("/metrics").text
    assert 'azr_executor_results_total{op="validate_proposal",status="ok"}' in metrics
    assert "azr_http_requests_total" in metrics
