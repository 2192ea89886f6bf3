"""Prompts that begin alike, forwarded once (with `prompt_gradient` false).

A self-play batch repeats its prompts: the samples of one solve task carry the same prompt, and the proposer prompts
of one task type share their instructions (~750 of ~1,800 tokens at K = 6). Micro-batches are planned by sequence
length, which already puts such rows side by side. When the prompt runs without autograd, a micro-batch's forward
runs its rows' common prefix once and each distinct prompt once (`prefix_share`, `trainer_svc.policy_forward`):
the same values up to float rounding, less work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PrefixShare:
    """How one micro-batch's prompt forward runs: the ``shared`` positions common to every row once (batch 1), then
    the rest of each distinct prompt (row ``representatives[d]`` stands for prompt d), right-padded to the widest
    prompt (``width``); row i then reads prompt ``prompt_of_row[i]``."""

    shared: int
    width: int
    representatives: tuple[int, ...]
    prompt_of_row: tuple[int, ...]

    @property
    def distinct(self) -> int:
        """Distinct prompts in the micro-batch."""
        return len(self.representatives)

    @property
    def positions(self) -> int:
        """Positions the prompt forward processes (the shared part once, the rest once per distinct prompt)."""
        return self.shared + self.distinct * (self.width - self.shared)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prefix_share(prefixes: Sequence[Sequence[int]]) -> PrefixShare:
    """The shared forward of a micro-batch's prompt prefixes (one per row: its prompt but the last token)."""
    if not prefixes:
        raise ValueError("prefix_share needs at least one row")
    first_row: dict[tuple[int, ...], int] = {}
    for row, prefix in enumerate(prefixes):
        first_row.setdefault(tuple(prefix), row)
    ordered = sorted(first_row)
    width = max(len(p) for p in ordered)
    # in lexicographic order, the first and last prefixes share exactly what all of them share
    shared = len(ordered[0]) if len(ordered) == 1 else common_prefix_length(ordered[0], ordered[-1])
    index = {prefix: d for d, prefix in enumerate(ordered)}
    return PrefixShare(shared=shared, width=width, representatives=tuple(first_row[p] for p in ordered),
                       prompt_of_row=tuple(index[tuple(p)] for p in prefixes))


def rows_prefix_share(input_ids: torch.Tensor, prefix_lengths: torch.Tensor) -> PrefixShare:
    """`prefix_share` of a micro-batch's rows: row i's prefix is ``input_ids[i, :prefix_lengths[i]]``."""
    return prefix_share([input_ids[row, :length].tolist() for row, length in enumerate(prefix_lengths.tolist())])
