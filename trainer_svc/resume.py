"""Build a PolicyTrainer: fresh from a model directory, or restored from a run's latest checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from services.settings import Settings
from trainer_svc.checkpoints import latest_checkpoint, load_trainer_state, restore_rng, save_checkpoint
from trainer_svc.policy_forward import resolve_device
from trainer_svc.ppo_update import PolicyTrainer, make_optimizer


@dataclass
class LoadedPolicy:
    """A trainer with its tokenizer, and where it came from."""

    trainer: PolicyTrainer
    tokenizer: Any
    source: Path
    applied_episode_ids: list[str] = field(default_factory=list)  # applied since the checkpoint before `source`
    restored: bool = False  # True when `source` is one of the run's checkpoints


def load_model_and_tokenizer(model_dir: Path) -> tuple[torch.nn.Module, Any]:
    """An HF causal LM in float32 (master weights for AdamW) and its tokenizer, from local files only."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    return model, tokenizer


def pad_id_of(tokenizer: Any) -> int:
    """The id used for right padding: the pad token, else EOS (padding is masked, so its value never matters)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError("tokenizer has neither a pad nor an EOS token to pad with")
    return int(pad)


def fresh_trainer(model_dir: Path, settings: Settings) -> LoadedPolicy:
    """A trainer at step 0, policy version 0, on the base model in ``model_dir``."""
    model, tokenizer = load_model_and_tokenizer(model_dir)
    trainer = PolicyTrainer(model, settings, pad_id=pad_id_of(tokenizer), device=resolve_device(settings.device))
    return LoadedPolicy(trainer=trainer, tokenizer=tokenizer, source=Path(model_dir))


def restore_trainer(run_dir: Path, settings: Settings) -> LoadedPolicy | None:
    """The trainer exactly as the run's latest checkpoint saved it (weights, optimizer, step, version, RNG), or
    None when the run has no checkpoint yet."""
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        return None
    model, tokenizer = load_model_and_tokenizer(checkpoint)
    state = load_trainer_state(checkpoint)
    device = resolve_device(settings.device)
    model = model.to(device)
    optimizer = make_optimizer(model, settings)
    optimizer.load_state_dict(state.optimizer)
    trainer = PolicyTrainer(model, settings, pad_id=pad_id_of(tokenizer), device=device, optimizer=optimizer,
                            step=state.step, policy_version=state.policy_version)
    restore_rng(state.rng)
    return LoadedPolicy(trainer=trainer, tokenizer=tokenizer, source=checkpoint,
                        applied_episode_ids=state.applied_episode_ids, restored=True)


def load_or_restore(run_dir: Path, model_dir: Path, settings: Settings) -> LoadedPolicy:
    """Resume from the run's latest checkpoint when there is one, else start from the base model."""
    return restore_trainer(run_dir, settings) or fresh_trainer(model_dir, settings)


def checkpoint_trainer(loaded: LoadedPolicy, run_dir: Path, settings: Settings, *, policy_version: int,
                       applied_episode_ids: list[str] | None = None) -> Path:
    """Save the trainer as checkpoint ``policy_version`` (keeping the newest ``settings.keep_checkpoints``); the
    trainer's policy version becomes ``policy_version``, the version its weights will be served as."""
    trainer = loaded.trainer
    trainer.policy_version = policy_version
    return save_checkpoint(run_dir, model=trainer.model, tokenizer=loaded.tokenizer, optimizer=trainer.optimizer,
                           step=trainer.step, policy_version=policy_version, settings_json=settings.resolved(),
                           applied_episode_ids=applied_episode_ids, keep=settings.keep_checkpoints)
