"""The paper's equations as pure functions (rewards Eq 4-6, TRR++ Eq 8, PPO-clip Eq 9), like veRL's core_algos.py.

No I/O, no state. Shapes: B sequences, T response-token positions (right-padded), V vocabulary entries.

Decisions, with evidence (paper = Zhao et al. 2025; reference = the authors' veRL code,
LeapLabTHU/Absolute-Zero-Reasoner):
- Eq 6 "passable": a proposer response is *well formed* only if it follows the R1 template AND yields a valid task
  (§3.3: "only responses that produce valid triplets and pass the filtering stage are considered to be correctly
  formatted"); a well-formed proposal is always passable: it earns its Eq 4 reward, **0** when r̄ ∈ {0, 1}, or the
  released code's −0.5 (issue #37; `unlearnable_reward`). A solver response is passable iff its answer is correct
  (Eq 5); −0.5 is for a well-formed wrong answer; −1 for a format error, whatever the answer.
- TRR++ statistics: per sample (Eq 8 as written; population std, eps added to σ, so each group's advantages have
  mean 0 and std 1 exactly, also in small groups) or token-weighted (the released code's veRL masked_whiten: weighted
  by response length, Bessel's N/(N−1) over tokens, eps = 1e-8 inside the square root; reference §5.2). A group whose
  rewards are all equal gets exactly 0 (max == min, so rounding in μ cannot leak out).
- Token level: the reward sits on the last response token; with γ = 1 and no KL term (Table 3) the return at every
  response token equals that scalar, so each token's advantage is its sequence's advantage (REINFORCE++ outcome
  supervision; reference §5.2). `broadcast_to_tokens` does exactly that.
- PPO (Eq 9), no KL: clip range [1 − ε_low, 1 + ε_high], symmetric 0.2 by default (the paper branch's), 0.2/0.28 and
  a dual clip c = 3 for A < 0 in the released code (§5.3); the token losses become one number by
  `loss_aggregation_weights`. Each difference is a setting: docs/paper-vs-code.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, get_args

import torch

from services.algorithm.task_types import TASK_GROUPS, Role, TaskType

FORMAT_ERROR_REWARD = -1.0
"""Eq 6: response has formatting errors (for a proposer: also an invalid task)."""

WRONG_ANSWER_REWARD = -0.5
"""Eq 6: response is well formatted but wrong (solver only; see the module docstring)."""

PAPER_UNLEARNABLE_REWARD = 0.0
"""Eq 4: a proposal the solver always or never solves (r̄ ∈ {0, 1}) earns 0."""

RELEASED_CODE_UNLEARNABLE_REWARD = -0.5
"""The released code's reward for r̄ ∈ {0, 1}: its reward manager turns a learnability of 0 into −0.5 (issue #37)."""

NUM_GROUPS = len(TASK_GROUPS)
LOG_RATIO_CLAMP = 20.0
"""Numerical guard on log(π/π_old) before exp (as veRL); exp(20) ≈ 4.9e8, far outside any clip range."""


# --------------------------------------------------------------------------------------------------- rewards


def learnability_reward(solve_successes: Sequence[float | bool], *,
                        unlearnable_reward: float = PAPER_UNLEARNABLE_REWARD) -> float:
    """Eq 4, proposer reward: r̄ = mean of the n solver outcomes (each in [0, 1]); ``unlearnable_reward`` if
    r̄ ∈ {0, 1} (0 in Eq 4, −0.5 in the released code), else 1 − r̄."""
    if len(solve_successes) == 0:
        raise ValueError("learnability_reward needs at least one solver outcome (Eq 4 averages n >= 1 rollouts)")
    values = [float(s) for s in solve_successes]
    for v in values:
        if not 0.0 <= v <= 1.0:  # also rejects NaN
            raise ValueError(f"solver outcome must lie in [0, 1], got {v!r}")
    mean = math.fsum(values) / len(values)
    if mean == 0.0 or mean == 1.0:
        return float(unlearnable_reward)
    return 1.0 - mean


