"""The loop of every trainer rank but rank 0: do what rank 0 announces, in its order, until it says stop.

These ranks never touch the episode queue, the inference servers or the policy-version board; they hold their
shards of the weights and optimizer and take part in each update's, export's and checkpoint's collectives.
"""

from __future__ import annotations

import logging
from pathlib import Path

from services.json_types import JsonObject
from services.settings import TrainerSettings
from trainer_svc.rank_commands import (
    CheckpointCommand,
    ExportCommand,
    StopCommand,
    UpdateCommand,
    announce,
    next_command,
)
from trainer_svc.resume import LoadedPolicy, checkpoint_trainer
from trainer_svc.weight_export import export_weights

log = logging.getLogger(__name__)


def follow_main_rank(loaded: LoadedPolicy, settings: TrainerSettings, run_dir: Path,
                     settings_record: JsonObject) -> int:
    """Mirror rank 0's updates, weight exports and checkpoints (each with `settings_record`, the run's resolved
    settings) until its `StopCommand`; returns how many updates this rank ran."""
    ranks = loaded.trainer.ranks
    if ranks is None or ranks.is_main:
        raise RuntimeError("follow_main_rank runs on the ranks other than 0 of a torchrun job")
    updates = 0
    while True:
        command = next_command(ranks)
        if isinstance(command, UpdateCommand):
            loaded.trainer.update(command.episodes, stale_dropped=command.stale_dropped)
            updates += 1
        elif isinstance(command, ExportCommand):
            export_weights(loaded, run_dir, policy_version=command.policy_version)
        elif isinstance(command, CheckpointCommand):
            checkpoint_trainer(loaded, run_dir, settings, settings_record=settings_record,
                               policy_version=command.policy_version,
                               applied_episode_ids=command.applied_episode_ids)
        elif isinstance(command, StopCommand):
            log.info("rank %d: stopping with rank 0 after %d updates", ranks.rank, updates)
            return updates


def release_followers(loaded: LoadedPolicy) -> None:
    """Rank 0, after its last checkpoint: tell the other ranks to leave their loop (no-op in one process)."""
    ranks = loaded.trainer.ranks
    if ranks is not None and ranks.is_main:
        announce(ranks, StopCommand())
