"""The policy objective in one place: TRR++ advantages (Eq 8), the PPO-clip token loss (Eq 9), how its token losses
become the batch loss, the truncated importance weights, and `policy_loss_terms`, the one function the training loop
(trainer_svc/ppo_update.py) calls per micro-batch. The TRR++ statistics (`TRR_STATISTICS`) and the aggregation modes
(`LOSS_AGGREGATIONS`) are registered by name, as veRL's core_algos.py registers its losses.

Pure functions, no I/O, no state. Shapes: B sequences, T response-token positions (right-padded), V vocabulary
entries.

Decisions, with evidence (paper = Zhao et al. 2025; reference = the authors' veRL code,
LeapLabTHU/Absolute-Zero-Reasoner):
- TRR++ statistics: per sample (Eq 8 as written; population std, eps added to σ, so each group's advantages have
  mean 0 and std 1 exactly, also in small groups) or token-weighted (the released code's veRL masked_whiten: weighted
  by response length, Bessel's N/(N−1) over tokens, eps = 1e-8 inside the square root; reference §5.2). A group whose
  rewards are all equal gets exactly 0 (max == min, so rounding in μ cannot leak out).
- Token level: the reward sits on the last response token; with γ = 1 and no KL term (Table 3) the return at every
  response token equals that scalar, so each token's advantage is its sequence's advantage (REINFORCE++ outcome
  supervision; reference §5.2). `broadcast_to_tokens` does exactly that.
- PPO (Eq 9), no KL: clip range [1 − ε_low, 1 + ε_high], symmetric 0.2 by default (the paper branch's), 0.2/0.28 and
  a dual clip c = 3 for A < 0 in the released code (§5.3); the token losses become one number by
  `loss_aggregation_weights`. Each difference is a setting (`PolicyLoss`): docs/paper-vs-code.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

import torch

from services.algorithm.task_types import TASK_GROUPS, Role, TaskType

NUM_GROUPS = len(TASK_GROUPS)
LOG_RATIO_CLAMP = 20.0
"""Numerical guard on log(π/π_old) before exp (as veRL); exp(20) ≈ 4.9e8, far outside any clip range."""


class ScoredResponse(Protocol):
    """What the objective reads of an episode (services.records.Episode): its group, reward and response."""

    @property
    def task_type(self) -> TaskType: ...
    @property
    def role(self) -> Role: ...
    @property
    def reward(self) -> float: ...
    @property
    def response_ids(self) -> list[int]: ...


# --------------------------------------------------------------------------------------------------- TRR++


def group_index(task_type: TaskType | str, role: Role | str) -> int:
    """Index of the (task type, role) group in TASK_GROUPS (0..5), the ``group_ids`` of `trr_plus_plus_advantages`."""
    return TASK_GROUPS.index((TaskType(task_type), Role(role)))


def trr_plus_plus_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, *, eps: float = 1e-6) -> torch.Tensor:
    """Eq 8, Task-Relative REINFORCE++: A = (r − μ_g) / (σ_g + eps), μ_g and σ_g per (task type × role) group.

    rewards: [B] float, one Eq 6 scalar per sequence. group_ids: [B] integer, index into TASK_GROUPS (0..5).
    Returns [B] in the rewards' floating dtype (float32 for integer rewards). σ_g is the biased (population) std over
    the group's samples; a group whose rewards are all equal (a singleton included) gets 0. Statistics are computed in
    float64 and each group's only from its own members, so other groups cannot change its advantages.
    """
    _check_eps(eps)
    r, ids, out_dtype = _trr_inputs(rewards, group_ids)
    if r.numel() == 0:
        return torch.zeros(0, dtype=out_dtype, device=rewards.device)
    counts = _group_sums(ids, torch.ones_like(r))
    mean = _group_sums(ids, r) / counts.clamp(min=1.0)
    centred = r - mean[ids]
    std = (_group_sums(ids, centred * centred) / counts.clamp(min=1.0)).sqrt()
    adv = centred / (std[ids] + eps)
    return _zero_flat_groups(adv, r, ids).to(out_dtype)


RELEASED_CODE_TRR_EPS = 1e-8
"""The eps inside the square root of the released code's whitening (veRL masked_whiten: rsqrt(var + 1e-8))."""


