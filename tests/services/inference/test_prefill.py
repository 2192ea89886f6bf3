"""The prefill computes each prompt on its own and a prefix shared with an earlier prompt once: the plan, the
positions it computes, and samples equal to decoding each prompt alone (greedy, the tiny model)."""

from __future__ import annotations

import pytest
import torch

from services.algorithm.prompts import deduction_solver_prompt
from services.inference.decoding import RowSpec, decode_rows
from services.inference.local_engine import LocalEngine
from services.inference.prefill import MIN_SHARED_PREFIX, prefill_batch, shared_prefix_plan


def test_each_prompt_starts_from_the_earlier_prompt_it_shares_most_with() -> None:
    system = list(range(100))
    a = system + [500, 501, 502]
    b = system + [500, 501, 600]
    c = list(range(1000, 1010))
    short = system[:MIN_SHARED_PREFIX - 1] + [7]
    assert shared_prefix_plan([a, b, c, a, short]) == [
        (None, 0),  # nothing before it
        (0, 102),  # system + 500, 501 from a
        (None, 0),  # shares nothing
        (0, len(a) - 1),  # identical to a: all but its last position, whose logits start the decoding
        (None, 0),  # a shared prefix below MIN_SHARED_PREFIX is computed again
    ]


@pytest.fixture(scope="module")
def shared_prompts(tiny_engine: LocalEngine) -> list[list[int]]:
    """Three solver prompts of one template, differing only near the end, and one unrelated prompt."""
    texts = [deduction_solver_prompt("def f(x):\n    return x + 1", str(k)) for k in (1, 22, 333)]
    prompts = [tiny_engine.prompt_ids(text) for text in texts] + [tiny_engine.codec.encode("print(1)")]
    assert shared_prefix_plan(prompts)[1][1] > 100  # the template is shared
    return prompts


def test_samples_equal_each_prompt_decoded_alone(tiny_engine: LocalEngine, shared_prompts: list[list[int]]) -> None:
    spec = RowSpec(max_new_tokens=8, temperature=0, top_p=1, top_k=-1)
    kwargs = {"eos_ids": set(), "detokenize": tiny_engine.decode, "generator": None}
    together = decode_rows(tiny_engine.model, shared_prompts, spec, repeats=2, **kwargs)
    alone = [s for p in shared_prompts for s in decode_rows(tiny_engine.model, [p], spec, repeats=2, **kwargs)]
    assert [s.output_ids for s in together] == [s.output_ids for s in alone]
    torch.testing.assert_close(torch.tensor([s.logprobs for s in together]),
                               torch.tensor([s.logprobs for s in alone]), atol=1e-4, rtol=1e-4)


def test_logits_and_cache_equal_each_prompt_computed_whole(tiny_engine: LocalEngine,
                                                          shared_prompts: list[list[int]]) -> None:
    """Each row's last logits and its right-aligned keys and values are those of one forward over its whole prompt
    (a row that reused a prefix must continue its positions from it: off by a shift, the tiny model's logits move
    by ~5e-3)."""
    from services.inference.decoding import _forward, cache_keyword

    model = tiny_engine.model
    keyword = cache_keyword(model)
    with torch.inference_mode():
        batch = prefill_batch(lambda past, **inputs: _forward(model, keyword, past, **inputs), shared_prompts,
                              chunk_tokens=0, before_forward=lambda: None, cache_config=model.config,
                              device=torch.device("cpu"))
        width = max(len(p) for p in shared_prompts)
        for row, prompt in enumerate(shared_prompts):
            ids = torch.tensor([prompt])
            cache, logits = _forward(model, keyword, None, input_ids=ids, attention_mask=torch.ones_like(ids),
                                     position_ids=torch.arange(len(prompt)).unsqueeze(0))
            torch.testing.assert_close(batch.last_logits[row], logits[0], atol=1e-5, rtol=1e-5)
            for whole, batched in zip(cache.layers, batch.cache.layers, strict=True):
                torch.testing.assert_close(batched.keys[row, :, width - len(prompt):], whole.keys[0], atol=1e-5,
                                           rtol=1e-5)
                torch.testing.assert_close(batched.values[row, :, width - len(prompt):], whole.values[0],
                                           atol=1e-5, rtol=1e-5)
            assert int(batch.attention_mask[row].sum()) == len(prompt)
            assert batch.positions[row, -1] == len(prompt) - 1


def test_a_shared_prefix_is_computed_once(tiny_engine: LocalEngine, shared_prompts: list[list[int]]) -> None:
    calls: list[int] = []
    hook = tiny_engine.model.register_forward_pre_hook(
        lambda _module, _args, kwargs: calls.append(int(kwargs["input_ids"].shape[1])), with_kwargs=True)
    try:
        tiny_engine.generate(shared_prompts, _one_token())
    finally:
        hook.remove()
    plan = shared_prefix_plan(shared_prompts)
    expected = sum(len(p) - taken for p, (_, taken) in zip(shared_prompts, plan))
    assert sum(calls) == expected < sum(len(p) for p in shared_prompts) - 200


def _one_token():
    from services.ports import SamplingParams

    return SamplingParams(max_new_tokens=1, temperature=1.0, seed=3)
