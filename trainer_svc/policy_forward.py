"""Response-token log-probabilities and entropies of a causal LM on one micro-batch.

The backbone runs over prompt + response; only the hidden states at the positions that predict response tokens
(``MicroBatch.response_positions``) go through the LM head, so memory for logits is [b, R, V], not [b, L, V].
Limit: this assumes logits = lm_head(last hidden state), true for the Qwen2/Llama/SmolLM families we use; a model
with a final logit soft-cap (e.g. Gemma 2) would need its cap applied here.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import ContextManager

import torch
from torch import nn

from trainer_svc.batching import MicroBatch
from trainer_svc.token_logprobs import token_logprobs_and_entropy


def response_logits(model: nn.Module, mb: MicroBatch) -> torch.Tensor:
    """[b, R, V] logits at the positions predicting each response token (padding rows hold junk; mask them).

    ``model`` is the causal LM, or the `ResponseLogits` module around it that FSDP shards as its root."""
    if isinstance(model, ResponseLogits):
        return model(mb.input_ids, mb.attention_mask, mb.response_positions)
    return _response_logits_of(model, mb.input_ids, mb.attention_mask, mb.response_positions)


def _response_logits_of(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        response_positions: torch.Tensor) -> torch.Tensor:
    backbone = model.base_model
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    rows = torch.arange(hidden.shape[0], device=hidden.device).unsqueeze(1)
    picked = hidden[rows, response_positions]  # [b, R, H]
    return model.get_output_embeddings()(picked)


class ResponseLogits(nn.Module):
    """The causal LM as one module whose ``forward`` is `response_logits`.

    Why it exists: `response_logits` calls the backbone and the LM head separately (to skip [L, V] logits), so the
    LM's own ``forward`` never runs. FSDP gathers a module's parameters around its ``forward``; sharded as the FSDP
    root, this module's forward is where the root's parameters (embeddings, final norm, LM head; tied or not) are
    gathered for the whole pass. Parameter names are the LM's with a ``policy.`` prefix.
    """

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                response_positions: torch.Tensor) -> torch.Tensor:
        """[b, R, V] logits at ``response_positions`` of each row (see `response_logits`)."""
        return _response_logits_of(self.policy, input_ids, attention_mask, response_positions)


def logprobs_and_entropy(model: nn.Module, mb: MicroBatch, *, with_entropy: bool = True, temperature: float = 1.0
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log π(response token) [b, R], entropy of π at that position [b, R] or None), in float32.

    The log-softmax of the logits shifted by one (divided by the rollout ``temperature``, as the engines define the
    behaviour logprobs and as veRL's actor does), gathered at the response ids; padding positions carry values
    computed from pad inputs and must be masked by ``mb.response_mask``. Computed in row chunks with a hand-written
    backward (`trainer_svc.token_logprobs`), so no float32 [b, R, V] tensor outlives its chunk.
    """
    logits = response_logits(model, mb)
    return token_logprobs_and_entropy(logits, mb.response_ids, temperature=temperature, with_entropy=with_entropy)


def autocast_for(device: torch.device, bf16: bool) -> ContextManager[object]:
    """bf16 autocast on CUDA when asked (fp32 master weights stay in the optimizer); nothing on CPU."""
    if device.type == "cuda" and bf16:
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return nullcontext()


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when present, else CPU; anything else as torch spells it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
