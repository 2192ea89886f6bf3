"""The trainer loop over an EpisodeQueue: fill a batch, update, checkpoint, push, publish, then acknowledge.

Exactly-once application over an at-least-once queue:
- A delivery is acknowledged only after the checkpoint containing its update is on disk and pushed, so a trainer
  killed at any earlier point gets its episodes again and restarts from the previous checkpoint without them.
- Each checkpoint stores the ids of the episodes applied since the one before; on restart those ids (they are in the
  restored weights) are skipped when redelivered, which covers a kill between the checkpoint and the acknowledgement.
- The applied-episode log (Redis SET / in-process set) is written after the checkpoint too, never before an update:
  marking first (as the log's contract suggests) would lose an episode whose update died with an unsaved trainer.
- Deliveries re-handed while waiting in the pool or awaiting a checkpoint are folded into the same episode.
Stale episodes (policy version < current − max_staleness) and malformed ones are acknowledged and counted, with a
log line saying why: they are deliberately not trained on, and redelivering them would change nothing.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.ports import EpisodeQueue, InferenceEngine
from services.queues.contracts import AppliedEpisodeLog
from services.records import Episode
from services.settings import Settings
from trainer_svc.batch_pool import BatchPool
from trainer_svc.batching import BatchError, check_episode
from trainer_svc.prometheus_metrics import TrainerMetrics
from trainer_svc.report import UpdateReport
from trainer_svc.resume import LoadedPolicy, checkpoint_trainer
from trainer_svc.staleness import is_stale
from trainer_svc.weight_push import VersionPublisher, push_weights

log = logging.getLogger(__name__)

METRICS_FILE = "trainer_metrics.jsonl"


@dataclass
class ServiceCounters:
    """What the loop did with the deliveries it read."""

    read: int = 0
    updates: int = 0
    checkpoints: int = 0
    stale_dropped: int = 0
    duplicates_skipped: int = 0
    rejected: int = 0
    acked: int = 0


class TrainerService:
    """Consumes episodes from ``queue`` and trains ``loaded.trainer`` on complete batches of B per group."""

    def __init__(self, *, loaded: LoadedPolicy, settings: Settings, queue: EpisodeQueue,
                 applied_log: AppliedEpisodeLog, run_dir: Path, engines: Sequence[InferenceEngine] = (),
                 publish: VersionPublisher | None = None, consumer: str = "trainer", read_count: int = 64,
                 metrics: TrainerMetrics | None = None) -> None:
        self.loaded = loaded
        self.trainer = loaded.trainer
        self.settings = settings
        self.queue = queue
        self.applied_log = applied_log
        self.run_dir = Path(run_dir)
        self.engines = list(engines)
        self.publish = publish
        self.consumer = consumer
        self.read_count = read_count
        self.pool = BatchPool(per_group=settings.batch_size)
        self.counters = ServiceCounters()
        self._in_restored_weights = set(loaded.applied_episode_ids)
        self._uncommitted: dict[str, Episode] = {}  # applied, not yet in a checkpoint
        self._uncommitted_deliveries: list[str] = []
        self._stale_since_update = 0
        self._vocab_size = int(getattr(self.trainer.model.config, "vocab_size", 0) or 0)
        self.metrics = metrics
        if metrics is not None:
            metrics.watch(self)

    # ------------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """After a restore, serve and publish the restored checkpoint (a kill may have come before its push)."""
        if self.loaded.restored:
            push_weights(self.loaded.source, self.trainer.policy_version, self.engines, self.publish)

    def run(self, *, max_updates: int | None = None, stop: threading.Event | None = None,
            block_s: float = 1.0) -> list[UpdateReport]:
        """Loop until ``max_updates`` updates are committed or ``stop`` is set (checked between reads; an update in
        progress finishes and is checkpointed first)."""
        self.start()
        reports: list[UpdateReport] = []
        while (max_updates is None or len(reports) < max_updates) and not (stop is not None and stop.is_set()):
            report = self.step(block_s=block_s)
            if report is not None:
                reports.append(report)
        if self._uncommitted:
            self.commit()
        return reports

    # ------------------------------------------------------------------------------------------------ one step

    def poll(self, block_s: float) -> int:
        """Read one round of deliveries into the pool; returns how many deliveries came."""
        deliveries = self.queue.read(self.consumer, self.read_count, block_s)
        ack_now: list[str] = []
        for delivery in deliveries:
            episode = delivery.episode
            self.counters.read += 1
            if episode.id in self.pool:
                self.pool.add(episode, delivery.delivery_id)
            elif episode.id in self._uncommitted:
                self._uncommitted_deliveries.append(delivery.delivery_id)
            elif episode.id in self._in_restored_weights or self.applied_log.was_applied(episode):
                self.applied_log.mark_applied_many([episode])
                self.counters.duplicates_skipped += 1
                log.info("episode %s already applied; acknowledging redelivery %s", episode.id, delivery.delivery_id)
                ack_now.append(delivery.delivery_id)
            elif reason := self._rejection(episode):
                self.counters.rejected += 1
                log.error("episode %s rejected, not trained on: %s", episode.id, reason)
                ack_now.append(delivery.delivery_id)
            elif is_stale(episode, self.trainer.policy_version, self.settings.max_staleness):
                self._count_stale(episode)
                ack_now.append(delivery.delivery_id)
            else:
                self.pool.add(episode, delivery.delivery_id)
        self._ack(ack_now)
        return len(deliveries)

    def step(self, block_s: float = 1.0) -> UpdateReport | None:
        """Poll once; when every group has B episodes, train on them (and checkpoint when due). None otherwise."""
        self.poll(block_s)
        batch = self.pool.take_batch()
        if batch is None:
            return None
        report = self.trainer.update(batch.episodes, stale_dropped=self._stale_since_update)
        self._stale_since_update = 0
        self.counters.updates += 1
        if self.metrics is not None:
            self.metrics.observe_update(report)
        for episode in batch.episodes:
            self._uncommitted[episode.id] = episode
        self._uncommitted_deliveries += batch.delivery_ids
        checkpoint = None
        if self.trainer.step % self.settings.checkpoint_every == 0:
            checkpoint = self.commit()
        self._write_metrics(report, checkpoint)
        return report

    def commit(self) -> Path:
        """Checkpoint as the next policy version, push and publish it, record the applied ids, then acknowledge."""
        version = self.trainer.policy_version + 1
        path = checkpoint_trainer(self.loaded, self.run_dir, self.settings, policy_version=version,
                                  applied_episode_ids=list(self._uncommitted))
        self.counters.checkpoints += 1
        push_weights(path, version, self.engines, self.publish)
        self.applied_log.mark_applied_many(list(self._uncommitted.values()))
        self._ack(self._uncommitted_deliveries)
        self._uncommitted.clear()
        self._uncommitted_deliveries = []
        self._drop_stale_waiting()
        return path

    # ------------------------------------------------------------------------------------------------ helpers

    def _rejection(self, episode: Episode) -> str | None:
        try:
            check_episode(episode)
        except BatchError as exc:
            return str(exc)
        if self._vocab_size:
            biggest = max(episode.prompt_ids + episode.response_ids)
            if biggest >= self._vocab_size or min(episode.prompt_ids + episode.response_ids) < 0:
                return f"token id {biggest} outside the model's vocabulary of {self._vocab_size}"
        return None

    def _count_stale(self, episode: Episode) -> None:
        self.counters.stale_dropped += 1
        self._stale_since_update += 1
        log.info("episode %s dropped as stale: policy version %d, trainer at %d, max staleness %d", episode.id,
                 episode.policy_version, self.trainer.policy_version, self.settings.max_staleness)

    def _drop_stale_waiting(self) -> None:
        """Episodes that went stale while waiting for their batch (the version just moved) leave the pool."""
        doomed = [e for e in self.pool.waiting()
                  if is_stale(e, self.trainer.policy_version, self.settings.max_staleness)]
        ack_ids: list[str] = []
        for episode in doomed:
            self._count_stale(episode)
            ack_ids += self.pool.remove(episode.id)
        self._ack(ack_ids)

    def _ack(self, delivery_ids: list[str]) -> None:
        if delivery_ids:
            self.queue.ack(delivery_ids)
            self.counters.acked += len(delivery_ids)

    def _write_metrics(self, report: UpdateReport, checkpoint: Path | None) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        line = report.model_dump(mode="json")
        line["checkpoint"] = str(checkpoint) if checkpoint else None
        line["published_version"] = self.trainer.policy_version
        with open(self.run_dir / METRICS_FILE, "a") as fh:
            fh.write(json.dumps(line) + "\n")
