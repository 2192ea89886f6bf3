"""LlamaCppEngine on the tiny model (a float32 GGUF written from its HF directory): the torch engine's contract —
log-probabilities, seeds, stops, abort, shared prefixes, waves — and weight pushes (LoRA adapters, full weights)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from services.algorithm.prompts import deduction_solver_prompt
from services.inference import llama_cpp_runtime
from services.inference.decoding import DecodeProgress
from services.inference.gguf_export import GgufExportError, write_lora_gguf, write_model_gguf
from services.inference.local_engine import LocalEngine, load_causal_lm
from services.ports import InferenceError, SamplingParams
from services.settings import Settings

pytestmark = pytest.mark.skipif(llama_cpp_runtime.available() is not None,
                                reason=str(llama_cpp_runtime.available()))

PROGRAM = "def f(a, b):\n    return sorted([x * b for x in a])[::-1]"


@pytest.fixture(scope="module")
def tiny_gguf(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_gguf(tiny_dir, tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def new_engine(tiny_dir: Path, gguf: Path, work: Path, **options: int) -> object:
    from services.inference.llama_cpp_engine import LlamaCppEngine

    return LlamaCppEngine(tiny_dir, gguf, work_dir=work, seed=123, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def engine(tiny_dir: Path, tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> object:
    return new_engine(tiny_dir, tiny_gguf, tmp_path_factory.mktemp("work"))


@pytest.fixture(scope="module")
def prompts(tiny_engine: LocalEngine) -> list[list[int]]:
    long_prompt = tiny_engine.prompt_ids(deduction_solver_prompt(PROGRAM, "[1, 2, 3], 4"))
    return [long_prompt, long_prompt[:-7], tiny_engine.codec.encode("def f(x):\n    return")]


def test_logprobs_and_tokens_equal_the_torch_engines(engine: object, tiny_engine: LocalEngine,
                                                    prompts: list[list[int]]) -> None:
    """Same seeds, same sampler: the same tokens as the float32 torch engine, and log-probabilities equal to the
    torch model's recomputation (the trainer's), at T = 1 and T = 0.7."""
    for temperature in (1.0, 0.7):
        sampling = SamplingParams(max_new_tokens=24, temperature=temperature, n=2, seed=11)
        ours = engine.generate(prompts, sampling)  # type: ignore[attr-defined]
        theirs = tiny_engine.generate(prompts, sampling)
        assert [[c.output_ids for c in g] for g in ours] == [[c.output_ids for c in g] for g in theirs]
        for prompt, group in zip(prompts, ours):
            for completion in group:
                recomputed = tiny_engine.forward_logprobs(prompt, completion.output_ids, temperature=temperature)
                assert completion.logprobs == pytest.approx(recomputed, abs=1e-3)


def test_seeds_give_repeatable_distinct_samples(engine: object, prompts: list[list[int]]) -> None:
    sampling = SamplingParams(max_new_tokens=16, n=4, seed=3)
    first = engine.generate(prompts[:1], sampling)[0]  # type: ignore[attr-defined]
    again = engine.generate(prompts[:1], sampling)[0]  # type: ignore[attr-defined]
    assert [c.output_ids for c in first] == [c.output_ids for c in again]
    assert len({tuple(c.output_ids) for c in first}) > 1
    unseeded = [engine.generate(prompts[:1], SamplingParams(max_new_tokens=16))[0][0]  # type: ignore[attr-defined]
                for _ in range(2)]
    assert unseeded[0].output_ids != unseeded[1].output_ids  # the engine's own generator advances


def test_a_prompt_samples_alike_alone_or_beside_prompts_it_shares_a_prefix_with(engine: object,
                                                                               prompts: list[list[int]]) -> None:
    """The second prompt starts from the first one's cache (shared prefix); its samples must not change."""
    together = engine.sample(prompts, SamplingParams(max_new_tokens=20, n=2), seeds=[1, 2, 3, 4, 5, 6])[0]  # type: ignore[attr-defined]
    alone = engine.sample(prompts[1:2], SamplingParams(max_new_tokens=20, n=2), seeds=[3, 4])[0]  # type: ignore[attr-defined]
    assert [s.output_ids for s in together[1]] == [s.output_ids for s in alone[0]]
    for shared, single in zip(together[1], alone[0]):
        assert shared.logprobs == pytest.approx(single.logprobs, abs=1e-4)


