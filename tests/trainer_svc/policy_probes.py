"""Probes of what an update did to the policy, shared by the CPU and the CUDA trainer tests."""

from __future__ import annotations

import torch
from trainer_episodes import rewarded_pair

from services.records import Episode
from services.records.updates import UpdateReport
from trainer_svc.batching import collate
from trainer_svc.policy_forward import logprobs_and_entropy
from trainer_svc.ppo_update import PolicyTrainer


def sequence_logprob(trainer: PolicyTrainer, ep: Episode) -> float:
    """Σ log π(response | prompt) under the trainer's current weights, in float32 on the trainer's device."""
    mb = collate([ep], torch.zeros(1), [0], trainer.pad_id).to(trainer.device)
    with torch.no_grad():
        logprobs, _ = logprobs_and_entropy(trainer.model, mb, with_entropy=False)
    return float(logprobs[mb.response_mask].sum())


def update_on_rewarded_pair(trainer: PolicyTrainer, tokenizer) -> tuple[UpdateReport, Episode, Episode]:
    """One update on a +1 and a −0.5 response to the same prompt; asserts the first gained log-probability and the
    second lost some. Returns the report and the two episodes."""
    good, bad = rewarded_pair(tokenizer)
    before = {e.id: sequence_logprob(trainer, e) for e in (good, bad)}
    report = trainer.update([good, bad])
    after = {e.id: sequence_logprob(trainer, e) for e in (good, bad)}
    assert after[good.id] > before[good.id] + 1e-3
    assert after[bad.id] < before[bad.id] - 1e-3
    return report, good, bad
