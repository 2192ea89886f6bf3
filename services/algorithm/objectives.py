"""The paper's rewards as pure functions (Eq 4-6), like veRL's core_algos.py; the policy objective they feed (TRR++
Eq 8, PPO-clip Eq 9, its aggregation and statistics) is services/algorithm/policy_objective.py.

No I/O, no state.

Decisions, with evidence (paper = Zhao et al. 2025; reference = the authors' veRL code,
LeapLabTHU/Absolute-Zero-Reasoner):
- Eq 6 "passable": a proposer response is *well formed* only if it follows the R1 template AND yields a valid task
  (§3.3: "only responses that produce valid triplets and pass the filtering stage are considered to be correctly
  formatted"); a well-formed proposal is always passable: it earns its Eq 4 reward, **0** when r̄ ∈ {0, 1}, or the
  released code's −0.5 (issue #37; `unlearnable_reward`). A solver response is passable iff its answer is correct
  (Eq 5); −0.5 is for a well-formed wrong answer; −1 for a format error, whatever the answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

FORMAT_ERROR_REWARD = -1.0
"""Eq 6: response has formatting errors (for a proposer: also an invalid task)."""

WRONG_ANSWER_REWARD = -0.5
"""Eq 6: response is well formatted but wrong (solver only; see the module docstring)."""

PAPER_UNLEARNABLE_REWARD = 0.0
"""Eq 4: a proposal the solver always or never solves (r̄ ∈ {0, 1}) earns 0."""

RELEASED_CODE_UNLEARNABLE_REWARD = -0.5
"""The released code's reward for r̄ ∈ {0, 1}: its reward manager turns a learnability of 0 into −0.5 (issue #37)."""


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
