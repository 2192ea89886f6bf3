"""Activation checkpointing of the decoder layers: keep each layer's input, recompute its insides in the backward pass.

Why our own and not `model.gradient_checkpointing_enable()`: transformers only checkpoints in `train()` mode, and
the trainer runs the policy in `eval()` (no dropout in RL updates). Wrapping each layer's bound `forward` in
non-reentrant `torch.utils.checkpoint` leaves module names, and so `save_pretrained`, the optimizer state and the FSDP
state-dict names, untouched (torch's `checkpoint_wrapper` would insert a `_checkpoint_wrapped_module` level).

Under FSDP2 (`fully_shard`, trainer_svc/fsdp_wrap.py) the wrapping is done before sharding, as torch's recipe for
`checkpoint_wrapper` + `fully_shard` does: FSDP's hooks sit on the layer module's `__call__`, outside the wrapped
`forward`, so the forward runs on gathered parameters, and in the backward FSDP's pre-backward hook gathers the
layer's parameters again before autograd reaches the layer's saved tensors, whose unpacking runs the recomputation.
Tested on CPU/gloo with two ranks: the same weights as the one-process trainer, with every layer recomputed once per
micro-batch (tests/trainer_svc/test_fsdp_update.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


_kept = threading.local()


@contextmanager
def activations_kept() -> Iterator[None]:
    """Checkpointed layers keep their activations inside this block (this thread): a forward that extends a
    key/value cache cannot be recomputed, since the recomputation would extend the cache a second time."""
    before = getattr(_kept, "on", False)
    _kept.on = True
    try:
        yield
    finally:
        _kept.on = before


def _checkpointed(forward: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled() or getattr(_kept, "on", False):  # inference, or a cached forward: as is
            return forward(*args, **kwargs)
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    run.azr_checkpointed = True  # type: ignore[attr-defined]  # a mark on the function object, read back above
    return run


def checkpoint_decoder_layers(model: nn.Module) -> int:
    """Make every decoder layer recompute its activations in backward; returns how many layers (idempotent)."""
    layers = decoder_layers(model)
    for layer in layers:
        if not getattr(layer.forward, "azr_checkpointed", False):
            layer.forward = _checkpointed(layer.forward)
    return len(layers)
