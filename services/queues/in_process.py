"""The embedded EpisodeQueue: thread-safe, in memory, with the Redis queue's at-least-once semantics.

A delivery not acknowledged within `claim_after_s` is handed out again to whichever consumer reads next (the
consumer that held it is presumed dead), with its delivery count raised. Episodes are kept as JSON, so a consumer
never shares a mutable object with the publisher. Limit: nothing survives the process.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from services.ports import Delivery
from services.records import Episode


@dataclass
class _Lease:
    consumer: str
    delivered_at: float
    deliveries: int


class InProcessEpisodeQueue:
    """EpisodeQueue for one process (the embedded profile); same contract as RedisEpisodeQueue."""

    def __init__(self, claim_after_s: float = 60.0) -> None:
        if claim_after_s <= 0:
            raise ValueError(f"claim_after_s must be positive, got {claim_after_s}")
        self.claim_after_s = claim_after_s
        self._changed = threading.Condition()
        self._ids = itertools.count(1)
        self._payloads: dict[str, str] = {}  # every unacknowledged entry: id -> Episode JSON
        self._new: deque[str] = deque()  # published, never delivered
        self._leases: dict[str, _Lease] = {}  # delivered, unacknowledged; insertion order = id order

    def publish(self, episodes: Sequence[Episode]) -> list[str]:
        """Append episodes; returns their delivery ids."""
        with self._changed:
            ids = []
            for episode in episodes:
                entry_id = str(next(self._ids))
                self._payloads[entry_id] = episode.model_dump_json()
                self._new.append(entry_id)
                ids.append(entry_id)
            self._changed.notify_all()
            return ids

    def read(self, consumer: str, max_count: int, block_s: float) -> list[Delivery]:
        """Overdue deliveries first, then new ones; waits up to `block_s` when there is neither."""
        if max_count < 1:
            raise ValueError(f"max_count must be at least 1, got {max_count}")
        deadline = time.monotonic() + max(0.0, block_s)
        with self._changed:
            while True:
                now = time.monotonic()
                taken = self._reclaim(consumer, max_count, now)
                while self._new and len(taken) < max_count:
                    entry_id = self._new.popleft()
                    self._leases[entry_id] = _Lease(consumer, now, 1)
                    taken.append(entry_id)
                if taken or now >= deadline:
                    return [Delivery(delivery_id=entry_id,
                                     episode=Episode.model_validate_json(self._payloads[entry_id]),
                                     deliveries=self._leases[entry_id].deliveries) for entry_id in taken]
                self._changed.wait(timeout=max(0.0, min(deadline, self._next_claim_due(deadline)) - now))

    def ack(self, delivery_ids: Sequence[str]) -> int:
        """Forget applied deliveries; returns how many were pending."""
        with self._changed:
            acknowledged = 0
            for entry_id in delivery_ids:
                if self._leases.pop(entry_id, None) is not None:
                    self._payloads.pop(entry_id, None)
                    acknowledged += 1
            return acknowledged

    def pending(self) -> int:
        """Deliveries handed out and not yet acknowledged."""
        with self._changed:
            return len(self._leases)

    def depth(self) -> int:
        """Episodes published and not yet handed out."""
        with self._changed:
            return len(self._new)

    def _reclaim(self, consumer: str, max_count: int, now: float) -> list[str]:
        taken: list[str] = []
        for entry_id, lease in self._leases.items():
            if len(taken) >= max_count:
                break
            if now - lease.delivered_at >= self.claim_after_s:
                lease.consumer, lease.delivered_at, lease.deliveries = consumer, now, lease.deliveries + 1
                taken.append(entry_id)
        return taken

    def _next_claim_due(self, otherwise: float) -> float:
        if not self._leases:
            return otherwise
        return min(lease.delivered_at for lease in self._leases.values()) + self.claim_after_s
