"""A micro-batch's prompts forwarded once each, their common prefix once: the plan (`prefix_share`) and the forward
over it, which gives the log-probs of the full forward and the gradient of one sequence at a time."""

from __future__ import annotations

import pytest
import torch
from test_prompt_gradient import (
    assert_frozen_prompt_gives_the_full_forward,
    reference_gradients,
    summed_logprob_gradients,
)
from trainer_episodes import episode

from services.records import Episode
from trainer_svc.batching import MicroBatch, build_micro_batches
from trainer_svc.policy_forward import autocast_for, forwarded_positions, logprobs_and_entropy
from trainer_svc.prompt_sharing import common_prefix_length, prefix_share


def test_identical_prompts_are_one_prompt() -> None:
    share = prefix_share([[5, 6, 7], [5, 6, 7], [5, 6, 7]])
    assert (share.shared, share.width, share.distinct, share.positions) == (3, 3, 1, 3)
    assert share.prompt_of_row == (0, 0, 0)


def test_a_common_prefix_runs_once_and_each_rest_once_per_distinct_prompt() -> None:
    # rows 0 and 2 share their whole prompt; all four share [1, 2]; row 3 is a prefix of row 1
    prefixes = [[1, 2, 9, 9], [1, 2, 3, 4, 5], [1, 2, 9, 9], [1, 2, 3]]
    share = prefix_share(prefixes)
    assert (share.shared, share.width, share.distinct) == (2, 5, 3)
    assert share.positions == 2 + 3 * 3  # against 4 x 5 = 20 without sharing
    for row, prefix in enumerate(prefixes):
        assert prefixes[share.representatives[share.prompt_of_row[row]]] == prefix


def test_prompts_with_nothing_in_common_share_nothing() -> None:
    share = prefix_share([[4, 5], [7, 8, 9]])
    assert (share.shared, share.distinct, share.positions) == (0, 2, 6)
    assert common_prefix_length([1, 2, 3], [1, 2]) == 2
    with pytest.raises(ValueError):
        prefix_share([])


SHARED = list(range(20, 32))


def sharing_episodes() -> list[Episode]:
    """Two samples of one prompt, a prompt that extends the shared instructions differently, and one that is a
    prefix of another: every case of `prefix_share`, with ragged responses."""
    generator = torch.Generator().manual_seed(3)

    def ids(n: int) -> list[int]:
        return torch.randint(40, 200, (n,), generator=generator).tolist()

    task_a, task_b = SHARED + ids(6), SHARED + ids(3)
    prompts = [task_a, task_a, task_b, task_b[:-2], SHARED + ids(9)]
    return [episode(prompt, ids(r), reward=1.0) for prompt, r in zip(prompts, (4, 9, 2, 6, 5), strict=True)]


def sharing_batch() -> MicroBatch:
    episodes = sharing_episodes()
    return build_micro_batches(episodes, torch.ones(len(episodes)), pad_id=0, micro_batch_size=len(episodes))[0]


def test_shared_prompts_give_the_full_forwards_log_probs(tiny_model: torch.nn.Module) -> None:
    assert_frozen_prompt_gives_the_full_forward(tiny_model, sharing_batch())


def test_shared_prompts_give_the_one_sequence_gradient(tiny_model: torch.nn.Module) -> None:
    mb = sharing_batch()
    shared = summed_logprob_gradients(tiny_model, mb, prompt_gradient=False)
    reference = reference_gradients(tiny_model, mb)
    assert shared.keys() == reference.keys()
    for name in reference:
        torch.testing.assert_close(shared[name], reference[name], atol=1e-5, rtol=1e-4, msg=name)


def test_the_update_counts_the_positions_it_forwards() -> None:
    mb = sharing_batch()
    prompt_lengths = [len(e.prompt_ids) for e in sharing_episodes()]
    width = max(prompt_lengths) - 1
    # the 12 shared tokens once; then 4 distinct prompts (two rows hold task_a) padded to the widest
    assert forwarded_positions(mb, prompt_gradient=False) == 12 + 4 * (width - 12) + mb.rows * 9
    assert forwarded_positions(mb, prompt_gradient=True) == mb.input_ids.numel()


@pytest.mark.precision
@pytest.mark.parametrize("threads", [1, 2])
def test_shared_prompts_under_bf16_autocast_give_the_full_forwards_log_probs(tiny_model: torch.nn.Module,
                                                                            threads: int) -> None:
    """bf16 autocast forced on (whatever this CPU multiplies natively), on 1 and 2 torch threads: the shared prompt
    forward stays within bf16 rounding of the full forward, on the same numbers at either thread count."""
    torch.set_num_threads(threads)
    mb = sharing_batch()
    with torch.no_grad(), autocast_for(torch.device("cpu"), True):
        full, _ = logprobs_and_entropy(tiny_model, mb)
        shared, _ = logprobs_and_entropy(tiny_model, mb, prompt_gradient=False)
    mask = mb.response_mask
    assert shared.dtype == torch.float32 and bool(torch.isfinite(shared[mask]).all())
    torch.testing.assert_close(shared[mask], full[mask], atol=2e-3, rtol=1e-3)
