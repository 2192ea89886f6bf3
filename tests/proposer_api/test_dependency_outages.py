"""PostgreSQL and Redis stopped and restarted under a running proposer_api (our own throwaway servers only)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import redis
from proposer_servers import serve, settings_for
from throwaway_servers import (
    ExecutorWorkers,
    ThrowawayPostgres,
    ThrowawayRedis,
    throwaway_postgres,
    throwaway_redis,
    wait_for,
)

from executor_svc.rq_client import RQCodeExecutor
from services.algorithm.task_types import TaskType
from services.http.ops import READINESS_TTL_S, redis_check

pytestmark = pytest.mark.slow


@pytest.fixture()
def own_postgres() -> Iterator[ThrowawayPostgres]:
    yield from throwaway_postgres()


@pytest.fixture()
def own_redis() -> Iterator[ThrowawayRedis]:
    yield from throwaway_redis()


def seed_body(row: dict[str, str]) -> dict[str, str]:
    return {"kind": "program", "program": row["code"], "input": row["input"]}


def readiness(client: httpx.Client) -> tuple[int, dict[str, str]]:
    response = client.get("/readyz")
    return response.status_code, response.json()["failures"]


def readiness_once_settled(client: httpx.Client, status: int) -> tuple[int, dict[str, str]]:
    """/readyz after it has turned `status`: it answers from checks at most READINESS_TTL_S old."""
    wait_for(lambda: readiness(client)[0] == status, READINESS_TTL_S + 10, f"/readyz {status}", interval_s=0.2)
    return readiness(client)


def test_postgres_outage_turns_readiness_503_and_writes_resume(own_postgres, sandbox, cruxeval_rows) -> None:
    from services.store import open_store

    store = open_store(own_postgres.url, create=True)
    try:
        with serve(settings_for("pg-token"), store, sandbox) as url, \
                httpx.Client(base_url=url, headers={"Authorization": "Bearer pg-token"}, timeout=60) as client:
            assert readiness(client) == (200, {})
            assert client.post("/v1/seeds", json=seed_body(cruxeval_rows[20])).status_code == 201
            own_postgres.stop()
            status, failures = readiness_once_settled(client, 503)
            assert status == 503 and set(failures) == {"database"}
            down = client.post("/v1/seeds", json=seed_body(cruxeval_rows[21]))
            assert down.status_code == 503 and down.json()["dependency"] == "database", down.text
            assert client.get("/v1/buffers").status_code == 503
            assert client.get("/healthz").status_code == 200  # alive all along
            own_postgres.start()
            wait_for(lambda: readiness(client)[0] == 200, 30, "readiness after PostgreSQL restarted", interval_s=0.5)
            resumed = client.post("/v1/seeds", json=seed_body(cruxeval_rows[21]))
            assert resumed.status_code == 201, resumed.text
            assert client.post("/v1/seeds", json=seed_body(cruxeval_rows[20])).status_code == 200  # survived
        assert store.count(TaskType.DEDUCTION) == 2
    finally:
        store.close()


def test_redis_outage_turns_readiness_503_and_writes_resume(own_redis, postgres_store, cruxeval_rows) -> None:
    workers = ExecutorWorkers(own_redis.url, timeout_s=3)
    connection = redis.Redis.from_url(own_redis.url, socket_connect_timeout=2, socket_timeout=10)
    executor = RQCodeExecutor(connection, queue_name=workers.queue, timeout_s=3, retries=1, wait_s=60)
    app_settings = settings_for("redis-token", profile="distributed", redis_url=own_redis.url)
    try:
        workers.start("a")
        with serve(app_settings, postgres_store, executor, extra_checks={"redis": redis_check(connection)}) as url, \
                httpx.Client(base_url=url, headers={"Authorization": "Bearer redis-token"}, timeout=90) as client:
            wait_for(lambda: readiness(client)[0] == 200, 60, "an executor worker registered")
            assert client.post("/v1/seeds", json=seed_body(cruxeval_rows[30])).status_code == 201
            own_redis.stop()
            status, failures = readiness_once_settled(client, 503)
            assert status == 503 and {"redis", "executor"} <= set(failures), failures
            down = client.post("/v1/seeds", json=seed_body(cruxeval_rows[31]))
            assert down.status_code == 503 and down.json()["dependency"] == "redis", down.text
            assert client.get("/v1/buffers").status_code == 200  # reads need only the database
            own_redis.start()
            # A restarted Redis without persistence has forgotten the worker's registration: the old worker exits
            # or lingers unregistered (see the report). As its supervisor would, replace it.
            for process in workers.processes:
                if process.poll() is None:
                    workers.kill(process)
            assert readiness(client)[0] == 503  # Redis answers, but no executor worker is registered yet
            workers.start("after-outage")
            wait_for(lambda: readiness(client)[0] == 200, 60, "readiness after Redis restarted", interval_s=0.5)
            resumed = client.post("/v1/seeds", json=seed_body(cruxeval_rows[31]))
            assert resumed.status_code == 201, resumed.text
        assert postgres_store.count(TaskType.DEDUCTION) == 2
    finally:
        workers.stop_all()
        connection.close()
