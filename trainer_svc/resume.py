"""Build a PolicyTrainer: fresh from a model directory, or restored from a run's latest checkpoint; and save one.

Under torchrun (``ranks`` given) every rank runs these functions: each loads the same weights, shards them with FSDP
and builds its optimizer over its shards; restoring loads the full optimizer state and keeps the local shard. A
checkpoint gathers the full weights and optimizer state to rank 0, which alone writes the directory while the other
ranks wait.

With `lora_rank` > 0 (one process only, `trainer_svc/lora.py`) the base model gets LoRA adapters before the
optimizer is built; a checkpoint then holds the adapters and names its base model, and a restore loads that base
(checked against the checkpoint's fingerprint of it) and puts the adapters on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from services.json_types import JsonObject
from services.settings import TrainerSettings
from trainer_svc.activation_checkpointing import checkpoint_decoder_layers
from trainer_svc.checkpoints import (
    checkpoint_name,
    checkpoints_root,
    latest_checkpoint,
    load_trainer_state,
    restore_rng,
    save_checkpoint,
)
from trainer_svc.distributed_env import RankInfo, wait_for_all
from trainer_svc.lora import (
    add_adapters,
    base_for_restore,
    is_adapter_checkpoint,
    load_adapters,
    refuse_under_fsdp,
    train_dropout,
)
from trainer_svc.optimizer_layout import BY_INDEX, BY_NAME, load_optimizer_state
from trainer_svc.policy_forward import resolve_device
from trainer_svc.ppo_update import MicroBatchProgress, PolicyTrainer
from trainer_svc.rank_commands import CheckpointCommand, announce

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from trainer_svc.format_warmup import WarmupPlan

log = logging.getLogger(__name__)


@dataclass
class LoadedPolicy:
    """A trainer with its tokenizer, and where it came from."""

    trainer: PolicyTrainer
    tokenizer: PreTrainedTokenizerBase
    source: Path  # an HF directory a server can start from: the base model, or the restored full checkpoint
    applied_episode_ids: list[str] = field(default_factory=list)  # applied since the checkpoint before `checkpoint`
    restored: bool = False  # True when restored from `checkpoint`, one of the run's checkpoints
    checkpoint: Path | None = None  # the restored checkpoint (`source` too, unless it holds LoRA adapters only:
    # then `source` is its base model, and `UpdateCycle.start` pushes the merged weights to every server)
    snapshot_run_step: int = 0  # a new run from a snapshot (`lora_init_adapter`): the run step it was taken at


def load_model_and_tokenizer(model_dir: Path) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """An HF causal LM in float32 (master weights for AdamW) and its tokenizer, from local files only."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    return model, tokenizer


def pad_id_of(tokenizer: PreTrainedTokenizerBase) -> int:
    """The id used for right padding: the pad token, else EOS (padding is masked, so its value never matters)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError("tokenizer has neither a pad nor an EOS token to pad with")
    return int(pad)


def build_trainer(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, settings: TrainerSettings,
                  ranks: RankInfo | None = None, *, step: int = 0, policy_version: int = 0,
                  base_dir: Path | None = None,
                  on_micro_batch: Callable[[MicroBatchProgress], None] | None = None) -> PolicyTrainer:
    """A trainer (with a fresh AdamW) over ``model``: on `settings.device` in one process, FSDP-sharded over the
    ranks under torchrun. With `settings.gradient_checkpointing` every decoder layer recomputes its activations in
    the backward pass, in both cases (under FSDP the layers are wrapped before they are sharded). With
    `settings.lora.lora_rank` > 0 (one process only) ``model``, loaded from ``base_dir``, first gets LoRA adapters
    and AdamW covers them alone. ``on_micro_batch``: the trainer's micro-batch callback (a live display)."""
    lora = settings.lora
    if ranks is not None:
        refuse_under_fsdp(lora)
    elif lora.lora_rank > 0:
        if base_dir is None:
            raise ValueError("build_trainer with lora_rank > 0 needs the base model's directory (base_dir)")
        model = add_adapters(model, lora, base_dir)
    if settings.gradient_checkpointing:
        checkpoint_decoder_layers(model)
    if ranks is None:
        trainer = PolicyTrainer(model, settings, pad_id=pad_id_of(tokenizer), device=resolve_device(settings.device),
                                step=step, policy_version=policy_version, on_micro_batch=on_micro_batch)
        if lora.lora_rank > 0 and lora.lora_dropout > 0:
            train_dropout(trainer.model)
        return trainer
    from trainer_svc.fsdp_wrap import shard_policy

    root = shard_policy(model, ranks, bf16=settings.trainer_bf16)
    return PolicyTrainer(model, settings, pad_id=pad_id_of(tokenizer), device=ranks.device, step=step,
                         policy_version=policy_version, ranks=ranks, forward_module=root,
                         on_micro_batch=on_micro_batch)


