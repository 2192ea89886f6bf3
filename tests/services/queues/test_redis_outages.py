"""A Redis restart in the middle of a call is ridden through, not a crash: the coordinator's and the trainer's Redis
adapters retry with a log line until Redis answers again, and fail with Redis's error only past `outage_s`.

Each test owns a real `redis-server` on a spare loopback port (with an append-only file, as a deployment runs it),
SIGKILLs it, makes the call while it is down, and starts it again a moment later on the same port.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from throwaway_servers import ThrowawayRedis, throwaway_redis

from executor_svc.rq_client import RQCodeExecutor
from services.queues import RedisAppliedEpisodeLog, RedisEpisodeQueue, RedisPolicyVersionBoard
from services.queues.redis_outages import RedisOutagePolicy

DOWN_S = 1.5
"""How long each outage lasts."""


@pytest.fixture()
def own_redis() -> Iterator[ThrowawayRedis]:
    yield from throwaway_redis(aof=True)


@pytest.fixture()
def client(own_redis: ThrowawayRedis) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(own_redis.url, socket_connect_timeout=1, socket_timeout=5)
    yield connection
    connection.close()


def during_a_restart(server: ThrowawayRedis, call: Callable[[], Any],
                     after_restart: Callable[[], None] | None = None) -> tuple[Any, float]:
    """Kill Redis, run `call` while it is down, start Redis again after DOWN_S (then `after_restart`); the call's
    result and duration."""
    server.stop()
    outcome: dict[str, Any] = {}

    def run() -> None:
        began = time.monotonic()
        try:
            outcome["result"] = call()
        except Exception as error:  # handed to the test below, which fails with it
            outcome["error"] = error
        outcome["took_s"] = time.monotonic() - began

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(DOWN_S)
    assert thread.is_alive(), f"the call ended while Redis was down: {outcome}"
    server.start()
    if after_restart is not None:
        after_restart()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the call did not return after Redis came back"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"], outcome["took_s"]


def test_the_coordinator_publishes_episodes_through_a_restart(own_redis, client, make_episodes, caplog) -> None:
    queue = RedisEpisodeQueue(client, "outage", claim_after_s=30, outages=RedisOutagePolicy(outage_s=30))
    before, during = make_episodes(2), make_episodes(3)
    queue.publish(before)
    with caplog.at_level(logging.WARNING, logger="services.queues.redis_outages"):
        ids, took_s = during_a_restart(own_redis, lambda: queue.publish(during))
    assert len(ids) == 3 and took_s >= DOWN_S
    assert "redis unavailable during publishing 3 episodes" in caplog.text
    assert "redis answers again: publishing 3 episodes done after an outage of" in caplog.text
    delivered = queue.read("trainer", 10, 0.5)  # what was written before and during the outage, once each
    assert sorted(d.episode.id for d in delivered) == sorted(e.id for e in before + during)


@pytest.mark.slow
def test_the_trainer_reads_acks_and_marks_through_restarts(own_redis, client, make_episodes, caplog) -> None:
    outages = RedisOutagePolicy(outage_s=30)
    queue = RedisEpisodeQueue(client, "outage", claim_after_s=30, outages=outages)
    applied = RedisAppliedEpisodeLog(client, "outage", outages=outages)
    board = RedisPolicyVersionBoard(client, "outage", outages=outages)
    episodes = make_episodes(4)
    queue.publish(episodes)
    board.publish(1)
    with caplog.at_level(logging.WARNING, logger="services.queues.redis_outages"):
        delivered, _ = during_a_restart(own_redis, lambda: queue.read("trainer", 10, 0.5))
        assert sorted(d.episode.id for d in delivered) == sorted(e.id for e in episodes)
        assert during_a_restart(own_redis, lambda: board.publish(2))[0] == 2  # the Lua script is loaded again
        during_a_restart(own_redis, lambda: applied.mark_applied_many(episodes))
        assert during_a_restart(own_redis, lambda: [applied.was_applied(e) for e in episodes])[0] == [True] * 4
        assert during_a_restart(own_redis, lambda: queue.ack([d.delivery_id for d in delivered]))[0] == 4
        assert during_a_restart(own_redis, board.current)[0] == 2
    for what in ("reading episodes", "publishing policy version 2", "marking 4 episodes applied",
                 "reading the applied-episode log", "acknowledging 4 episodes", "reading the policy version"):
        assert f"redis unavailable during {what}" in caplog.text, what
    assert queue.pending() == 0 and queue.read("trainer", 10, 0.1) == []


def test_an_outage_longer_than_outage_s_fails_with_redis_error(own_redis, client, caplog) -> None:
    board = RedisPolicyVersionBoard(client, "outage", outages=RedisOutagePolicy(outage_s=1.0, first_wait_s=0.1))
    own_redis.stop()
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="services.queues.redis_outages"), pytest.raises(redis.ConnectionError):
        board.current()
    assert time.monotonic() - began >= 1.0
    assert "redis still unavailable after" in caplog.text and "giving up" in caplog.text


def test_without_a_ride_through_the_first_failure_is_final(own_redis, client) -> None:
    """What the issue saw: the adapters failed on the first refused connection (APIs keep this, to answer 503)."""
    board = RedisPolicyVersionBoard(client, "outage", outages=RedisOutagePolicy(outage_s=0))
    own_redis.stop()
    with pytest.raises(redis.ConnectionError):
        board.current()


@pytest.mark.slow
def test_the_coordinators_executor_jobs_ride_through_a_restart(own_redis, client) -> None:
    """An RQ executor job enqueued while Redis is down is enqueued once it is back, and its result waited for.
    The worker is an RQ worker: Redis going away ends it a few seconds later, and its supervisor starts another
    (compose's `restart: on-failure`; here a second worker joins as soon as Redis is back)."""
    from throwaway_servers import ExecutorWorkers

    workers = ExecutorWorkers(own_redis.url, timeout_s=3)
    workers.start("a")
    executor = RQCodeExecutor(client, queue_name=workers.queue, timeout_s=3, retries=1, wait_s=60,
                              outages=RedisOutagePolicy(outage_s=30))

    def supervise() -> None:
        workers.start("b")

    try:
        assert executor.validate_proposal("def f(x):\n    return x + 1", "1").output == "2"  # the worker is up
        result, _ = during_a_restart(own_redis, lambda: executor.validate_proposal("def f(x):\n    return x * 3",
                                                                                   "2"), after_restart=supervise)
        assert result.output == "6"
    finally:
        workers.stop_all()
