"""The switches of one update's objective, read from the settings: which TRR++ statistics (Eq 8) give the
advantages, the clip range and dual clip of Eq 9, and how its token losses are aggregated. The math is
services/algorithm/objectives.py; which side of the paper / released-code differences each value is:
docs/paper-vs-code.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from services.algorithm.objectives import (
    LossAggMode,
    loss_aggregation_weights,
    trr_plus_plus_advantages,
    trr_plus_plus_advantages_token_weighted,
)
from services.records import Episode
from services.settings import TrainerSettings
from trainer_svc.batching import group_ids_of

TrrStatistics = Literal["per-sample", "token-weighted"]


@dataclass(frozen=True)
class PolicyLoss:
    """Eq 9's switches (settings of the same names); the defaults are the settings' defaults."""

    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    clip_ratio_c: float = 0.0  # 0: no dual clip
    loss_agg_mode: LossAggMode = "token-mean"
    loss_agg_micro_batch_size: int = 16
    behaviour_is_cap: float = 0.0  # 0: no truncated importance sampling of the engine/trainer mismatch

    @classmethod
    def from_settings(cls, settings: TrainerSettings) -> PolicyLoss:
        return cls(clip_ratio_low=settings.clip_ratio_low, clip_ratio_high=settings.clip_ratio_high,
                   clip_ratio_c=settings.clip_ratio_c, loss_agg_mode=settings.loss_agg_mode,
                   loss_agg_micro_batch_size=settings.loss_agg_micro_batch_size,
                   behaviour_is_cap=settings.behaviour_is_cap)

    def clip_arguments(self) -> dict[str, Any]:
        """The keyword arguments of `ppo_clip_loss` that set its clip range and dual clip."""
        return {"clip_ratio_low": self.clip_ratio_low, "clip_ratio_high": self.clip_ratio_high,
                "clip_ratio_c": self.clip_ratio_c}

    def episode_weights(self, episodes: Sequence[Episode]) -> torch.Tensor:
        """[B] weight of each response token of episode b in the batch loss, over the whole batch in its order
        (`loss_aggregation_weights`), so leaving episodes out of the forward pass never changes the others' weight."""
        lengths = torch.tensor([len(e.response_ids) for e in episodes], dtype=torch.long)
        return loss_aggregation_weights(lengths, self.loss_agg_mode, micro_batch_size=self.loss_agg_micro_batch_size)


DEFAULT_POLICY_LOSS = PolicyLoss()
"""The settings' defaults: symmetric clip 0.2, no dual clip, one token-mean over the batch."""


def trr_advantages(episodes: Sequence[Episode], statistics: TrrStatistics) -> torch.Tensor:
    """Eq 8 advantages [B] of ``episodes``, normalised within each (task type x role) group of the batch, with
    per-sample statistics (Eq 8 as written) or token-weighted ones (the released code's)."""
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
    if statistics == "token-weighted":
        lengths = torch.tensor([len(e.response_ids) for e in episodes], dtype=torch.long)
        return trr_plus_plus_advantages_token_weighted(rewards, group_ids_of(episodes), lengths)
    if statistics == "per-sample":
        return trr_plus_plus_advantages(rewards, group_ids_of(episodes))
    raise ValueError(f"unknown trr_statistics {statistics!r}")
