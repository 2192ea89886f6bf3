"""LocalEngine on the tiny model: sampling, greedy, logprobs, stops, EOS, seeds, weight swaps."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import torch

from services.algorithm.prompts import deduction_solver_prompt
from services.inference.decoding import RowSpec, decode_rows
from services.inference.local_engine import LocalEngine, load_causal_lm
from services.ports import InferenceError, SamplingParams

PROGRAM = "def f(a, b):\n    return sorted([x * b for x in a])[::-1]"


@pytest.fixture(scope="module")
def prompts(tiny_engine: LocalEngine) -> list[list[int]]:
    """Two prompts of different lengths, so the batch needs left padding."""
    long_prompt = tiny_engine.prompt_ids(deduction_solver_prompt(PROGRAM, "[1, 2, 3], 4"))
    short_prompt = tiny_engine.codec.encode("def f(x):\n    return")
    assert len(long_prompt) > len(short_prompt) + 50
    return [long_prompt, short_prompt]


def test_n_samples_differ_at_temperature_one(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    out = tiny_engine.generate(prompts, SamplingParams(max_new_tokens=12, temperature=1.0, n=4))
    assert [len(group) for group in out] == [4, 4]
    for index, group in enumerate(out):
        assert all(c.prompt_index == index for c in group)
        assert len({tuple(c.output_ids) for c in group}) > 1


def test_greedy_samples_are_identical_and_repeatable(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    greedy = SamplingParams(max_new_tokens=12, temperature=0, n=3)
    first = tiny_engine.generate(prompts, greedy)
    second = tiny_engine.generate(prompts, greedy)
    for group_a, group_b in zip(first, second):
        assert len({tuple(c.output_ids) for c in group_a}) == 1
        assert group_a[0].output_ids == group_b[0].output_ids


def test_logprobs_equal_a_forward_pass_recomputation(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    out = tiny_engine.generate(prompts, SamplingParams(max_new_tokens=16, temperature=1.0, n=2, seed=5))
    for prompt, group in zip(prompts, out):
        for completion in group:
            assert len(completion.logprobs) == len(completion.output_ids) > 0
            recomputed = tiny_engine.forward_logprobs(prompt, completion.output_ids)
            assert completion.logprobs == pytest.approx(recomputed, abs=1e-4)
            assert all(lp <= 0 for lp in completion.logprobs)


def test_logprobs_at_other_temperatures_are_temperature_scaled(tiny_engine: LocalEngine,
                                                               prompts: list[list[int]]) -> None:
    completion = tiny_engine.generate(prompts[:1], SamplingParams(max_new_tokens=10, temperature=0.5, seed=3))[0][0]
    scaled = tiny_engine.forward_logprobs(prompts[0], completion.output_ids, temperature=0.5)
    plain = tiny_engine.forward_logprobs(prompts[0], completion.output_ids, temperature=1.0)
    assert completion.logprobs == pytest.approx(scaled, abs=1e-4)
    assert completion.logprobs != pytest.approx(plain, abs=1e-3)
    greedy = tiny_engine.generate(prompts[:1], SamplingParams(max_new_tokens=10, temperature=0))[0][0]
    assert greedy.logprobs == pytest.approx(tiny_engine.forward_logprobs(prompts[0], greedy.output_ids), abs=1e-4)


def test_max_new_tokens_ends_with_length(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    out = tiny_engine.generate(prompts, SamplingParams(max_new_tokens=7, temperature=0))
    for group in out:
        assert group[0].finish_reason == "length"
        assert len(group[0].output_ids) == 7
        assert group[0].weight_version == tiny_engine.weight_version()


def test_stop_string_truncates_text_and_ends_generation(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    seeded = SamplingParams(max_new_tokens=40, temperature=1.0, seed=4)  # greedy tiny output is only newlines
    free = tiny_engine.generate(prompts[:1], seeded)[0][0]
    visible = [i for i in range(len(free.text) // 3, len(free.text) - 3) if free.text[i:i + 3].strip()]
    assert visible, f"no visible 3-character stop string in {free.text!r}"
    stop = free.text[visible[0]:visible[0] + 3]
    stopped = tiny_engine.generate(prompts[:1], seeded.model_copy(update={"stop": [stop]}))[0][0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[:free.text.index(stop)]
    assert stop not in stopped.text
    assert stopped.output_ids == free.output_ids[:len(stopped.output_ids)]
    assert len(stopped.output_ids) < len(free.output_ids)
    assert stop in tiny_engine.decode(stopped.output_ids)  # the ids run through the token that completed it


def test_eos_token_ends_a_row_and_is_kept(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    free = tiny_engine.generate(prompts[:1], SamplingParams(max_new_tokens=6, temperature=0))[0][0]
    eos = free.output_ids[2]  # declare the third greedy token an EOS id
    samples = decode_rows(tiny_engine.model, prompts[:1], RowSpec(max_new_tokens=6, temperature=0, top_p=1, top_k=-1),
                          eos_ids={eos}, detokenize=tiny_engine.decode,
                          generator=None)
    first_eos = free.output_ids.index(eos)
    assert samples[0].finish_reason == "stop" and samples[0].matched == eos
    assert samples[0].output_ids == free.output_ids[:first_eos + 1]


def test_abort_event_returns_abort_samples(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    import threading

    abort = threading.Event()
    abort.set()
    batches, version = tiny_engine.sample(prompts, SamplingParams(max_new_tokens=5, n=2), abort=abort)
    assert version == tiny_engine.weight_version()
    assert [s.finish_reason for group in batches for s in group] == ["abort"] * 4


def test_same_seed_same_samples_other_seed_other_samples(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    def run(seed: int) -> list[list[int]]:
        out = tiny_engine.generate(prompts, SamplingParams(max_new_tokens=12, temperature=1.0, n=2, seed=seed))
        return [c.output_ids for group in out for c in group]

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_every_sample_has_its_own_seed(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    """Sample k of a seeded request draws from seed + k alone: the n samples of a prompt differ, and a sample is the
    same whether it is drawn in a batch or alone (so a deterministic server cannot repeat one sample n times)."""
    sampling = SamplingParams(max_new_tokens=12, temperature=1.0, n=4, seed=500)
    batch = tiny_engine.generate(prompts, sampling)
    assert all(len({tuple(c.output_ids) for c in group}) == 4 for group in batch)
    for index, prompt in enumerate(prompts):
        for j in range(4):
            alone = tiny_engine.generate([prompt], sampling.model_copy(update={"n": 1, "seed": 500 + index * 4 + j}))
            assert alone[0][0].output_ids == batch[index][j].output_ids


def test_engine_seed_makes_unseeded_runs_reproducible(tiny_dir: Path, prompts: list[list[int]]) -> None:
    sampling = SamplingParams(max_new_tokens=10, temperature=1.0, n=2)
    runs = [LocalEngine(tiny_dir, device="cpu", seed=99).generate(prompts, sampling) for _ in range(2)]
    assert [c.output_ids for g in runs[0] for c in g] == [c.output_ids for g in runs[1] for c in g]


def test_update_weights_changes_outputs_and_version(tiny_engine: LocalEngine, tiny_dir: Path, perturbed_dir: Path,
                                                    prompts: list[list[int]]) -> None:
    greedy = SamplingParams(max_new_tokens=12, temperature=0)
    before = tiny_engine.generate(prompts, greedy)
    try:
        tiny_engine.update_weights(str(perturbed_dir), 3)
        assert tiny_engine.weight_version() == "3"
        after = tiny_engine.generate(prompts, greedy)
        assert all(c.weight_version == "3" for group in after for c in group)
        assert [g[0].output_ids for g in after] != [g[0].output_ids for g in before]
        with pytest.raises(InferenceError, match="no HF model directory"):
            tiny_engine.update_weights(str(perturbed_dir / "missing"), 4)
        assert tiny_engine.weight_version() == "3"  # a failed load changes nothing
    finally:
        tiny_engine.update_weights(str(tiny_dir), 0)
    assert [g[0].output_ids for g in tiny_engine.generate(prompts, greedy)] == [g[0].output_ids for g in before]


def test_a_weight_update_prints_no_loading_bar_and_leaves_the_bar_switch_as_it_was(
        tiny_engine: LocalEngine, tiny_dir: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from transformers.utils import logging as hf_logging

    load_causal_lm(tiny_dir, torch.device("cpu"), torch.float32)
    assert "Loading weights" in capfd.readouterr().err  # a first load shows it (so the check below can fail)
    tiny_engine.update_weights(str(tiny_dir), 0)
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()


def test_top_k_one_is_greedy(tiny_engine: LocalEngine, prompts: list[list[int]]) -> None:
    greedy = tiny_engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=0))
    top1 = tiny_engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=1.0, top_k=1, n=2, seed=1))
    for g, t in zip(greedy, top1):
        assert all(c.output_ids == g[0].output_ids for c in t)


def test_model_on_cpu_in_float32(tiny_engine: LocalEngine) -> None:
    assert tiny_engine.device == torch.device("cpu")
    assert tiny_engine.model_info()["dtype"] == "float32"


def test_decode_progress_reports_each_step_and_ends_with_no_live_row(tiny_engine: LocalEngine,
                                                                    prompts: list[list[int]]) -> None:
    """The live display's feed: one report per step, tokens counted, and a last report with no row decoding, also
    when every row runs to the length limit (no EOS)."""
    from services.inference.decoding import DecodeProgress

    seen: list[DecodeProgress] = []
    tiny_engine.on_decode_step = seen.append
    try:
        out = tiny_engine.generate(prompts, SamplingParams(max_new_tokens=6, temperature=1.0, n=2, stop=[]))
    finally:
        tiny_engine.on_decode_step = None
    produced = sum(len(c.output_ids) for group in out for c in group)
    prefill = [p for p in seen if p.step == 0]  # a long prompt is prefilled in reported chunks first
    assert seen[:len(prefill)] == prefill and prefill[-1].prefilled == sum(len(p) for p in prompts)
    seen = seen[len(prefill):]
    assert [p.step for p in seen] == list(range(1, len(seen) + 1)) and len(seen) <= 6
    assert seen[-1].live == 0 and seen[-1].tokens == produced and seen[0].rows == 4
    assert all(p.live > 0 for p in seen[:-1])


def test_a_watched_long_prefill_goes_in_reported_chunks_and_samples_as_one_forward_does(
        tiny_engine: LocalEngine, prompts: list[list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    from services.inference import decoding

    spec = RowSpec(max_new_tokens=8, temperature=0, top_p=1, top_k=-1)
    kwargs = {"eos_ids": set(), "detokenize": tiny_engine.decode,
              "generator": None, "repeats": 2}
    whole = decode_rows(tiny_engine.model, prompts, spec, **kwargs)  # nobody watches: one prefill forward
    monkeypatch.setattr(decoding, "PREFILL_CHUNK_TOKENS", 64)  # each prompt in chunks of 64 positions
    events: list[decoding.DecodeProgress] = []
    chunked = decode_rows(tiny_engine.model, prompts, spec, on_step=events.append, **kwargs)
    total = sum(len(p) for p in prompts)  # the two prompts share no prefix: every position is computed
    prefill = [e for e in events if e.step == 0]
    done = [0] + [e.prefilled for e in prefill]
    assert all(0 < b - a <= 64 for a, b in zip(done, done[1:])) and done[-1] == total
    assert all(e.prompt_width == total and e.rows == 2 for e in prefill) and len(prefill) >= 3
    assert events[len(prefill)].step == 1  # decoding follows the prefill
    assert [s.output_ids for s in chunked] == [s.output_ids for s in whole]
    assert torch.allclose(torch.tensor([s.logprobs for s in chunked]), torch.tensor([s.logprobs for s in whole]),
                          atol=1e-4)


def test_before_forward_runs_before_every_forward_pass(tiny_engine: LocalEngine, prompts: list[list[int]],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded run sets torch's threads there: once per prefill chunk and once per decoding step after the first
    (whose logits come from the prefill), and it sees the model's forward calls one for one."""
    from services.inference import decoding

    monkeypatch.setattr(decoding, "PREFILL_CHUNK_TOKENS", 64)
    calls: list[str] = []
    model = tiny_engine.model
    hook = model.register_forward_pre_hook(lambda *_: calls.append("forward"))
    tiny_engine.before_forward = lambda: calls.append("before")
    try:
        events: list[decoding.DecodeProgress] = []
        tiny_engine.on_decode_step = events.append
        tiny_engine.generate(prompts, SamplingParams(max_new_tokens=6, temperature=1.0, stop=[]))
    finally:
        hook.remove()
        tiny_engine.before_forward = tiny_engine.on_decode_step = None
    chunks = sum(1 for e in events if e.step == 0)
    steps = sum(1 for e in events if e.step > 0)
    assert calls == ["before", "forward"] * (chunks + steps - 1) and chunks >= 2


