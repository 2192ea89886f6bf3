"""The trainer's applied-episode log and the policy-version board, both adapters under one contract."""

from __future__ import annotations

import threading

import pytest

from services.ports import PolicyVersionRegression
from services.queues import (
    InProcessAppliedEpisodeLog,
    InProcessEpisodeQueue,
    InProcessPolicyVersionBoard,
    RedisAppliedEpisodeLog,
    RedisEpisodeQueue,
    RedisPolicyVersionBoard,
    open_applied_episode_log,
    open_episode_queue,
    open_policy_version_board,
)
from services.queues.keys import applied_set_key
from services.settings import Settings


@pytest.fixture(params=["inprocess", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture()
def settings_and_client(backend: str, request: pytest.FixtureRequest):
    if backend == "inprocess":
        return Settings(queue_backend="inprocess"), None
    client = request.getfixturevalue("redis_client")
    return Settings(queue_backend="redis", run_id=request.getfixturevalue("run_id")), client


def test_factories_pick_the_backend(settings_and_client, backend) -> None:
    settings, client = settings_and_client
    expected = {
        "inprocess": (InProcessEpisodeQueue, InProcessAppliedEpisodeLog, InProcessPolicyVersionBoard),
        "redis": (RedisEpisodeQueue, RedisAppliedEpisodeLog, RedisPolicyVersionBoard),
    }[backend]
    built = (open_episode_queue(settings.storage, settings.run.run_id, client),
             open_applied_episode_log(settings.storage, settings.run.run_id, client),
             open_policy_version_board(settings.storage, settings.run.run_id, client))
    assert tuple(type(item) for item in built) == expected


def test_applied_log_detects_the_second_application(settings_and_client, make_episodes) -> None:
    settings, client = settings_and_client
    log = open_applied_episode_log(settings.storage, settings.run.run_id, client)
    first, second, third = make_episodes(3)
    assert log.was_applied(first) is False
    assert log.mark_applied(first) is True
    assert log.was_applied(first) is True
    assert log.mark_applied(first) is False
    assert log.mark_applied_many([second, first, third, second]) == [True, False, True, False]


def test_applied_log_under_concurrent_trainers_admits_each_episode_once(settings_and_client, make_episodes) -> None:
    settings, client = settings_and_client
    log = open_applied_episode_log(settings.storage, settings.run.run_id, client)
    episodes = make_episodes(40)
    admitted: list[str] = []
    lock = threading.Lock()

    def apply_all() -> None:
        fresh = log.mark_applied_many(episodes)
        with lock:
            admitted.extend(e.id for e, ok in zip(episodes, fresh) if ok)

    threads = [threading.Thread(target=apply_all) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(admitted) == sorted(e.id for e in episodes)


def test_redis_applied_sets_are_per_step_and_expire(redis_client, run_id, make_episodes) -> None:
    log = RedisAppliedEpisodeLog(redis_client, run_id, ttl_s=120)
    log.mark_applied_many(make_episodes(2, step=5) + make_episodes(1, step=6))
    assert redis_client.scard(applied_set_key(run_id, 5)) == 2
    assert redis_client.scard(applied_set_key(run_id, 6)) == 1
    assert 0 < redis_client.ttl(applied_set_key(run_id, 5)) <= 120


def test_policy_version_moves_forward_only(settings_and_client) -> None:
    settings, client = settings_and_client
    board = open_policy_version_board(settings.storage, settings.run.run_id, client)
    reader = open_policy_version_board(settings.storage, settings.run.run_id, client) if client is not None else board
    assert reader.current() == 0
    assert board.publish(3) == 3
    assert board.publish(3) == 3
    assert reader.current() == 3
    with pytest.raises(PolicyVersionRegression, match="older than the published 3"):
        board.publish(2)
    with pytest.raises(ValueError):
        board.publish(-1)
    assert reader.current() == 3


def test_a_restored_trainer_rewinds_the_version_and_publishing_goes_forward_from_there(settings_and_client) -> None:
    settings, client = settings_and_client
    board = open_policy_version_board(settings.storage, settings.run.run_id, client)
    reader = open_policy_version_board(settings.storage, settings.run.run_id, client) if client is not None else board
    board.publish(5)
    assert board.rewind(3) == 3 and reader.current() == 3
    assert board.publish(4) == 4 and reader.current() == 4
    with pytest.raises(PolicyVersionRegression):
        board.publish(3)
    with pytest.raises(ValueError):
        board.rewind(-1)


def test_redis_policy_version_is_announced_on_its_channel(redis_client, run_id) -> None:
    board = RedisPolicyVersionBoard(redis_client, run_id)
    subscriber = redis_client.pubsub(ignore_subscribe_messages=True)
    subscriber.subscribe(board.channel)
    try:
        subscriber.get_message(timeout=1)  # consume the subscribe confirmation
        board.publish(7)
        message = subscriber.get_message(timeout=5)
        assert message is not None and message["data"] == b"7"
    finally:
        subscriber.close()
