"""Redis-only behaviour of the episode stream: a SIGKILLed consumer process, dead letters, bounded growth."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import redis

from services.queues import RedisAppliedEpisodeLog, RedisEpisodeQueue
from services.queues.keys import episode_stream_key
from services.records import RECORD_SCHEMA_VERSION

REPO_ROOT = Path(__file__).resolve().parents[3]

DOOMED_TRAINER = textwrap.dedent("""
    import sys, time, redis
    from services.queues import RedisAppliedEpisodeLog, RedisEpisodeQueue
    url, run_id = sys.argv[1], sys.argv[2]
    client = redis.Redis.from_url(url)
    queue = RedisEpisodeQueue(client, run_id, claim_after_s=0.5)
    log = RedisAppliedEpisodeLog(client, run_id)
    deliveries = queue.read("doomed", max_count=100, block_s=5)
    fresh = log.mark_applied_many([d.episode for d in deliveries])  # applied to the weights...
    print(len(deliveries), sum(fresh), flush=True)
    time.sleep(600)  # ...and killed before acknowledging
""")


def test_sigkilled_consumer_process_gets_its_episodes_redelivered_and_deduplicated(redis_client, redis_url, run_id,
                                                                                   make_episodes) -> None:
    queue = RedisEpisodeQueue(redis_client, run_id, claim_after_s=0.5)
    log = RedisAppliedEpisodeLog(redis_client, run_id)
    episodes = make_episodes(6)
    queue.publish(episodes)
    doomed = subprocess.Popen([sys.executable, "-c", DOOMED_TRAINER, redis_url, run_id], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert doomed.stdout is not None
        assert doomed.stdout.readline().split() == ["6", "6"]
        assert queue.pending() == 6
    finally:
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
    time.sleep(0.6)
    redelivered = queue.read("survivor", max_count=100, block_s=0)
    assert sorted(d.episode.id for d in redelivered) == sorted(e.id for e in episodes)
    assert all(d.deliveries == 2 for d in redelivered)
    assert log.mark_applied_many([d.episode for d in redelivered]) == [False] * 6  # second application detected
    assert queue.ack([d.delivery_id for d in redelivered]) == 6
    assert (queue.pending(), queue.depth()) == (0, 0)


def test_malformed_entries_are_dead_lettered_with_a_reason_and_acknowledged(redis_client, run_id,
                                                                            make_episodes) -> None:
    queue = RedisEpisodeQueue(redis_client, run_id, claim_after_s=5)
    key = episode_stream_key(run_id)
    good = make_episodes(2)
    queue.publish(good[:1])
    redis_client.xadd(key, {"episode": "{not json"})
    redis_client.xadd(key, {"something": "else"})
    future = good[1].model_copy(update={"schema_version": RECORD_SCHEMA_VERSION + 1})
    redis_client.xadd(key, {"episode": future.model_dump_json()})
    queue.publish(good[1:])
    deliveries = queue.read("trainer", max_count=10, block_s=0)
    assert [d.episode.id for d in deliveries] == [good[0].id, good[1].id]
    dead = queue.dead_letters()
    assert len(dead) == 3
    assert "not an Episode" in dead[0]["reason"] and dead[0]["payload"] == "{not json"
    assert "no 'episode' field" in dead[1]["reason"]
    assert f"schema_version {RECORD_SCHEMA_VERSION + 1}" in dead[2]["reason"]
    assert queue.pending() == 2  # the bad entries were acknowledged, only the good ones wait
    queue.ack([d.delivery_id for d in deliveries])
    assert redis_client.xlen(key) == 0


def test_acknowledged_entries_leave_the_stream(redis_client, run_id, make_episodes) -> None:
    queue = RedisEpisodeQueue(redis_client, run_id, claim_after_s=5)
    key = episode_stream_key(run_id)
    queue.publish(make_episodes(50))
    for _ in range(5):
        batch = queue.read("trainer", max_count=10, block_s=0)
        # out-of-order acknowledgement: the later half first, as two consumers would
        queue.ack([d.delivery_id for d in batch[5:]])
        queue.ack([d.delivery_id for d in batch[:5]])
    assert redis_client.xlen(key) == 0
    assert queue.depth() == 0


def test_a_lost_group_is_recreated_on_read(redis_client, run_id, make_episodes) -> None:
    queue = RedisEpisodeQueue(redis_client, run_id, claim_after_s=5)
    redis_client.delete(episode_stream_key(run_id))  # what a Redis restart without persistence leaves
    assert queue.read("trainer", max_count=5, block_s=0) == []
    episode = make_episodes(1)[0]
    queue.publish([episode])
    assert [d.episode.id for d in queue.read("trainer", max_count=5, block_s=0)] == [episode.id]


def test_entries_are_plain_episode_json_with_schema_version(redis_client: redis.Redis, run_id, make_episodes) -> None:
    queue = RedisEpisodeQueue(redis_client, run_id)
    episode = make_episodes(1)[0]
    (entry_id,) = queue.publish([episode])
    ((_, fields),) = redis_client.xrange(episode_stream_key(run_id), min=entry_id, max=entry_id)
    assert f'"schema_version":{RECORD_SCHEMA_VERSION}'.encode() in fields[b"episode"]


def test_a_consumer_restarted_under_its_name_gets_its_unacknowledged_entries_at_once(redis_client, run_id,
                                                                                    make_episodes) -> None:
    """A restarted trainer (a new queue object, same consumer name) reads what its previous process never
    acknowledged on its first read, without waiting `claim_after_s` for XAUTOCLAIM; it does not get them again."""
    episodes = make_episodes(5)
    before = RedisEpisodeQueue(redis_client, run_id, claim_after_s=3600)
    before.publish(episodes)
    held = before.read("trainer", max_count=100, block_s=1)
    assert len(held) == 5
    before.ack([held[0].delivery_id])  # applied and acknowledged before the crash; the other 4 were not

    restarted = RedisEpisodeQueue(redis_client, run_id, claim_after_s=3600)
    started = time.monotonic()
    again = restarted.read("trainer", max_count=2, block_s=1) + restarted.read("trainer", max_count=100, block_s=1)
    assert time.monotonic() - started < 1.5  # not held back for claim_after_s
    assert [d.episode.id for d in again] == [e.id for e in episodes[1:]]
    assert all(d.deliveries >= 2 for d in again)
    assert restarted.read("trainer", max_count=100, block_s=0.2) == []  # held now: not delivered a third time
    assert RedisEpisodeQueue(redis_client, run_id, claim_after_s=3600).read("other", 100, 0.2) == []
