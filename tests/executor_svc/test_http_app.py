"""`POST /v1/execute` and the operational routes, over a real sandbox pool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from executor_svc.executor import Executor
from executor_svc.http_app import create_executor_app
from services.settings import DEFAULT_API_TOKEN, Settings

TOKEN = "executor-debug-test-token"


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with Executor.from_settings(Settings(executor_workers=1, executor_timeout_s=3).executor) as running:
        yield running


@pytest.fixture(scope="module")
def client(executor: Executor) -> Iterator[TestClient]:
    with TestClient(create_executor_app(executor, SecretStr(TOKEN), max_body_bytes=4096),
                    headers={"Authorization": f"Bearer {TOKEN}"}) as test_client:
        yield test_client


def test_execute_needs_the_token_and_never_takes_the_placeholder(executor: Executor) -> None:
    """Issue 37: `azr serve executor-debug` ran model code for anyone who could reach it."""
    body = {"op": "validate_proposal", "program": "def f(x):\n    return x", "input": "1"}
    with TestClient(create_executor_app(executor, SecretStr(TOKEN))) as anonymous:
        assert anonymous.post("/v1/execute", json=body).status_code == 401
        wrong = anonymous.post("/v1/execute", json=body, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 403
    with TestClient(create_executor_app(executor, SecretStr(DEFAULT_API_TOKEN))) as placeholder:
        response = placeholder.post("/v1/execute", json=body, headers={"Authorization": f"Bearer {DEFAULT_API_TOKEN}"})
        assert response.status_code == 403


def test_readiness_runs_no_sandbox_job_and_is_cached(client: TestClient, executor: Executor) -> None:
    """/readyz is unauthenticated: it reads the executor's state, it never makes a worker run a program."""
    requests_before = executor.stats()["gold"]["requests"]
    for _ in range(20):
        assert client.get("/readyz").status_code == 200
    assert executor.stats()["gold"]["requests"] == requests_before


def test_an_unconfined_executor_is_ready_but_says_it_is_not_isolated() -> None:
    with Executor(workers=1, sandbox="none") as unconfined:
        with TestClient(create_executor_app(unconfined, SecretStr(TOKEN))) as test_client:
            ready = test_client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["notes"]["sandbox"].startswith("not isolated")


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
