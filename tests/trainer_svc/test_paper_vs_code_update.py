"""The trainer applies the paper / released-code switches of its settings (docs/paper-vs-code.md): TRR++ statistics,
loss aggregation (policy loss and entropy bonus alike, whatever the memory micro-batches) and the clip range, each
checked on a 3-episode batch against values worked out by hand, both ways."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from trainer_episodes import episode, text_ids

from services.algorithm.policy_objective import PolicyLoss
from services.records import Episode
from services.settings import Settings, load_settings
from trainer_svc.batching import collate
from trainer_svc.policy_forward import logprobs_and_entropy
from trainer_svc.ppo_update import PolicyTrainer, accumulate_gradients
from trainer_svc.resume import fresh_trainer

CPU = torch.device("cpu")
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
R2, R7 = math.sqrt(2.0), math.sqrt(7.0)


def trainer_for(tiny_dir: Path, settings: Settings) -> tuple[PolicyTrainer, object]:
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    return loaded.trainer, loaded.tokenizer


def three_episodes(tok) -> list[Episode]:
    """One group (deduction solver), rewards (1, 0, 0), responses of 1, 2 and 4 tokens."""
    prompt = text_ids(tok, "def f(x):\n    return x")
    response = text_ids(tok, "return sorted(x, reverse=True)")
    assert len(response) >= 4
    return [episode(prompt, response[:length], reward) for length, reward in ((1, 1.0), (2, 0.0), (4, 0.0))]


def test_trr_statistics_per_sample_and_token_weighted(tiny_dir: Path, cpu_settings: Settings) -> None:
    # per sample (Eq 8): μ = 1/3, σ = sqrt(2/9) -> A = (√2, −1/√2, −1/√2) (eps 1e-6 on σ: < 1e-5 relative).
    # token-weighted (released code), lengths (1, 2, 4): N = 7, μ = 1/7, Σ |o| (r − μ)² = 36/49 + 2/49 + 4/49 = 6/7,
    #   var = (6/7)/6 = 1/7 -> A = (6/7, −1/7, −1/7) · √7 = (6/√7, −1/√7, −1/√7).
    trainer, tok = trainer_for(tiny_dir, cpu_settings)
    batch = three_episodes(tok)
    torch.testing.assert_close(trainer.advantages(batch), torch.tensor([R2, -1 / R2, -1 / R2]), atol=1e-5, rtol=0)
    trainer.settings = cpu_settings.trainer.model_copy(update={"trr_statistics": "token-weighted"})
    torch.testing.assert_close(trainer.advantages(batch), torch.tensor([6 / R7, -1 / R7, -1 / R7]), atol=1e-5, rtol=0)


# At ratio 1 (the first epoch recomputes π_old) the policy loss is −Σ_b w_b |o_b| A_b whatever the weights.
# |o| = (1, 2, 4); weights: token-mean 1/7 each; micro-batch groups of 2: (1/6, 1/6, 1/8); seq-mean (1/3, 1/6, 1/12).
HAND_PG_LOSS = [
    ("per-sample", "token-mean", 2 * R2 / 7),  # −(√2 − 2/√2 − 4/√2)/7
    ("per-sample", "micro-batch-token-mean", R2 / 4),  # −((√2 − 2/√2)/6 − 4/(√2·8))
    ("per-sample", "seq-mean-token-mean", 0.0),  # −(√2 − 1/√2 − 1/√2)/3
    ("token-weighted", "token-mean", 0.0),  # −(6 − 2 − 4)/(7√7)
    ("token-weighted", "micro-batch-token-mean", -1 / (6 * R7)),  # −((6 − 2)/(6√7) − 4/(8√7))
    ("token-weighted", "seq-mean-token-mean", -4 / (3 * R7)),  # −(6 − 1 − 1)/(3√7)
]


def test_loss_aggregation_both_ways_whatever_the_memory_micro_batches(tiny_dir: Path,
                                                                      cpu_settings: Settings) -> None:
    trainer, tok = trainer_for(tiny_dir, cpu_settings)
    batch = three_episodes(tok)
    for statistics, mode, expected in HAND_PG_LOSS:
        for micro_batch_size in (1, 3):
            trainer.settings = cpu_settings.trainer.model_copy(update={
                "trr_statistics": statistics, "loss_agg_mode": mode, "loss_agg_micro_batch_size": 2,
                "micro_batch_size": micro_batch_size})
            report = trainer.update(batch)
            assert report.pg_loss == pytest.approx(expected, abs=2e-5), (statistics, mode, micro_batch_size)


def test_entropy_bonus_is_aggregated_like_the_policy_loss(tiny_dir: Path, cpu_settings: Settings) -> None:
    settings = cpu_settings.with_values(entropy_coef=1.0, loss_agg_mode="seq-mean-token-mean")
    trainer, tok = trainer_for(tiny_dir, settings)
    with torch.no_grad():  # random weights give every position almost the same entropy: sharpen them apart
        trainer.model.get_output_embeddings().weight.mul_(5.0)
    batch = three_episodes(tok)
    mb = collate(batch, torch.zeros(3), [0, 1, 2], trainer.pad_id)
    with torch.no_grad():
        _, entropy = logprobs_and_entropy(trainer.model, mb)
    assert entropy is not None
    per_sequence = sum(float(entropy[row][mb.response_mask[row]].mean()) for row in range(3)) / 3
    per_token = float(entropy[mb.response_mask].mean())
    assert abs(per_sequence - per_token) > 1e-3 * per_token  # the two aggregations differ here
    report = trainer.update(batch)
    # Eq 9 as written: the bonus is each response's mean entropy, averaged over the three responses.
    assert report.loss - report.pg_loss == pytest.approx(-per_sequence, rel=1e-4)


def test_clip_range_of_each_preset_reaches_the_loss(tiny_dir: Path, cpu_settings: Settings) -> None:
    # Three one-token responses with ratios s = (1.25, 0.7, 5.0) and advantages (+1, −1, −1):
    # paper (0.2 / 0.2, no dual clip): token losses (−1.2, 0.8, 5) -> 4.6/3 (one token each: every aggregation
    # mode gives the plain mean); released code (0.2 / 0.28, c = 3): (−1.25, 0.8, 3) -> 2.55/3.
    trainer, tok = trainer_for(tiny_dir, cpu_settings)
    prompt = text_ids(tok, "def f(x):\n    return x")
    batch = [episode(prompt, text_ids(tok, text)[:1], 0.0) for text in ("return", "x", "sorted")]
    current = collate(batch, torch.zeros(3), [0, 1, 2], trainer.pad_id)
    with torch.no_grad():
        logprobs, _ = logprobs_and_entropy(trainer.model, current, with_entropy=False)
    ratios = torch.tensor([[1.25], [0.7], [5.0]])
    mb = replace(current, old_logprobs=logprobs - ratios.log(), has_old_logprobs=torch.ones(3, dtype=torch.bool),
                 advantages=torch.tensor([1.0, -1.0, -1.0]))
    for preset, expected in (("paper", 4.6 / 3), ("authors-code", 2.55 / 3)):
        policy_loss = PolicyLoss.from_settings(load_settings(CONFIGS / f"{preset}.toml").trainer)
        trainer.model.zero_grad(set_to_none=True)
        stats = accumulate_gradients(trainer.model, [mb], policy_loss=policy_loss,
                                     loss_weights=policy_loss.episode_weights(batch), entropy_coef=0.0, device=CPU)
        assert stats.pg_loss == pytest.approx(expected, abs=1e-5), preset
