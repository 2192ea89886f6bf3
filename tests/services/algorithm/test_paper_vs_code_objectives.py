"""The paper / released-code switches of services/algorithm/objectives.py and policy_objective.py
(docs/paper-vs-code.md), each computed both ways on a 3-sample batch whose every expected number is worked out by
hand in the comments."""

from __future__ import annotations

import math

import pytest
import torch

from services.algorithm.objectives import (
    RELEASED_CODE_UNLEARNABLE_REWARD,
    learnability_reward,
    propose_reward,
)
from services.algorithm.policy_objective import (
    loss_aggregation_weights,
    ppo_clip_loss,
    trr_plus_plus_advantages,
    trr_plus_plus_advantages_token_weighted,
    weighted_token_sum,
)

ONE_GROUP = torch.tensor([2, 2, 2])


# ----------------------------------------------------------------------------------------------- Eq 4: r̄ ∈ {0, 1}


@pytest.mark.parametrize(("successes", "paper", "released_code"), [
    ([0, 0, 0], 0.0, -0.5),  # never solved
    ([1, 1, 1], 0.0, -0.5),  # always solved
    ([1, 0, 0], 2 / 3, 2 / 3),  # r̄ = 1/3 -> 1 − 1/3 either way
])
def test_unlearnable_proposal_reward_both_ways(successes: list[int], paper: float, released_code: float) -> None:
    assert learnability_reward(successes) == pytest.approx(paper, abs=1e-15)
    assert learnability_reward(successes, unlearnable_reward=RELEASED_CODE_UNLEARNABLE_REWARD) == pytest.approx(
        released_code, abs=1e-15)
    got = propose_reward(successes, well_formed=True, valid_task=True, unlearnable_reward=-0.5)
    assert got == pytest.approx(released_code, abs=1e-15)
    # A format error or an invalid task stays −1 whatever the switch.
    assert propose_reward(successes, well_formed=False, valid_task=True, unlearnable_reward=-0.5) == -1.0


# ----------------------------------------------------------------------------------------------- Eq 8 statistics


def test_trr_per_sample_and_token_weighted_by_hand() -> None:
    # rewards (1, 0, −1), response lengths (1, 2, 3) tokens, one group.
    # per sample (Eq 8): μ = 0, population σ = sqrt(2/3) -> A = ±1/sqrt(2/3) = ±1.2247448714, 0.
    # token-weighted (released code): N = 6 tokens, μ = (1·1 + 2·0 + 3·(−1))/6 = −1/3; deviations (4/3, 1/3, −2/3);
    #   Σ |o| d² = 16/9 + 2/9 + 12/9 = 10/3; var = (10/3)/6 · 6/5 = 2/3 -> A = d / sqrt(2/3)
    #   = (1.6329931619, 0.4082482905, −0.8164965809).
    rewards = torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
    lengths = torch.tensor([1, 2, 3])
    per_sample = trr_plus_plus_advantages(rewards, ONE_GROUP, eps=0.0)
    torch.testing.assert_close(per_sample, torch.tensor([1.2247448714, 0.0, -1.2247448714], dtype=torch.float64),
                               atol=1e-9, rtol=0)
    token_weighted = trr_plus_plus_advantages_token_weighted(rewards, ONE_GROUP, lengths, eps=0.0)
    torch.testing.assert_close(token_weighted,
                               torch.tensor([1.6329931619, 0.4082482905, -0.8164965809], dtype=torch.float64),
                               atol=1e-9, rtol=0)
    # The released code's eps = 1e-8 sits inside the square root: a change of ~1e-8 relative, nothing more.
    torch.testing.assert_close(trr_plus_plus_advantages_token_weighted(rewards, ONE_GROUP, lengths), token_weighted,
                               atol=1e-7, rtol=0)


def test_token_weighted_applies_bessel_over_tokens_and_eps_inside_the_square_root() -> None:
    rewards = torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
    # Equal lengths of 1: N = 3 tokens, μ = 0, Σ d² / N = 2/3, Bessel 3/2 -> var = 1 -> A = (1, 0, −1) exactly,
    # where the per-sample (population) statistics give ±1.2247.
    ones = torch.ones(3, dtype=torch.long)
    torch.testing.assert_close(trr_plus_plus_advantages_token_weighted(rewards, ONE_GROUP, ones, eps=0.0),
                               torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64), atol=1e-12, rtol=0)
    # eps = 1: inside the root (released code) d / sqrt(2/3 + 1) = (4/3, 1/3, −2/3) / 1.2909944487;
    # added to σ (Eq 8 here): ±1 / (0.8164965809 + 1) = ±0.5505102572.
    lengths = torch.tensor([1, 2, 3])
    inside = trr_plus_plus_advantages_token_weighted(rewards, ONE_GROUP, lengths, eps=1.0)
    torch.testing.assert_close(inside, torch.tensor([1.0327955590, 0.2581988897, -0.5163977795],
                                                    dtype=torch.float64), atol=1e-9, rtol=0)
    added = trr_plus_plus_advantages(rewards, ONE_GROUP, eps=1.0)
    torch.testing.assert_close(added, torch.tensor([0.5505102572, 0.0, -0.5505102572], dtype=torch.float64),
                               atol=1e-9, rtol=0)


