"""Build the episode channels the storage settings ask for: Redis (distributed) or in-process (embedded), under the
run's key prefix.

In-process adapters are plain objects: the coordinator and the trainer of one process must share the instance
returned here, not call the factory twice.
"""

from __future__ import annotations

import redis

from services.ports import AppliedEpisodeLog, EpisodeQueue, PolicyVersionBoard
from services.queues.applied_log import InProcessAppliedEpisodeLog, RedisAppliedEpisodeLog
from services.queues.in_process import InProcessEpisodeQueue
from services.queues.policy_version import InProcessPolicyVersionBoard, RedisPolicyVersionBoard
from services.queues.redis_outages import RedisOutagePolicy
from services.queues.redis_stream import RedisEpisodeQueue
from services.settings import StorageSettings


def _client(settings: StorageSettings, redis_client: redis.Redis | None) -> redis.Redis:
    return redis_client if redis_client is not None else redis.Redis.from_url(settings.redis_url)


def outage_policy(settings: StorageSettings) -> RedisOutagePolicy:
    """How long the Redis adapters ride through an outage (`settings.redis_outage_s`)."""
    return RedisOutagePolicy(outage_s=settings.redis_outage_s)


def open_episode_queue(settings: StorageSettings, run_id: str,
                       redis_client: redis.Redis | None = None) -> EpisodeQueue:
    """The episode queue of run `run_id` for `settings.queue_backend`, with `settings.episode_claim_after_s`."""
    if settings.queue_backend == "redis":
        return RedisEpisodeQueue(_client(settings, redis_client), run_id,
                                 claim_after_s=settings.episode_claim_after_s, outages=outage_policy(settings))
    return InProcessEpisodeQueue(claim_after_s=settings.episode_claim_after_s)


def open_applied_episode_log(settings: StorageSettings, run_id: str,
                             redis_client: redis.Redis | None = None) -> AppliedEpisodeLog:
    """The trainer's applied-episode log of run `run_id` for `settings.queue_backend`."""
    if settings.queue_backend == "redis":
        return RedisAppliedEpisodeLog(_client(settings, redis_client), run_id,
                                      ttl_s=settings.applied_log_ttl_s, outages=outage_policy(settings))
    return InProcessAppliedEpisodeLog()


def open_policy_version_board(settings: StorageSettings, run_id: str,
                              redis_client: redis.Redis | None = None) -> PolicyVersionBoard:
    """The policy-version board of run `run_id` for `settings.queue_backend`."""
    if settings.queue_backend == "redis":
        return RedisPolicyVersionBoard(_client(settings, redis_client), run_id,
                                       outages=outage_policy(settings))
    return InProcessPolicyVersionBoard()
