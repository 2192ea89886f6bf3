"""Episodes -> padded micro-batches for the PPO update.

Layout of one micro-batch of b episodes (right padding everywhere):
- ``input_ids`` / ``attention_mask``: [b, L], prompt + response, L = the longest sequence of the micro-batch.
- ``response_positions``: [b, R], for response token k of row i the position whose logits predict it
  (prompt_len_i - 1 + k); R = the longest response. Only these positions go through the LM head, so a long prompt
  costs no [L, V] logits.
- ``response_ids``, ``response_mask``: [b, R], response tokens in order, padding masked.
- ``behaviour_logprobs`` [b, R] and ``has_behaviour_logprobs`` [b]: what the inference engine reported for each
  sampled token (absent for some episodes); used only to measure the engine/trainer mismatch.
- ``old_logprobs`` [b, R] and ``has_old_logprobs`` [b]: π_old of the PPO ratio, recomputed by the policy itself in
  the first epoch, before any optimizer step (as the authors do: the engine samples in another precision and
  kernel, so its numbers would make the first ratio differ from 1); False until then.
Micro-batches are formed from episodes sorted by length so rows of similar length share a pad length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from services.records import Episode


class BatchError(ValueError):
    """An episode cannot be trained on (empty response, logprob count mismatch, ...)."""


@dataclass(frozen=True)
class MicroBatch:
    """One forward/backward pass worth of episodes, as tensors (see the module docstring for shapes)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_positions: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    behaviour_logprobs: torch.Tensor
    has_behaviour_logprobs: torch.Tensor
    old_logprobs: torch.Tensor
    has_old_logprobs: torch.Tensor
    advantages: torch.Tensor
    episode_index: torch.Tensor  # [b] position of each row in the batch's episode list

    @property
    def rows(self) -> int:
        """Number of sequences."""
        return int(self.input_ids.shape[0])

    @property
    def response_tokens(self) -> int:
        """Unmasked response tokens (loss tokens)."""
        return int(self.response_mask.sum())

    def to(self, device: torch.device | str) -> MicroBatch:
        """The same micro-batch with every tensor on ``device``."""
        return MicroBatch(**{name: getattr(self, name).to(device) for name in self.__dataclass_fields__})


def check_episode(episode: Episode) -> None:
    """Raise BatchError when ``episode`` cannot be trained on; says which episode and why."""
    if not episode.prompt_ids:
        raise BatchError(f"episode {episode.id}: empty prompt (the first response token needs a prompt position)")
    if not episode.response_ids:
        raise BatchError(f"episode {episode.id}: empty response (nothing to train on)")
    logprobs = episode.behaviour_logprobs
    if logprobs is not None and len(logprobs) != len(episode.response_ids):
        raise BatchError(f"episode {episode.id}: {len(logprobs)} behaviour logprobs for "
                         f"{len(episode.response_ids)} response tokens")


def plan_micro_batches(lengths: Sequence[int], micro_batch_size: int, micro_batch_tokens: int = 0) -> list[list[int]]:
    """Indices of the sequences in each micro-batch: sorted by length, at most ``micro_batch_size`` rows and, when
    ``micro_batch_tokens`` > 0, at most that many padded tokens (rows x longest); a longer single sequence gets a
    micro-batch of its own."""
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    plans: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = max([lengths[j] for j in current] + [lengths[i]])
        too_many_tokens = micro_batch_tokens > 0 and longest * (len(current) + 1) > micro_batch_tokens
        if current and (len(current) >= micro_batch_size or too_many_tokens):
            plans.append(current)
            current = []
        current.append(i)
    if current:
        plans.append(current)
    return plans


def collate(episodes: Sequence[Episode], advantages: torch.Tensor, indices: Sequence[int], pad_id: int) -> MicroBatch:
    """Tensors of the episodes ``indices`` (positions in ``episodes`` and ``advantages``), right-padded."""
    rows = [episodes[i] for i in indices]
    for episode in rows:
        check_episode(episode)
    seq_len = max(len(e.prompt_ids) + len(e.response_ids) for e in rows)
    resp_len = max(len(e.response_ids) for e in rows)
    b = len(rows)
    input_ids = torch.full((b, seq_len), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((b, seq_len), dtype=torch.long)
    positions = torch.zeros((b, resp_len), dtype=torch.long)
    response_ids = torch.full((b, resp_len), pad_id, dtype=torch.long)
    response_mask = torch.zeros((b, resp_len), dtype=torch.bool)
    behaviour = torch.zeros((b, resp_len), dtype=torch.float32)
    has_behaviour = torch.zeros(b, dtype=torch.bool)
    for row, e in enumerate(rows):
        p, r = len(e.prompt_ids), len(e.response_ids)
        input_ids[row, : p + r] = torch.tensor(e.prompt_ids + e.response_ids, dtype=torch.long)
        attention_mask[row, : p + r] = 1
        positions[row, :r] = torch.arange(p - 1, p - 1 + r)
        response_ids[row, :r] = torch.tensor(e.response_ids, dtype=torch.long)
        response_mask[row, :r] = True
        if e.behaviour_logprobs is not None:
            behaviour[row, :r] = torch.tensor(e.behaviour_logprobs, dtype=torch.float32)
            has_behaviour[row] = True
    return MicroBatch(
        input_ids=input_ids, attention_mask=attention_mask, response_positions=positions,
        response_ids=response_ids, response_mask=response_mask, behaviour_logprobs=behaviour,
        has_behaviour_logprobs=has_behaviour, old_logprobs=torch.zeros((b, resp_len), dtype=torch.float32),
        has_old_logprobs=torch.zeros(b, dtype=torch.bool), advantages=advantages[list(indices)].to(torch.float32),
        episode_index=torch.tensor(list(indices), dtype=torch.long),
    )


def build_micro_batches(episodes: Sequence[Episode], advantages: torch.Tensor, *, pad_id: int,
                        micro_batch_size: int, micro_batch_tokens: int = 0,
                        rows: Sequence[int] | None = None) -> list[MicroBatch]:
    """The episodes as length-grouped micro-batches; ``advantages`` [B] is one scalar per episode (TRR++).
    ``rows``: the positions of the episodes to include (default: all); `episode_index` keeps positions in
    ``episodes``."""
    if advantages.shape != (len(episodes),):
        raise ValueError(f"need one advantage per episode: {len(episodes)} episodes, {tuple(advantages.shape)}")
    for episode in episodes:
        check_episode(episode)
    chosen = list(range(len(episodes))) if rows is None else list(rows)
    lengths = [len(episodes[i].prompt_ids) + len(episodes[i].response_ids) for i in chosen]
    plans = plan_micro_batches(lengths, micro_batch_size, micro_batch_tokens)
    return [collate(episodes, advantages, [chosen[j] for j in plan], pad_id) for plan in plans]


def response_tokens_of(episodes: Sequence[Episode]) -> int:
    """Loss tokens of ``episodes`` (their response tokens), counted without building tensors."""
    return sum(len(e.response_ids) for e in episodes)


def total_response_tokens(micro_batches: Sequence[MicroBatch]) -> int:
    """Loss tokens of the whole batch: the token-mean denominator shared by every micro-batch."""
    return sum(mb.response_tokens for mb in micro_batches)
