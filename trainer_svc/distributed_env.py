"""The trainer's ranks under torchrun: process-group setup from torchrun's environment, and the CPU control channel
through which rank 0 hands every other rank the same batch, the same checkpoint order, and the order to stop.

Two process groups:
- the default group (NCCL on CUDA, gloo on CPU) carries FSDP's all-gathers and reduce-scatters;
- a gloo *control* group carries the small, CPU-side traffic: pickled commands (`broadcast_from_main`), the
  update's statistics, and the barrier while rank 0 writes a checkpoint. It waits up to `CONTROL_TIMEOUT`: the other
  ranks sit in a broadcast for as long as rank 0 waits for episodes, which may be hours when the coordinator is slow,
  and a checkpoint of a large model to network storage can outlast NCCL's default 10 minutes. A rank that dies is
  not waited for: torchrun stops every worker of the group when one exits with an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import torch
import torch.distributed as dist

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
"""Set by torchrun (torch.distributed.run) for every worker it starts."""

CONTROL_TIMEOUT = timedelta(days=7)
"""How long a rank waits on the control group (see the module docstring for why it is long)."""

MAIN_RANK = 0


@dataclass(frozen=True)
class RankInfo:
    """Where this trainer process sits in the torchrun job, and the groups it talks through."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    control_group: dist.ProcessGroup | None = None  # gloo; None only before `init_from_torchrun` made one

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that reads the episode queue, writes checkpoints, pushes weights and publishes."""
        return self.rank == MAIN_RANK


def launched_by_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """Whether torchrun started this process (its RANK, WORLD_SIZE and LOCAL_RANK are all set)."""
    env = os.environ if environ is None else environ
    return all(name in env for name in TORCHRUN_VARIABLES)


def rank_layout(environ: Mapping[str, str]) -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's variables; ValueError when they are inconsistent."""
    try:
        rank, world_size, local_rank = (int(environ[name]) for name in TORCHRUN_VARIABLES)
    except (KeyError, ValueError) as exc:
        raise ValueError(f"torchrun variables {TORCHRUN_VARIABLES} must all be integers: {exc}") from None
    if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
        raise ValueError(f"inconsistent torchrun layout: RANK={rank} WORLD_SIZE={world_size} LOCAL_RANK={local_rank}")
    return rank, world_size, local_rank


def rank_device(device_setting: str, local_rank: int) -> torch.device:
    """The device of one rank: its own GPU (index = LOCAL_RANK, one GPU per worker, as torchrun lays them out) unless
    ``device_setting`` (AZR_DEVICE) says `cpu` or there is no CUDA under `auto`."""
    if device_setting == "cpu":
        return torch.device("cpu")
    if device_setting == "auto" and not torch.cuda.is_available():
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"AZR_DEVICE={device_setting} but CUDA is not available to this process")
    visible = torch.cuda.device_count()
    if local_rank >= visible:  # more ranks per node than GPUs: two ranks would share one (NCCL refuses)
        raise RuntimeError(f"LOCAL_RANK {local_rank} but only {visible} GPUs are visible (CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): give torchrun one rank per GPU")
    return torch.device("cuda", local_rank)


def init_from_torchrun(device_setting: str, environ: Mapping[str, str] | None = None) -> RankInfo:
    """Join the job torchrun started: the default group (NCCL on CUDA, gloo on CPU) and the gloo control group."""
    env = os.environ if environ is None else environ
    rank, world_size, local_rank = rank_layout(env)
    device = rank_device(device_setting, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    control = dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT)
    return RankInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=device, control_group=control)


def broadcast_from_main(obj: object, ranks: RankInfo) -> object:
    """Rank 0's ``obj`` on every rank (pickled over the control group); the other ranks pass anything (None)."""
    box = [obj if ranks.is_main else None]
    dist.broadcast_object_list(box, src=MAIN_RANK, group=ranks.control_group)
    return box[0]


def all_reduce_floats(values: Sequence[float], ranks: RankInfo, op: Literal["sum", "max"]) -> list[float]:
    """Element-wise sum or max of ``values`` over the ranks (float64, on the control group)."""
    tensor = torch.tensor(list(values), dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX, group=ranks.control_group)
    return [float(v) for v in tensor.tolist()]


def wait_for_all(ranks: RankInfo) -> None:
    """Barrier on the control group (e.g. the other ranks wait while rank 0 writes a checkpoint)."""
    dist.barrier(group=ranks.control_group)


def shutdown() -> None:
    """Leave the process groups (no-op when none was made)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def join_torchrun_job(device_setting: str) -> RankInfo | None:
    """`init_from_torchrun` when torchrun started this process, else None (one process, no process group)."""
    return init_from_torchrun(device_setting) if launched_by_torchrun() else None
