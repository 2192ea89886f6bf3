"""Off-policy guard: episodes sampled by weights too many versions old are dropped, not trained on."""

from __future__ import annotations

from collections.abc import Sequence

from services.records import Episode


def is_stale(episode: Episode, current_version: int, max_staleness: int) -> bool:
    """True when the episode's policy version is below ``current_version − max_staleness``."""
    return episode.policy_version < current_version - max_staleness


def split_stale(episodes: Sequence[Episode], current_version: int, max_staleness: int
                ) -> tuple[list[Episode], list[Episode]]:
    """(fresh episodes, stale episodes), each in input order."""
    fresh = [e for e in episodes if not is_stale(e, current_version, max_staleness)]
    stale = [e for e in episodes if is_stale(e, current_version, max_staleness)]
    return fresh, stale