def fresh_trainer(model_dir: Path, settings: TrainerSettings, ranks: RankInfo | None = None, *,
                  on_micro_batch: Callable[[MicroBatchProgress], None] | None = None) -> LoadedPolicy:
    """A trainer at step 0, policy version 0, on the base model in ``model_dir``; with `lora_init_adapter`, with
    that snapshot's adapter weights at its trainer step and policy version (fresh AdamW moments), pushed to the
    servers at start like a restored checkpoint's."""
    model, tokenizer = load_model_and_tokenizer(model_dir)
    trainer = build_trainer(model, tokenizer, settings, ranks, base_dir=Path(model_dir), on_micro_batch=on_micro_batch)
    lora = settings.lora
    if lora.lora_init_adapter is not None:
        if lora.lora_rank == 0:
            raise ValueError("lora_init_adapter needs LoRA (lora_rank > 0)")
        from trainer_svc.snapshot import load_snapshot, snapshot_metadata

        load_snapshot(trainer.model, lora.lora_init_adapter, rank=lora.lora_rank, alpha=lora.lora_alpha)
        header = snapshot_metadata(lora.lora_init_adapter)
        # Version 0 is the base model, which every engine serves at start: adapters that are not the base's need
        # another version, or the engines, already "at" version 0, would never take them.
        trainer.step, trainer.policy_version = header["step"], max(1, header["policy_version"])
        return LoadedPolicy(trainer=trainer, tokenizer=tokenizer, source=Path(model_dir), restored=True,
                            snapshot_run_step=int(header["run_step"]))
    return LoadedPolicy(trainer=trainer, tokenizer=tokenizer, source=Path(model_dir))


def restore_trainer(run_dir: Path, settings: TrainerSettings, ranks: RankInfo | None = None,
                    model_dir: Path | None = None, *,
                    on_micro_batch: Callable[[MicroBatchProgress], None] | None = None) -> LoadedPolicy | None:
    """The trainer exactly as the run's latest checkpoint saved it (weights, optimizer, step, version, RNG), or
    None when the run has no checkpoint yet. Either optimizer layout loads, on one process or any number of ranks.
    A LoRA checkpoint's adapters go on ``model_dir`` (default: the base model directory the checkpoint names),
    which must be the base they were trained on."""
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        return None
    adapters = is_adapter_checkpoint(checkpoint)
    lora = settings.lora
    if not adapters and lora.lora_rank > 0:
        raise ValueError(f"{checkpoint} holds full weights (a run without LoRA) but lora_rank={lora.lora_rank}: "
                         "set AZR_LORA_RANK=0 to resume it, or start a new run for LoRA")
    source = base_for_restore(checkpoint, lora, model_dir) if adapters else checkpoint
    model, tokenizer = load_model_and_tokenizer(source)
    state = load_trainer_state(checkpoint, mmap=ranks is not None)
    trainer = build_trainer(model, tokenizer, settings, ranks, step=state.step, policy_version=state.policy_version,
                            base_dir=source, on_micro_batch=on_micro_batch)
    if adapters:
        load_adapters(trainer.model, checkpoint)
    load_optimizer_state(trainer.model, trainer.optimizer, state.optimizer, state.optimizer_layout,
                         sharded=ranks is not None)
    restore_rng(state.rng)
    return LoadedPolicy(trainer=trainer, tokenizer=tokenizer, source=source,
                        applied_episode_ids=state.applied_episode_ids, restored=True, checkpoint=checkpoint)


