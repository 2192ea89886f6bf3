"""Activation checkpointing: same gradients, fewer saved activations, checkpoints with unchanged names."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainer_svc.activation_checkpointing import checkpoint_decoder_layers, decoder_layers
from trainer_svc.resume import fresh_trainer


def _model(tiny_dir: Path) -> torch.nn.Module:
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32, local_files_only=True)
    model.eval()  # as the trainer runs it
    return model


def _loss_and_saved_bytes(model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Forward with autograd, counting the bytes autograd keeps for backward inside the decoder stack (the LM head
    keeps its logits either way)."""
    saved = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal saved
        saved += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
    logits = model.lm_head(hidden)
    loss = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids.unsqueeze(-1)).mean()
    return loss, saved


def test_checkpointed_layers_give_the_same_gradients_and_keep_fewer_activations(tiny_dir: Path) -> None:
    torch.manual_seed(0)
    ids = torch.randint(5, 200, (2, 96))
    plain, checkpointed = _model(tiny_dir), _model(tiny_dir)
    assert checkpoint_decoder_layers(checkpointed) == len(decoder_layers(plain))

    plain_loss, plain_saved = _loss_and_saved_bytes(plain, ids)
    ckpt_loss, ckpt_saved = _loss_and_saved_bytes(checkpointed, ids)
    plain_loss.backward()
    ckpt_loss.backward()

    assert torch.equal(plain_loss.detach(), ckpt_loss.detach())
    for (name, p), (_, q) in zip(plain.named_parameters(), checkpointed.named_parameters()):
        assert p.grad is not None and q.grad is not None, name
        assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-5), name
    assert ckpt_saved < plain_saved / 3, (ckpt_saved, plain_saved)


def test_checkpointing_is_idempotent_and_keeps_parameter_names(tiny_dir: Path) -> None:
    model = _model(tiny_dir)
    names = [name for name, _ in model.named_parameters()]
    checkpoint_decoder_layers(model)
    first = [layer.forward for layer in decoder_layers(model)]
    checkpoint_decoder_layers(model)
    assert [layer.forward for layer in decoder_layers(model)] == first
    assert [name for name, _ in model.named_parameters()] == names
    with torch.no_grad():  # no autograd: the plain forward, same result
        ids = torch.randint(5, 200, (1, 16))
        assert torch.equal(model(input_ids=ids).logits, _model(tiny_dir)(input_ids=ids).logits)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_setting_switches_it_on_in_the_trainer(tiny_dir: Path, cpu_settings, enabled: bool) -> None:
    settings = cpu_settings.with_values(gradient_checkpointing=enabled)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    marked = [getattr(layer.forward, "azr_checkpointed", False) for layer in decoder_layers(loaded.trainer.model)]
    assert marked and all(flag == enabled for flag in marked)


def test_a_model_without_decoder_layers_is_refused() -> None:
    with pytest.raises(ValueError, match="no `model.layers`"):
        checkpoint_decoder_layers(torch.nn.Linear(2, 2))
