"""The paper's equations as pure functions (rewards Eq 4-6, TRR++ Eq 8, PPO-clip Eq 9), like veRL's core_algos.py.

No I/O, no state. Shapes: B sequences, T response-token positions (right-padded), V vocabulary entries.

Decisions, with evidence (paper = Zhao et al. 2025; reference = the authors' veRL code,
LeapLabTHU/Absolute-Zero-Reasoner):
- Eq 6 "passable": a proposer response is *well formed* only if it follows the R1 template AND yields a valid task
  (paper §3.3: "only responses that produce valid triplets and pass the filtering stage are considered to be correctly
  formatted"); a well-formed proposal is always passable, so it earns its Eq 4 learnability reward, which is **0** when
  r̄ ∈ {0, 1}. The reference gives −0.5 there (its reward manager maps r == 0 to −0.5; issue #37), which makes Eq 4's
  zero branch dead; DESIGN §1 fixes it. A solver response is passable iff its answer is correct (Eq 5); −0.5 is for a
  well-formed wrong answer; −1 for a format error, whatever the answer.
- TRR++ std: biased (population, divide by n), per *sample*. Eq 8 does not say; the reference (veRL masked_whiten)
  applies Bessel's N/(N-1) over *tokens* (N = tens of thousands), i.e. effectively the population std, but weights
  every statistic by response length. We keep one reward per sequence (Eq 8 as written) and the population std, so that
  each group's advantages have mean 0 and std 1 exactly, also for the embedded profile's small groups (B = 4, where a
  per-sample Bessel factor would rescale them by sqrt(4/3)).
- eps is added to σ (default 1e-6; the reference uses rsqrt(var + 1e-8)). Groups whose rewards are all equal (this
  includes singletons) get exactly 0, detected by max == min, not by σ ≈ 0, so float rounding in μ cannot leak out.
- Token level: the reward sits on the last response token; with γ = 1 and no KL term (Table 3) the return at every
  response token equals that scalar, so each token's advantage is its sequence's advantage (REINFORCE++ outcome
  supervision; reference §5.2). `broadcast_to_tokens` does exactly that.
- PPO (Eq 9): token-mean over every unmasked token of the batch (reference loss_agg_mode=token-mean), no KL, single clip
  ε = 0.2 (the paper branch's; master's 0.28/dual-clip is not the paper's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from services.algorithm.task_types import TASK_GROUPS, Role, TaskType

FORMAT_ERROR_REWARD = -1.0
"""Eq 6: response has formatting errors (for a proposer: also an invalid task)."""

WRONG_ANSWER_REWARD = -0.5
"""Eq 6: response is well formatted but wrong (solver only; see the module docstring)."""

NUM_GROUPS = len(TASK_GROUPS)
LOG_RATIO_CLAMP = 20.0
"""Numerical guard on log(π/π_old) before exp (as veRL); exp(20) ≈ 4.9e8, far outside any clip range."""


# --------------------------------------------------------------------------------------------------- rewards


def learnability_reward(solve_successes: Sequence[float | bool]) -> float:
    """Eq 4, proposer reward: r̄ = mean of the n solver outcomes (each in [0, 1]); 0 if r̄ ∈ {0, 1}, else 1 − r̄."""
    if len(solve_successes) == 0:
        raise ValueError("learnability_reward needs at least one solver outcome (Eq 4 averages n >= 1 rollouts)")
    values = [float(s) for s in solve_successes]
    for v in values:
        if not 0.0 <= v <= 1.0:  # also rejects NaN
            raise ValueError(f"solver outcome must lie in [0, 1], got {v!r}")
    mean = math.fsum(values) / len(values)
    if mean == 0.0 or mean == 1.0:
        return 0.0
    return 1.0 - mean


def solver_reward(correct: bool) -> float:
    """Eq 5, solver reward: r_solve = I(y = y*), 1.0 if the answer is right (value equality in Python), else 0.0."""
    return 1.0 if bool(correct) else 0.0


def composite_reward(role_reward: float, *, well_formed: bool, passable: bool) -> float:
    """Eq 6, the scalar put on a response's last token.

    - not ``well_formed`` -> −1 (format error dominates; ``passable`` is ignored);
    - ``well_formed`` and ``passable`` -> ``role_reward``;
    - ``well_formed`` and not ``passable`` -> −0.5.

    Proposer: ``well_formed`` = R1 template AND a valid task (§3.3.3 filters); pass ``passable=True`` — a valid task is
    never "wrong", and its reward is the Eq 4 value, 0 (not −0.5) when r̄ ∈ {0, 1}. Solver: ``well_formed`` = R1
    template; ``passable`` = the answer is correct; ``role_reward`` = Eq 5. See `propose_reward` / `solve_reward`.
    """
    if not well_formed:
        return FORMAT_ERROR_REWARD
    if not passable:
        return WRONG_ANSWER_REWARD
    return float(role_reward)


def propose_reward(solve_successes: Sequence[float | bool] | None, *, well_formed: bool, valid_task: bool) -> float:
    """Eq 6 ∘ Eq 4 for a proposer: −1 unless the template is right and the task valid, else the learnability reward.

    ``solve_successes`` (the n solver outcomes on this task) may be None for a rejected proposal (no rollouts run).
    """
    if not (well_formed and valid_task):
        return FORMAT_ERROR_REWARD
    if solve_successes is None:
        raise ValueError("a valid proposal needs its n solver outcomes to compute the Eq 4 learnability reward")
    return composite_reward(learnability_reward(solve_successes), well_formed=True, passable=True)


def reward_from_text(*, format_ok: bool, extracted: bool) -> float | None:
    """The Eq 6 reward when the text alone decides it, else None (the executor must run first).

    Either role earns −1 when its response fails the format check (a proposer whatever its task; a solver is then
    never checked) or yields nothing to run (a proposer with no task to validate; an induction solver with no code
    block); otherwise validity (proposer), learnability (Eq 4) or correctness (Eq 5) decide.
    """
    if not (format_ok and extracted):
        return FORMAT_ERROR_REWARD
    return None


def solve_reward(correct: bool, *, well_formed: bool) -> float:
    """Eq 6 ∘ Eq 5 for a solver: 1 if right, −0.5 if well formed but wrong, −1 on a format error."""
    return composite_reward(solver_reward(correct), well_formed=well_formed, passable=bool(correct))


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
    if rewards.dim() != 1 or group_ids.shape != rewards.shape:
        shapes = f"{tuple(rewards.shape)} and {tuple(group_ids.shape)}"
        raise ValueError(f"rewards and group_ids must both be [B], got {shapes}")
    if group_ids.dtype.is_floating_point or group_ids.dtype == torch.bool or group_ids.is_complex():
        raise ValueError(f"group_ids must be an integer tensor, got {group_ids.dtype}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    if rewards.numel() == 0:
        return torch.zeros(0, dtype=out_dtype, device=rewards.device)
    ids = group_ids.long()
    if int(ids.min()) < 0 or int(ids.max()) >= NUM_GROUPS:
        raise ValueError(f"group_ids must lie in [0, {NUM_GROUPS}), got range [{int(ids.min())}, {int(ids.max())}]")
    r = rewards.detach().to(torch.float64)
    if not bool(torch.isfinite(r).all()):
        raise ValueError("rewards must be finite")

    zeros = torch.zeros(NUM_GROUPS, dtype=torch.float64, device=r.device)
    counts = zeros.index_add(0, ids, torch.ones_like(r))
    mean = zeros.index_add(0, ids, r) / counts.clamp(min=1.0)
    centred = r - mean[ids]
    std = (zeros.index_add(0, ids, centred * centred) / counts.clamp(min=1.0)).sqrt()
    g_max = zeros.scatter_reduce(0, ids, r, reduce="amax", include_self=False)
    g_min = zeros.scatter_reduce(0, ids, r, reduce="amin", include_self=False)
    flat = (g_max == g_min)[ids]

    adv = centred / (std[ids] + eps)
    adv = torch.where(flat, torch.zeros_like(adv), adv)
    return adv.to(out_dtype)


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


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_eps: float = 0.2,
    *,
    token_count: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Eq 9, PPO clipped surrogate (Appendix A), negated as a loss, token-mean aggregated, no KL term.

    All inputs [B, T]: ``logprobs`` log π_θ(o_t) (the only input that carries gradient), ``old_logprobs``
    log π_θold(o_t) (behaviour policy), ``advantages`` per-token A (see `broadcast_to_tokens`), ``response_mask``.
    Per token: ℓ_t = max(−A·s_t, −A·clip(s_t, 1 − ε, 1 + ε)), s_t = exp(logprobs − old_logprobs).
    loss = Σ_unmasked ℓ_t / N, N = ``token_count`` or, by default, the number of unmasked tokens here. When
    accumulating gradients over micro-batches, pass the whole batch's token count so the summed micro-batch losses
    equal the batch token-mean. Returns (loss scalar, metrics): ``clip_fraction`` (share of tokens where the clipped
    term is active), ``approx_kl`` (mean of log π_old − log π, veRL's ppo_kl), ``approx_kl_k3`` (mean of (s−1) − log s),
    ``ratio_mean``, ``ratio_max``, ``tokens``. Metrics are means over this call's unmasked tokens.
    """
    shape = logprobs.shape
    if logprobs.dim() != 2 or any(t.shape != shape for t in (old_logprobs, advantages, response_mask)):
        raise ValueError(
            "logprobs, old_logprobs, advantages and response_mask must all be [B, T], got "
            f"{[tuple(t.shape) for t in (logprobs, old_logprobs, advantages, response_mask)]}"
        )
    if not 0.0 <= clip_eps < 1.0:
        raise ValueError(f"clip_eps must lie in [0, 1), got {clip_eps}")
    mask = response_mask.to(torch.bool)
    zero = torch.zeros((), dtype=logprobs.dtype, device=logprobs.device)
    old = old_logprobs.detach().to(logprobs.dtype)
    adv = torch.where(mask, advantages.detach().to(logprobs.dtype), zero)
    log_ratio = torch.where(mask, logprobs - old, zero).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = log_ratio.exp()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps)
    per_token = torch.maximum(unclipped, clipped)

    n_tokens = int(mask.sum())
    denom = float(n_tokens) if token_count is None else float(token_count)
    if denom < 0 or (token_count is not None and denom < n_tokens):
        raise ValueError(f"token_count must be >= the unmasked tokens in this call ({n_tokens}), got {token_count}")
    loss = torch.where(mask, per_token, zero).sum() / max(denom, 1.0)

    with torch.no_grad():
        metrics = {
            "clip_fraction": float(masked_mean((clipped > unclipped).to(logprobs.dtype), mask)),
            "approx_kl": float(masked_mean(-log_ratio, mask)),
            "approx_kl_k3": float(masked_mean(ratio - 1.0 - log_ratio, mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
            "ratio_max": float(ratio[mask].max()) if n_tokens else 1.0,
            "tokens": float(n_tokens),
        }
    return loss, metrics
