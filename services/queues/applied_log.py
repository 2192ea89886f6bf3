"""The trainer's record of applied episodes: detects the second application of a redelivered episode by its id.

Redis: one SET per step, `azr:{run_id}:applied:{step}`, written with SADD (1 = first time). Sharding by step lets
old sets expire (`ttl_s`, refreshed on every write) instead of one set growing for the whole run; a redelivered
episode carries the same step as the first delivery, so it always meets its own set. An episode redelivered after
its set expired would not be detected, but it is by then far older than `max_staleness` and dropped as stale.

Both operations ride through a short Redis outage (`redis_outages`). Marking is idempotent in effect (the
trainer reads `was_applied`, never the first-time flag, which a retry after a lost reply would get wrong).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import redis

from services.queues.keys import applied_set_key
from services.queues.redis_outages import RedisOutagePolicy
from services.records import Episode


class RedisAppliedEpisodeLog:
    """AppliedEpisodeLog in Redis SETs, shared by every trainer process of a run."""

    def __init__(self, redis_client: redis.Redis, run_id: str, ttl_s: int = 7 * 24 * 3600,
                 outages: RedisOutagePolicy | None = None) -> None:
        if ttl_s < 1:
            raise ValueError(f"ttl_s must be at least 1 s, got {ttl_s}")
        self.redis = redis_client
        self.run_id = run_id
        self.ttl_s = ttl_s
        self.outages = outages or RedisOutagePolicy()

    def mark_applied(self, episode: Episode) -> bool:
        """Record `episode.id`; True the first time, False when already recorded."""
        return self.mark_applied_many([episode])[0]

    def mark_applied_many(self, episodes: Sequence[Episode]) -> list[bool]:
        """SADD each id to its step's set (and refresh the sets' expiry) in one transaction."""
        if not episodes:
            return []

        def mark() -> list[bool]:
            pipe = self.redis.pipeline(transaction=True)
            for episode in episodes:
                pipe.sadd(applied_set_key(self.run_id, episode.step), episode.id)
            for step in {episode.step for episode in episodes}:
                pipe.expire(applied_set_key(self.run_id, step), self.ttl_s)
            replies = pipe.execute()
            return [int(added) == 1 for added in replies[: len(episodes)]]

        return self.outages.call(f"marking {len(episodes)} episodes applied", mark)

    def was_applied(self, episode: Episode) -> bool:
        """Whether `episode.id` is recorded."""
        return bool(self.outages.call("reading the applied-episode log", lambda: self.redis.sismember(
            applied_set_key(self.run_id, episode.step), episode.id)))


class InProcessAppliedEpisodeLog:
    """AppliedEpisodeLog in a set, for the embedded profile (lives as long as the process)."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def mark_applied(self, episode: Episode) -> bool:
        """Record `episode.id`; True the first time, False when already recorded."""
        return self.mark_applied_many([episode])[0]

    def mark_applied_many(self, episodes: Sequence[Episode]) -> list[bool]:
        """`mark_applied` for each episode, in order (a repeated id within the batch is False the second time)."""
        with self._lock:
            fresh = []
            for episode in episodes:
                fresh.append(episode.id not in self._ids)
                self._ids.add(episode.id)
            return fresh

    def was_applied(self, episode: Episode) -> bool:
        """Whether `episode.id` is recorded."""
        with self._lock:
            return episode.id in self._ids
