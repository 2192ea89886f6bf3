"""What rank 0 tells the other trainer ranks, one command per collective step, over the control group.

Rank 0 runs the ordinary TrainerService loop. Every operation that needs all ranks (an update, a weight export, a
checkpoint) first announces itself, so the other ranks (`rank_follower.follow_main_rank`) enter the same collectives
in the same order; `StopCommand` ends them. Commands are pydantic models, pickled by `broadcast_object_list`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from services.records import Episode
from trainer_svc.distributed_env import RankInfo, broadcast_from_main


class UpdateCommand(BaseModel):
    """Train on this batch (exactly the episodes, in this order, that rank 0 trains on)."""

    kind: Literal["update"] = "update"
    episodes: list[Episode]
    stale_dropped: int = Field(0, ge=0)


class CheckpointCommand(BaseModel):
    """Gather the full state for checkpoint ``policy_version`` (rank 0 writes it)."""

    kind: Literal["checkpoint"] = "checkpoint"
    policy_version: int = Field(ge=1)
    applied_episode_ids: list[str] = Field(default_factory=list)


class ExportCommand(BaseModel):
    """Gather the full weights for the bf16 export pushed as ``policy_version`` (rank 0 writes it)."""

    kind: Literal["export"] = "export"
    policy_version: int = Field(ge=0)


class StopCommand(BaseModel):
    """Rank 0 is done: leave the loop and the process group."""

    kind: Literal["stop"] = "stop"


RankCommand = UpdateCommand | ExportCommand | CheckpointCommand | StopCommand


def announce(ranks: RankInfo, command: RankCommand) -> None:
    """Rank 0: send ``command`` to every other rank (no-op in a one-rank job)."""
    if not ranks.is_main:
        raise RuntimeError(f"rank {ranks.rank} cannot announce; only rank 0 drives the others")
    if ranks.world_size > 1:
        broadcast_from_main(command, ranks)


def next_command(ranks: RankInfo) -> RankCommand:
    """The other ranks: wait for rank 0's next command."""
    command = broadcast_from_main(None, ranks)
    if not isinstance(command, (UpdateCommand, ExportCommand, CheckpointCommand, StopCommand)):
        raise TypeError(f"rank {ranks.rank} received {type(command).__name__}, not a trainer command")
    return command
