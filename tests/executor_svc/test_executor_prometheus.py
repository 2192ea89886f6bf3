"""Executor metrics over real HTTP: the in-process pool (embedded profile, coordinator) and a real `azr worker
executor` process behind RQ, each scraped after real validations and checks in the process sandbox."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_scrape import labelled, scrape, value
from rq import Queue
from throwaway_servers import ExecutorWorkers, free_port

from executor_svc.executor import Executor
from executor_svc.prometheus_metrics import TASK_KINDS, ExecutorMetrics
from executor_svc.rq_client import RQCodeExecutor
from services.execution import ExecStatus
from services.http.metrics_endpoint import serve_metrics

FAILING_PROGRAM = "def f(x):\n    return x // 0"
FORBIDDEN_PROGRAM = "import random\ndef f(x):\n    return random.random()"


@pytest.fixture(scope="module")
def cruxeval_rows(shared_dir: Path) -> list[dict[str, str]]:
    """The first three CRUXEval rows (valid, deterministic programs with their gold outputs)."""
    with (shared_dir / "data" / "cruxeval.jsonl").open() as stream:
        return [json.loads(next(stream)) for _ in range(3)]


def test_in_process_executor_counts_tasks_by_kind_and_status(cruxeval_rows: list[dict[str, str]]) -> None:
    metrics = ExecutorMetrics()
    endpoint = serve_metrics(metrics.registry, free_port(), "127.0.0.1")
    assert endpoint is not None
    try:
        empty = scrape(f"http://127.0.0.1:{endpoint.port}/metrics")
        for kind in TASK_KINDS:  # every kind's histogram exists before the first task
            assert value(empty, "azr_executor_task_duration_seconds_count", kind=kind) == 0
        with Executor(workers=1, metrics=metrics) as executor:
            results = [executor.validate_proposal(row["code"], row["input"]) for row in cruxeval_rows]
            failing = executor.validate_proposal(FAILING_PROGRAM, "3")
            forbidden = executor.validate_proposal(FORBIDDEN_PROGRAM, "3")
            right = executor.check_deduction(cruxeval_rows[0]["output"], cruxeval_rows[0]["output"])
            wrong = executor.check_deduction(cruxeval_rows[0]["output"], "'not the output'")
        samples = scrape(f"http://127.0.0.1:{endpoint.port}/metrics")
    finally:
        endpoint.close()
    assert [r.status for r in results] == [ExecStatus.OK] * 3
    assert (failing.status, forbidden.status) == (ExecStatus.RUNTIME_ERROR, ExecStatus.FORBIDDEN)
    assert (right.status, wrong.status) == (ExecStatus.OK, ExecStatus.WRONG_ANSWER)

    assert labelled(samples, "azr_executor_tasks_total") == {
        (("kind", "validate_proposal"), ("status", "ok")): 3,
        (("kind", "validate_proposal"), ("status", "runtime_error")): 1,
        (("kind", "validate_proposal"), ("status", "forbidden")): 1,
        (("kind", "check_deduction"), ("status", "ok")): 1,
        (("kind", "check_deduction"), ("status", "wrong_answer")): 1,
    }
    assert value(samples, "azr_executor_task_duration_seconds_count", kind="validate_proposal") == 5
    assert value(samples, "azr_executor_task_duration_seconds_count", kind="check_deduction") == 2
    assert value(samples, "azr_executor_task_duration_seconds_count", kind="check_induction") == 0
    # The histogram's sum is the executor's own timing of those tasks (ms in the results), in seconds.
    measured = sum(r.ms for r in [*results, failing, forbidden]) / 1000
    assert value(samples, "azr_executor_task_duration_seconds_sum", kind="validate_proposal") == \
        pytest.approx(measured, rel=1e-6)
    assert measured > 0
    # Buckets are cumulative: every validation (10 s limit per run) is inside the largest finite bucket.
    assert value(samples, "azr_executor_task_duration_seconds_bucket", kind="validate_proposal", le="40.0") == 5


@pytest.fixture()
def metered_worker(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RQCodeExecutor, str]]:
    """A real `azr worker executor` on a private queue, serving its metrics on a free port."""
    port = free_port()
    monkeypatch.setenv("AZR_EXECUTOR_METRICS_PORT", str(port))
    monkeypatch.setenv("AZR_METRICS_ADDRESS", "127.0.0.1")
    connection = redis.Redis.from_url(redis_url)
    workers = ExecutorWorkers(redis_url, f"executor-test-{uuid.uuid4().hex[:8]}")
    try:
        workers.start("metered")
        client = RQCodeExecutor(connection, queue_name=workers.queue, timeout_s=8, wait_s=120)
        yield client, f"http://127.0.0.1:{port}/metrics"
    finally:
        workers.stop_all()
        Queue(workers.queue, connection=connection).empty()
        connection.close()


def test_rq_worker_serves_its_task_counts(metered_worker: tuple[RQCodeExecutor, str]) -> None:
    client, url = metered_worker
    ok = client.validate_proposal("def f(a):\n    return a[::-1]", "'abc'")
    failing = client.validate_proposal(FAILING_PROGRAM, "3")
    induction = client.validate_induction("def f(x):\n    return x + 1", ["1", "2"])
    assert (ok.status, failing.status, induction.status) == (ExecStatus.OK, ExecStatus.RUNTIME_ERROR, ExecStatus.OK)

    # The worker binds its metrics port before it serves a job, and counts a task before the job returns.
    samples = scrape(url)
    assert value(samples, "azr_executor_tasks_total", kind="validate_proposal", status="ok") == 1
    assert value(samples, "azr_executor_tasks_total", kind="validate_proposal", status="runtime_error") == 1
    assert value(samples, "azr_executor_tasks_total", kind="validate_induction", status="ok") == 1
    assert value(samples, "azr_executor_task_duration_seconds_count", kind="validate_proposal") == 2
    assert value(samples, "azr_executor_task_duration_seconds_sum", kind="validate_proposal") == \
        pytest.approx((ok.ms + failing.ms) / 1000, rel=1e-6)

