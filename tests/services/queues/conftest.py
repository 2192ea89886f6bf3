"""Fixtures of the queue tests: both EpisodeQueue adapters behind one fixture, on private Redis keys."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from services.algorithm.task_types import Role, TaskType
from services.records import Episode


def delete_run_keys(client: redis.Redis, run_id: str) -> None:
    """Delete only this test's keys (`azr:{run_id}:*`)."""
    keys = list(client.scan_iter(match=f"azr:{run_id}:*", count=500))
    if keys:
        client.delete(*keys)


@pytest.fixture()
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the real Redis server."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture()
def run_id(request: pytest.FixtureRequest) -> Iterator[str]:
    """A unique run id; its Redis keys are deleted afterwards when Redis was used."""
    value = f"qtest-{uuid.uuid4().hex[:12]}"
    yield value
    if "redis_client" in request.fixturenames:
        delete_run_keys(request.getfixturevalue("redis_client"), value)


@pytest.fixture()
def make_episodes(shared_dir: Path) -> Callable[..., list[Episode]]:
    """Episodes whose text is a real CRUXEval program, so payloads have realistic size and characters."""
    rows = [json.loads(line) for line in (shared_dir / "data" / "cruxeval.jsonl").open() if line.strip()][:64]

    def build(count: int, run: str = "r", step: int = 3) -> list[Episode]:
        episodes = []
        for index in range(count):
            row = rows[index % len(rows)]
            episodes.append(Episode(
                id=str(uuid.uuid4()), run_id=run, step=step, task_type=list(TaskType)[index % 3],
                role=list(Role)[index % 2], prompt_ids=list(range(index, index + 16)), response_ids=[7, 8, index],
                behaviour_logprobs=[-0.5, -1.25, -0.125], reward=1.0 if index % 2 else -0.5, policy_version=2,
                text=row["code"], task_id=row["id"], exec_status="ok",
            ))
        return episodes

    return build