def test_token_weighted_keeps_groups_apart_and_flat_groups_at_zero() -> None:
    rewards = torch.tensor([0.5, 0.5, 0.5, 1.0, -1.0], dtype=torch.float64)
    groups = torch.tensor([0, 0, 0, 4, 4])
    lengths = torch.tensor([7, 1, 3, 2, 2])
    got = trr_plus_plus_advantages_token_weighted(rewards, groups, lengths, eps=0.0)
    # group 0 is flat -> 0; group 4: N = 4, μ = 0, Σ |o| d² = 4, var = 4/4 · 4/3 = 4/3 -> ±1/sqrt(4/3) = ±0.8660254
    torch.testing.assert_close(got, torch.tensor([0.0, 0.0, 0.0, 0.8660254038, -0.8660254038], dtype=torch.float64),
                               atol=1e-9, rtol=0)
    with pytest.raises(ValueError, match="response_lengths"):
        trr_plus_plus_advantages_token_weighted(rewards, groups, torch.tensor([1, 2]))


# ----------------------------------------------------------------------------------------------- Eq 9 clip range


def _three_tokens(ratios: list[float], advantages: list[float]) -> tuple[torch.Tensor, ...]:
    """Three one-token sequences with the given ratios s = π/π_old and advantages."""
    old = torch.tensor([[-1.0], [-2.0], [-0.5]], dtype=torch.float64)
    new = (old + torch.tensor(ratios, dtype=torch.float64).log().unsqueeze(1)).requires_grad_(True)
    adv = torch.tensor(advantages, dtype=torch.float64).unsqueeze(1)
    return new, old, adv, torch.ones(3, 1, dtype=torch.bool)


def test_clip_range_and_dual_clip_both_ways() -> None:
    # (s, A) per token: (1.25, +1), (0.7, −1), (5.0, −1); ℓ = max(−A·s, −A·clip(s, 1 − low, 1 + high)).
    # paper (0.2 / 0.2, no dual clip): ℓ = (max(−1.25, −1.2), max(0.7, 0.8), max(5, 1.2)) = (−1.2, 0.8, 5);
    #   token-mean 4.6/3; gradient dℓ/dlogπ = −A·s where the unclipped term wins: (0, 0, 5) / 3.
    # released code (0.2 / 0.28, c = 3): s = 1.25 < 1.28 is no longer clipped: −1.25; (0.8 as before);
    #   5 > 3·|A| is capped by the dual clip at 3 -> (−1.25, 0.8, 3), mean 2.55/3; gradient (−1.25, 0, 0) / 3.
    new, old, adv, mask = _three_tokens([1.25, 0.7, 5.0], [1.0, -1.0, -1.0])
    paper, paper_metrics = ppo_clip_loss(new, old, adv, mask, 0.2)
    assert paper.item() == pytest.approx(4.6 / 3, abs=1e-12)
    assert paper_metrics["clip_fraction"] == pytest.approx(2 / 3) and paper_metrics["dual_clip_fraction"] == 0.0
    paper.backward()
    assert new.grad is not None
    torch.testing.assert_close(new.grad, torch.tensor([[0.0], [0.0], [5.0 / 3]], dtype=torch.float64),
                               atol=1e-12, rtol=0)

    new, old, adv, mask = _three_tokens([1.25, 0.7, 5.0], [1.0, -1.0, -1.0])
    code, code_metrics = ppo_clip_loss(new, old, adv, mask, 0.2, clip_ratio_high=0.28, clip_ratio_c=3.0)
    assert code.item() == pytest.approx(2.55 / 3, abs=1e-12)
    assert code_metrics["clip_fraction"] == pytest.approx(1 / 3)
    assert code_metrics["dual_clip_fraction"] == pytest.approx(1 / 3)
    code.backward()
    assert new.grad is not None
    torch.testing.assert_close(new.grad, torch.tensor([[-1.25 / 3], [0.0], [0.0]], dtype=torch.float64),
                               atol=1e-12, rtol=0)