def load_or_restore(run_dir: Path, model_dir: Path, settings: TrainerSettings, ranks: RankInfo | None = None, *,
                    on_micro_batch: Callable[[MicroBatchProgress], None] | None = None,
                    warmup: WarmupPlan | None = None, say: Callable[[str], None] = log.info) -> LoadedPolicy:
    """Resume from the run's latest checkpoint when there is one, else start from the base model (with the format
    warm-up first when `warmup` asks for examples, `format_warmup_per_type` > 0, and no `lora_init_adapter` is
    given: a switch, not the paper)."""
    restored = restore_trainer(run_dir, settings, ranks, model_dir, on_micro_batch=on_micro_batch)
    if restored is not None:
        return restored
    loaded = fresh_trainer(model_dir, settings, ranks, on_micro_batch=on_micro_batch)
    lora = settings.lora
    if warmup is not None and warmup.per_type > 0 and lora.lora_init_adapter is None:
        if lora.lora_rank == 0 or ranks is not None:
            raise ValueError("the format warm-up trains LoRA adapters in one process: set lora_rank > 0")
        from trainer_svc.format_warmup import SNAPSHOT_FILE, warm_up
        from trainer_svc.snapshot import load_snapshot

        snapshot = Path(run_dir) / SNAPSHOT_FILE
        if snapshot.is_file():  # warmed up before, stopped before the first checkpoint: not twice
            load_snapshot(loaded.trainer.model, snapshot, rank=lora.lora_rank, alpha=lora.lora_alpha)
            say(f"format warm-up: the adapters of {snapshot}")
        else:
            warm_up(loaded.trainer.model, Path(model_dir), warmup, settings, snapshot, say=say)
        loaded.restored = True  # its adapters are not the base model's: pushed to the engines before step 1,
        loaded.trainer.policy_version = 1  # as version 1 (version 0, the base, is what the engines start with)
    return loaded


def checkpoint_trainer(loaded: LoadedPolicy, run_dir: Path, settings: TrainerSettings, *,
                       settings_record: JsonObject, policy_version: int,
                       applied_episode_ids: list[str] | None = None) -> Path:
    """Save the trainer as checkpoint ``policy_version`` (keeping the newest ``settings.keep_checkpoints``), with
    ``settings_record`` (the run's resolved settings) as its settings.json; the trainer's policy version becomes
    ``policy_version``, the version its weights will be served as.

    Under torchrun every rank calls this (rank 0 first announces it): all gather, rank 0 writes, all wait for it."""
    trainer = loaded.trainer
    trainer.policy_version = policy_version
    ranks = trainer.ranks
    if ranks is None:
        return save_checkpoint(run_dir, model=trainer.model, tokenizer=loaded.tokenizer, optimizer=trainer.optimizer,
                               step=trainer.step, policy_version=policy_version, settings_json=settings_record,
                               applied_episode_ids=applied_episode_ids, keep=settings.keep_checkpoints,
                               optimizer_layout=BY_INDEX)
    from trainer_svc.fsdp_wrap import gather_full_optimizer_state, gather_full_weights

    if ranks.is_main:
        announce(ranks, CheckpointCommand(policy_version=policy_version,
                                          applied_episode_ids=list(applied_episode_ids or [])))
    weights = gather_full_weights(trainer.model)
    optimizer_state = gather_full_optimizer_state(trainer.model, trainer.optimizer)
    path = checkpoints_root(run_dir) / checkpoint_name(policy_version)
    if ranks.is_main:
        path = save_checkpoint(run_dir, model=trainer.model, tokenizer=loaded.tokenizer, optimizer=None,
                               step=trainer.step, policy_version=policy_version, settings_json=settings_record,
                               applied_episode_ids=applied_episode_ids, keep=settings.keep_checkpoints,
                               model_state=weights, optimizer_state=optimizer_state, optimizer_layout=BY_NAME)
    wait_for_all(ranks)
    return path
