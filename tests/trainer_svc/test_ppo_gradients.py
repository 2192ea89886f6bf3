"""The TRR++ PPO update on the tiny real model: direction, clipping, entropy sign, groups, padding, accumulation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from policy_probes import update_on_rewarded_pair
from trainer_episodes import episode, six_group_batch, text_ids

from services.algorithm.task_types import Role, TaskType
from services.settings import Settings
from trainer_svc.batching import MicroBatch, collate
from trainer_svc.policy_forward import logprobs_and_entropy
from trainer_svc.ppo_update import PolicyTrainer, accumulate_gradients
from trainer_svc.resume import fresh_trainer

CPU = torch.device("cpu")


def trainer_for(tiny_dir: Path, settings: Settings) -> tuple[PolicyTrainer, object]:
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    return loaded.trainer, loaded.tokenizer


def gradients(trainer: PolicyTrainer, micro_batches: list[MicroBatch],
              entropy_coef: float = 0.0) -> dict[str, torch.Tensor]:
    trainer.model.zero_grad(set_to_none=True)
    accumulate_gradients(trainer.model, micro_batches, entropy_coef=entropy_coef, device=CPU)
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    trainer.model.zero_grad(set_to_none=True)
    return grads


def assert_same_gradients(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = 1e-6) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=1e-4, msg=f"gradient of {name} differs")


def test_positive_advantage_response_gains_probability_negative_loses(tiny_dir: Path, cpu_settings: Settings) -> None:
    trainer, tok = trainer_for(tiny_dir, cpu_settings)
    report, good, bad = update_on_rewarded_pair(trainer, tok)
    assert report.step == 1 and report.tokens == len(good.response_ids) + len(bad.response_ids)
    assert report.clip_fraction == 0.0 and report.approx_kl == pytest.approx(0.0, abs=1e-7)  # recomputed: ratio 1


@pytest.mark.parametrize(("advantage_sign", "log_ratio", "clipped"), [
    (+1.0, +0.5, True),    # ratio e^0.5 > 1.2 with A > 0: clipped, no gradient
    (-1.0, -0.5, True),    # ratio e^-0.5 < 0.8 with A < 0: clipped, no gradient
    (+1.0, -0.5, False),   # ratio < 0.8 with A > 0: the objective still pulls it up
    (-1.0, +0.5, False),   # ratio > 1.2 with A < 0: the objective still pushes it down
    (+1.0, 0.0, False),    # inside [1 - ε, 1 + ε]
])
def test_clipping_zeroes_the_gradient_only_outside_the_trust_region_in_the_advantage_direction(
        tiny_dir: Path, cpu_settings: Settings, advantage_sign: float, log_ratio: float, clipped: bool) -> None:
    trainer, tok = trainer_for(tiny_dir, cpu_settings)
    ep = episode(text_ids(tok, "def f(x):"), text_ids(tok, "return sorted(x)"), reward=0.0)
    current = collate([ep], torch.zeros(1), [0], trainer.pad_id)
    with torch.no_grad():
        logprobs, _ = logprobs_and_entropy(trainer.model, current, with_entropy=False)
    old = logprobs - log_ratio  # log π − log π_old = log_ratio on every token
    mb = replace(current, old_logprobs=old, has_old_logprobs=torch.ones(1, dtype=torch.bool),
                 advantages=torch.tensor([advantage_sign]))
    grads = gradients(trainer, [mb])
    total = sum(float(g.abs().sum()) for g in grads.values())
    if clipped:
        assert total == 0.0
    else:
        assert total > 1e-6


def test_entropy_bonus_raises_entropy(tiny_dir: Path, cpu_settings: Settings) -> None:
    settings = cpu_settings.with_values(entropy_coef=1.0, skip_zero_advantage_batches=False)
    trainer, tok = trainer_for(tiny_dir, settings)
    prompt = text_ids(tok, "def f(nums):")
    eps = [episode(prompt, text_ids(tok, t), reward=1.0) for t in ("return nums", "return sum(nums)")]
    mb = collate(eps, torch.zeros(2), [0, 1], trainer.pad_id)

    def mean_entropy() -> float:
        with torch.no_grad():
            _, entropy = logprobs_and_entropy(trainer.model, mb)
        return float(entropy[mb.response_mask].mean())

    before = mean_entropy()
    report = trainer.update(eps)  # equal rewards: every advantage 0, only the entropy term acts
    assert report.pg_loss == 0.0
    assert report.loss == pytest.approx(-report.entropy, rel=1e-5)
    assert mean_entropy() > before + 1e-4


def test_groups_are_normalised_independently(tiny_dir: Path, cpu_settings: Settings) -> None:
    trainer, tok = trainer_for(tiny_dir, cpu_settings)
    batch = six_group_batch(tok, per_group=4)
    adv = trainer.advantages(batch)
    for task_type in TaskType:
        for role in Role:
            idx = [i for i, e in enumerate(batch) if e.task_type == task_type and e.role == role]
            group = adv[idx]
            assert float(group.mean()) == pytest.approx(0.0, abs=1e-5)
            assert float(group.std(unbiased=False)) == pytest.approx(1.0, abs=1e-4)
    # rescaling one group's rewards leaves every other group's advantages as they were
    scaled = [e.model_copy(update={"reward": e.reward * 10 + 3}) if (e.task_type, e.role) ==
              (TaskType.INDUCTION, Role.PROPOSE) else e for e in batch]
    adv2 = trainer.advantages(scaled)
    others = [i for i, e in enumerate(batch) if (e.task_type, e.role) != (TaskType.INDUCTION, Role.PROPOSE)]
    assert torch.equal(adv[others], adv2[others])
    # same task type, other role: a separate group
    ded = [episode([1, 2], [3], 1.0, task_type=TaskType.DEDUCTION, role=Role.SOLVE),
           episode([1, 2], [3], 0.0, task_type=TaskType.DEDUCTION, role=Role.PROPOSE)]
    assert trainer.advantages(ded).tolist() == [0.0, 0.0]


def pad_further(mb: MicroBatch, extra_seq: int, extra_resp: int, pad_id: int) -> MicroBatch:
    """The same micro-batch with more padding columns on the right (masked everywhere)."""
    b = mb.rows
    return replace(
        mb,
        input_ids=torch.cat([mb.input_ids, torch.full((b, extra_seq), pad_id)], 1),
        attention_mask=torch.cat([mb.attention_mask, torch.zeros((b, extra_seq), dtype=torch.long)], 1),
        response_positions=torch.cat([mb.response_positions, torch.zeros((b, extra_resp), dtype=torch.long)], 1),
        response_ids=torch.cat([mb.response_ids, torch.full((b, extra_resp), pad_id)], 1),
        response_mask=torch.cat([mb.response_mask, torch.zeros((b, extra_resp), dtype=torch.bool)], 1),
        old_logprobs=torch.cat([mb.old_logprobs, torch.full((b, extra_resp), -3.0)], 1),
    )


def test_padding_changes_neither_loss_nor_gradient(tiny_dir: Path, cpu_settings: Settings) -> None:
    trainer, tok = trainer_for(tiny_dir, cpu_settings.with_values(entropy_coef=0.01))
    batch = six_group_batch(tok, per_group=2)
    adv = trainer.advantages(batch)
    one = collate(batch, adv, list(range(len(batch))), trainer.pad_id)
    base = gradients(trainer, [one], entropy_coef=0.01)
    padded = gradients(trainer, [pad_further(one, 9, 5, trainer.pad_id)], entropy_coef=0.01)
    assert_same_gradients(base, padded)
    trainer.model.zero_grad()
    loss_a = accumulate_gradients(trainer.model, [one], entropy_coef=0.01, device=CPU).loss
    trainer.model.zero_grad()
    loss_b = accumulate_gradients(trainer.model, [pad_further(one, 17, 2, trainer.pad_id)],
                                  entropy_coef=0.01, device=CPU).loss
    assert loss_a == pytest.approx(loss_b, rel=1e-5, abs=1e-7)


def test_micro_batch_accumulation_equals_the_full_batch_gradient(tiny_dir: Path, cpu_settings: Settings) -> None:
    trainer, tok = trainer_for(tiny_dir, cpu_settings.with_values(entropy_coef=0.01))
    batch = six_group_batch(tok, per_group=2)
    adv = trainer.advantages(batch)
    full = [collate(batch, adv, list(range(len(batch))), trainer.pad_id)]
    singles = [collate(batch, adv, [i], trainer.pad_id) for i in range(len(batch))]
    assert len({mb.input_ids.shape[1] for mb in singles}) > 1  # different lengths: the full batch has padding
    assert_same_gradients(gradients(trainer, full, 0.01), gradients(trainer, singles, 0.01))


def test_staleness_filtered_episodes_and_report_fields(tiny_dir: Path, cpu_settings: Settings) -> None:
    trainer, tok = trainer_for(tiny_dir, cpu_settings)
    batch = six_group_batch(tok, per_group=2)
    report = trainer.update(batch, stale_dropped=3)
    assert report.stale_dropped == 3 and report.episodes == 12 and report.micro_batches == 3
    assert [(g.task_type, g.role, g.count) for g in report.groups][:2] == [("deduction", "propose", 2),
                                                                           ("deduction", "solve", 2)]
    assert report.grad_norm > 0 and report.tokens_per_s > 0 and report.peak_memory_mb > 0
    assert report.memory_kind == "cpu_peak_rss"


def test_trainer_entropy_matches_the_core_entropy(tiny_dir: Path, cpu_settings: Settings) -> None:
    from services.algorithm.policy_objective import entropy_from_logits
    from trainer_svc.policy_forward import response_logits

    trainer, tok = trainer_for(tiny_dir, cpu_settings)
    mb = collate(six_group_batch(tok, 1), torch.zeros(6), list(range(6)), trainer.pad_id)
    with torch.no_grad():
        logits = response_logits(trainer.model, mb).float()
        _, entropy = logprobs_and_entropy(trainer.model, mb)
    torch.testing.assert_close(entropy, entropy_from_logits(logits))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_behaviour_logprobs_from_the_local_engine_give_ratio_one(tiny_dir: Path, cpu_settings: Settings,
                                                                 temperature: float) -> None:
    """The trainer's log-probs are aligned with what the engine sampled: same tokens, same positions, same T."""
    from services.inference.local_engine import LocalEngine
    from services.ports import SamplingParams

    engine = LocalEngine(tiny_dir, device="cpu", dtype=torch.float32)
    prompts = [engine.prompt_ids(f"Deduce the output of program {k}.") for k in range(3)]
    sampled = engine.generate(prompts, SamplingParams(max_new_tokens=12, temperature=temperature, seed=7))
    eps = [episode(prompts[i], c.output_ids, float(i), behaviour_logprobs=c.logprobs)
           for i, completions in enumerate(sampled) for c in completions]
    settings = cpu_settings.with_values(temperature=temperature, learning_rate=1e-6)
    trainer, _ = trainer_for(tiny_dir, settings)
    report = trainer.update(eps)
    assert report.tokens == sum(len(e.response_ids) for e in eps) > 0
    assert report.approx_kl == pytest.approx(0.0, abs=1e-4)
    assert report.ratio_max == pytest.approx(1.0, abs=1e-3) and report.clip_fraction == 0.0
