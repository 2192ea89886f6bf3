"""Deliveries waiting for a batch: B episodes per (task type x role) group make a batch; extras wait for the next.

One episode may arrive under several delivery ids (the queue re-hands a delivery held longer than its claim
timeout); the pool keeps the episode once and remembers every delivery id so all of them are acknowledged.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from services.algorithm.task_types import TASK_GROUPS, Role, TaskType
from services.records import Episode


@dataclass
class PooledBatch:
    """A complete batch: the episodes (6·B, in group order) and every delivery id that carried them."""

    episodes: list[Episode]
    delivery_ids: list[str]


@dataclass
class BatchPool:
    """Per-group FIFO of episodes waiting to be trained on."""

    per_group: int
    _groups: dict[tuple[TaskType, Role], OrderedDict[str, Episode]] = field(default_factory=dict)
    _delivery_ids: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.per_group < 1:
            raise ValueError(f"per_group must be >= 1, got {self.per_group}")
        self._groups = {group: OrderedDict() for group in TASK_GROUPS}

    def __contains__(self, episode_id: str) -> bool:
        return episode_id in self._delivery_ids

    def __len__(self) -> int:
        return len(self._delivery_ids)

    def add(self, episode: Episode, delivery_id: str) -> bool:
        """Pool the episode; False (only the delivery id recorded) when the same episode id is already waiting."""
        if episode.id in self._delivery_ids:
            self._delivery_ids[episode.id].append(delivery_id)
            return False
        self._groups[(episode.task_type, episode.role)][episode.id] = episode
        self._delivery_ids[episode.id] = [delivery_id]
        return True

    def counts(self) -> dict[str, int]:
        """Waiting episodes per group, keyed `task_type/role`."""
        return {f"{t.value}/{r.value}": len(q) for (t, r), q in self._groups.items()}

    def is_complete(self) -> bool:
        """Whether every group has at least B episodes."""
        return all(len(q) >= self.per_group for q in self._groups.values())

    def remove(self, episode_id: str) -> list[str]:
        """Take one episode out (e.g. gone stale while waiting); returns its delivery ids."""
        for queue in self._groups.values():
            queue.pop(episode_id, None)
        return self._delivery_ids.pop(episode_id, [])

    def waiting(self) -> list[Episode]:
        """Every waiting episode, oldest first within each group."""
        return [e for q in self._groups.values() for e in q.values()]

    def take_batch(self) -> PooledBatch | None:
        """The oldest B episodes of each group, removed from the pool; None until every group has B."""
        if not self.is_complete():
            return None
        episodes: list[Episode] = []
        delivery_ids: list[str] = []
        for queue in self._groups.values():
            for _ in range(self.per_group):
                _, episode = queue.popitem(last=False)
                episodes.append(episode)
                delivery_ids += self._delivery_ids.pop(episode.id)
        return PooledBatch(episodes=episodes, delivery_ids=delivery_ids)

    def take(self, episode_ids: set[str]) -> PooledBatch:
        """Those of `episode_ids` that wait here, removed, in id order (the embedded profile trains on exactly one
        step's episodes, whatever their count per group; id order makes a replay train on the same batch in the same
        order)."""
        chosen = sorted(episode_id for episode_id in episode_ids if episode_id in self._delivery_ids)
        episodes = [next(q[i] for q in self._groups.values() if i in q) for i in chosen]
        delivery_ids: list[str] = []
        for episode_id in chosen:
            delivery_ids += self.remove(episode_id)
        return PooledBatch(episodes=episodes, delivery_ids=delivery_ids)
