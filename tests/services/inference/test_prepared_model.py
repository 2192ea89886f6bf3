"""The APIs' tokenizer-only view of the model (services/inference/prepared_model.py, azr.factory.apis.api_engine):
they find what the model-prep step prepared and load its tokenizer, need no weight file, and never build, convert or
write anything when it is missing."""

from __future__ import annotations

import shutil
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from azr.cli.serve_cmd import starting
from azr.factory.apis import api_engine
from services.inference.model_registry import QWEN_CODER, ModelUnavailable, converted_model_path
from services.inference.prepared_model import prepared_model_dir, wait_for_prepared_model
from services.inference.tiny_model import tiny_model_path
from services.settings import Settings

WEIGHTS_ONLY = ("config.json", "generation_config.json")
"""Files of a model directory that describe the network, not the tokenizer: left out of tokenizer-only copies."""


def tree(root: Path) -> dict[str, int]:
    """Every file under `root` with its size: what a test compares to prove nothing was written."""
    return {str(path.relative_to(root)): path.stat().st_size for path in root.rglob("*")}


def tokenizer_only_copy(model_dir: Path, target: Path, markers: tuple[str, ...]) -> Path:
    """`target` holding the tokenizer files of `model_dir` (no weights, no network config) and the given markers."""
    target.mkdir(parents=True)
    for source in model_dir.iterdir():
        if source.is_file() and source.suffix != ".safetensors" and source.name not in WEIGHTS_ONLY:
            shutil.copyfile(source, target / source.name)
    for name in markers:
        (target / name).write_text("{}")
    return target


def sglang_settings(cache: Path, model: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Distributed-profile settings over the model cache `cache` (as the API pods have it)."""
    monkeypatch.setenv("AZR_MODEL_CACHE", str(cache))
    return Settings(profile="distributed", model=model, inference_backend="sglang",
                    sglang_urls=["http://127.0.0.1:9"], api_token="test-token-not-the-placeholder")


def test_the_prepared_tiny_model_is_found_where_resolve_model_builds_it(tiny_dir: Path) -> None:
    assert prepared_model_dir("tiny", tiny_dir.parent) == tiny_dir == tiny_model_path(tiny_dir.parent)


def test_a_converted_release_needs_only_its_tokenizer_and_marker(tiny_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "models"
    prepared = tokenizer_only_copy(tiny_dir, converted_model_path(QWEN_CODER, cache), ("azr_conversion.json",))
    assert prepared_model_dir(QWEN_CODER.name, cache) == prepared
    assert not any(path.suffix == ".safetensors" for path in prepared.iterdir())


@pytest.mark.parametrize("model", ["tiny", QWEN_CODER.name])
def test_nothing_prepared_is_refused_and_nothing_is_written(model: str, tmp_path: Path) -> None:
    cache = tmp_path / "models"
    cache.mkdir()
    with pytest.raises(ModelUnavailable, match="not prepared"):
        prepared_model_dir(model, cache)
    assert tree(cache) == {}


def test_a_half_converted_release_is_not_taken(tiny_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "models"
    tokenizer_only_copy(tiny_dir, converted_model_path(QWEN_CODER, cache), ())  # no azr_conversion.json yet
    with pytest.raises(ModelUnavailable, match="azr_conversion.json"):
        prepared_model_dir(QWEN_CODER.name, cache)


def test_the_sglang_engine_loads_the_tokenizer_without_weights_and_writes_nothing(
        tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "models"
    tokenizer_only_copy(tiny_dir, converted_model_path(QWEN_CODER, cache), ("azr_conversion.json",))
    before = tree(cache)
    engine = starting(lambda: api_engine(sglang_settings(cache, QWEN_CODER.name, monkeypatch), ExitStack()))
    try:
        assert engine.codec.decode(engine.codec.encode("def f(x): return x")) == "def f(x): return x"
    finally:
        engine.close()
    assert tree(cache) == before


def test_the_sglang_engine_refuses_an_unprepared_model_instead_of_building_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old behaviour built the tiny model (or converted a release) inside the API process."""
    import typer

    cache = tmp_path / "models"
    cache.mkdir()
    with pytest.raises(typer.Exit) as stopped:
        starting(lambda: api_engine(sglang_settings(cache, "tiny", monkeypatch), ExitStack()))
    assert stopped.value.exit_code == 2
    assert tree(cache) == {}


def test_waiting_returns_once_the_model_appears(tiny_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "models"
    target = converted_model_path(QWEN_CODER, cache)
    timer = threading.Timer(0.5, tokenizer_only_copy, (tiny_dir, target, ("azr_conversion.json",)))
    timer.start()
    started = time.monotonic()
    try:
        assert wait_for_prepared_model(QWEN_CODER.name, timeout_s=30, poll_s=0.1, cache_root=cache) == target
    finally:
        timer.join()
    assert 0.4 < time.monotonic() - started < 30


def test_waiting_gives_up_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="not prepared"):
        wait_for_prepared_model("tiny", timeout_s=0.3, poll_s=0.1, cache_root=tmp_path)
