"""The distributed coordinator's wait for the trainer (`SelfPlayLoop.wait_for_policy`) on a real Redis policy-version
board: it says what it waits for (the version it needs, the one published, how long it has waited) when it starts
waiting and periodically after, and stops at its deadline with the same facts."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from services.coordinator.loop import LoopOptions, SelfPlayLoop
from services.coordinator.step_metrics import MetricsLog
from services.queues import RedisPolicyVersionBoard


@pytest.fixture
def board(redis_url: str) -> Iterator[RedisPolicyVersionBoard]:
    client = redis.Redis.from_url(redis_url)
    made = RedisPolicyVersionBoard(client, f"wait-test-{uuid.uuid4().hex[:12]}")
    yield made
    client.delete(made.key)
    client.close()


def waiting_loop(board: RedisPolicyVersionBoard, tmp_path: Path, said: list[str], wait_s: float) -> SelfPlayLoop:
    options = LoopOptions(steps=1, seed=0, seed_target=1, seed_max_rounds=0, max_staleness=1, version_wait_s=wait_s,
                          version_log_every_s=0.3)
    return SelfPlayLoop(run_id="wait", step_runner=None, store=None, metrics=MetricsLog(tmp_path / "m.jsonl"),
                        options=options, versions=board, progress=said.append)


def test_the_wait_names_the_version_it_needs_and_the_one_it_sees(board: RedisPolicyVersionBoard,
                                                                 tmp_path: Path) -> None:
    board.publish(2)
    said: list[str] = []
    loop = waiting_loop(board, tmp_path, said, wait_s=30)
    publisher = threading.Timer(1.2, lambda: board.publish(4))
    publisher.start()
    began = time.monotonic()
    loop.wait_for_policy(6)  # needs 6 - 1 - 1 = 4
    publisher.join()
    assert time.monotonic() - began >= 1.0 and loop.policy_version == 4
    assert len(said) >= 3, said  # at once, then every 0.3 s
    assert all("step 6: waiting for the trainer to publish policy version 4" in line and "published: 2" in line
               for line in said), said


def test_a_wait_past_its_deadline_fails_saying_what_was_missing(board: RedisPolicyVersionBoard,
                                                                tmp_path: Path) -> None:
    said: list[str] = []
    loop = waiting_loop(board, tmp_path, said, wait_s=0.8)
    with pytest.raises(TimeoutError, match=r"has not published policy version 3 \(at 0\) after \d+ s"):
        loop.wait_for_policy(5)
    assert said and "published: 0" in said[0]