def trr_plus_plus_advantages_token_weighted(rewards: torch.Tensor, group_ids: torch.Tensor,
                                            response_lengths: torch.Tensor, *,
                                            eps: float = RELEASED_CODE_TRR_EPS) -> torch.Tensor:
    """Eq 8 with the released code's statistics (reference §5.2: veRL masked_whiten over each task-role sub-batch).

    rewards: [B] float; group_ids: [B] integer (0..5); response_lengths: [B] integer |o_b|. Each response token
    carries its sequence's reward, so with N_g = Σ_{b∈g} |o_b| tokens in group g: μ_g = Σ_b |o_b| r_b / N_g,
    var_g = Σ_b |o_b| (r_b − μ_g)² / (N_g − 1) (Bessel's correction over tokens), A_b = (r_b − μ_g) / sqrt(var_g + eps).
    Returns [B] like `trr_plus_plus_advantages`; a group whose rewards are all equal gets 0 (the released code's
    var = 0 gives that too, up to rounding); a sequence without response tokens does not count in the statistics.
    """
    _check_eps(eps)
    r, ids, out_dtype = _trr_inputs(rewards, group_ids)
    if response_lengths.shape != rewards.shape:
        raise ValueError(f"response_lengths must be [B] like rewards, got {tuple(response_lengths.shape)}")
    if r.numel() == 0:
        return torch.zeros(0, dtype=out_dtype, device=rewards.device)
    weights = response_lengths.detach().to(device=r.device, dtype=torch.float64)
    if bool((weights < 0).any()):
        raise ValueError("response_lengths must be >= 0")
    tokens = _group_sums(ids, weights)
    mean = _group_sums(ids, weights * r) / tokens.clamp(min=1.0)
    centred = r - mean[ids]
    bessel = tokens / (tokens - 1.0).clamp(min=1.0)
    variance = _group_sums(ids, weights * centred * centred) / tokens.clamp(min=1.0) * bessel
    adv = centred / (variance[ids] + eps).sqrt()
    return _zero_flat_groups(adv, r, ids).to(out_dtype)


def _check_eps(eps: float) -> None:
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")


def _trr_inputs(rewards: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """(rewards in float64, group ids as long, the output dtype), after checking shapes, dtypes and ranges."""
    if rewards.dim() != 1 or group_ids.shape != rewards.shape:
        shapes = f"{tuple(rewards.shape)} and {tuple(group_ids.shape)}"
        raise ValueError(f"rewards and group_ids must both be [B], got {shapes}")
    if group_ids.dtype.is_floating_point or group_ids.dtype == torch.bool or group_ids.is_complex():
        raise ValueError(f"group_ids must be an integer tensor, got {group_ids.dtype}")
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    ids = group_ids.long()
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= NUM_GROUPS):
        raise ValueError(f"group_ids must lie in [0, {NUM_GROUPS}), got range [{int(ids.min())}, {int(ids.max())}]")
    r = rewards.detach().to(torch.float64)
    if not bool(torch.isfinite(r).all()):
        raise ValueError("rewards must be finite")
    return r, ids, out_dtype


