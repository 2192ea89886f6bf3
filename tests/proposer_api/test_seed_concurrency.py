"""Concurrent submission of the same seeds: the store's de-duplication holds under real contention on PostgreSQL.

The executor here is the in-process sandbox pool: what is under test is the API + PostgreSQL path (512 requests);
the RQ path is covered by test_seeds_distributed.py and would only make this test slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from proposer_servers import RunningApi, serve, settings_for

from services.algorithm.task_types import TaskType

SEEDS = 64  # each of the 8 clients submits all of them, each from its own starting point


@pytest.fixture()
def postgres_api(postgres_store: Any, sandbox: Any) -> Iterator[RunningApi]:
    with serve(settings_for("concurrency-token"), postgres_store, sandbox) as url:
        yield RunningApi(url, "concurrency-token", postgres_store, sandbox)


@pytest.mark.slow
def test_eight_clients_submitting_the_same_64_seeds_store_64_rows(postgres_api, cruxeval_rows) -> None:
    seeds = [{"kind": "program", "program": row["code"], "input": row["input"]} for row in cruxeval_rows[:SEEDS]]
    assert len({(s["program"], s["input"]) for s in seeds}) == SEEDS

    def submit_all(order: int) -> list[int]:
        shuffled = seeds[order * 8:] + seeds[:order * 8]  # each client starts elsewhere: real contention
        with postgres_api.client() as client:
            return [client.post("/v1/seeds", json=seed).status_code for seed in shuffled]

    with ThreadPoolExecutor(max_workers=8) as clients:
        statuses = [code for codes in clients.map(submit_all, range(8)) for code in codes]
    assert set(statuses) <= {200, 201}
    assert statuses.count(201) >= SEEDS  # every seed was created by exactly one client in at least one buffer...
    assert postgres_api.store.count(TaskType.DEDUCTION) == SEEDS  # ...and stored exactly once per buffer
    assert postgres_api.store.count(TaskType.ABDUCTION) == SEEDS
    with postgres_api.client(token=None) as client:
        page = client.get("/v1/buffers/deduction", params={"limit": 500}).json()
    assert page["total"] == SEEDS and len({e["id"] for e in page["entries"]}) == SEEDS
