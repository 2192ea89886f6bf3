"""The one rule both trainer loops follow (the distributed `TrainerService` and the embedded `InProcessTrainer`):

    update → bf16 weights exported (with LoRA: base + adapters merged), pushed to every server, version published
           → every k-th update (`checkpoint_every`): the full resumable checkpoint, durable
           → only then: the episodes of every update it holds are marked applied and their deliveries acknowledged.

Exactly-once in effect over an at-least-once queue:
- An episode is acknowledged only once the full checkpoint holding its update is durable. A trainer killed before
  that restarts from the previous full checkpoint, gets the episode again (the queue redelivers what was never
  acknowledged) and applies it on top of the restored state: the update it made before the kill is gone with the
  process, so nothing is applied twice and nothing is lost.
- Each full checkpoint stores the ids of the episodes applied since the one before; a kill between the checkpoint
  and the acknowledgement leaves those ids in the restored state, so their redeliveries are skipped
  (`already_applied`).
- The applied-episode log is written after the checkpoint too, never before: marking first would lose an episode
  whose update died with an unsaved trainer.
- Versions pushed after the last full checkpoint did not happen as far as a restarted trainer is concerned: `start`
  rewinds the policy-version board to the restored version, and the servers are brought back to its weights.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.json_types import JsonObject
from services.ports import AppliedEpisodeLog, EpisodeQueue, PolicyVersionBoard
from services.records import Episode
from services.records.updates import UpdateReport
from services.settings import TrainerSettings
from trainer_svc.resume import LoadedPolicy, checkpoint_trainer
from trainer_svc.server_sync import ServerSync
from trainer_svc.weight_export import PushForm, export_weights

log = logging.getLogger(__name__)


@dataclass
class ServiceCounters:
    """What a trainer loop did with the deliveries it read (the cycle counts updates, pushes, checkpoints, acks)."""

    read: int = 0
    updates: int = 0
    pushes: int = 0
    checkpoints: int = 0
    stale_dropped: int = 0
    duplicates_skipped: int = 0
    rejected: int = 0
    acked: int = 0


@dataclass
class Applied:
    """One update as the cycle carried it out."""

    report: UpdateReport
    weights: Path  # the bf16 directory pushed as `report.policy_version + 1`
    checkpoint: Path | None  # the full checkpoint written after it, when one was due


class UpdateCycle:
    """Owns the trainer's weights between full checkpoints: what was applied and not yet committed."""

    def __init__(self, *, loaded: LoadedPolicy, settings: TrainerSettings, settings_record: JsonObject,
                 queue: EpisodeQueue, applied_log: AppliedEpisodeLog, run_dir: Path, sync: ServerSync,
                 board: PolicyVersionBoard | None = None, counters: ServiceCounters | None = None,
                 push_form: PushForm = "merged") -> None:
        """`settings_record`: the run's resolved settings, saved in every full checkpoint; `push_form`: what every
        push writes (trainer_svc/weight_export.py)."""
        self.loaded = loaded
        self.push_form = push_form
        self.trainer = loaded.trainer
        self.settings = settings
        self.settings_record = settings_record
        self.queue = queue
        self.applied_log = applied_log
        self.run_dir = Path(run_dir)
        self.sync = sync
        self.board = board
        self.counters = counters or ServiceCounters()
        self._in_restored_weights = set(loaded.applied_episode_ids)
        self.uncommitted: dict[str, Episode] = {}  # applied, not yet in a full checkpoint
        self.uncommitted_deliveries: list[str] = []

    # ------------------------------------------------------------------------------------------------ start

    def start(self) -> None:
        """Before the first update: the board and every server agree with the trainer's version. A restored
        trainer exports its checkpoint's weights and rewinds the board when versions past it were published; a
        fresh one serves the base model as version 0."""
        version = self.trainer.policy_version
        weights = (export_weights(self.loaded, self.run_dir, policy_version=version,
                                   form=self.push_form) if self.loaded.restored
                   else self.loaded.source)
        if self.board is not None and (published := self.board.current()) > version:
            log.warning("policy versions %d..%d were pushed but never written to a full checkpoint: rewinding to "
                        "version %d (their episodes were never acknowledged and come back)", version + 1, published,
                        version)
            self.board.rewind(version)
        self.sync.adopt(weights, version)
        self.sync.check(force=True)
        if self.board is not None:
            self.board.publish(version)

    # ------------------------------------------------------------------------------------------------ deliveries

    def already_applied(self, episode: Episode) -> bool:
        """Whether the episode's update is in a durable checkpoint (restored, or committed by any trainer)."""
        return episode.id in self._in_restored_weights or self.applied_log.was_applied(episode)

    def holds(self, episode_id: str) -> bool:
        """Whether the episode is applied and awaits its full checkpoint."""
        return episode_id in self.uncommitted

    def hold_delivery(self, delivery_id: str) -> None:
        """A redelivery of an episode awaiting its checkpoint: acknowledged with it."""
        self.uncommitted_deliveries.append(delivery_id)

    def acknowledge_duplicate(self, episode: Episode, delivery_id: str) -> None:
        """A redelivery of an episode already in a durable checkpoint: record it applied (a kill may have come
        before the log was written) and acknowledge it."""
        self.applied_log.mark_applied_many([episode])
        self.counters.duplicates_skipped += 1
        log.info("episode %s already applied; acknowledging redelivery %s", episode.id, delivery_id)
        self._ack([delivery_id])

    # ------------------------------------------------------------------------------------------------ the cycle

    def apply(self, episodes: Sequence[Episode], delivery_ids: Sequence[str], *, stale_dropped: int = 0) -> Applied:
        """Train on ``episodes``, push the new weights and publish their version, and commit when a full checkpoint
        is due (every `checkpoint_every` updates)."""
        report = self.trainer.update(episodes, stale_dropped=stale_dropped)
        self.counters.updates += 1
        for episode in episodes:
            self.uncommitted[episode.id] = episode
        self.uncommitted_deliveries += list(delivery_ids)
        version = self.trainer.policy_version + 1
        weights = export_weights(self.loaded, self.run_dir, policy_version=version,
                                   form=self.push_form)
        self.sync.push(weights, version)
        self.counters.pushes += 1
        if self.board is not None:
            self.board.publish(version)
        checkpoint = self.commit() if self.trainer.step % self.settings.checkpoint_every == 0 else None
        return Applied(report=report, weights=weights, checkpoint=checkpoint)

    def commit(self) -> Path | None:
        """Write the full checkpoint of the current version, then mark its episodes applied and acknowledge their
        deliveries; None when nothing awaits one."""
        if not self.uncommitted:
            return None
        path = self.checkpoint()
        self.acknowledge()
        return path

    def checkpoint(self) -> Path:
        """The first half of `commit`: the durable full checkpoint, listing the uncommitted episodes."""
        path = checkpoint_trainer(self.loaded, self.run_dir, self.settings, settings_record=self.settings_record,
                                  policy_version=self.trainer.policy_version,
                                  applied_episode_ids=list(self.uncommitted))
        self.counters.checkpoints += 1
        return path

    def acknowledge(self) -> None:
        """The second half of `commit`: mark the checkpointed episodes applied, then acknowledge their deliveries."""
        self.applied_log.mark_applied_many(list(self.uncommitted.values()))
        self._ack(self.uncommitted_deliveries)
        self.uncommitted.clear()
        self.uncommitted_deliveries = []

    def _ack(self, delivery_ids: Sequence[str]) -> None:
        if delivery_ids:
            self.queue.ack(list(delivery_ids))
            self.counters.acked += len(delivery_ids)
