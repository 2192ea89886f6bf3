"""The embedded profile's trainer: the self-play loop's `PolicyUpdater`, a thin adapter over the distributed
trainer's own loop (`trainer_svc.service.TrainerService`: the same reads, duplicate/rejection/staleness rules and
update cycle: update → push bf16 weights → every k updates the full checkpoint → only then mark applied and
acknowledge), driven one step at a time (`TrainerService.train_on`), plus the replay that stands in for redelivery
after a crash.

Why a replay: the embedded queue lives in the process, so the episodes of updates made after the last full
checkpoint die with it. They are in the store, though (the loop records a step's episodes before its update, and
the step's `policy_version_after` once the update is pushed). On resume, `replay_uncommitted_steps` hands the
episodes of every recorded step whose version lies past the restored checkpoint back to the trainer, in step order,
through the queue: the updates lost with the process are made again, on the restored state, once each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from services.json_types import JsonObject
from services.ports import AppliedEpisodeLog, EpisodeQueue, InferenceEngine, PolicyVersionBoard, StepStore
from services.records import Episode
from services.records.updates import StepUpdate
from services.settings import RolloutSettings, TrainerSettings
from trainer_svc.resume import LoadedPolicy
from trainer_svc.service import TrainerService

log = logging.getLogger(__name__)

TRAINER_CONSUMER = "embedded-trainer"
EPISODE_PAGE = 500


class InProcessTrainer:
    """The loop's PolicyUpdater: after each step, the distributed trainer's loop trains on that step's episodes."""

    def __init__(self, *, loaded: LoadedPolicy, settings: TrainerSettings, rollout: RolloutSettings,
                 settings_record: JsonObject, run_dir: Path, queue: EpisodeQueue, applied_log: AppliedEpisodeLog,
                 engines: Sequence[InferenceEngine], board: PolicyVersionBoard | None,
                 before_update: Callable[[], None] | None = None) -> None:
        """The distributed trainer's loop over `settings` (and the rollouts' staleness rule), checkpointing into
        `run_dir` with `settings_record`; `before_update` runs before each update (the embedded run gives torch
        every core there)."""
        self.loaded = loaded
        self.before_update = before_update
        self.service = TrainerService(loaded=loaded, settings=settings, rollout=rollout,
                                      settings_record=settings_record, queue=queue, applied_log=applied_log,
                                      run_dir=run_dir, engines=engines, board=board, consumer=TRAINER_CONSUMER)

    @property
    def policy_version(self) -> int:
        return int(self.loaded.trainer.policy_version)

    def start(self) -> None:
        """The engine and the board take the trainer's version (after a restore: its checkpoint's bf16 weights)."""
        self.service.start()

    def update_on(self, episodes: Sequence[Episode], step: int) -> StepUpdate:
        """Train on the step's episodes (read back from the queue, with any redelivery of earlier ones), push, and
        commit when a full checkpoint is due. Returns the update's report with `policy_version` after it."""
        counters = self.service.counters
        duplicates_before = counters.duplicates_skipped
        if self.before_update is not None:
            self.before_update()
        try:
            trained = self.service.train_on({episode.id for episode in episodes})
        except RuntimeError as error:
            raise RuntimeError(f"step {step}: {error}") from None
        duplicates = counters.duplicates_skipped - duplicates_before
        applied = self.service.last_applied
        if trained is None or applied is None:
            return StepUpdate(policy_version=self.policy_version, duplicates_skipped=duplicates)
        return StepUpdate(policy_version=self.policy_version, duplicates_skipped=duplicates, report=applied.report,
                          weights=str(applied.weights),
                          checkpoint=str(applied.checkpoint) if applied.checkpoint is not None else None)

    def finish(self) -> str | None:
        """End of the session: write the full checkpoint of the updates since the last one (if any); its path."""
        path = self.service.commit()
        return str(path) if path is not None else None


def uncommitted_steps(store: StepStore, run_id: str, checkpoint_version: int) -> list[int]:
    """The recorded steps whose update made a policy version past ``checkpoint_version``, in step order: their
    updates were pushed but are not in the restored checkpoint."""
    return [record.step for record in store.list_steps(run_id)
            if int((record.metrics or {}).get("policy_version_after", 0)) > checkpoint_version]


def step_episodes(store: StepStore, run_id: str, step: int) -> list[Episode]:
    """Every episode the store holds for one step of the run."""
    found: list[Episode] = []
    while True:
        page, total = store.list_episodes(run_id, step=step, limit=EPISODE_PAGE, offset=len(found))
        found += page
        if not page or len(found) >= total:
            return found


def replay_uncommitted_steps(store: StepStore, run_id: str, trainer: InProcessTrainer, queue: EpisodeQueue,
                             progress: Callable[[str], None]) -> list[int]:
    """Train again, through the queue, on the recorded steps whose updates the restored checkpoint does not hold;
    returns those steps."""
    steps = uncommitted_steps(store, run_id, trainer.policy_version)
    if steps:
        progress(f"replaying the updates of steps {steps[0]}-{steps[-1]}: pushed after the last full checkpoint "
                 f"(policy version {trainer.policy_version}), lost with the previous process")
    for step in steps:
        episodes = step_episodes(store, run_id, step)
        queue.publish(episodes)
        report = trainer.update_on(episodes, step)
        log.info("replayed step %d: %d episodes, now policy version %s", step, len(episodes),
                 report.policy_version)
    return steps
