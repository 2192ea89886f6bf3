"""Prefill a batch of prompts without computing padding or a shared prefix twice.

A left-padded batch forward computes every pad position, and a step's prompts are long and alike: the proposer
prompts of one task type share the system message and the whole task template before their K references (~900 of
~1,700 tokens), and every prompt shares the system message. Here each prompt is prefilled on its own, starting from
the cached keys and values of the longest prefix it shares with a prompt prefilled before it (at least
`MIN_SHARED_PREFIX` tokens), and the rows' caches are then laid side by side, right-aligned, into one left-padded
cache: the layout the decoding loop continues from (pads masked, positions counting real tokens only).

Same logits as one padded forward up to float rounding (a row's keys and values do not depend on the other rows);
the compute is the sum of the prompts' unshared tokens instead of rows x the longest prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedConfig

MIN_SHARED_PREFIX = 32
"""Shorter common prefixes are prefilled again: copying a cache costs more than a few positions of compute."""


class CachedLayer(Protocol):
    """One layer of a filled KV cache: keys and values [batch, heads, positions, head dim]."""

    keys: torch.Tensor
    values: torch.Tensor


class KvCache(Protocol):
    """What the decoding uses of a transformers DynamicCache: its filled layers and the edits of its batch rows."""

    @property
    def layers(self) -> Sequence[CachedLayer]: ...

    def batch_repeat_interleave(self, repeats: int) -> None: ...

    def batch_select_indices(self, indices: torch.Tensor) -> None: ...


@dataclass
class PrefilledBatch:
    """The left-padded batch as the decoding loop needs it after the prefill."""

    cache: KvCache  # a transformers DynamicCache holding every row's prompt, right-aligned to the longest
    last_logits: torch.Tensor  # [rows, V] logits at each prompt's last position
    attention_mask: torch.Tensor  # [rows, width] 1 on real positions
    positions: torch.Tensor  # [rows, width] position id of each column (real tokens counted from 0)


@dataclass(frozen=True)
class PrefillProgress:
    """Prompt positions computed so far, of all that need computing (shared prefixes counted once)."""

    computed: int
    total: int


def shared_prefix_plan(prompts: Sequence[Sequence[int]], min_shared: int = MIN_SHARED_PREFIX
                       ) -> list[tuple[int | None, int]]:
    """For each prompt (in order): (an earlier prompt whose cache it starts from, or None; how many leading tokens
    it takes from it). The donor is the earlier prompt with the longest common prefix, capped one short of the
    prompt's length so its last position is always computed (its logits start the decoding)."""
    plan: list[tuple[int | None, int]] = []
    for index, prompt in enumerate(prompts):
        best, best_length = None, 0
        for earlier in range(index):
            length = _common_prefix(prompt, prompts[earlier])
            if length > best_length:
                best, best_length = earlier, length
        best_length = min(best_length, len(prompt) - 1)
        plan.append((best, best_length) if best_length >= min_shared else (None, 0))
    return plan


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


Forward = Callable[..., tuple[KvCache, torch.Tensor]]
"""forward(cache or None, input_ids=, attention_mask=, position_ids=) -> (the cache after, last-position logits
[batch, V]): one causal-LM forward pass with a KV cache (services.inference.decoding builds it for the model)."""


def prefill_batch(forward: Forward, prompts: Sequence[Sequence[int]], *, chunk_tokens: int,
                  before_forward: Callable[[], None], cache_config: PreTrainedConfig | None, device: torch.device,
                  on_progress: Callable[[PrefillProgress], None] | None = None) -> PrefilledBatch:
    """Prefill ``prompts`` (each non-empty) into one left-padded cache; see the module docstring. ``chunk_tokens``
    > 0: at most that many positions per forward, each chunk reported to ``on_progress`` when given; 0: each
    prompt's unshared part in one forward. ``cache_config``: the model's config (the cache's layer types)."""
    plan = shared_prefix_plan(prompts)
    total = sum(len(prompt) - taken for prompt, (_, taken) in zip(prompts, plan))
    computed = 0
    rows: list[list[tuple[torch.Tensor, torch.Tensor]]] = []  # per prompt, per layer: keys, values [1, h, len, d]
    last_logits = []
    for prompt, (donor, taken) in zip(prompts, plan):
        cache: KvCache | None = None if donor is None else _cache([(k[:, :, :taken], v[:, :, :taken])
                                                        for k, v in rows[donor]], cache_config)
        ids = torch.tensor([list(prompt)], dtype=torch.long, device=device)
        step = chunk_tokens if chunk_tokens > 0 else len(prompt)
        for start in range(taken, len(prompt), step):
            end = min(start + step, len(prompt))
            before_forward()
            cache, logits = forward(cache, input_ids=ids[:, start:end],
                                    attention_mask=torch.ones((1, end), dtype=torch.long, device=device),
                                    position_ids=torch.arange(start, end, device=device).unsqueeze(0))
            computed += end - start
            if on_progress is not None:
                on_progress(PrefillProgress(computed=computed, total=total))
        assert cache is not None  # every prompt computes at least its last position
        rows.append([(layer.keys, layer.values) for layer in cache.layers])
        last_logits.append(logits)
    return _left_padded(rows, [len(p) for p in prompts], torch.cat(last_logits), cache_config, device)


def _cache(layers: list[tuple[torch.Tensor, torch.Tensor]], config: PreTrainedConfig | None) -> KvCache:
    """A transformers DynamicCache holding ``layers`` (keys, values per layer)."""
    from transformers import DynamicCache

    return cast(KvCache, DynamicCache(ddp_cache_data=layers, config=config))


def _left_padded(rows: list[list[tuple[torch.Tensor, torch.Tensor]]], lengths: list[int], last_logits: torch.Tensor,
                 config: PreTrainedConfig | None, device: torch.device) -> PrefilledBatch:
    """Every row's cache right-aligned into one [rows, h, width, d] cache per layer, zeros (masked) on the left."""
    width = max(lengths)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for row, length in enumerate(lengths):
        mask[row, width - length:] = 1
    layers = []
    for layer in range(len(rows[0])):
        keys, values = rows[0][layer]
        shape = (len(rows), keys.shape[1], width, keys.shape[3])
        batch_keys = keys.new_zeros(shape)
        batch_values = values.new_zeros((len(rows), values.shape[1], width, values.shape[3]))
        for row, length in enumerate(lengths):
            batch_keys[row, :, width - length:] = rows[row][layer][0][0]
            batch_values[row, :, width - length:] = rows[row][layer][1][0]
        layers.append((batch_keys, batch_values))
    cache = _cache(layers, config)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return PrefilledBatch(cache=cache, last_logits=last_logits, attention_mask=mask, positions=positions)
