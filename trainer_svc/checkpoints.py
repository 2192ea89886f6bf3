"""Checkpoints: `RUN_DIR/checkpoints/v{policy_version:06d}/`, written atomically, the last N kept.

A checkpoint directory holds the HF model (`save_pretrained`, safetensors) and tokenizer (what inference servers
load), `trainer_state.pt` (optimizer state, step, policy version, the torch/CUDA/python/numpy RNG states, the ids of
the episodes applied since the previous checkpoint) and `settings.json`. It is assembled in a hidden temp directory
in the same folder, fsynced, then renamed into place, so a directory with a final name is always complete; leftover
temp directories of a crashed save are ignored by `latest_checkpoint` and removed by the next save.

The FSDP trainer (torchrun) writes the same directory from rank 0, with the full state gathered from every rank:
``model_state`` (the full weights) and ``optimizer_state`` keyed by parameter name (`optimizer_layout.BY_NAME`, which
``trainer_state.pt`` records as ``optimizer_layout``), so its checkpoints resume in one process or on any number of
ranks, and the one-process trainer's checkpoints resume under torchrun.

With LoRA (`lora_rank` > 0, trainer_svc/lora.py) the weights part is the adapters alone, as a PEFT adapter directory
(`adapter_config.json`, `adapter_model.safetensors`) plus `lora_base.json` naming the base model they adapt; the
rest of the directory is as above (AdamW state of the adapters only).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn
from torch.optim.optimizer import StateDict

from services.inference.causal_lm import hf_model
from services.json_types import JsonObject
from trainer_svc.lora import has_adapters, save_adapters
from trainer_svc.optimizer_layout import BY_INDEX, OptimizerLayout

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

CHECKPOINTS_DIR = "checkpoints"
TRAINER_STATE_FILE = "trainer_state.pt"
SETTINGS_FILE = "settings.json"
CHECKPOINT_FORMAT_VERSION = 1
"""Bumped whenever the layout of trainer_state.pt changes."""

_NAME = re.compile(r"^v(\d{6,})$")
_TEMP_PREFIX = ".tmp-"

class RngState(TypedDict):
    """The generators' states as `capture_rng` takes them: torch's CPU generator, python's, numpy's, and every CUDA
    device's where there is one."""

    torch: Tensor
    python: tuple[object, ...]
    numpy: dict[str, object] | tuple[str, npt.NDArray[np.uint32], int, int, float]
    cuda: NotRequired[list[Tensor]]


@dataclass
class TrainerState:
    """Everything besides the weights needed to continue training exactly where a checkpoint left off."""

    step: int
    policy_version: int
    optimizer: StateDict
    rng: RngState
    applied_episode_ids: list[str] = field(default_factory=list)
    format_version: int = CHECKPOINT_FORMAT_VERSION
    optimizer_layout: OptimizerLayout = BY_INDEX  # absent from checkpoints written before the FSDP trainer


def checkpoint_name(policy_version: int) -> str:
    """Directory name of a policy version's checkpoint."""
    return f"v{policy_version:06d}"


def checkpoints_root(run_dir: Path) -> Path:
    """Where a run keeps its checkpoints."""
    return Path(run_dir) / CHECKPOINTS_DIR


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of the run, oldest first (temp directories and stray files skipped)."""
    root = checkpoints_root(run_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint, or None."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def capture_rng() -> RngState:
    """The torch (CPU and every CUDA device), python and numpy generator states."""
    state: RngState = {
        "torch": torch.random.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: RngState) -> None:
    """Put the generators back as `capture_rng` saw them."""
    torch.random.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _fsync_dir(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _fsync_tree(directory: Path) -> None:
    """Flush every file and the directory itself, so the rename publishes data that is on disk."""
    for path in directory.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    _fsync_dir(directory)


def save_checkpoint(run_dir: Path, *, model: nn.Module, tokenizer: PreTrainedTokenizerBase | None,
                    optimizer: torch.optim.Optimizer | None, step: int, policy_version: int, settings_json: JsonObject,
                    applied_episode_ids: list[str] | None = None, keep: int = 3,
                    model_state: dict[str, torch.Tensor] | None = None,
                    optimizer_state: StateDict | None = None,
                    optimizer_layout: OptimizerLayout = BY_INDEX) -> Path:
    """Write checkpoint ``v{policy_version}`` atomically, then delete all but the newest ``keep``; returns its path.

    ``model_state`` / ``optimizer_state`` (in ``optimizer_layout``) replace ``model.state_dict()`` /
    ``optimizer.state_dict()`` when given: the FSDP trainer passes the full state it gathered from the shards. A
    model with LoRA adapters saves the adapters only."""
    if optimizer_state is None:
        if optimizer is None:
            raise ValueError("save_checkpoint needs the optimizer or its state")
        optimizer_state = optimizer.state_dict()
    root = checkpoints_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(policy_version)
    if final.exists():
        raise FileExistsError(f"checkpoint {final} already exists; policy versions must increase")
    for stale in root.glob(_TEMP_PREFIX + "*"):  # a previous save that crashed half way
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX + final.name + "-", dir=root))
    try:
        if model_state is None and has_adapters(model):
            save_adapters(model, staging)
        else:
            hf_model(model).save_pretrained(staging, safe_serialization=True, state_dict=model_state)
        if tokenizer is not None:
            tokenizer.save_pretrained(staging)
        state = TrainerState(step=step, policy_version=policy_version, optimizer=optimizer_state,
                             rng=capture_rng(), applied_episode_ids=list(applied_episode_ids or []),
                             optimizer_layout=optimizer_layout)
        torch.save(state.__dict__, staging / TRAINER_STATE_FILE)
        (staging / SETTINGS_FILE).write_text(json.dumps(settings_json, indent=2, sort_keys=True) + "\n")
        _fsync_tree(staging)
        os.rename(staging, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    prune_checkpoints(run_dir, keep)
    return final


def prune_checkpoints(run_dir: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` complete checkpoints; returns what was deleted."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    doomed = list_checkpoints(run_dir)[:-keep]
    for path in doomed:
        shutil.rmtree(path)
    return doomed


def load_trainer_state(checkpoint: Path, *, mmap: bool = False) -> TrainerState:
    """The optimizer state, counters, RNG states and applied ids saved with a checkpoint.

    ``mmap``: map the tensors from the file instead of reading them (the FSDP ranks of one node then share one copy
    of the full optimizer state in the page cache while each keeps its shard)."""
    raw = torch.load(Path(checkpoint) / TRAINER_STATE_FILE, map_location="cpu", weights_only=False, mmap=mmap)
    if raw.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        raise ValueError(f"{checkpoint}: trainer_state format {raw.get('format_version')!r}, "
                         f"this code reads {CHECKPOINT_FORMAT_VERSION}")
    return TrainerState(**raw)
