"""The distributed EpisodeQueue: a Redis Stream `azr:{run_id}:episodes` read through a consumer group.

Delivery is at least once. A queue object's first reads by a consumer name return what that name holds unacknowledged
(XREADGROUP from id 0): a trainer restarted under its name gets the deliveries its previous process never
acknowledged at once, not after `claim_after_s`. Then `read` takes over entries another consumer has held
unacknowledged for longer than `claim_after_s` (XAUTOCLAIM: that consumer is presumed dead), then reads new ones
(XREADGROUP `>`). The trainer detects a second application by `Episode.id` (`services.queues.applied_log`).

Growth: `ack` does XACK and XDEL of exactly the acknowledged entries, in one MULTI. Trimming by MINID or MAXLEN
instead would be unsafe with several consumers: acknowledgements arrive out of order, and trimming up to the
newest acknowledged id would drop older entries still pending elsewhere. With XDEL the stream holds only entries
not yet delivered or not yet acknowledged, so `depth` is XLEN minus the pending count.

An entry that does not parse as an Episode of this schema version is copied to `azr:{run_id}:episodes:dead` with
the reason and the raw payload, then acknowledged and deleted: never silently dropped, never redelivered forever.

A short Redis outage is ridden through (`redis_outages`): each operation is retried with a log line until
Redis answers or the outage has lasted `outages.outage_s`. Publishing again after a lost reply may append an episode
twice; the trainer applies an id once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import redis
from pydantic import ValidationError

from services.ports import Delivery
from services.queues.keys import as_text, dead_letter_key, episode_stream_key
from services.queues.redis_outages import RedisOutagePolicy
from services.records import RECORD_SCHEMA_VERSION, Episode

EPISODE_FIELD = "episode"
"""Stream entry field holding the Episode JSON (the model carries its schema_version)."""

EntryFields = Mapping[bytes | str, bytes | str] | None
"""A stream entry's fields as the client replies them: bytes, or text when the client decodes."""


