"""Which of the batch's micro-batches one rank trains on.

Every rank holds the whole batch as the same list of micro-batches; rank r takes micro-batches r, r + W, r + 2W, ...
(W ranks). FSDP's all-gathers and reduce-scatters are collectives, so every rank must run the same number of forward
and backward passes: a rank with one micro-batch fewer than the others runs one *idle pass* (a real micro-batch with
its loss multiplied by 0: all collectives, zero gradient).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankShare:
    """The micro-batches (positions in the batch's list) a rank trains on, and its idle passes."""

    indices: tuple[int, ...]
    idle_passes: int = 0

    @property
    def passes(self) -> int:
        """Forward/backward passes this rank runs per PPO epoch (equal on every rank)."""
        return len(self.indices) + self.idle_passes


def whole_batch(micro_batch_count: int) -> RankShare:
    """One process: every micro-batch, no idle pass."""
    return RankShare(indices=tuple(range(micro_batch_count)))


def rank_share(micro_batch_count: int, rank: int, world_size: int) -> RankShare:
    """Rank ``rank``'s round-robin share of ``micro_batch_count`` micro-batches, padded with idle passes to the
    largest share."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside a world of {world_size}")
    if micro_batch_count < 1:
        raise ValueError("a batch has at least one micro-batch")
    indices = tuple(range(rank, micro_batch_count, world_size))
    most = -(-micro_batch_count // world_size)  # ceil
    return RankShare(indices=indices, idle_passes=most - len(indices))