class _Cyclic:
    """An object in a reference cycle, holding a tensor: freed only by a garbage collection."""

    def __init__(self) -> None:
        self.itself = self
        self.weights = torch.ones(1024)


@pytest.mark.parametrize("int8", [False, True], ids=["float32", "int8 per channel"])
def test_a_weight_update_frees_the_replaced_model_and_cyclic_garbage_at_once(
        tiny_dir: Path, perturbed_dir: Path, int8: bool, prompts: list[list[int]]) -> None:
    # A weight export (save_pretrained) and a model leave objects in reference cycles; left to Python's rare full
    # collection they stayed resident and the learning run's process grew ~1.8 GB a step (0.5B model). Automatic
    # collection is off here, so only the engine's own collection can free them.
    engine = LocalEngine(tiny_dir, device="cpu", dtype=torch.float32, seed=0, int8_linear=int8, int8_per_channel=int8)
    replaced = weakref.ref(engine._model)
    gc.disable()
    try:
        engine.generate(prompts, SamplingParams(max_new_tokens=4, temperature=1.0))  # a model that has generated
        garbage = weakref.ref(_Cyclic().weights)
        assert garbage() is not None
        engine.update_weights(str(perturbed_dir), 1)
        assert replaced() is None and garbage() is None
    finally:
        gc.enable()
    assert engine.weight_version() == "1"