def test_a_batch_that_does_not_fit_the_cache_is_decoded_in_waves(tiny_dir: Path, tiny_gguf: Path, tmp_path: Path,
                                                                engine: object, prompts: list[list[int]]) -> None:
    small = new_engine(tiny_dir, tiny_gguf, tmp_path, context_tokens=1400, max_sequences=4)
    sampling = SamplingParams(max_new_tokens=40, n=3, seed=9)
    steps: list[DecodeProgress] = []
    small.on_decode_step = steps.append  # type: ignore[attr-defined]
    waved = small.generate(prompts, sampling)  # type: ignore[attr-defined]
    whole = engine.generate(prompts, sampling)  # type: ignore[attr-defined]
    assert [[c.output_ids for c in g] for g in waved] == [[c.output_ids for c in g] for g in whole]
    assert sum(1 for s in steps if s.step == 1) == 3  # one wave per prompt: 3 rows each, 4 sequences at most
    with pytest.raises(InferenceError, match="cache cells"):
        small.generate(prompts[:1], SamplingParams(max_new_tokens=2000))  # type: ignore[attr-defined]


def test_stop_strings_cut_the_text_and_keep_the_token(engine: object, prompts: list[list[int]]) -> None:
    free = engine.generate(prompts[:1], SamplingParams(max_new_tokens=30, seed=4))[0][0]  # type: ignore[attr-defined]
    text = free.text
    stop = text[5:8]
    assert len(stop.strip()) > 0
    stopped = engine.generate(prompts[:1], SamplingParams(max_new_tokens=30, seed=4, stop=[stop]))[0][0]  # type: ignore[attr-defined]
    assert stopped.finish_reason == "stop"
    assert stop not in stopped.text and text.startswith(stopped.text)
    assert len(stopped.output_ids) < len(free.output_ids)
    assert stopped.output_ids == free.output_ids[:len(stopped.output_ids)]


def test_abort_ends_rows_with_what_they_had(engine: object, prompts: list[list[int]]) -> None:
    abort = threading.Event()
    seen: list[DecodeProgress] = []

    def watch(progress: DecodeProgress) -> None:
        seen.append(progress)
        if progress.step == 5:
            abort.set()

    engine.on_decode_step = watch  # type: ignore[attr-defined]
    try:
        groups, _ = engine.sample(prompts[:2], SamplingParams(max_new_tokens=50, n=2), abort=abort)  # type: ignore[attr-defined]
    finally:
        engine.on_decode_step = None  # type: ignore[attr-defined]
    samples = [s for group in groups for s in group]
    assert all(s.finish_reason == "abort" and len(s.output_ids) == 5 for s in samples)


def test_token_ids_outside_the_vocabulary_are_refused(engine: object) -> None:
    with pytest.raises(InferenceError, match="outside"):
        engine.generate([[1, 999_999]], SamplingParams(max_new_tokens=2))  # type: ignore[attr-defined]


def lora_model(tiny_dir: Path, rank: int = 4) -> torch.nn.Module:
    from trainer_svc.lora import add_adapters

    model = add_adapters(load_causal_lm(tiny_dir, torch.device("cpu"), torch.float32),
                         Settings(lora_rank=rank, lora_alpha=8.0).trainer.lora, tiny_dir)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model


def test_a_lora_push_serves_the_adapted_policy(tiny_dir: Path, tiny_gguf: Path, tmp_path: Path,
                                               prompts: list[list[int]]) -> None:
    from trainer_svc.lora import save_adapters

    fresh = new_engine(tiny_dir, tiny_gguf, tmp_path)
    model = lora_model(tiny_dir)
    save_adapters(model, tmp_path / "push")
    before = fresh.generate(prompts[:1], SamplingParams(max_new_tokens=24, seed=2))[0][0]  # type: ignore[attr-defined]
    fresh.update_weights(str(tmp_path / "push"), 5)  # type: ignore[attr-defined]
    completion = fresh.generate(prompts[:1], SamplingParams(max_new_tokens=24, seed=2))[0][0]  # type: ignore[attr-defined]
    assert completion.weight_version == "5" and fresh.weight_version() == "5"  # type: ignore[attr-defined]
    ids = torch.tensor([prompts[0] + completion.output_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompts[0]) - 1:-1]
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion.output_ids)[:, None])[:, 0]
    assert completion.logprobs == pytest.approx(expected.tolist(), abs=1e-3)
    moved = fresh.forward_logprobs(prompts[0], before.output_ids)  # type: ignore[attr-defined]
    assert max(abs(a - b) for a, b in zip(moved, before.logprobs)) > 0.05  # the adapter changed the policy