@pytest.mark.parametrize("bad", [0.5, 1.0, -2.0])
def test_dual_clip_is_off_or_above_one(bad: float) -> None:
    new, old, adv, mask = _three_tokens([1.0, 1.0, 1.0], [1.0, -1.0, -1.0])
    with pytest.raises(ValueError, match="clip_ratio_c"):
        ppo_clip_loss(new, old, adv, mask, clip_ratio_c=bad)


# ----------------------------------------------------------------------------------------------- Eq 9 aggregation

# Three sequences of 1, 2 and 4 response tokens whose token losses are (3), (1, 5), (0, 0, 4, 4):
LENGTHS = torch.tensor([1, 2, 4])
TOKEN_LOSSES = torch.tensor([[3.0, 0, 0, 0], [1.0, 5.0, 0, 0], [0, 0, 4.0, 4.0]], dtype=torch.float64)
MASK = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
# token-mean: (3 + 6 + 8) / 7 = 17/7; weights 1/7 each.
# micro-batch token-mean, groups of 2: {0, 1}: 9/3 = 3, {2}: 8/4 = 2 -> (3 + 2)/2 = 2.5; weights (1/6, 1/6, 1/8).
# seq-mean-token-mean (Eq 9): (3/1 + 6/2 + 8/4)/3 = 8/3; weights (1/3, 1/6, 1/12).
EXPECTED = {
    "token-mean": ([1 / 7, 1 / 7, 1 / 7], 17 / 7),
    "micro-batch-token-mean": ([1 / 6, 1 / 6, 1 / 8], 2.5),
    "seq-mean-token-mean": ([1 / 3, 1 / 6, 1 / 12], 8 / 3),
}


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_loss_aggregation_by_hand(mode: str) -> None:
    weights = loss_aggregation_weights(LENGTHS, mode, micro_batch_size=2)
    expected_weights, expected_loss = EXPECTED[mode]
    torch.testing.assert_close(weights, torch.tensor(expected_weights, dtype=torch.float64), atol=1e-15, rtol=0)
    assert float(weighted_token_sum(TOKEN_LOSSES, MASK, weights)) == pytest.approx(expected_loss, abs=1e-12)
    # The same through Eq 9 at ratio 1 (ℓ = −A), and cut into memory micro-batches {0} and {1, 2}: the same sum.
    logp = torch.zeros(3, 4, dtype=torch.float64)
    whole, _ = ppo_clip_loss(logp, logp, -TOKEN_LOSSES, MASK, sequence_weights=weights)
    first, _ = ppo_clip_loss(logp[:1], logp[:1], -TOKEN_LOSSES[:1], MASK[:1], sequence_weights=weights[:1])
    rest, _ = ppo_clip_loss(logp[1:], logp[1:], -TOKEN_LOSSES[1:], MASK[1:], sequence_weights=weights[1:])
    assert float(whole) == pytest.approx(expected_loss, abs=1e-12)
    assert float(first + rest) == pytest.approx(expected_loss, abs=1e-12)


def test_micro_batch_mode_spans_the_other_two() -> None:
    # One group holding the whole batch is the token-mean; groups of one sequence are the sequence mean.
    torch.testing.assert_close(loss_aggregation_weights(LENGTHS, "micro-batch-token-mean", micro_batch_size=16),
                               loss_aggregation_weights(LENGTHS, "token-mean"), atol=1e-15, rtol=0)
    torch.testing.assert_close(loss_aggregation_weights(LENGTHS, "micro-batch-token-mean", micro_batch_size=1),
                               loss_aggregation_weights(LENGTHS, "seq-mean-token-mean"), atol=1e-15, rtol=0)
    # A sequence without response tokens weighs nothing and is not counted as a sequence.
    with_empty = loss_aggregation_weights(torch.tensor([2, 0, 2]), "seq-mean-token-mean")
    torch.testing.assert_close(with_empty, torch.tensor([0.25, 0.0, 0.25], dtype=torch.float64), atol=0, rtol=0)
    with pytest.raises(ValueError, match="loss_agg_mode"):
        loss_aggregation_weights(LENGTHS, "sum")
    with pytest.raises(ValueError, match="token_count or sequence_weights"):
        logp = torch.zeros(3, 4)
        ppo_clip_loss(logp, logp, logp, MASK, token_count=7, sequence_weights=torch.ones(3))
    assert math.isclose(float(loss_aggregation_weights(torch.tensor([4]), "token-mean")[0]), 0.25)
