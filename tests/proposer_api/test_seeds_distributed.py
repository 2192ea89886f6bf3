"""Seed submission in the distributed profile: HTTP -> RQ job on a real `azr worker executor` -> PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
import redis
from proposer_servers import serve, settings_for
from rq.registry import FinishedJobRegistry, StartedJobRegistry
from test_seed_routes import HOSTILE_SYSTEM, INFINITE_LOOP
from throwaway_servers import wait_for

from executor_svc.rq_client import RQCodeExecutor
from services.algorithm.task_types import TaskType

SLOW_PROGRAM = "def f(n):\n    total = 0\n    for i in range(n):\n        total += i % 7\n    return total"
SLOW_INPUT = str(4 * 10**6)
"""About half a second per run here: long enough to kill the worker mid-job, well inside its 3 s limit."""


def test_seed_goes_through_rq_into_postgres_and_is_visible(distributed_api, cruxeval_rows, redis_url) -> None:
    connection = redis.Redis.from_url(redis_url)
    finished = FinishedJobRegistry(distributed_api.executor.queue.name, connection=connection)
    row = cruxeval_rows[10]
    with distributed_api.client() as client:
        assert client.get("/readyz").status_code == 200
        response = client.post("/v1/seeds", json={"kind": "program", "program": row["code"], "input": row["input"]})
        assert response.status_code == 201, response.text
        assert finished.count >= 1  # the validation ran as an RQ job, not in the API process
        ids = {o["buffer"]: o["id"] for o in response.json()["outcomes"]}
        for buffer, entry_id in ids.items():
            stored = distributed_api.store.get(TaskType(buffer), entry_id)
            assert stored is not None and stored.output == row["output"]
            assert client.get(f"/v1/buffers/{buffer}/{entry_id}").json()["output"] == row["output"]
        listed = client.get("/v1/buffers/abduction", params={"source": "user"}).json()
        assert [e["id"] for e in listed["entries"]] == [ids["abduction"]]
    connection.close()


def test_hostile_seeds_get_422_through_rq_and_nothing_is_stored(distributed_api) -> None:
    with distributed_api.client() as client:
        for program, status in ((HOSTILE_SYSTEM, "forbidden"), (INFINITE_LOOP, "timeout")):
            response = client.post("/v1/seeds", json={"kind": "program", "program": program, "input": "1"})
            assert response.status_code == 422, response.text
            assert response.json()["status"] == status
    assert [distributed_api.store.count(t) for t in TaskType] == [0, 0, 0]


@pytest.mark.slow
def test_worker_sigkilled_mid_validation_gives_retry_or_clean_5xx(distributed_api, executor_workers, redis_url) -> None:
    connection = redis.Redis.from_url(redis_url)
    no_retry = RQCodeExecutor(connection, queue_name=executor_workers.queue, timeout_s=3, retries=0, wait_s=120)
    fragile = serve(settings_for("fragile-token"), distributed_api.store, no_retry)
    retried_seed = {"kind": "program", "program": SLOW_PROGRAM, "input": SLOW_INPUT, "buffers": ["deduction"]}
    lost_seed = {"kind": "program", "program": SLOW_PROGRAM + "  # no retry", "input": SLOW_INPUT,
                 "buffers": ["deduction"]}
    results: dict[str, httpx.Response] = {}
    started = StartedJobRegistry(executor_workers.queue, connection=connection)
    with fragile as fragile_url:
        def post(name: str, url: str, token: str, body: dict[str, Any]) -> None:
            results[name] = httpx.post(f"{url}/v1/seeds", json=body, headers={"Authorization": f"Bearer {token}"},
                                       timeout=180)

        threads = [threading.Thread(target=post,
                                    args=("retried", distributed_api.url, distributed_api.token, retried_seed)),
                   threading.Thread(target=post, args=("lost", fragile_url, "fragile-token", lost_seed))]
        for thread in threads:
            thread.start()
        wait_for(lambda: started.count == 2, 60, "both validations running on the two workers")
        for process in list(executor_workers.processes):
            executor_workers.kill(process)
        executor_workers.start("rescuer")
        for thread in threads:
            thread.join(timeout=180)
    retried, lost = results["retried"], results["lost"]
    assert retried.status_code == 201, retried.text  # RQ retried the abandoned job on the rescuer
    (outcome,) = retried.json()["outcomes"]
    stored = distributed_api.store.get(TaskType.DEDUCTION, outcome["id"])
    assert stored is not None and stored.program == SLOW_PROGRAM
    assert lost.status_code == 503 and lost.json()["dependency"] == "executor", lost.text
    assert "Abandoned" in lost.json()["reason"]
    entries, total = distributed_api.store.list_entries(TaskType.DEDUCTION, limit=10)
    assert total == 1 and [e.id for e in entries] == [outcome["id"]]  # reported == stored, nothing else
    connection.close()
