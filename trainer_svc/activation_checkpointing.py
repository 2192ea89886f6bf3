"""Activation checkpointing of the decoder layers: keep each layer's input, recompute its insides in the backward pass.

Why our own and not `model.gradient_checkpointing_enable()`: transformers only checkpoints in `train()` mode, and
the trainer runs the policy in `eval()` (no dropout in RL updates). Wrapping each layer's bound `forward` leaves
module names, and so `save_pretrained` and the optimizer state, untouched. Limit: single-process trainers only; under
FSDP the layers' parameters are resharded between forward and the recompute (FSDP has its own wrapper for that).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The transformer blocks of an HF causal LM (`model.model.layers` for Llama/Qwen-style models)."""
    backbone = getattr(model, "model", None)
    layers = getattr(backbone, "layers", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise ValueError(f"{type(model).__name__} has no `model.layers` to checkpoint")
    return layers


def _checkpointed(forward: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():  # logprob recomputation and inference: nothing to save memory on
            return forward(*args, **kwargs)
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    run.azr_checkpointed = True  # type: ignore[attr-defined]
    return run


def checkpoint_decoder_layers(model: nn.Module) -> int:
    """Make every decoder layer recompute its activations in backward; returns how many layers (idempotent)."""
    layers = decoder_layers(model)
    for layer in layers:
        if not getattr(layer.forward, "azr_checkpointed", False):
            layer.forward = _checkpointed(layer.forward)  # type: ignore[method-assign]
    return len(layers)
