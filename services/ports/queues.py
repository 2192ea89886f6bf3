"""The episode channels between the coordinator and the trainer (docs/design.md §3): the EpisodeQueue, the trainer's
AppliedEpisodeLog and the PolicyVersionBoard.

Adapters: `services.queues` (Redis, or in-process; same contracts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel

from services.records import Episode


class Delivery(BaseModel):
    """One episode handed to a consumer; `ack` it by `delivery_id` once applied."""

    delivery_id: str  # the queue's own id for this delivery (a stream entry id, or a counter)
    episode: Episode
    deliveries: int = 1  # how many times this entry has been handed out (>1 after a consumer died)


class EpisodeQueue(Protocol):
    """Completed episodes from the coordinator to the trainer, at least once (docs/design.md §3).

    An episode read but not acknowledged is handed out again after `claim_after_s` to any consumer of the
    group; the trainer detects a second application by `Episode.id`.
    """

    def publish(self, episodes: Sequence[Episode]) -> list[str]:
        """Append episodes; returns their delivery ids."""

    def read(self, consumer: str, max_count: int, block_s: float) -> list[Delivery]:
        """Up to `max_count` deliveries for `consumer`: first ones left unacknowledged by dead consumers, then new."""

    def ack(self, delivery_ids: Sequence[str]) -> int:
        """Acknowledge applied deliveries; returns how many were pending."""

    def pending(self) -> int:
        """Deliveries handed out and not yet acknowledged."""

    def depth(self) -> int:
        """Episodes published and not yet handed out."""


class AppliedEpisodeLog(Protocol):
    """Which episodes the trainer has already applied, so a redelivered one is not applied twice.

    At-least-once delivery means an episode read, applied, and not acknowledged before a crash comes back; the
    trainer calls `mark_applied` before applying and skips the episode when it returns False.
    """

    def mark_applied(self, episode: Episode) -> bool:
        """Record `episode.id` as applied; True the first time, False when it was already recorded."""

    def mark_applied_many(self, episodes: Sequence[Episode]) -> list[bool]:
        """`mark_applied` for each episode, in order, in one round trip."""

    def was_applied(self, episode: Episode) -> bool:
        """Whether `episode.id` is recorded, without recording it."""


class PolicyVersionBoard(Protocol):
    """Where the trainer publishes the policy version it last pushed to the inference servers; the distributed
    coordinator reads it (`current`) to keep generation at most `max_staleness` versions ahead of training."""

    def publish(self, version: int) -> int:
        """Make `version` current; republishing the current one is a no-op, going backwards raises
        PolicyVersionRegression (a ValueError)."""

    def current(self) -> int:
        """The current policy version: 0 (the base model) until the trainer publishes one."""

    def rewind(self, version: int) -> int:
        """Make `version` current even when it is older: only a trainer restored from its last full checkpoint does
        this, for versions it had published but never checkpointed (they are redone from redelivered episodes)."""


class PolicyVersionRegression(ValueError):
    """A publisher tried to move the policy version backwards (a stale trainer, or two trainers on one run)."""
