"""Truncated importance sampling of the engine/trainer mismatch (`behaviour_is_cap`): the weights, and what they do
to a real update's gradient."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from trainer_episodes import six_group_batch

from services.algorithm.policy_objective import PolicyLoss, ppo_clip_loss, truncated_importance_weights
from services.settings import Settings
from trainer_svc.batching import collate
from trainer_svc.ppo_update import accumulate_gradients
from trainer_svc.resume import fresh_trainer

CPU = torch.device("cpu")


def test_the_weight_is_the_trainer_over_engine_probability_capped_and_one_where_unknown() -> None:
    old = torch.log(torch.tensor([[0.5, 0.2, 0.9, 0.3]]))
    engine = torch.log(torch.tensor([[0.25, 0.4, 0.1, 0.3]]))
    known = torch.tensor([[True, True, True, False]])
    weights = truncated_importance_weights(old, engine, known, cap=2.0)
    # 0.5/0.25 = 2; 0.2/0.4 = 0.5; 0.9/0.1 = 9 -> capped at 2; unknown -> 1
    torch.testing.assert_close(weights, torch.tensor([[2.0, 0.5, 2.0, 1.0]]))
    with pytest.raises(ValueError):
        truncated_importance_weights(old, engine, known, cap=0.0)


def test_token_weights_scale_each_tokens_loss_and_its_gradient() -> None:
    logprobs = torch.log(torch.tensor([[0.3, 0.6, 0.5]])).requires_grad_()
    old = logprobs.detach().clone()
    advantages, mask = torch.tensor([[1.0, 1.0, -1.0]]), torch.ones(1, 3, dtype=torch.bool)
    plain, _ = ppo_clip_loss(logprobs, old, advantages, mask)
    (plain_grad,) = torch.autograd.grad(plain, logprobs)
    weights = torch.tensor([[2.0, 0.5, 1.0]])
    weighted, _ = ppo_clip_loss(logprobs, old, advantages, mask, token_weights=weights)
    (weighted_grad,) = torch.autograd.grad(weighted, logprobs)
    # ratio 1 everywhere: loss = -mean(A) = -(1 + 1 - 1)/3; weighted: -(2 + 0.5 - 1)/3
    assert float(plain.detach()) == pytest.approx(-1 / 3) and float(weighted.detach()) == pytest.approx(-1.5 / 3)
    torch.testing.assert_close(weighted_grad, plain_grad * weights)


def test_an_engine_that_found_every_sampled_token_half_as_likely_doubles_the_update(
        tiny_dir: Path, cpu_settings: Settings) -> None:
    """The same micro-batch trained with the engine's log-probs equal to the trainer's (weight 1), then one
    log 2 below (the trainer's policy makes these tokens twice as likely: weight 2 under a cap of 3): the gradient
    doubles; without the setting (cap 0) the engine's log-probs change nothing."""
    loaded = fresh_trainer(tiny_dir, cpu_settings.trainer)
    trainer = loaded.trainer
    batch = six_group_batch(loaded.tokenizer, per_group=2)
    micro = [collate(batch, trainer.advantages(batch), list(range(len(batch))), trainer.pad_id)]

    def grads(policy_loss: PolicyLoss, shift: float) -> dict[str, torch.Tensor]:
        mb = micro[0]
        engine = replace(mb, behaviour_logprobs=mb.old_logprobs - shift,
                         has_behaviour_logprobs=torch.ones_like(mb.has_behaviour_logprobs))
        trainer.model.zero_grad(set_to_none=True)
        accumulate_gradients(trainer.model, [engine], policy_loss=policy_loss, entropy_coef=0.0, device=CPU)
        out = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        trainer.model.zero_grad(set_to_none=True)
        return out

    accumulate_gradients(trainer.model, micro, entropy_coef=0.0, device=CPU)  # fills the trainer's old log-probs
    trainer.model.zero_grad(set_to_none=True)
    corrected = PolicyLoss(behaviour_is_cap=3.0)
    same = grads(corrected, 0.0)
    doubled = grads(corrected, math.log(2.0))
    uncorrected = grads(PolicyLoss(), math.log(2.0))
    assert same.keys() == doubled.keys() == uncorrected.keys() and same
    for name in same:
        torch.testing.assert_close(doubled[name], 2 * same[name], atol=1e-6, rtol=1e-4)
        torch.testing.assert_close(uncorrected[name], same[name], atol=1e-6, rtol=1e-4)
