"""Updates move the policy only on signal: a batch whose every Eq 8 advantage is 0 makes no optimizer step when
`skip_zero_advantage_batches` is on (and did move every weight when it was not), and with entropy 0 only the episodes
with a nonzero advantage go through the model, giving the same update as the whole batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_episodes import episode, six_group_batch, text_ids

from services.algorithm.task_types import Role, TaskType
from services.records import Episode
from services.settings import Settings
from trainer_svc.batching import build_micro_batches, response_tokens_of
from trainer_svc.ppo_update import PolicyTrainer, accumulate_gradients
from trainer_svc.resume import fresh_trainer


def trainer_for(tiny_dir: Path, settings: Settings) -> tuple[PolicyTrainer, object]:
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    return loaded.trainer, loaded.tokenizer


def weights(trainer: PolicyTrainer) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}


def no_signal_batch(tok) -> list[Episode]:
    """Every group's rewards equal (all −1, as a step where nothing was well formed): every advantage is 0."""
    prompt = text_ids(tok, "def f(nums):")
    return [episode(prompt, text_ids(tok, text), reward=-1.0, task_type=task_type, role=role)
            for task_type in TaskType for role in Role for text in ("return nums", "return sum(nums)")]


def test_a_batch_without_signal_makes_no_step_but_the_version_advances(tiny_dir: Path, cpu_settings: Settings
                                                                      ) -> None:
    settings = cpu_settings.with_values(entropy_coef=0.001, weight_decay=0.01,
                                               skip_zero_advantage_batches=True)
    trainer, tok = trainer_for(tiny_dir, settings)
    before = weights(trainer)
    report = trainer.update(no_signal_batch(tok))
    after = weights(trainer)
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert report.optimizer_steps == 0 and report.signal_episodes == 0 and report.trained_episodes == 0
    assert report.grad_norm == 0.0 and report.micro_batches == 0
    assert trainer.optimizer.state == {}  # AdamW's moments and step count untouched
    assert trainer.step == 1  # the trainer step (and so the pushed version) still advances
    assert report.tokens == response_tokens_of(no_signal_batch(tok))


@pytest.mark.parametrize("entropy_coef", [0.0, 0.001])
def test_without_the_skip_such_a_batch_moves_every_weight(tiny_dir: Path, cpu_settings: Settings,
                                                          entropy_coef: float) -> None:
    """The defect the setting exists for: with the entropy bonus alone AdamW normalises a tiny gradient into a
    full-size step; at entropy 0 weight decay still moves every weight."""
    settings = cpu_settings.with_values(entropy_coef=entropy_coef, weight_decay=0.01,
                                               skip_zero_advantage_batches=False)
    trainer, tok = trainer_for(tiny_dir, settings)
    before = weights(trainer)
    report = trainer.update(no_signal_batch(tok))
    moved = {name for name, value in weights(trainer).items() if not torch.equal(value, before[name])}
    assert report.optimizer_steps == 1 and report.trained_episodes == 12
    matrices = {name for name, value in before.items() if value.dim() >= 2}  # weight decay spares norms and biases
    assert moved == set(before) if entropy_coef > 0 else matrices <= moved


def signal_in_two_groups(tok) -> list[Episode]:
    """Six groups of 4; only the deduction solvers' and the abduction proposers' rewards differ."""
    batch = six_group_batch(tok, per_group=4)
    flat = [(TaskType.DEDUCTION, Role.SOLVE), (TaskType.ABDUCTION, Role.PROPOSE)]
    return [e if (e.task_type, e.role) in flat else e.model_copy(update={"reward": -0.5}) for e in batch]


def test_entropy_zero_trains_only_the_signal_episodes_and_equals_the_whole_batch_update(
        tiny_dir: Path, cpu_settings: Settings) -> None:
    settings = cpu_settings.with_values(entropy_coef=0.0, micro_batch_size=3)
    cheap, tok = trainer_for(tiny_dir, settings)
    full, _ = trainer_for(tiny_dir, settings)
    # Plain SGD, so the weights after the step are the (clipped) gradient itself: AdamW's m/sqrt(v) would blow
    # float-rounding noise on near-zero gradient entries up to full-size steps of either sign.
    for trainer in (cheap, full):
        trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.5)
    initial = weights(full)
    batch = signal_in_two_groups(tok)
    advantages = cheap.advantages(batch)
    signal = int((advantages != 0).sum())
    assert 0 < signal < len(batch)

    report = cheap.update(batch)
    # The whole batch through the model, as before: every micro-batch, the same loss denominator.
    micro_batches = build_micro_batches(batch, advantages, pad_id=full.pad_id, micro_batch_size=3)
    accumulate_gradients(full.model, micro_batches, entropy_coef=0.0,
                         device=torch.device("cpu"))
    torch.nn.utils.clip_grad_norm_(full.model.parameters(), settings.trainer.grad_clip)
    full.optimizer.step()

    assert report.signal_episodes == signal and report.trained_episodes == signal
    assert report.tokens == response_tokens_of(batch)
    moved = 0
    for (name, a), b in zip(cheap.model.named_parameters(), full.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-5, msg=f"{name} differs from the whole-batch update")
        moved += int(not torch.equal(a, initial[name]))
    assert moved > 0
