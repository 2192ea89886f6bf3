"""One contract for both EpisodeQueue adapters: the Redis Stream and the in-process queue."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from services.ports import EpisodeQueue
from services.queues import InProcessEpisodeQueue, RedisEpisodeQueue

CLAIM_AFTER_S = 0.3


@pytest.fixture(params=["inprocess", "redis"])
def queue_factory(request: pytest.FixtureRequest) -> Callable[[], EpisodeQueue]:
    """Builds queues of one backend sharing one stream (Redis) or one object (in-process), like processes would."""
    if request.param == "inprocess":
        shared = InProcessEpisodeQueue(claim_after_s=CLAIM_AFTER_S)
        return lambda: shared
    client: redis.Redis = request.getfixturevalue("redis_client")
    run = request.getfixturevalue("run_id")
    return lambda: RedisEpisodeQueue(client, run, claim_after_s=CLAIM_AFTER_S)


def test_publish_read_ack_round_trip(queue_factory, make_episodes) -> None:
    queue = queue_factory()
    episodes = make_episodes(5)
    ids = queue.publish(episodes)
    assert len(set(ids)) == 5
    assert (queue.depth(), queue.pending()) == (5, 0)
    deliveries = queue.read("trainer-a", max_count=3, block_s=0)
    assert [d.episode for d in deliveries] == episodes[:3]
    assert [d.delivery_id for d in deliveries] == ids[:3]
    assert all(d.deliveries == 1 for d in deliveries)
    assert (queue.depth(), queue.pending()) == (2, 3)
    assert queue.ack([d.delivery_id for d in deliveries]) == 3
    assert queue.ack([deliveries[0].delivery_id]) == 0  # a second ack finds nothing pending
    rest = queue.read("trainer-a", max_count=10, block_s=0)
    assert [d.episode.id for d in rest] == [e.id for e in episodes[3:]]
    assert queue.ack([d.delivery_id for d in rest]) == 2
    assert (queue.depth(), queue.pending()) == (0, 0)


def test_empty_read_returns_nothing_after_blocking(queue_factory) -> None:
    queue = queue_factory()
    assert queue.read("trainer-a", max_count=4, block_s=0) == []
    assert queue.read("trainer-a", max_count=4, block_s=0.05) == []
    with pytest.raises(ValueError):
        queue.read("trainer-a", max_count=0, block_s=0)


def test_blocking_read_wakes_on_publish(queue_factory, make_episodes) -> None:
    reader, writer = queue_factory(), queue_factory()
    episode = make_episodes(1)[0]
    timer = threading.Timer(0.2, lambda: writer.publish([episode]))
    timer.start()
    try:
        deliveries = reader.read("trainer-a", max_count=1, block_s=10)
    finally:
        timer.join()
    assert [d.episode.id for d in deliveries] == [episode.id]


def test_unacknowledged_delivery_goes_to_another_consumer_after_claim_time(queue_factory, make_episodes) -> None:
    queue = queue_factory()
    episodes = make_episodes(4)
    queue.publish(episodes)
    held = queue.read("dying", max_count=4, block_s=0)
    queue.ack([held[0].delivery_id])  # applied one, then died holding three
    assert queue.read("survivor", max_count=4, block_s=0) == []  # not overdue yet: nobody steals live work
    time.sleep(CLAIM_AFTER_S + 0.1)
    again = queue.read("survivor", max_count=4, block_s=0)
    assert [d.episode.id for d in again] == [e.id for e in episodes[1:]]
    assert [d.delivery_id for d in again] == [d.delivery_id for d in held[1:]]
    assert all(d.deliveries == 2 for d in again)
    assert queue.ack([d.delivery_id for d in again]) == 3
    assert (queue.depth(), queue.pending()) == (0, 0)


def test_reclaimed_entries_come_before_new_ones(queue_factory, make_episodes) -> None:
    queue = queue_factory()
    old, new = make_episodes(2), make_episodes(2)
    queue.publish(old)
    queue.read("dying", max_count=2, block_s=0)
    time.sleep(CLAIM_AFTER_S + 0.1)
    queue.publish(new)
    deliveries = queue.read("survivor", max_count=3, block_s=0)
    assert [d.episode.id for d in deliveries] == [old[0].id, old[1].id, new[0].id]
    assert [d.deliveries for d in deliveries] == [2, 2, 1]


def test_concurrent_consumers_split_the_work_without_duplicates(queue_factory, make_episodes) -> None:
    queue = queue_factory()
    episodes = make_episodes(120)
    queue.publish(episodes)
    seen: list[str] = []
    lock = threading.Lock()

    def consume(name: str) -> None:
        own = queue_factory()
        while True:
            batch = own.read(name, max_count=7, block_s=0)
            if not batch:
                return
            with lock:
                seen.extend(d.episode.id for d in batch)
            own.ack([d.delivery_id for d in batch])

    threads = [threading.Thread(target=consume, args=(f"c{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen) == sorted(e.id for e in episodes)
    assert (queue.depth(), queue.pending()) == (0, 0)
