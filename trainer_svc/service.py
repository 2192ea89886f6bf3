"""The distributed trainer loop over an EpisodeQueue: fill a batch, then run the update cycle on it
(trainer_svc/update_cycle.py: update → push bf16 weights and publish → every k updates the full checkpoint → then
acknowledge), while keeping every inference server on the current weights (trainer_svc/server_sync.py).

What this loop adds to the cycle:
- Batches: B episodes of each (task type x role) group (`BatchPool`); extras wait for the next batch.
- Deliveries re-handed while waiting in the pool or awaiting a checkpoint are folded into the same episode; those of
  episodes already in a durable checkpoint are acknowledged as duplicates.
- Stale episodes (policy version < current − max_staleness) and malformed ones are acknowledged and counted, with a
  log line saying why: they are deliberately not trained on, and redelivering them would change nothing.
- Between reads, every `server_check_every_s` seconds, each server's `/model_info` weight version is compared with
  the current one and a server that is behind (restarted, or down during a push) gets the weights again.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from services.json_types import JsonObject
from services.ports import AppliedEpisodeLog, EpisodeQueue, InferenceEngine, MetricSink, PolicyVersionBoard
from services.records import Episode
from services.records.updates import UpdateReport
from services.settings import LoraSettings, RolloutSettings, TrainerSettings
from trainer_svc.batch_pool import BatchPool
from trainer_svc.batching import BatchError, check_episode
from trainer_svc.prometheus_metrics import TrainerMetrics
from trainer_svc.resume import LoadedPolicy
from trainer_svc.server_sync import ServerSync
from trainer_svc.staleness import is_stale
from trainer_svc.update_cycle import Applied, ServiceCounters, UpdateCycle
from trainer_svc.weight_export import PushForm

__all__ = ["METRICS_FILE", "ServiceCounters", "TrainerService"]

log = logging.getLogger(__name__)

METRICS_FILE = "trainer_metrics.jsonl"


def push_form(settings: LoraSettings, engines: Sequence[InferenceEngine]) -> PushForm:
    """`adapter` when the policy has LoRA adapters and its only engines apply adapters themselves (the embedded
    run's llama.cpp engine), else `merged` (SGLang servers, the torch engine)."""
    from services.inference.llama_cpp_engine import LlamaCppEngine

    if settings.lora_rank > 0 and engines and all(isinstance(engine, LlamaCppEngine) for engine in engines):
        return "adapter"
    return "merged"


class TrainerService:
    """Consumes episodes from ``queue`` and trains ``loaded.trainer`` on complete batches of B per group."""

    def __init__(self, *, loaded: LoadedPolicy, settings: TrainerSettings, rollout: RolloutSettings,
                 settings_record: JsonObject, queue: EpisodeQueue, applied_log: AppliedEpisodeLog, run_dir: Path,
                 engines: Sequence[InferenceEngine] = (), board: PolicyVersionBoard | None = None,
                 consumer: str = "trainer", read_count: int = 64, metrics: TrainerMetrics | None = None,
                 sinks: Sequence[MetricSink] = ()) -> None:
        """Batches of the rollouts' B episodes per group, no episode staler than their `max_staleness`;
        `settings_record`: the run's resolved settings, saved in every full checkpoint; `sinks`: also write every
        update's line there (TensorBoard, W&B), keys prefixed `trainer/`, step = the trainer's step."""
        self.loaded = loaded
        self.sinks = list(sinks)
        self.last_applied: Applied | None = None  # the latest update: its report, pushed weights, checkpoint
        self.trainer = loaded.trainer
        self.settings = settings
        self.max_staleness = rollout.max_staleness
        self.queue = queue
        self.run_dir = Path(run_dir)
        self.consumer = consumer
        self.read_count = read_count
        self.pool = BatchPool(per_group=rollout.batch_size)
        self.counters = ServiceCounters()
        self.sync = ServerSync(engines, check_every_s=settings.server_check_every_s)
        self.cycle = UpdateCycle(loaded=loaded, settings=settings, settings_record=settings_record, queue=queue,
                                 applied_log=applied_log, run_dir=self.run_dir, sync=self.sync, board=board,
                                 counters=self.counters, push_form=push_form(settings.lora, engines))
        self._stale_since_update = 0
        self._vocab_size = int(getattr(self.trainer.model.config, "vocab_size", 0) or 0)
        self.metrics = metrics
        if metrics is not None:
            metrics.watch(self)

    # ------------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Bring the board and the servers to the trainer's version (after a restore: its checkpoint's)."""
        self.cycle.start()

    def run(self, *, max_updates: int | None = None, stop: threading.Event | None = None,
            block_s: float = 1.0) -> list[UpdateReport]:
        """Loop until ``max_updates`` updates are done or ``stop`` is set (checked between reads; an update in
        progress finishes); then the updates not yet in a full checkpoint are committed."""
        self.start()
        reports: list[UpdateReport] = []
        while (max_updates is None or len(reports) < max_updates) and not (stop is not None and stop.is_set()):
            report = self.step(block_s=block_s)
            if report is not None:
                reports.append(report)
            self.sync.check()
        self.cycle.commit()
        return reports

    # ------------------------------------------------------------------------------------------------ one step

    def poll(self, block_s: float, read_count: int | None = None) -> list[str]:
        """Read one round of deliveries into the pool (applying the rules: duplicates, rejections, staleness);
        returns the ids of the episodes delivered."""
        deliveries = self.queue.read(self.consumer, read_count or self.read_count, block_s)
        ack_now: list[str] = []
        for delivery in deliveries:
            episode = delivery.episode
            self.counters.read += 1
            if episode.id in self.pool:
                self.pool.add(episode, delivery.delivery_id)
            elif self.cycle.holds(episode.id):
                self.cycle.hold_delivery(delivery.delivery_id)
            elif self.cycle.already_applied(episode):
                self.cycle.acknowledge_duplicate(episode, delivery.delivery_id)
            elif reason := self._rejection(episode):
                self.counters.rejected += 1
                log.error("episode %s rejected, not trained on: %s", episode.id, reason)
                ack_now.append(delivery.delivery_id)
            elif is_stale(episode, self.trainer.policy_version, self.max_staleness):
                self._count_stale(episode)
                ack_now.append(delivery.delivery_id)
            else:
                self.pool.add(episode, delivery.delivery_id)
        self._ack(ack_now)
        return [delivery.episode.id for delivery in deliveries]

    def step(self, block_s: float = 1.0) -> UpdateReport | None:
        """Poll once; when every group has B episodes, run the cycle on them. None otherwise."""
        self.poll(block_s)
        batch = self.pool.take_batch()
        if batch is None:
            return None
        return self._apply(batch.episodes, batch.delivery_ids)

    def train_on(self, episode_ids: set[str]) -> UpdateReport | None:
        """The embedded profile's step-synchronous update: read until every one of `episode_ids` (one step's
        episodes, already published) has been delivered, then train on those the rules let through, whatever their
        count per group, in id order. None when none is left (all duplicates of applied ones, stale or rejected).
        RuntimeError when the queue runs dry first: the step published fewer episodes than it said."""
        seen: set[str] = set()
        while not episode_ids <= seen:
            delivered = self.poll(0.0, read_count=max(len(episode_ids), 1) * 2)
            if not delivered:
                missing = len(episode_ids - seen)
                raise RuntimeError(f"the queue handed out {len(episode_ids) - missing} of the {len(episode_ids)} "
                                   f"episodes the step published")
            seen.update(delivered)
        batch = self.pool.take(episode_ids)
        if not batch.episodes:
            return None
        return self._apply(batch.episodes, batch.delivery_ids)

    def _apply(self, episodes: list[Episode], delivery_ids: list[str]) -> UpdateReport:
        """Run the update cycle on one batch; count, log and write the metrics line."""
        applied = self.cycle.apply(episodes, delivery_ids, stale_dropped=self._stale_since_update)
        self.last_applied = applied
        self._stale_since_update = 0
        if self.metrics is not None:
            self.metrics.observe_update(applied.report)
        self._drop_stale_waiting()
        self._write_metrics(applied.report, applied.weights, applied.checkpoint)
        return applied.report

    def commit(self) -> Path | None:
        """Write the full checkpoint now and acknowledge what it holds (also done when the loop ends)."""
        return self.cycle.commit()

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
                 episode.policy_version, self.trainer.policy_version, self.max_staleness)

    def _drop_stale_waiting(self) -> None:
        """Episodes that went stale while waiting for their batch (the version just moved) leave the pool."""
        doomed = [e for e in self.pool.waiting()
                  if is_stale(e, self.trainer.policy_version, self.max_staleness)]
        ack_ids: list[str] = []
        for episode in doomed:
            self._count_stale(episode)
            ack_ids += self.pool.remove(episode.id)
        self._ack(ack_ids)

    def _ack(self, delivery_ids: list[str]) -> None:
        if delivery_ids:
            self.queue.ack(delivery_ids)
            self.counters.acked += len(delivery_ids)

    def _write_metrics(self, report: UpdateReport, weights: Path, checkpoint: Path | None) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        line = report.model_dump(mode="json")
        line["weights"] = str(weights)
        line["checkpoint"] = str(checkpoint) if checkpoint else None
        line["published_version"] = self.trainer.policy_version
        with open(self.run_dir / METRICS_FILE, "a") as fh:
            fh.write(json.dumps(line) + "\n")
        if self.sinks:
            prefixed = {"step": report.step, **{f"trainer/{key}": value for key, value in line.items()}}
            for sink in self.sinks:
                sink.write(prefixed)
