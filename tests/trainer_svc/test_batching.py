"""Batch assembly: right padding, masks, logprob alignment, length grouping, token budget, bad episodes."""

from __future__ import annotations

import pytest
import torch
from trainer_episodes import episode

from services.algorithm.task_types import Role, TaskType
from trainer_svc.batching import BatchError, build_micro_batches, collate, plan_micro_batches, total_response_tokens

PAD = 0


def test_collate_right_pads_and_aligns_response_positions() -> None:
    eps = [episode([5, 6, 7], [8, 9], 1.0, behaviour_logprobs=[-0.1, -0.2]),
           episode([5], [4, 3, 2, 1], 0.0)]
    mb = collate(eps, torch.tensor([0.5, -0.5]), [0, 1], PAD)
    assert mb.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 4, 3, 2, 1]]
    assert mb.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1]]
    # the logits at position p-1+k predict response token k
    assert mb.response_positions[0, :2].tolist() == [2, 3]
    assert mb.response_positions[1].tolist() == [0, 1, 2, 3]
    for row in range(2):
        n = int(mb.response_mask[row].sum())
        picked = mb.input_ids[row, mb.response_positions[row, :n] + 1]
        assert torch.equal(picked, mb.response_ids[row, :n])
    assert mb.response_mask.tolist() == [[True, True, False, False], [True, True, True, True]]
    assert mb.behaviour_logprobs[0].tolist() == pytest.approx([-0.1, -0.2, 0.0, 0.0])
    assert mb.has_behaviour_logprobs.tolist() == [True, False]
    assert mb.has_old_logprobs.tolist() == [False, False]  # π_old is recomputed by the policy, not copied
    assert mb.advantages.tolist() == [0.5, -0.5]


def test_collate_pads_shorter_sequences_on_the_right() -> None:
    eps = [episode([5, 6, 7, 8], [9, 10], 1.0), episode([5], [4], 0.0)]
    mb = collate(eps, torch.zeros(2), [0, 1], PAD)
    assert mb.input_ids[1].tolist() == [5, 4, PAD, PAD, PAD, PAD]
    assert mb.attention_mask[1].tolist() == [1, 1, 0, 0, 0, 0]
    assert mb.response_mask[1].tolist() == [True, False]


def test_micro_batches_group_by_length_and_cover_every_episode_once() -> None:
    lengths = [50, 3, 48, 4, 49, 5]
    plans = plan_micro_batches(lengths, micro_batch_size=3)
    assert plans == [[1, 3, 5], [2, 4, 0]]
    token_plans = plan_micro_batches(lengths, micro_batch_size=10, micro_batch_tokens=100)
    assert sorted(i for p in token_plans for i in p) == list(range(6))
    assert all(len(p) * max(lengths[i] for i in p) <= 100 for p in token_plans if len(p) > 1)
    assert plan_micro_batches([500, 2], micro_batch_size=4, micro_batch_tokens=100) == [[1], [0]]


def test_token_count_is_every_response_token_of_the_batch() -> None:
    eps = [episode([1, 2], [3] * k, 0.0) for k in (1, 2, 3, 4, 5)]
    mbs = build_micro_batches(eps, torch.zeros(5), pad_id=PAD, micro_batch_size=2)
    assert total_response_tokens(mbs) == 15
    assert sorted(int(i) for mb in mbs for i in mb.episode_index) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("prompt", "response", "logprobs", "reason"), [
    ([], [1], None, "empty prompt"),
    ([1], [], None, "empty response"),
    ([1], [2, 3], [-0.1], "1 behaviour logprobs for 2"),
])
def test_bad_episode_is_refused_with_a_reason(prompt, response, logprobs, reason) -> None:
    bad = episode(prompt, response, 0.0, behaviour_logprobs=logprobs, task_type=TaskType.INDUCTION, role=Role.PROPOSE)
    with pytest.raises(BatchError, match=reason):
        build_micro_batches([bad], torch.zeros(1), pad_id=PAD, micro_batch_size=1)
