"""The two small channels beside the episode queue: the trainer's dedup log and the policy-version board.

The `EpisodeQueue` protocol itself lives in `services/ports.py`; these two are only used by the coordinator and the
trainer, so they are declared here with their adapters.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from services.records import Episode


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
    """Where the trainer publishes the policy version it last pushed to the inference servers."""

    def publish(self, version: int) -> int:
        """Make `version` current; republishing the current one is a no-op, going backwards raises ValueError."""

    def current(self) -> int:
        """The current policy version: 0 (the base model) until the trainer publishes one."""


class PolicyVersionRegression(ValueError):
    """A publisher tried to move the policy version backwards (a stale trainer, or two trainers on one run)."""


def check_policy_version(version: int) -> None:
    """Refuse negative or non-integer versions with a clear error."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"policy version must be a non-negative integer, got {version!r}")
