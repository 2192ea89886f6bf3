"""Tests for services/algorithm/objectives.py and policy_objective.py: every expected number below is worked out by
hand in the comments."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from services.algorithm.objectives import (
    FORMAT_ERROR_REWARD,
    WRONG_ANSWER_REWARD,
    composite_reward,
    learnability_reward,
    propose_reward,
    solve_reward,
    solver_reward,
)
from services.algorithm.policy_objective import (
    broadcast_to_tokens,
    entropy_from_logits,
    group_index,
    masked_mean,
    ppo_clip_loss,
    trr_plus_plus_advantages,
)
from services.algorithm.task_types import TASK_GROUPS, Role, TaskType

# ----------------------------------------------------------------------------------------------- Eq 4, 5, 6


@pytest.mark.parametrize(
    ("successes", "expected"),
    [
        ([0] * 8, 0.0),  # r̄ = 0: unsolvable -> 0
        ([1] + [0] * 7, 7 / 8),  # r̄ = 1/8 -> 1 - 1/8
        ([1, 0] * 4, 0.5),  # r̄ = 1/2 -> 1/2
        ([1] * 7 + [0], 1 / 8),  # r̄ = 7/8 -> 1/8
        ([1] * 8, 0.0),  # r̄ = 1: trivial -> 0
        ([True, False, False, False], 0.75),  # bools count as 0/1; r̄ = 1/4
        ([0.5, 0.5], 0.5),  # fractional outcomes: r̄ = 1/2, not an extreme
    ],
)
def test_learnability_reward_table(successes: list[float], expected: float) -> None:
    assert learnability_reward(successes) == pytest.approx(expected, abs=1e-15)


def test_learnability_reward_extremes_are_exactly_zero() -> None:
    assert learnability_reward([1.0] * 8) == 0.0
    assert learnability_reward([0.0] * 8) == 0.0


def test_learnability_reward_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="at least one solver outcome"):
        learnability_reward([])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        learnability_reward([1.5, 0.0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        learnability_reward([float("nan")])


@pytest.mark.parametrize(("correct", "expected"), [(True, 1.0), (False, 0.0)])
def test_solver_reward(correct: bool, expected: float) -> None:
    assert solver_reward(correct) == expected


@pytest.mark.parametrize(
    ("role_reward", "well_formed", "passable", "expected"),
    [
        (0.75, True, True, 0.75),  # passable: the role reward itself
        (0.0, True, True, 0.0),  # a learnability reward of 0 stays 0
        (1.0, True, True, 1.0),
        (0.75, True, False, -0.5),  # well formed but wrong
        (0.75, False, True, -1.0),  # format error dominates
        (0.75, False, False, -1.0),
    ],
)
def test_composite_reward_table(role_reward: float, well_formed: bool, passable: bool, expected: float) -> None:
    assert composite_reward(role_reward, well_formed=well_formed, passable=passable) == expected


def test_reward_constants() -> None:
    assert (FORMAT_ERROR_REWARD, WRONG_ANSWER_REWARD) == (-1.0, -0.5)


@pytest.mark.parametrize(
    ("successes", "well_formed", "valid_task", "expected"),
    [
        ([0] * 8, True, True, 0.0),  # r̄ = 0 -> 0, NOT the reference code's -0.5
        ([1] * 8, True, True, 0.0),  # r̄ = 1 -> 0, NOT -0.5
        ([1] + [0] * 7, True, True, 0.875),
        ([1] * 7 + [0], True, True, 0.125),
        ([1, 0] * 4, False, True, -1.0),  # bad template
        (None, True, False, -1.0),  # invalid task counts as a format error (§3.3)
        (None, False, False, -1.0),
    ],
)
def test_propose_reward(successes: list[int] | None, well_formed: bool, valid_task: bool, expected: float) -> None:
    assert propose_reward(successes, well_formed=well_formed, valid_task=valid_task) == expected


def test_propose_reward_valid_without_outcomes_is_an_error() -> None:
    with pytest.raises(ValueError, match="solver outcomes"):
        propose_reward(None, well_formed=True, valid_task=True)


@pytest.mark.parametrize(
    ("correct", "well_formed", "expected"),
    [(True, True, 1.0), (False, True, -0.5), (True, False, -1.0), (False, False, -1.0)],
)
def test_solve_reward(correct: bool, well_formed: bool, expected: float) -> None:
    assert solve_reward(correct, well_formed=well_formed) == expected


# ----------------------------------------------------------------------------------------------- Eq 8, TRR++


def test_group_index_matches_task_groups() -> None:
    assert group_index("deduction", "propose") == 0
    assert group_index(TaskType.INDUCTION, Role.SOLVE) == 5
    for i, (task_type, role) in enumerate(TASK_GROUPS):
        assert group_index(task_type, role) == i
        assert group_index(task_type.value, role.value) == i
    with pytest.raises(ValueError):
        group_index("translation", "solve")


def test_trr_hand_computed() -> None:
    # group 0: [1, 0, 1, 0]: μ = 0.5, biased σ = 0.5 -> ±1 (unbiased σ would give ±0.866).
    # group 1: [-1, -0.5, 1]: μ = -1/6, deviations (-5/6, -1/3, 7/6), Σd² = 78/36, σ = sqrt(13/18) = 0.8498365856
    #          -> (-0.9805806757, -0.3922322703, 1.3728129460).
    # group 2: [0.875, 0.5]: μ = 0.6875, σ = 0.1875 -> (+1, -1).
    # group 4: all -1 -> 0.  group 5: singleton -> 0.  group 3: absent.
    rewards = torch.tensor(
        [1.0, -1.0, 0.0, 0.875, -0.5, 1.0, -1.0, 0.5, 0.0, 1.0, -1.0, 0.5, -1.0], dtype=torch.float64
    )
    groups = torch.tensor([0, 1, 0, 2, 1, 0, 4, 5, 0, 1, 4, 2, 4])
    expected = torch.tensor(
        [1.0, -0.9805806757, -1.0, 1.0, -0.3922322703, 1.0, 0.0, 0.0, -1.0, 1.3728129460, 0.0, -1.0, 0.0],
        dtype=torch.float64,
    )
    got = trr_plus_plus_advantages(rewards, groups, eps=0.0)
    torch.testing.assert_close(got, expected, atol=1e-9, rtol=0)
    # With the default eps = 1e-6 the values shrink by σ/(σ+eps), i.e. by < 1e-5 relative here.
    torch.testing.assert_close(trr_plus_plus_advantages(rewards, groups), expected, atol=1e-5, rtol=0)


def test_trr_flat_and_singleton_groups_are_exactly_zero_even_without_eps() -> None:
    rewards = torch.tensor([0.1] * 7 + [0.3], dtype=torch.float32)  # 0.1 is inexact: a naive μ could leak rounding
    groups = torch.tensor([3] * 7 + [1])
    got = trr_plus_plus_advantages(rewards, groups, eps=0.0)
    assert torch.equal(got, torch.zeros(8))
    assert got.dtype == torch.float32


def test_trr_changing_one_group_leaves_others_bitwise_unchanged() -> None:
    gen = torch.Generator().manual_seed(0)
    groups = torch.arange(6).repeat(8)[torch.randperm(48, generator=gen)]
    rewards = torch.randint(-2, 3, (48,), generator=gen).float() / 2
    before = trr_plus_plus_advantages(rewards, groups)
    changed = rewards.clone()
    in_group_2 = groups == 2
    changed[in_group_2] = torch.linspace(-1, 1, int(in_group_2.sum()))
    after = trr_plus_plus_advantages(changed, groups)
    assert torch.equal(before[~in_group_2], after[~in_group_2])
    assert not torch.equal(before[in_group_2], after[in_group_2])


def test_trr_is_permutation_equivariant() -> None:
    gen = torch.Generator().manual_seed(1)
    groups = torch.randint(0, 6, (64,), generator=gen)
    rewards = torch.rand(64, generator=gen, dtype=torch.float64)
    perm = torch.randperm(64, generator=gen)
    base = trr_plus_plus_advantages(rewards, groups)
    torch.testing.assert_close(trr_plus_plus_advantages(rewards[perm], groups[perm]), base[perm], atol=1e-12, rtol=0)


REALISTIC_REWARDS = [-1.0, -0.5, 0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(REALISTIC_REWARDS)), min_size=1, max_size=96))
def test_trr_property_zero_mean_unit_population_std(samples: list[tuple[int, float]]) -> None:
    groups = torch.tensor([g for g, _ in samples])
    rewards = torch.tensor([r for _, r in samples], dtype=torch.float64)
    adv = trr_plus_plus_advantages(rewards, groups)
    assert torch.isfinite(adv).all()
    for g in range(6):
        members = groups == g
        if not members.any():
            continue
        a = adv[members]
        if rewards[members].unique().numel() >= 2:
            assert abs(float(a.mean())) < 1e-9
            assert float(a.std(unbiased=False)) == pytest.approx(1.0, abs=1e-3)
            # sign preserved: above-mean rewards get positive advantages
            centred = rewards[members] - rewards[members].mean()
            assert bool(((centred > 1e-12) <= (a > 0)).all())
        else:
            assert torch.equal(a, torch.zeros_like(a))


def test_trr_validation_and_edge_shapes() -> None:
    r = torch.tensor([1.0, 0.0])
    with pytest.raises(ValueError, match="group_ids must lie in"):
        trr_plus_plus_advantages(r, torch.tensor([0, 6]))
    with pytest.raises(ValueError, match="group_ids must lie in"):
        trr_plus_plus_advantages(r, torch.tensor([-1, 0]))
    with pytest.raises(ValueError, match="integer"):
        trr_plus_plus_advantages(r, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"\[B\]"):
        trr_plus_plus_advantages(r, torch.tensor([0, 0, 0]))
    with pytest.raises(ValueError, match="finite"):
        trr_plus_plus_advantages(torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))
    assert trr_plus_plus_advantages(torch.zeros(0), torch.zeros(0, dtype=torch.long)).shape == (0,)
    # integer rewards come back as float32
    assert trr_plus_plus_advantages(torch.tensor([1, 0]), torch.tensor([0, 0])).dtype == torch.float32


def test_broadcast_to_tokens() -> None:
    adv = torch.tensor([0.5, -2.0])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    expected = torch.tensor([[0.5, 0.5, 0.5, 0.0], [-2.0, -2.0, 0.0, 0.0]])
    assert torch.equal(broadcast_to_tokens(adv, mask), expected)
    assert torch.equal(broadcast_to_tokens(adv, mask.bool()), expected)
    with pytest.raises(ValueError):
        broadcast_to_tokens(adv, torch.ones(3, 4))


def test_broadcast_equals_return_to_go_of_last_token_reward() -> None:
    # REINFORCE++ outcome supervision: reward on the last response token, γ = 1 returns-to-go (reference §5.2 loop).
    rewards = torch.tensor([1.0, -0.5, 0.25])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float32)
    token_rewards = torch.zeros_like(mask)
    last = mask.sum(dim=1).long() - 1
    token_rewards[torch.arange(3), last] = rewards
    returns = torch.zeros_like(mask)
    running = torch.zeros(3)
    for t in reversed(range(mask.shape[1])):
        returns[:, t] = token_rewards[:, t] + running
        running = returns[:, t] * mask[:, t]
    assert torch.equal(returns * mask, broadcast_to_tokens(rewards, mask))


# ----------------------------------------------------------------------------------------------- Eq 9, PPO clip


def _hand_example() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # unmasked tokens (ratio s, advantage A):             ℓ = max(-A·s, -A·clip(s, 0.8, 1.2))
    #   (1.5, +1) -> max(-1.5, -1.2) = -1.2  clipped      (0.9, +1) -> -0.9  unclipped
    #   (0.5, -2) -> max( 1.0,  1.6) =  1.6  clipped      (1.1, -2) ->  2.2  unclipped
    #   (1.5, -1) -> max( 1.5,  1.2) =  1.5  unclipped (ratio out of range, but the clip does not bind for A < 0)
    # loss = (-1.2 - 0.9 + 1.6 + 2.2 + 1.5) / 5 = 3.2 / 5 = 0.64; clip fraction = 2/5.
    ratio = torch.tensor([[1.5, 0.9, 0.5, 1.0], [1.1, 1.5, 1.0, 1.0]], dtype=torch.float64)
    nan = float("nan")
    old = torch.tensor([[-1.0, -2.0, -0.5, nan], [-3.0, -0.25, nan, nan]], dtype=torch.float64)
    new = old + ratio.log()
    new[0, 3], new[1, 2], new[1, 3] = 50.0, float("-inf"), 7.0  # garbage on masked tokens
    adv = torch.tensor([[1.0, 1.0, -2.0, float("nan")], [-2.0, -1.0, 1e9, float("inf")]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    return new, old, adv, mask


def test_ppo_clip_loss_hand_computed() -> None:
    new, old, adv, mask = _hand_example()
    new.requires_grad_(True)
    old.requires_grad_(True)
    adv.requires_grad_(True)
    loss, metrics = ppo_clip_loss(new, old, adv, mask, clip_ratio_low=0.2)
    assert loss.item() == pytest.approx(0.64, abs=1e-12)
    assert metrics["clip_fraction"] == pytest.approx(0.4)
    logs = [math.log(1.5), math.log(0.9), math.log(0.5), math.log(1.1), math.log(1.5)]
    assert metrics["approx_kl"] == pytest.approx(-sum(logs) / 5)
    assert metrics["ratio_mean"] == pytest.approx((1.5 + 0.9 + 0.5 + 1.1 + 1.5) / 5)
    assert metrics["ratio_max"] == pytest.approx(1.5)
    assert metrics["tokens"] == 5.0
    loss.backward()
    # dℓ/dlogπ = -A·s where the unclipped term is active, 0 where the clipped one is; divided by N = 5.
    expected_grad = torch.tensor([[0.0, -0.9 / 5, 0.0, 0.0], [2.2 / 5, 1.5 / 5, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(new.grad, expected_grad, atol=1e-12, rtol=0)
    assert old.grad is None and adv.grad is None  # gradient flows only through logprobs


def test_ppo_masked_tokens_have_no_effect() -> None:
    new, old, adv, mask = _hand_example()
    loss_a, metrics_a = ppo_clip_loss(new, old, adv, mask)
    new2, old2, adv2 = new.clone(), old.clone(), adv.clone()
    new2[~mask], old2[~mask], adv2[~mask] = -3.0, 4.0, -123.0
    loss_b, metrics_b = ppo_clip_loss(new2, old2, adv2, mask)
    assert float(loss_a) == float(loss_b)
    assert metrics_a == metrics_b


def test_ppo_ratio_one_gives_minus_mean_advantage() -> None:
    gen = torch.Generator().manual_seed(2)
    logp = torch.randn(3, 6, generator=gen, dtype=torch.float64)
    adv = torch.randn(3, 6, generator=gen, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]], dtype=torch.bool)
    new = logp.clone().requires_grad_(True)
    loss, metrics = ppo_clip_loss(new, logp, adv, mask)
    assert loss.item() == pytest.approx(-float(adv[mask].mean()), abs=1e-12)
    assert metrics["clip_fraction"] == 0.0 and metrics["approx_kl"] == 0.0 and metrics["approx_kl_k3"] == 0.0
    loss.backward()
    torch.testing.assert_close(new.grad, torch.where(mask, -adv / 10, torch.zeros_like(adv)), atol=1e-12, rtol=0)


def test_ppo_token_count_makes_micro_batches_sum_to_batch_token_mean() -> None:
    new, old, adv, mask = _hand_example()
    full, _ = ppo_clip_loss(new, old, adv, mask)
    total = float(mask.sum())
    part0, _ = ppo_clip_loss(new[:1], old[:1], adv[:1], mask[:1], token_count=total)
    part1, _ = ppo_clip_loss(new[1:], old[1:], adv[1:], mask[1:], token_count=total)
    assert float(part0 + part1) == pytest.approx(float(full), abs=1e-12)
    with pytest.raises(ValueError, match="token_count"):
        ppo_clip_loss(new, old, adv, mask, token_count=2)


def test_ppo_empty_mask_and_bad_shapes() -> None:
    x = torch.zeros(2, 3, requires_grad=True)
    loss, metrics = ppo_clip_loss(x, torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2, 3))
    assert loss.item() == 0.0 and metrics["tokens"] == 0.0
    loss.backward()  # still differentiable
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        ppo_clip_loss(x, torch.zeros(2, 4), torch.ones(2, 3), torch.ones(2, 3))


# ----------------------------------------------------------------------------------------------- helpers


def test_entropy_from_logits() -> None:
    logits = torch.stack(
        [
            torch.zeros(4),  # uniform over 4: ln 4
            torch.tensor([0.5, 0.25, 0.25, 0.0]).log(),  # 0.5 ln 2 + 2·0.25 ln 4 = 1.5 ln 2; p=0 via -inf logit
            torch.tensor([3.0, float("-inf"), float("-inf"), float("-inf")]),  # certain: 0
        ]
    ).reshape(1, 3, 4)
    logits.requires_grad_(True)
    h = entropy_from_logits(logits)
    assert h.shape == (1, 3)
    torch.testing.assert_close(h, torch.tensor([[math.log(4), 1.5 * math.log(2), 0.0]]), atol=1e-6, rtol=0)
    h.sum().backward()
    assert torch.isfinite(logits.grad).all()
    assert entropy_from_logits(torch.zeros(2, 5, 7, dtype=torch.bfloat16)).dtype == torch.float32


def test_masked_mean() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0, float("nan")]], requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0]])
    m = masked_mean(x, mask)
    assert m.item() == 2.0
    m.backward()
    assert torch.equal(x.grad, torch.tensor([[1 / 3, 1 / 3, 1 / 3, 0.0]]))
    assert float(masked_mean(torch.ones(3), torch.zeros(3))) == 0.0
    with pytest.raises(ValueError):
        masked_mean(torch.ones(3), torch.ones(4))


def test_the_signal_levers_change_only_their_own_case() -> None:
    """`solver_wrong_answer_reward` moves only a well-formed wrong answer; `proposer_invalid_task_reward` only a
    well-formed proposal with a task the executor rejected (a departure from §3.1's rule)."""
    assert solve_reward(False, well_formed=True, wrong_reward=-1.0) == -1.0
    assert solve_reward(True, well_formed=True, wrong_reward=-1.0) == 1.0
    assert solve_reward(False, well_formed=False, wrong_reward=-0.2) == -1.0
    assert propose_reward(None, well_formed=True, valid_task=False, extracted=True, invalid_task_reward=-0.5) == -0.5
    assert propose_reward(None, well_formed=True, valid_task=False, extracted=False, invalid_task_reward=-0.5) == -1.0
    assert propose_reward(None, well_formed=False, valid_task=False, extracted=True, invalid_task_reward=-0.5) == -1.0
    assert propose_reward([True, False], well_formed=True, valid_task=True, extracted=True,
                          invalid_task_reward=-0.5) == 0.5
    assert propose_reward(None, well_formed=True, valid_task=False, extracted=True) == -1.0  # the paper's default
