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


def silence_weight_progress_bars() -> None:
    """Turn off, for this process, the progress bars transformers draws on every model load and save ("Loading
    weights", "Writing model shards"): a run loads or writes weights after every update, and each bar would land in
    its terminal and log. The run's own progress lines say what is happening instead."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