def test_an_adapter_of_another_base_is_refused_and_changes_nothing(tiny_dir: Path, tiny_gguf: Path,
                                                                  tmp_path: Path) -> None:
    import json

    from trainer_svc.lora import save_adapters

    fresh = new_engine(tiny_dir, tiny_gguf, tmp_path)
    save_adapters(lora_model(tiny_dir), tmp_path / "push")
    record = tmp_path / "push" / "lora_base.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "base_model_dir": str(tmp_path)}))
    with pytest.raises(InferenceError, match="trained on"):
        fresh.update_weights(str(tmp_path / "push"), 1)  # type: ignore[attr-defined]
    assert fresh.weight_version() == "0"  # type: ignore[attr-defined]


def test_rslora_adapters_are_refused(tiny_dir: Path, tmp_path: Path) -> None:
    import json

    from trainer_svc.lora import save_adapters

    save_adapters(lora_model(tiny_dir), tmp_path / "push")
    config = tmp_path / "push" / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "use_rslora": True}))
    with pytest.raises(GgufExportError, match="use_rslora"):
        write_lora_gguf(tmp_path / "push", tmp_path / "a.gguf", architecture="qwen2", blocks=2)


def test_a_full_push_serves_the_new_weights(tiny_dir: Path, tiny_gguf: Path, tmp_path: Path, perturbed_dir: Path,
                                            prompts: list[list[int]]) -> None:
    """A full fine-tuning push (an HF directory without a tokenizer) replaces the model; log-probabilities are the
    pushed weights' (the torch engine loaded from the same directory)."""
    import shutil

    weights_only = tmp_path / "v000003"
    weights_only.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(perturbed_dir / name, weights_only / name)
    fresh = new_engine(tiny_dir, tiny_gguf, tmp_path)
    fresh.update_weights(str(weights_only), 3)  # type: ignore[attr-defined]
    reference = LocalEngine(perturbed_dir, device="cpu", dtype=torch.float32)
    completion = fresh.generate(prompts[:1], SamplingParams(max_new_tokens=20, seed=8))[0][0]  # type: ignore[attr-defined]
    assert completion.weight_version == "3"
    # the perturbed weights make large activations: llama.cpp's f16 KV cache rounds them (~0.01 nats here)
    pushed = reference.forward_logprobs(prompts[0], completion.output_ids)
    base = LocalEngine(tiny_dir, device="cpu", dtype=torch.float32).forward_logprobs(prompts[0],
                                                                                       completion.output_ids)
    to_pushed = sum(abs(a - b) for a, b in zip(completion.logprobs, pushed)) / len(pushed)
    to_base = sum(abs(a - b) for a, b in zip(completion.logprobs, base)) / len(base)
    assert to_pushed < 0.03 and to_base > 10 * to_pushed
    with pytest.raises(InferenceError, match="serves full fine-tuned weights"):
        from trainer_svc.lora import save_adapters

        save_adapters(lora_model(tiny_dir), tmp_path / "adapter")
        fresh.update_weights(str(tmp_path / "adapter"), 4)  # type: ignore[attr-defined]


def test_pushes_and_a_converted_base_are_the_engines_own_files(tiny_dir: Path, tmp_path: Path, perturbed_dir: Path,
                                                              prompts: list[list[int]]) -> None:
    """A base converted from a checkpoint and each full push live in the engine's scratch directory: a push removes
    the file it replaces, close removes the directory; an engine of a cached GGUF that takes no full push makes
    none."""
    import shutil

    from services.inference.llama_cpp_engine import LlamaCppEngine

    cache = tmp_path / "cache"
    cache.mkdir()
    released = write_model_gguf(tiny_dir, cache / "tiny.gguf")
    with_release = LlamaCppEngine(tiny_dir, released, seed=1)
    with_release.close()
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf"]  # no push: no scratch directory made

    engine = LlamaCppEngine(tiny_dir, None, scratch_root=tmp_path / "scratch", seed=1)
    scratch = engine.scratch.path
    assert sorted(p.name for p in scratch.iterdir()) == ["base.gguf"]
    for count, version in enumerate((3, "second", 3), start=1):  # the HTTP server's versions are any string
        push = tmp_path / f"push{count}"
        push.mkdir()
        for name in ("config.json", "generation_config.json", "model.safetensors"):
            shutil.copy(perturbed_dir / name, push / name)
        engine.update_weights(str(push), version)  # type: ignore[arg-type]
        assert sorted(p.name for p in scratch.iterdir()) == [f"push-{count:06d}.gguf"]
    completion = engine.generate(prompts[:1], SamplingParams(max_new_tokens=4, seed=8))[0][0]
    assert completion.weight_version == "3"
    engine.close()
    assert not scratch.exists() and list((tmp_path / "scratch").iterdir()) == []
