"""The transformers surface of the models we load, typed once for the type checker.

Every model the engine and the trainer hold is a transformers `PreTrainedModel` (a LoRA model is its base model with
adapters injected), but most code holds it as a plain `torch.nn.Module`, whose attribute lookup the type checker
reads as "a Tensor or a Module". The few places that call transformers' own methods (`save_pretrained`,
`get_input_embeddings`, `get_output_embeddings`, `base_model`) go through `hf_model`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def hf_model(model: nn.Module) -> PreTrainedModel:
    """`model` as the transformers model it is; for the type checker only (nothing is checked or converted)."""
    return cast("PreTrainedModel", model)
