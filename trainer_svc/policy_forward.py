"""Response-token log-probabilities and entropies of a causal LM on one micro-batch.

The backbone runs over prompt + response; only the hidden states at the positions that predict response tokens
(``MicroBatch.response_positions``) reach the LM head, and the head is applied there one chunk of tokens at a time
inside the log-prob function (`trainer_svc.head_logprobs`), so neither [b, L, V] nor [b, R, V] logits ever exist.
Limit: this assumes logits = lm_head(last hidden state), true for the Qwen2/Llama/SmolLM families we use; a model
with a final logit soft-cap (e.g. Gemma 2) would need its cap applied here.

With ``prompt_gradient`` False (`TrainerSettings.prompt_gradient`; not in the paper) the prompt, all but its last
token, runs first without autograd and leaves its keys and values in a `FrozenPrefixCache`; then the positions that
predict response tokens run with gradients on top of it. Same values; the gradient leaves out what reaches the
weights through the prompt's keys and values. That prompt forward runs the micro-batch's common prefix once and each
distinct prompt once (`trainer_svc.prompt_sharing`): the samples of one task share their whole prompt.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from services.compute.cpu_features import cpu_has_native_bf16
from services.inference.causal_lm import hf_model
from services.settings import TrainerSettings
from trainer_svc.batching import MicroBatch
from trainer_svc.head_logprobs import DEFAULT_CHUNK_TOKENS, head_logprobs_and_entropy
from trainer_svc.prompt_sharing import rows_prefix_share


class FrozenPrefixCache(DynamicCache):
    """A key/value cache filled once (the prompt's), then frozen: `update` returns the prefix's keys and values with
    the new ones appended without storing them, so a forward over the rest of the sequence can run again with the
    same result (activation checkpointing recomputes it in the backward)."""

    frozen = False

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: object,
               **kwargs: object) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.frozen:
            return super().update(key_states, value_states, layer_idx, *args, **kwargs)
        layer = self.layers[layer_idx]
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if not isinstance(keys, torch.Tensor) or not isinstance(values, torch.Tensor):
            raise TypeError(f"layer {layer_idx} of the prompt's cache holds no keys and values (an attention kind "
                            "prompt_gradient = false does not support)")
        return torch.cat([keys, key_states], dim=-2), torch.cat([values, value_states], dim=-2)


def response_hidden(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    response_positions: torch.Tensor, prompt_gradient: bool = True) -> torch.Tensor:
    """[b, R, H] last hidden states at the positions predicting each response token (padding rows hold junk)."""
    if not prompt_gradient and int(response_positions[:, 0].min()) > 0:  # every prompt longer than one token
        return _hidden_over_frozen_prompt(model, input_ids, attention_mask, response_positions)
    backbone = hf_model(model).base_model
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    rows = torch.arange(hidden.shape[0], device=hidden.device).unsqueeze(1)
    return hidden[rows, response_positions]


def _hidden_over_frozen_prompt(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                               response_positions: torch.Tensor) -> torch.Tensor:
    """`response_hidden` with the prompt's forward outside autograd. Row i's prefix is its first p_i tokens, p_i =
    ``response_positions[i, 0]`` (the prompt but its last token), right-padded to the longest [b, P]; the tail is the
    tokens at ``response_positions`` [b, R] (the last prompt token and the response but its last), at those
    positions, attending to the row's prefix and to its own earlier tail tokens."""
    causal = hf_model(model)
    backbone = causal.base_model
    rows = torch.arange(input_ids.shape[0], device=input_ids.device).unsqueeze(1)
    prefix_lengths = response_positions[:, 0]
    width = max(int(prefix_lengths.max()), 1)
    prefix_mask = (torch.arange(width, device=input_ids.device).unsqueeze(0) < prefix_lengths.unsqueeze(1))
    tail_ids = input_ids[rows, response_positions]
    # a row's padding sits after its tail, so causality alone keeps it from the tail's real positions
    tail_mask = attention_mask[rows, response_positions].bool() & (response_positions >= prefix_lengths.unsqueeze(1))
    cache = FrozenPrefixCache(config=causal.config)
    with torch.no_grad():
        fill_prompt_cache(backbone, input_ids, prefix_lengths, cache)
    cache.frozen = True
    return backbone(input_ids=tail_ids, attention_mask=torch.cat([prefix_mask, tail_mask], dim=1).long(),
                    position_ids=response_positions, cache=cache, use_cache=True).last_hidden_state


def fill_prompt_cache(backbone: nn.Module, input_ids: torch.Tensor, prefix_lengths: torch.Tensor,
                       cache: DynamicCache) -> None:
    """Leave the prompts' keys and values in ``cache``, [b, ·, width, ·] per layer in row order, forwarding the
    micro-batch's common prefix once and each distinct prompt once (`trainer_svc.prompt_sharing`)."""
    share = rows_prefix_share(input_ids, prefix_lengths)
    device = input_ids.device
    representatives = torch.tensor(share.representatives, dtype=torch.long, device=device)
    if share.shared:
        backbone(input_ids=input_ids[representatives[:1], :share.shared],
                 attention_mask=torch.ones((1, share.shared), dtype=torch.long, device=device), cache=cache,
                 use_cache=True)
        _select_rows(cache, torch.zeros(share.distinct, dtype=torch.long, device=device))
    if share.width > share.shared:  # each distinct prompt's rest, right-padded; positions follow the cache's length
        mask = torch.arange(share.width, device=device).unsqueeze(0) < prefix_lengths[representatives].unsqueeze(1)
        backbone(input_ids=input_ids[representatives, share.shared:share.width], attention_mask=mask.long(),
                 cache=cache, use_cache=True)
    _select_rows(cache, torch.tensor(share.prompt_of_row, dtype=torch.long, device=device))


def _select_rows(cache: DynamicCache, rows: torch.Tensor) -> None:
    """Every layer's keys and values become rows ``rows`` of what they were (a row may repeat)."""
    for index, layer in enumerate(cache.layers):
        if not isinstance(layer, DynamicLayer) or layer.keys is None or layer.values is None:
            raise TypeError(f"layer {index} of the prompt's cache holds no keys and values (an attention kind "
                            "prompt_gradient = false does not support)")
        layer.keys = layer.keys.index_select(0, rows)
        layer.values = layer.values.index_select(0, rows)


def forwarded_positions(mb: MicroBatch, prompt_gradient: bool = True) -> int:
    """Input positions the forward of ``mb`` processes, padding included: rows x width for the full forward; with
    ``prompt_gradient`` False, the shared prompt forward's positions plus the tail's (rows x longest response)."""
    prefix_lengths = mb.response_positions[:, 0]
    if prompt_gradient or int(prefix_lengths.min()) <= 0:
        return int(mb.input_ids.numel())
    return rows_prefix_share(mb.input_ids, prefix_lengths).positions + int(mb.response_positions.numel())


def response_logits(model: nn.Module, mb: MicroBatch) -> torch.Tensor:
    """[b, R, V] logits at the positions predicting each response token, materialised in full: what the update
    computed before the chunked head, kept as the reference in tests and the baseline of bench/trainer.py.
    ``model`` is the causal LM (not the FSDP root)."""
    picked = response_hidden(model, mb.input_ids, mb.attention_mask, mb.response_positions)
    return hf_model(model).get_output_embeddings()(picked)


def _head_of(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    head = hf_model(model).get_output_embeddings()
    return head.weight, getattr(head, "bias", None)


def _logprobs_of(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 response_positions: torch.Tensor, response_ids: torch.Tensor, temperature: float,
                 with_entropy: bool, chunk_tokens: int,
                 prompt_gradient: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    picked = response_hidden(model, input_ids, attention_mask, response_positions, prompt_gradient)
    weight, bias = _head_of(model)
    return head_logprobs_and_entropy(picked, weight, bias, response_ids, temperature=temperature,
                                     with_entropy=with_entropy, chunk_tokens=chunk_tokens)


class ResponseLogprobs(nn.Module):
    """The causal LM as one module whose ``forward`` is `logprobs_and_entropy`: the FSDP root.

    Why it exists: the update calls the backbone and then the chunked head function with the head's weight, so the
    LM's own ``forward`` never runs. FSDP gathers a module's parameters around its ``forward``; sharded as the FSDP
    root, this module's forward is where the root's parameters (embeddings, final norm, LM head; tied or not) are
    gathered for the whole pass. Parameter names are the LM's with a ``policy.`` prefix.
    """

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, response_positions: torch.Tensor,
                response_ids: torch.Tensor, temperature: float = 1.0, with_entropy: bool = True,
                chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
                prompt_gradient: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(log-probs [b, R], entropies [b, R] or None) of the response tokens (see `logprobs_and_entropy`)."""
        return _logprobs_of(self.policy, input_ids, attention_mask, response_positions, response_ids, temperature,
                            with_entropy, chunk_tokens, prompt_gradient)


def logprobs_and_entropy(model: nn.Module, mb: MicroBatch, *, with_entropy: bool = True, temperature: float = 1.0,
                         chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
                         prompt_gradient: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log π(response token) [b, R], entropy of π at that position [b, R] or None), in float32.

    The log-softmax of the logits shifted by one (divided by the rollout ``temperature``, as the engines define the
    behaviour logprobs and as veRL's actor does), gathered at the response ids; padding positions carry values
    computed from pad inputs and must be masked by ``mb.response_mask``. The LM head runs per ``chunk_tokens``
    response positions inside the function (`trainer_svc.head_logprobs`), so no [b, R, V] tensor is ever built.
    ``model`` is the causal LM, or the `ResponseLogprobs` module around it that FSDP shards as its root.
    ``prompt_gradient`` False: the prompt's forward runs without autograd (the module docstring).
    """
    args = (mb.input_ids, mb.attention_mask, mb.response_positions, mb.response_ids)
    if isinstance(model, ResponseLogprobs):
        return model(*args, temperature=temperature, with_entropy=with_entropy, chunk_tokens=chunk_tokens,
                     prompt_gradient=prompt_gradient)
    return _logprobs_of(model, *args, temperature, with_entropy, chunk_tokens, prompt_gradient)


def autocast_for(device: torch.device, bf16: bool) -> AbstractContextManager[object]:
    """bf16 autocast on CUDA or CPU when asked (fp32 master weights stay in the optimizer); nothing otherwise."""
    if bf16 and device.type in ("cuda", "cpu"):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


def bf16_autocast(settings: TrainerSettings, device: torch.device) -> bool:
    """Whether the trainer's forward passes autocast to bf16 on `device`: `trainer_bf16` on CUDA,
    `trainer_bf16_cpu` on a CPU that multiplies bf16 natively."""
    if device.type == "cuda":
        return settings.trainer_bf16
    return device.type == "cpu" and settings.trainer_bf16_cpu and cpu_has_native_bf16()


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when present, else CPU; anything else as torch spells it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