def solver_reward(correct: bool) -> float:
    """Eq 5, solver reward: r_solve = I(y = y*), 1.0 if the answer is right (value equality in Python), else 0.0."""
    return 1.0 if bool(correct) else 0.0


def composite_reward(role_reward: float, *, well_formed: bool, passable: bool,
                     wrong_reward: float = WRONG_ANSWER_REWARD) -> float:
    """Eq 6, the scalar put on a response's last token.

    - not ``well_formed`` -> −1 (format error dominates; ``passable`` is ignored);
    - ``well_formed`` and ``passable`` -> ``role_reward``;
    - ``well_formed`` and not ``passable`` -> −0.5 (``wrong_reward``: the `solver_wrong_answer_reward` lever).

    Proposer: ``well_formed`` = R1 template AND a valid task (§3.3.3 filters); pass ``passable=True`` — a valid task is
    never "wrong", its reward is the Eq 4 value (for r̄ ∈ {0, 1}: 0, or the released code's −0.5). Solver:
    ``well_formed`` = R1 template; ``passable`` = the answer is correct; ``role_reward`` = Eq 5. See `propose_reward` /
    `solve_reward`.
    """
    if not well_formed:
        return FORMAT_ERROR_REWARD
    if not passable:
        return float(wrong_reward)
    return float(role_reward)


def propose_reward(solve_successes: Sequence[float | bool] | None, *, well_formed: bool, valid_task: bool,
                   unlearnable_reward: float = PAPER_UNLEARNABLE_REWARD, extracted: bool = False,
                   invalid_task_reward: float = FORMAT_ERROR_REWARD) -> float:
    """Eq 6 ∘ Eq 4 for a proposer: −1 unless the template is right and the task valid, else the learnability reward
    (``unlearnable_reward`` when r̄ ∈ {0, 1}: see `learnability_reward`).

    ``solve_successes`` (the n solver outcomes on this task) may be None for a rejected proposal (no rollouts run).
    ``invalid_task_reward`` (the `proposer_invalid_task_reward` lever, a departure from §3.1's rule that only a
    valid triplet counts as well formed): the reward of a response with the right template and an ``extracted``
    task that the executor rejected, instead of −1.
    """
    if well_formed and extracted and not valid_task:
        return float(invalid_task_reward)
    if not (well_formed and valid_task):
        return FORMAT_ERROR_REWARD
    if solve_successes is None:
        raise ValueError("a valid proposal needs its n solver outcomes to compute the Eq 4 learnability reward")
    learnability = learnability_reward(solve_successes, unlearnable_reward=unlearnable_reward)
    return composite_reward(learnability, well_formed=True, passable=True)


def reward_from_text(*, format_ok: bool, extracted: bool) -> float | None:
    """The Eq 6 reward when the text alone decides it, else None (the executor must run first).

    Either role earns −1 when its response fails the format check (a proposer whatever its task; a solver is then
    never checked) or yields nothing to run (a proposer with no task to validate; an induction solver with no code
    block); otherwise validity (proposer), learnability (Eq 4) or correctness (Eq 5) decide.
    """
    if not (format_ok and extracted):
        return FORMAT_ERROR_REWARD
    return None


def solve_reward(correct: bool, *, well_formed: bool, wrong_reward: float = WRONG_ANSWER_REWARD) -> float:
    """Eq 6 ∘ Eq 5 for a solver: 1 if right, −0.5 (``wrong_reward``, the `solver_wrong_answer_reward` lever) if well
    formed but wrong, −1 on a format error."""
    return composite_reward(solver_reward(correct), well_formed=well_formed, passable=bool(correct),
                            wrong_reward=wrong_reward)


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


