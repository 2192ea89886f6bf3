"""`prompt_gradient = false`: prompts run without autograd over a frozen key/value cache. Same log-probs as the full
forward; the gradient is the one that holds the prompt's keys and values constant (checked row by row against a
one-sequence reference), unchanged by activation checkpointing, and different from the full gradient."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_episodes import episode

from services.settings import Settings
from trainer_svc.activation_checkpointing import checkpoint_decoder_layers
from trainer_svc.batching import MicroBatch, build_micro_batches
from trainer_svc.policy_forward import logprobs_and_entropy
from trainer_svc.resume import fresh_trainer

LENGTHS = [(9, 5), (3, 11), (14, 2), (2, 7)]  # (prompt, response): ragged, so padding and prefix widths differ


def micro_batch(seed: int = 0) -> MicroBatch:
    generator = torch.Generator().manual_seed(seed)
    episodes = [episode(torch.randint(5, 200, (p,), generator=generator).tolist(),
                        torch.randint(5, 200, (r,), generator=generator).tolist(), reward=1.0) for p, r in LENGTHS]
    return build_micro_batches(episodes, torch.ones(len(episodes)), pad_id=0, micro_batch_size=len(episodes))[0]


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def summed_logprob_gradients(model: torch.nn.Module, mb: MicroBatch, *,
                             prompt_gradient: bool) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    logprobs, _ = logprobs_and_entropy(model, mb, prompt_gradient=prompt_gradient, with_entropy=False)
    logprobs[mb.response_mask].sum().backward()
    return gradients(model)


def reference_gradients(model: torch.nn.Module, mb: MicroBatch) -> dict[str, torch.Tensor]:
    """One sequence at a time, no padding: the prompt but its last token under no_grad with a plain cache, then the
    last prompt token and the response, the way the format warm-up computes its loss."""
    model.zero_grad(set_to_none=True)
    for row in range(mb.rows):
        length = int(mb.attention_mask[row].sum())
        prefix = int(mb.response_positions[row, 0])
        ids = mb.input_ids[row, :length].unsqueeze(0)
        with torch.no_grad():
            cache = model.model(input_ids=ids[:, :prefix], use_cache=True).cache
        hidden = model.model(input_ids=ids[:, prefix:length - 1], cache=cache, use_cache=True).last_hidden_state
        logprobs = torch.log_softmax(model.lm_head(hidden).float(), dim=-1)
        logprobs.gather(-1, ids[:, prefix + 1:length].unsqueeze(-1)).sum().backward()
    return gradients(model)


def assert_frozen_prompt_gives_the_full_forward(model: torch.nn.Module, mb: MicroBatch) -> None:
    """The response log-probs and entropies with the prompt's forward outside autograd equal the full forward's."""
    with torch.no_grad():
        full, full_entropy = logprobs_and_entropy(model, mb)
        frozen, frozen_entropy = logprobs_and_entropy(model, mb, prompt_gradient=False)
    mask = mb.response_mask
    torch.testing.assert_close(frozen[mask], full[mask], atol=1e-5, rtol=1e-5)
    assert full_entropy is not None and frozen_entropy is not None
    torch.testing.assert_close(frozen_entropy[mask], full_entropy[mask], atol=1e-5, rtol=1e-5)


def test_the_log_probs_and_entropies_are_the_full_forwards(tiny_model: torch.nn.Module) -> None:
    assert_frozen_prompt_gives_the_full_forward(tiny_model, micro_batch())


def test_the_gradient_holds_the_prompts_keys_and_values_constant(tiny_model: torch.nn.Module) -> None:
    mb = micro_batch(1)
    frozen = summed_logprob_gradients(tiny_model, mb, prompt_gradient=False)
    reference = reference_gradients(tiny_model, mb)
    assert frozen.keys() == reference.keys()
    for name in reference:
        torch.testing.assert_close(frozen[name], reference[name], atol=1e-5, rtol=1e-4, msg=name)
    full = summed_logprob_gradients(tiny_model, mb, prompt_gradient=True)
    key_weights = [name for name in full if "k_proj.weight" in name]
    assert key_weights and any(not torch.allclose(full[name], frozen[name], atol=1e-6) for name in key_weights)


def test_checkpointed_layers_recompute_over_the_frozen_cache_to_the_same_gradient(
        tiny_model: torch.nn.Module) -> None:
    mb = micro_batch(2)
    plain = summed_logprob_gradients(tiny_model, mb, prompt_gradient=False)
    checkpoint_decoder_layers(tiny_model)
    checkpointed = summed_logprob_gradients(tiny_model, mb, prompt_gradient=False)
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], atol=1e-6, rtol=1e-5, msg=name)


def test_the_setting_reaches_the_update(tiny_dir: Path, tmp_path: Path) -> None:
    """Two trainers from the same weights, one update on the same batch: same loss, different weights."""
    mb_episodes = [episode(list(range(10, 10 + p)), list(range(50, 50 + r)), reward=float(i % 2))
                   for i, (p, r) in enumerate(LENGTHS)]
    reports, weights = [], []
    for prompt_gradient in (True, False):
        settings = Settings(device="cpu", run_root=tmp_path, gradient_checkpointing=True, learning_rate=1e-3,
                            prompt_gradient=prompt_gradient, skip_zero_advantage_batches=False)
        trainer = fresh_trainer(tiny_dir, settings.trainer).trainer
        reports.append(trainer.update(mb_episodes))
        weights.append({name: p.detach().clone() for name, p in trainer.model.named_parameters()})
    assert reports[0].loss == pytest.approx(reports[1].loss, abs=1e-6)
    assert any(not torch.allclose(weights[0][name], weights[1][name]) for name in weights[0] if "k_proj" in name)
