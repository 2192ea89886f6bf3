"""Fixtures of the proposer_api tests: real stores, real executors, a real uvicorn server, real HTTP (httpx)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from proposer_servers import RunningApi, serve, settings_for
from throwaway_servers import ExecutorWorkers, PrivateDatabase, wait_for

from executor_svc.executor import Executor
from executor_svc.rq_client import RQCodeExecutor
from services.execution import ExecutionLimits
from services.http.ops import redis_check


@pytest.fixture(scope="session")
def cruxeval_rows(shared_dir: Path) -> list[dict[str, str]]:
    """The CRUXEval programs with their inputs and outputs (all valid, deterministic)."""
    return [json.loads(line) for line in (shared_dir / "data" / "cruxeval.jsonl").open() if line.strip()]


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Executor]:
    """One in-process sandbox pool for the embedded-profile tests (3 s limit keeps `while True` short)."""
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=3)) as executor:
        yield executor


@pytest.fixture()
def embedded_api(tmp_path: Path, sandbox: Executor) -> Iterator[RunningApi]:
    """The embedded profile: a SQLite store in a temporary file and the in-process sandbox."""
    from services.store import open_store

    token = f"tok-{uuid.uuid4().hex}"
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    try:
        with serve(settings_for(token, max_request_bytes=4096), store, sandbox) as url:
            yield RunningApi(url, token, store, sandbox)
    finally:
        store.close()


@pytest.fixture()
def postgres_store(postgres_url: str) -> Iterator[Any]:
    """A store on a private database of the shared PostgreSQL, dropped afterwards."""
    from services.store import open_store

    with PrivateDatabase(postgres_url) as url:
        store = open_store(url, create=True)
        try:
            yield store
        finally:
            store.close()


@pytest.fixture()
def executor_workers(redis_url: str) -> Iterator[ExecutorWorkers]:
    """`azr worker executor` processes on a private RQ queue of the shared Redis (start them in the test)."""
    workers = ExecutorWorkers(redis_url, timeout_s=3)
    connection = redis.Redis.from_url(redis_url)
    try:
        yield workers
    finally:
        workers.stop_all()
        from rq import Queue

        Queue(workers.queue, connection=connection).empty()
        connection.close()


@pytest.fixture()
def distributed_api(postgres_store: Any, executor_workers: ExecutorWorkers, redis_url: str) -> Iterator[RunningApi]:
    """The distributed profile: PostgreSQL store, executor jobs through RQ to two real workers."""
    executor_workers.start("a")
    executor_workers.start("b")
    connection = redis.Redis.from_url(redis_url)
    executor = RQCodeExecutor(connection, queue_name=executor_workers.queue, timeout_s=3, retries=2, wait_s=120)
    token = f"tok-{uuid.uuid4().hex}"
    app_settings = settings_for(token, profile="distributed", redis_url=redis_url)
    try:
        with serve(app_settings, postgres_store, executor, extra_checks={"redis": redis_check(connection)}) as url:
            wait_for(lambda: httpx.get(f"{url}/readyz").status_code == 200, 60, "the executor workers registered", 0.2)
            # /readyz needs one worker; tests that kill both mid-job need both listening, or one takes every job.
            wait_for(lambda: executor_workers.registered(connection) == 2, 60, "both executor workers registered", 0.2)
            yield RunningApi(url, token, postgres_store, executor)
    finally:
        connection.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def api(request: pytest.FixtureRequest, sandbox: Executor) -> Iterator[RunningApi]:
    """The proposer API over a fresh SQLite file or a private PostgreSQL database (each test runs on both)."""
    from services.store import open_store

    if request.param == "postgresql":
        store = request.getfixturevalue("postgres_store")
    else:
        store = open_store(f"sqlite:///{request.getfixturevalue('tmp_path') / 'buffers.sqlite3'}", create=True)
        request.addfinalizer(store.close)
    token = f"tok-{uuid.uuid4().hex}"
    with serve(settings_for(token), store, sandbox) as url:
        yield RunningApi(url, token, store, sandbox)