def loss_aggregation_weights(response_lengths: torch.Tensor, mode: LossAggMode, *,
                             micro_batch_size: int = 16) -> torch.Tensor:
    """Eq 9's outer average as one weight per sequence: the batch loss is Σ_b w_b Σ_t ℓ_{b,t}.

    response_lengths: [B] integer |o_b|, in the batch's order. Returns [B] float64 w_b:
    - ``token-mean``: 1 / N with N = Σ_b |o_b|, one token-mean over the whole batch;
    - ``micro-batch-token-mean``: the batch cut, in order, into G groups of ``micro_batch_size`` sequences (the last may
      be shorter); each group's token-mean, averaged over groups: 1 / (G · N_g), veRL's masked mean per micro-batch
      divided by the gradient-accumulation count (the only mode that depends on a split, by definition);
    - ``seq-mean-token-mean``: 1 / (S · |o_b|), S the sequences with a response token: Eq 9 as written, E_q[1/|o| Σ_t].
    A sequence without response tokens gets 0. The weights depend on the batch alone, never on how the trainer cuts it
    into micro-batches for memory, so every mode gives the same loss whatever that cut.
    """
    if response_lengths.dim() != 1:
        raise ValueError(f"response_lengths must be [B], got {tuple(response_lengths.shape)}")
    lengths = response_lengths.detach().to(torch.float64)
    has_tokens = lengths > 0
    if mode == "token-mean":
        return torch.where(has_tokens, 1.0 / lengths.sum().clamp(min=1.0), 0.0)
    if mode == "seq-mean-token-mean":
        return torch.where(has_tokens, 1.0 / (lengths.clamp(min=1.0) * has_tokens.sum().clamp(min=1)), 0.0)
    if mode == "micro-batch-token-mean":
        if micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
        group = torch.arange(lengths.numel(), device=lengths.device) // micro_batch_size
        groups = max(-(-lengths.numel() // micro_batch_size), 1)
        tokens = torch.zeros(groups, dtype=torch.float64, device=lengths.device).index_add(0, group, lengths)
        return torch.where(has_tokens, 1.0 / (groups * tokens[group].clamp(min=1.0)), 0.0)
    raise ValueError(f"unknown loss_agg_mode {mode!r}; one of {get_args(LossAggMode)}")


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
    if logprobs.dim() != 2 or any(t.shape != shape for t in (old_logprobs, advantages, response_mask)):
        raise ValueError(
            "logprobs, old_logprobs, advantages and response_mask must all be [B, T], got "
            f"{[tuple(t.shape) for t in (logprobs, old_logprobs, advantages, response_mask)]}"
        )
    high = clip_ratio_low if clip_ratio_high is None else clip_ratio_high
    if not 0.0 <= clip_ratio_low < 1.0 or high < 0.0:
        raise ValueError(f"clip ratios must satisfy 0 <= low < 1 and high >= 0, got {clip_ratio_low} and {high}")
    if clip_ratio_c != 0.0 and not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be 0 (off) or > 1, got {clip_ratio_c}")
    if token_count is not None and sequence_weights is not None:
        raise ValueError("give token_count or sequence_weights, not both")
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
    if sequence_weights is not None:
        loss = weighted_token_sum(per_token, mask, sequence_weights)
    else:
        denom = float(n_tokens) if token_count is None else float(token_count)
        if denom < 0 or (token_count is not None and denom < n_tokens):
            raise ValueError(f"token_count must be >= the unmasked tokens in this call ({n_tokens}), got {token_count}")
        loss = torch.where(mask, per_token, zero).sum() / max(denom, 1.0)

    with torch.no_grad():
        metrics = {
            "clip_fraction": float(masked_mean((clipped > unclipped).to(logprobs.dtype), mask)),
            "dual_clip_fraction": float(masked_mean(dual_clipped.to(logprobs.dtype), mask)),
            "approx_kl": float(masked_mean(-log_ratio, mask)),
            "approx_kl_k3": float(masked_mean(ratio - 1.0 - log_ratio, mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
            "ratio_max": float(ratio[mask].max()) if n_tokens else 1.0,
            "tokens": float(n_tokens),
        }
    return loss, metrics


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