class RedisEpisodeQueue:
    """EpisodeQueue over a Redis Stream with a consumer group (docs/design.md §3)."""

    def __init__(self, redis_client: redis.Redis, run_id: str, group: str = "trainer",
                 claim_after_s: float = 60.0, outages: RedisOutagePolicy | None = None) -> None:
        if claim_after_s <= 0:
            raise ValueError(f"claim_after_s must be positive, got {claim_after_s}")
        self.redis = redis_client
        self.run_id = run_id
        self.key = episode_stream_key(run_id)
        self.dead_key = dead_letter_key(run_id)
        self.group = group
        self.claim_after_ms = max(1, int(claim_after_s * 1000))
        self.outages = outages or RedisOutagePolicy()
        self._own_cursor: dict[str, str | None] = {}  # per consumer: where its own pending entries' read stands
        self.outages.call("creating the episode stream's group", self.ensure_group)

    def ensure_group(self) -> None:
        """Create the stream and the group if absent (a Redis restart without persistence loses both)."""
        try:
            self.redis.xgroup_create(self.key, self.group, id="0", mkstream=True)
        except redis.ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise

    # --- the port ----------------------------------------------------------------------------------------------------
    def publish(self, episodes: Sequence[Episode]) -> list[str]:
        """Append episodes as JSON entries in one round trip; returns their stream ids."""
        if not episodes:
            return []
        payloads = [episode.model_dump_json() for episode in episodes]

        def append() -> list[str]:
            pipe = self.redis.pipeline(transaction=False)
            for payload in payloads:
                pipe.xadd(self.key, {EPISODE_FIELD: payload})
            return [as_text(entry_id) for entry_id in pipe.execute()]

        return self.outages.call(f"publishing {len(payloads)} episodes", append)

    def read(self, consumer: str, max_count: int, block_s: float) -> list[Delivery]:
        """Reclaimed entries of dead consumers first, then new entries; blocks up to `block_s` only when none."""
        if max_count < 1:
            raise ValueError(f"max_count must be at least 1, got {max_count}")

        def read_once() -> list[Delivery]:
            try:
                return self._read(consumer, max_count, block_s)
            except redis.ResponseError as error:
                if "NOGROUP" not in str(error):
                    raise
                self.ensure_group()
                return self._read(consumer, max_count, block_s)

        return self.outages.call("reading episodes", read_once)

    def ack(self, delivery_ids: Sequence[str]) -> int:
        """XACK and XDEL the applied entries atomically; returns how many were still pending."""
        if not delivery_ids:
            return 0

        def acknowledge() -> int:
            pipe = self.redis.pipeline(transaction=True)
            pipe.xack(self.key, self.group, *delivery_ids)
            pipe.xdel(self.key, *delivery_ids)
            acknowledged, _deleted = pipe.execute()
            return int(acknowledged)

        return self.outages.call(f"acknowledging {len(delivery_ids)} episodes", acknowledge)

    # `pending` and `depth` are read at scrape time: not retried, a scrape during an outage fails rather than hangs.
    def pending(self) -> int:
        """Entries delivered to some consumer and not yet acknowledged."""
        return int(self.redis.xpending(self.key, self.group)["pending"])

    def depth(self) -> int:
        """Entries published and not yet delivered: the stream holds only those and the pending ones."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.xlen(self.key)
        pipe.xpending(self.key, self.group)
        length, summary = pipe.execute()
        return int(length) - int(summary["pending"])

    # --- inspection --------------------------------------------------------------------------------------------------
    def dead_letters(self, limit: int = 100) -> list[dict[str, str]]:
        """The oldest dead-lettered entries: original id, reason, raw payload."""
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]], self.redis.xrange(self.dead_key, count=limit))
        return [{as_text(k): as_text(v) for k, v in fields.items()} for _entry_id, fields in entries]

    # --- internals ---------------------------------------------------------------------------------------------------
    def _read(self, consumer: str, max_count: int, block_s: float) -> list[Delivery]:
        deliveries = self._own_pending(consumer, max_count)
        deliveries += self._reclaim(consumer, max_count - len(deliveries)) if len(deliveries) < max_count else []
        wanted = max_count - len(deliveries)
        if wanted <= 0:
            return deliveries
        # Redis reads BLOCK 0 as "forever": only block when nothing was reclaimed and a positive wait was asked.
        block_ms = max(1, int(block_s * 1000)) if block_s > 0 and not deliveries else None
        # a synchronous client: a list of [stream, entries] (RESP2) or a dict of them (RESP3), or None on timeout
        reply: Any = self.redis.xreadgroup(self.group, consumer, {self.key: ">"}, count=wanted, block=block_ms)
        streams = reply.items() if isinstance(reply, dict) else (reply or [])
        for _stream, entries in streams:
            for entry_id, fields in entries:
                delivery = self._delivery(as_text(entry_id), fields, deliveries=1)
                if delivery is not None:
                    deliveries.append(delivery)
        return deliveries

    def _own_pending(self, consumer: str, max_count: int) -> list[Delivery]:
        """What ``consumer`` held unacknowledged before this queue object existed (a previous process under the same
        name), in pages, until it is all read; nothing after that (what this process holds it already has)."""
        cursor = self._own_cursor.setdefault(consumer, "0")
        if cursor is None:
            return []
        reply: Any = self.redis.xreadgroup(self.group, consumer, {self.key: cursor}, count=max_count)
        streams = reply.items() if isinstance(reply, dict) else (reply or [])
        entries = [(as_text(entry_id), fields) for _stream, found in streams for entry_id, fields in found]
        self._own_cursor[consumer] = entries[-1][0] if len(entries) == max_count else None
        return self._deliveries(entries)

    def _reclaim(self, consumer: str, max_count: int) -> list[Delivery]:
        claimed: list[tuple[str, EntryFields]] = []
        start = "0-0"
        while len(claimed) < max_count:
            reply = self.redis.xautoclaim(self.key, self.group, consumer, self.claim_after_ms, start_id=start,
                                          count=max_count - len(claimed))
            next_start, entries = as_text(reply[0]), reply[1]
            claimed.extend((as_text(entry_id), fields) for entry_id, fields in entries)
            if next_start == "0-0":
                break
            start = next_start
        return self._deliveries(claimed)

    def _deliveries(self, entries: list[tuple[str, EntryFields]]) -> list[Delivery]:
        """Entries delivered before (reclaimed or re-read), as deliveries with their delivery counts."""
        if not entries:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for entry_id, _fields in entries:
            pipe.xpending_range(self.key, self.group, min=entry_id, max=entry_id, count=1)
        counts = [rows[0]["times_delivered"] if rows else 2 for rows in pipe.execute()]
        deliveries = []
        for (entry_id, fields), times in zip(entries, counts):
            delivery = self._delivery(entry_id, fields, deliveries=int(times))
            if delivery is not None:
                deliveries.append(delivery)
        return deliveries

    def _delivery(self, entry_id: str, fields: EntryFields, deliveries: int) -> Delivery | None:
        """Parse one entry; dead-letter and acknowledge it when it is not a readable Episode."""
        decoded = {as_text(k): as_text(v) for k, v in (fields or {}).items()}
        payload = decoded.get(EPISODE_FIELD)
        if payload is None:
            self._dead_letter(entry_id, decoded, f"entry has no {EPISODE_FIELD!r} field")
            return None
        try:
            episode = Episode.model_validate_json(payload)
        except ValidationError as error:
            first = error.errors()[0]
            self._dead_letter(entry_id, decoded, f"not an Episode: {first['loc']}: {first['msg']}")
            return None
        if episode.schema_version != RECORD_SCHEMA_VERSION:
            self._dead_letter(entry_id, decoded,
                              f"schema_version {episode.schema_version}, this consumer reads {RECORD_SCHEMA_VERSION}")
            return None
        return Delivery(delivery_id=entry_id, episode=episode, deliveries=deliveries)

    def _dead_letter(self, entry_id: str, fields: dict[str, str], reason: str) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.xadd(self.dead_key, {"source_id": entry_id, "reason": reason,
                                  "payload": fields.get(EPISODE_FIELD, repr(fields))})
        pipe.xack(self.key, self.group, entry_id)
        pipe.xdel(self.key, entry_id)
        pipe.execute()