def _group_sums(ids: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """[NUM_GROUPS] sums of ``values`` [B] per group."""
    return torch.zeros(NUM_GROUPS, dtype=values.dtype, device=values.device).index_add(0, ids, values)


def _zero_flat_groups(adv: torch.Tensor, r: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``adv`` with exact zeros in every group whose rewards are all equal."""
    zeros = torch.zeros(NUM_GROUPS, dtype=r.dtype, device=r.device)
    g_max = zeros.scatter_reduce(0, ids, r, reduce="amax", include_self=False)
    g_min = zeros.scatter_reduce(0, ids, r, reduce="amin", include_self=False)
    return torch.where((g_max == g_min)[ids], torch.zeros_like(adv), adv)


def broadcast_to_tokens(advantages: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Outcome supervision (REINFORCE++, γ = 1): every response token gets its sequence's advantage.

    advantages: [B]; response_mask: [B, T] (bool or 0/1, 1 = a response token). Returns [B, T] with A_b on the
    unmasked tokens of row b and 0 elsewhere. Equivalent to placing the reward on the last response token and taking
    the undiscounted return-to-go at each token, then normalising per sequence (reference §5.2).
    """
    if advantages.dim() != 1 or response_mask.dim() != 2 or response_mask.shape[0] != advantages.shape[0]:
        raise ValueError(
            "need advantages [B] and response_mask [B, T], "
            f"got {tuple(advantages.shape)} and {tuple(response_mask.shape)}"
        )
    mask = response_mask.to(torch.bool)
    return torch.where(mask, advantages.unsqueeze(1), torch.zeros((), dtype=advantages.dtype, device=advantages.device))


TrrStatistics = Literal["per-sample", "token-weighted"]
"""Which statistics normalise Eq 8's advantages (`TRR_STATISTICS`)."""

TrrStatisticsFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""(rewards [B], group_ids [B], response_lengths [B]) -> advantages [B]."""

TRR_STATISTICS: dict[str, TrrStatisticsFunction] = {
    "per-sample": lambda rewards, group_ids, _lengths: trr_plus_plus_advantages(rewards, group_ids),
    "token-weighted": trr_plus_plus_advantages_token_weighted,
}
"""Eq 8's statistics by name: per sample (Eq 8 as written) or token-weighted (the released code's)."""


def trr_advantages(episodes: Sequence[ScoredResponse], statistics: TrrStatistics) -> torch.Tensor:
    """Eq 8 advantages [B] of ``episodes``, normalised within each (task type x role) group of the batch, with the
    statistics registered as ``statistics`` in `TRR_STATISTICS`."""
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
    function = TRR_STATISTICS.get(statistics)
    if function is None:
        raise ValueError(f"unknown trr_statistics {statistics!r}")
    lengths = torch.tensor([len(e.response_ids) for e in episodes], dtype=torch.long)
    group_ids = torch.tensor([group_index(e.task_type, e.role) for e in episodes], dtype=torch.long)
    return function(rewards, group_ids, lengths)


# --------------------------------------------------------------------------------------------------- PPO and entropy


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the positions where ``mask`` is true (any shape, same as ``x``); 0 if the mask is empty.

    Masked-out entries never contribute, even if they are NaN or inf, and receive zero gradient.
    """
    if x.shape != mask.shape:
        raise ValueError(f"x and mask must have the same shape, got {tuple(x.shape)} and {tuple(mask.shape)}")
    m = mask.to(torch.bool)
    total = torch.where(m, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum()
    return total / m.sum().clamp(min=1).to(x.dtype)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy H(π(·|s_t)) = −Σ_v p_v log p_v of each position's categorical distribution, for the entropy bonus.

    logits: [B, T, V] (any leading shape works). Returns [B, T], in float32 for half-precision logits (computed in
    float32), else in the logits' dtype. −inf logits (banned tokens) contribute 0 and no NaN gradients.
    """
    x = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    logp = torch.log_softmax(x, dim=-1)
    p = logp.exp()
    logp_finite = torch.where(torch.isfinite(logp), logp, torch.zeros((), dtype=logp.dtype, device=logp.device))
    return -(p * logp_finite).sum(dim=-1)


LossAggMode = Literal["token-mean", "micro-batch-token-mean", "seq-mean-token-mean"]
"""How Eq 9's token losses become the batch loss (`loss_aggregation_weights`)."""


def token_mean_weights(lengths: torch.Tensor, micro_batch_size: int) -> torch.Tensor:
    """``token-mean``: w_b = 1 / N with N = Σ_b |o_b|, one token-mean over the whole batch. lengths: [B] float64."""
    return torch.where(lengths > 0, 1.0 / lengths.sum().clamp(min=1.0), 0.0)


def seq_mean_token_mean_weights(lengths: torch.Tensor, micro_batch_size: int) -> torch.Tensor:
    """``seq-mean-token-mean``: w_b = 1 / (S · |o_b|), S the sequences with a response token: Eq 9 as written,
    E_q[1/|o| Σ_t]. lengths: [B] float64."""
    has_tokens = lengths > 0
    return torch.where(has_tokens, 1.0 / (lengths.clamp(min=1.0) * has_tokens.sum().clamp(min=1)), 0.0)


def micro_batch_token_mean_weights(lengths: torch.Tensor, micro_batch_size: int) -> torch.Tensor:
    """``micro-batch-token-mean``: the batch cut, in order, into G groups of ``micro_batch_size`` sequences (the last
    may be shorter); each group's token-mean, averaged over groups: w_b = 1 / (G · N_g), veRL's masked mean per
    micro-batch divided by the gradient-accumulation count. lengths: [B] float64."""
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
    group = torch.arange(lengths.numel(), device=lengths.device) // micro_batch_size
    groups = max(-(-lengths.numel() // micro_batch_size), 1)
    tokens = torch.zeros(groups, dtype=torch.float64, device=lengths.device).index_add(0, group, lengths)
    return torch.where(lengths > 0, 1.0 / (groups * tokens[group].clamp(min=1.0)), 0.0)


LOSS_AGGREGATIONS: dict[str, Callable[[torch.Tensor, int], torch.Tensor]] = {
    "token-mean": token_mean_weights,
    "micro-batch-token-mean": micro_batch_token_mean_weights,
    "seq-mean-token-mean": seq_mean_token_mean_weights,
}
"""Eq 9's outer average by name: (response lengths [B] float64, micro_batch_size) -> the [B] weights w_b."""


def loss_aggregation_weights(response_lengths: torch.Tensor, mode: LossAggMode, *,
                             micro_batch_size: int = 16) -> torch.Tensor:
    """Eq 9's outer average as one weight per sequence: the batch loss is Σ_b w_b Σ_t ℓ_{b,t}.

    response_lengths: [B] integer |o_b|, in the batch's order. Returns [B] float64 w_b, from the function registered
    as ``mode`` in `LOSS_AGGREGATIONS` (``token-mean``, ``micro-batch-token-mean``: the only mode that depends on a
    split, by definition; ``seq-mean-token-mean``). A sequence without response tokens gets 0. The weights depend on
    the batch alone, never on how the trainer cuts it into micro-batches for memory, so every mode gives the same
    loss whatever that cut.
    """
    if response_lengths.dim() != 1:
        raise ValueError(f"response_lengths must be [B], got {tuple(response_lengths.shape)}")
    lengths = response_lengths.detach().to(torch.float64)
    function = LOSS_AGGREGATIONS.get(mode)
    if function is None:
        raise ValueError(f"unknown loss_agg_mode {mode!r}; one of {get_args(LossAggMode)}")
    return function(lengths, micro_batch_size)


def weighted_token_sum(values: torch.Tensor, response_mask: torch.Tensor,
                       sequence_weights: torch.Tensor) -> torch.Tensor:
    """Σ_{b,t} mask_{b,t} · w_b · values_{b,t}: [B, T] values aggregated with the [B] `loss_aggregation_weights`;
    masked entries never contribute, even NaN or inf ones."""
    if values.dim() != 2 or response_mask.shape != values.shape or sequence_weights.shape != values.shape[:1]:
        raise ValueError("need values and response_mask [B, T] and sequence_weights [B], got "
                         f"{[tuple(t.shape) for t in (values, response_mask, sequence_weights)]}")
    mask = response_mask.to(torch.bool)
    weighted = values * sequence_weights.detach().to(values.dtype).unsqueeze(1)
    return torch.where(mask, weighted, torch.zeros((), dtype=values.dtype, device=values.device)).sum()


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_ratio_low: float = 0.2,
    *,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 0.0,
    token_count: float | None = None,
    sequence_weights: torch.Tensor | None = None,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Eq 9, PPO clipped surrogate (Appendix A), negated as a loss, no KL term.

    All inputs [B, T]: ``logprobs`` log π_θ(o_t) (the only input that carries gradient), ``old_logprobs``
    log π_θold(o_t) (behaviour policy), ``advantages`` per-token A (see `broadcast_to_tokens`), ``response_mask``.
    Per token: ℓ_t = max(−A·s_t, −A·clip(s_t, 1 − ε_low, 1 + ε_high)), s_t = exp(logprobs − old_logprobs), ε_low =
    ``clip_ratio_low``, ε_high = ``clip_ratio_high`` (default: ε_low, the paper's symmetric ε); with a dual clip
    c = ``clip_ratio_c`` > 1 (the released code: 3), ℓ_t = min(ℓ_t, −A·c) where A < 0, so a very unlikely token with a
    negative advantage cannot push the loss without bound. Aggregation: with ``sequence_weights`` [B]
    (`loss_aggregation_weights`), loss = Σ_b w_b Σ_t ℓ_{b,t}; else loss = Σ_unmasked ℓ_t / N, N = ``token_count`` or
    the unmasked tokens here (a token-mean; pass the batch's count to sum micro-batches to the batch token-mean).
    ``token_weights`` [B, T] (no gradient), when given, multiplies each ℓ_t before aggregation
    (`truncated_importance_weights`). Returns (loss scalar, metrics): ``clip_fraction`` (share of tokens where the
    clipped term is active), ``dual_clip_fraction`` (where the dual clip is), ``approx_kl`` (mean of log π_old −
    log π, veRL's ppo_kl), ``approx_kl_k3`` (mean of (s−1) − log s), ``ratio_mean``, ``ratio_max``, ``tokens``: means
    over this call's unmasked tokens.
    """
    shape = logprobs.shape
    high = _checked_clip_range(logprobs, old_logprobs, advantages, response_mask, clip_ratio_low=clip_ratio_low,
                               clip_ratio_high=clip_ratio_high, clip_ratio_c=clip_ratio_c,
                               both_aggregations=token_count is not None and sequence_weights is not None)
    mask = response_mask.to(torch.bool)
    zero = torch.zeros((), dtype=logprobs.dtype, device=logprobs.device)
    old = old_logprobs.detach().to(logprobs.dtype)
    adv = torch.where(mask, advantages.detach().to(logprobs.dtype), zero)
    log_ratio = torch.where(mask, logprobs - old, zero).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = log_ratio.exp()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_ratio_low, 1.0 + high)
    per_token = torch.maximum(unclipped, clipped)
    dual_clipped = torch.zeros_like(mask)
    if clip_ratio_c > 0.0:
        bound = -adv * clip_ratio_c
        dual_clipped = (adv < 0) & (per_token > bound)
        per_token = torch.where(adv < 0, torch.minimum(per_token, bound), per_token)
    if token_weights is not None:
        if token_weights.shape != shape:
            raise ValueError(f"token_weights must be [B, T] like logprobs, got {tuple(token_weights.shape)}")
        per_token = per_token * token_weights.detach().to(logprobs.dtype)
    n_tokens = int(mask.sum())
    loss = _aggregated(per_token, mask, n_tokens, token_count=token_count, sequence_weights=sequence_weights)
    with torch.no_grad():
        metrics = _ppo_statistics(clipped=clipped, unclipped=unclipped, dual_clipped=dual_clipped,
                                  log_ratio=log_ratio, ratio=ratio, mask=mask, n_tokens=n_tokens)
    return loss, metrics


def _aggregated(per_token: torch.Tensor, mask: torch.Tensor, n_tokens: int, *, token_count: float | None,
                sequence_weights: torch.Tensor | None) -> torch.Tensor:
    """`ppo_clip_loss`'s token losses ℓ [B, T] (mask: bool [B, T], ``n_tokens`` of them) as one scalar: Σ_b w_b Σ_t ℓ
    with ``sequence_weights`` w [B], else Σ ℓ / N with N = ``token_count`` or ``n_tokens``."""
    if sequence_weights is not None:
        return weighted_token_sum(per_token, mask, sequence_weights)
    denom = float(n_tokens) if token_count is None else float(token_count)
    if denom < 0 or (token_count is not None and denom < n_tokens):
        raise ValueError(f"token_count must be >= the unmasked tokens in this call ({n_tokens}), got {token_count}")
    zero = torch.zeros((), dtype=per_token.dtype, device=per_token.device)
    return torch.where(mask, per_token, zero).sum() / max(denom, 1.0)


def _checked_clip_range(*tensors: torch.Tensor, clip_ratio_low: float, clip_ratio_high: float | None,
                        clip_ratio_c: float, both_aggregations: bool) -> float:
    """ε_high of `ppo_clip_loss` (default ε_low), after checking its [B, T] inputs and its clip arguments."""
    shape = tensors[0].shape
    if tensors[0].dim() != 2 or any(t.shape != shape for t in tensors[1:]):
        raise ValueError(
            "logprobs, old_logprobs, advantages and response_mask must all be [B, T], got "
            f"{[tuple(t.shape) for t in tensors]}"
        )
    high = clip_ratio_low if clip_ratio_high is None else clip_ratio_high
    if not 0.0 <= clip_ratio_low < 1.0 or high < 0.0:
        raise ValueError(f"clip ratios must satisfy 0 <= low < 1 and high >= 0, got {clip_ratio_low} and {high}")
    if clip_ratio_c != 0.0 and not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be 0 (off) or > 1, got {clip_ratio_c}")
    if both_aggregations:
        raise ValueError("give token_count or sequence_weights, not both")
    return high


def _ppo_statistics(*, clipped: torch.Tensor, unclipped: torch.Tensor, dual_clipped: torch.Tensor,
                    log_ratio: torch.Tensor, ratio: torch.Tensor, mask: torch.Tensor,
                    n_tokens: int) -> dict[str, float]:
    """The diagnostics of `ppo_clip_loss`, means over the unmasked tokens of its [B, T] terms (mask: bool [B, T])."""
    dtype = log_ratio.dtype
    return {
        "clip_fraction": float(masked_mean((clipped > unclipped).to(dtype), mask)),
        "dual_clip_fraction": float(masked_mean(dual_clipped.to(dtype), mask)),
        "approx_kl": float(masked_mean(-log_ratio, mask)),
        "approx_kl_k3": float(masked_mean(ratio - 1.0 - log_ratio, mask)),
        "ratio_mean": float(masked_mean(ratio, mask)),
        "ratio_max": float(ratio[mask].max()) if n_tokens else 1.0,
        "tokens": float(n_tokens),
    }


def truncated_importance_weights(old_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor,
                                 has_behaviour: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance sampling (TIS) of the sampler/trainer mismatch; not in the paper (Yao et al. 2025,
    "Your efficient RL framework secretly brings you off-policy RL training"; veRL's `tis_imp_ratio_cap`).

    The tokens were sampled by the engine (π_engine: int8 or bf16 weights) while Eq 9's ratio starts from the
    trainer's own π_old, so the update is a policy gradient of samples from another policy. Each token's loss is
    weighted by w_t = min(π_old(o_t) / π_engine(o_t), ``cap``). Inputs [B, T]: ``old_logprobs`` log π_old (the
    trainer's recomputation), ``behaviour_logprobs`` log π_engine, ``has_behaviour`` (bool) where the engine's
    log-prob is known (elsewhere w = 1). Returns w [B, T], no gradient."""
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    log_ratio = (old_logprobs.detach().float() - behaviour_logprobs.detach().float()).clamp(max=LOG_RATIO_CLAMP)
    weights = log_ratio.exp().clamp(max=cap)
    return torch.where(has_behaviour.to(torch.bool), weights, torch.ones_like(weights))


# --------------------------------------------------------------------------------------------------- the loss


class PolicyLossSettings(Protocol):
    """The settings `PolicyLoss` reads (services.settings.TrainerSettings has them, of the same names)."""

    clip_ratio_low: float
    clip_ratio_high: float
    clip_ratio_c: float
    loss_agg_mode: LossAggMode
    loss_agg_micro_batch_size: int
    behaviour_is_cap: float


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
    def from_settings(cls, settings: PolicyLossSettings) -> PolicyLoss:
        return cls(clip_ratio_low=settings.clip_ratio_low, clip_ratio_high=settings.clip_ratio_high,
                   clip_ratio_c=settings.clip_ratio_c, loss_agg_mode=settings.loss_agg_mode,
                   loss_agg_micro_batch_size=settings.loss_agg_micro_batch_size,
                   behaviour_is_cap=settings.behaviour_is_cap)

    def episode_weights(self, episodes: Sequence[ScoredResponse]) -> torch.Tensor:
        """[B] weight of each response token of episode b in the batch loss, over the whole batch in its order
        (`loss_aggregation_weights`), so leaving episodes out of the forward pass never changes the others' weight."""
        lengths = torch.tensor([len(e.response_ids) for e in episodes], dtype=torch.long)
        return loss_aggregation_weights(lengths, self.loss_agg_mode, micro_batch_size=self.loss_agg_micro_batch_size)


DEFAULT_POLICY_LOSS = PolicyLoss()
"""The settings' defaults: symmetric clip 0.2, no dual clip, one token-mean over the batch."""


@dataclass(frozen=True)
class PolicyLossTerms:
    """One micro-batch's share of the batch objective and its statistics (`policy_loss_terms`)."""

    loss: torch.Tensor
    """Scalar with gradient: ``pg_loss`` − entropy_coef · Σ_b w_b Σ_t H_{b,t}."""
    pg_loss: torch.Tensor
    """Scalar with gradient: Eq 9's clipped surrogate, aggregated with the sequence weights."""
    entropy_sum: torch.Tensor
    """Scalar: Σ of the entropy over the response tokens, unweighted (for the report's token-mean)."""
    tokens: int
    """Response tokens of the micro-batch (the statistics' means cover them)."""
    clip_fraction: float
    approx_kl: float
    ratio_max: float
    importance_weighted_tokens: int = 0
    """Response tokens that carried a truncated importance weight (an engine log-prob)."""
    importance_capped_tokens: int = 0
    """Of those, the tokens whose weight hit `PolicyLoss.behaviour_is_cap`."""


def policy_loss_terms(policy_loss: PolicyLoss, *, logprobs: torch.Tensor, entropy: torch.Tensor,
                      old_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, has_behaviour: torch.Tensor,
                      advantages: torch.Tensor, response_mask: torch.Tensor, sequence_weights: torch.Tensor,
                      entropy_coef: float) -> PolicyLossTerms:
    """Eq 9 with the entropy bonus over one micro-batch, whose terms sum to the batch objective:
    loss = Σ_b w_b Σ_t [ℓ_{b,t} − entropy_coef · H_{b,t}], ℓ_{b,t} Eq 9's clipped token loss (`ppo_clip_loss`) with
    the sequence's Eq 8 advantage on every token (`broadcast_to_tokens`), times the truncated importance weight when
    `PolicyLoss.behaviour_is_cap` > 0 (`truncated_importance_weights`).

    Shapes: ``logprobs`` [B, T] log π_θ (with gradient), ``entropy`` [B, T] H(π_θ(·|s_t)) (with gradient),
    ``old_logprobs`` [B, T] log π_old, ``behaviour_logprobs`` [B, T] log π_engine, ``has_behaviour`` [B] bool (the
    row carries engine log-probs), ``advantages`` [B] Eq 8, ``response_mask`` [B, T] bool, ``sequence_weights`` [B]
    w_b (`loss_aggregation_weights` of the whole batch)."""
    token_advantages = broadcast_to_tokens(advantages, response_mask)
    token_weights = None
    weighted_tokens = capped_tokens = 0
    if policy_loss.behaviour_is_cap > 0:
        token_weights = truncated_importance_weights(old_logprobs, behaviour_logprobs,
                                                     has_behaviour.unsqueeze(1).expand_as(logprobs),
                                                     policy_loss.behaviour_is_cap)
        weighted = response_mask & has_behaviour.unsqueeze(1)
        weighted_tokens = int(weighted.sum())
        capped_tokens = int((weighted & (token_weights >= policy_loss.behaviour_is_cap)).sum())
    pg_loss, metrics = ppo_clip_loss(logprobs, old_logprobs, token_advantages, response_mask,
                                     sequence_weights=sequence_weights, token_weights=token_weights,
                                     clip_ratio_low=policy_loss.clip_ratio_low,
                                     clip_ratio_high=policy_loss.clip_ratio_high,
                                     clip_ratio_c=policy_loss.clip_ratio_c)
    entropy_sum = torch.where(response_mask, entropy, torch.zeros((), device=entropy.device)).sum()
    loss = pg_loss - entropy_coef * weighted_token_sum(entropy, response_mask, sequence_weights)
    return PolicyLossTerms(loss=loss, pg_loss=pg_loss, entropy_sum=entropy_sum, tokens=int(metrics["tokens"]),
                           clip_fraction=metrics["clip_fraction"], approx_kl=metrics["approx_kl"],
                           ratio_max=metrics["ratio_max"], importance_weighted_tokens=weighted_tokens,
                           importance_capped_tokens=capped_tokens)
