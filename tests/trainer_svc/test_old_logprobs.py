"""π_old of the PPO ratio is recomputed by the policy before the update; the engine's log-probs only measure the
engine/trainer mismatch (trainer_svc/ppo_update.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from trainer_episodes import six_group_batch

from services.records import Episode
from services.settings import Settings
from trainer_svc.batching import collate
from trainer_svc.policy_forward import logprobs_and_entropy
from trainer_svc.resume import fresh_trainer


def with_engine_logprobs(batch: list[Episode], value: float | None) -> list[Episode]:
    return [e.model_copy(update={"behaviour_logprobs": None if value is None else [value] * len(e.response_ids)})
            for e in batch]


def test_the_first_epoch_ratio_is_exactly_one_whatever_the_engine_reported(tiny_dir: Path,
                                                                           cpu_settings: Settings) -> None:
    tokenizer = fresh_trainer(tiny_dir, cpu_settings.trainer).tokenizer
    batch = six_group_batch(tokenizer, per_group=3)
    weights = []
    for engine_value in (-7.5, -0.01, None):  # far off, close, absent: the update must not care
        trainer = fresh_trainer(tiny_dir, cpu_settings.trainer).trainer
        report = trainer.update(with_engine_logprobs(batch, engine_value))
        assert report.ratio_max == 1.0
        assert report.clip_fraction == 0.0 and report.approx_kl == 0.0
        weights.append({name: p.detach().clone() for name, p in trainer.model.named_parameters()})
    for name in weights[0]:
        assert torch.equal(weights[0][name], weights[1][name]) and torch.equal(weights[0][name], weights[2][name])


def test_the_mismatch_metrics_measure_the_engine_against_the_policy(tiny_dir: Path, cpu_settings: Settings) -> None:
    loaded = fresh_trainer(tiny_dir, cpu_settings.trainer)
    trainer, tokenizer = loaded.trainer, loaded.tokenizer
    batch = six_group_batch(tokenizer, per_group=2)
    shift = 0.25
    shifted = []
    for e in batch:  # the engine's numbers are the policy's own plus `shift` on every token
        mb = collate([e], torch.zeros(1), [0], trainer.pad_id)
        with torch.no_grad():
            logprobs, _ = logprobs_and_entropy(trainer.model, mb, with_entropy=False)
        shifted.append(e.model_copy(update={"behaviour_logprobs": (logprobs[0] + shift).tolist()}))
    report = trainer.update(shifted)
    tokens = sum(len(e.response_ids) for e in batch)
    assert report.logprob_mismatch_tokens == tokens
    assert report.logprob_mismatch_abs == pytest.approx(shift, abs=1e-4)
    # k3 with log ρ = −shift on every token: e^{−shift} − 1 + shift
    assert report.logprob_mismatch_kl == pytest.approx(math.exp(-shift) - 1 + shift, abs=1e-4)
    plain = fresh_trainer(tiny_dir, cpu_settings.trainer).trainer.update(with_engine_logprobs(batch, None))
    assert plain.logprob_mismatch_tokens == 0 and plain.logprob_mismatch_abs is None


def test_a_second_epoch_keeps_the_pre_update_log_probs(tiny_dir: Path, cpu_settings: Settings) -> None:
    """With two PPO epochs π_old stays the first epoch's values, so the second epoch's ratio moves off 1."""
    settings = cpu_settings.with_values(ppo_epochs=2, learning_rate=5e-3)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    report = loaded.trainer.update(six_group_batch(loaded.tokenizer, per_group=3))
    assert report.ratio_max > 1.0 and report.approx_kl != 0.0
