"""Joining the pieces of a resumed sample (`services.inference.sglang_client`), without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.inference.chat_codec import PromptCodec
from services.inference.sglang_client import SGLangClient, join_pieces, oldest_version, resume_seed
from services.settings import Settings


@pytest.fixture(scope="module")
def codec(tiny_dir: Path) -> PromptCodec:
    """The tiny model's tokenizer."""
    return PromptCodec.from_model_dir(tiny_dir)


def test_the_oldest_version_is_kept() -> None:
    assert oldest_version(["3", "4"]) == "3"
    assert oldest_version(["10", "9"]) == "9"  # by value, not as text
    assert oldest_version(["5", "default"]) == "default"  # a server that booted with its own weights: oldest


def test_a_resumed_piece_gets_a_fresh_reproducible_seed() -> None:
    assert resume_seed(7, 12) == resume_seed(7, 12)
    seeds = {7, 8} | {resume_seed(7, k) for k in (1, 12, 13)} | {resume_seed(8, 12)}
    assert len(seeds) == 6  # differs from the sample's seed, its neighbours', and per abort point
    assert all(0 <= s < 1 << 63 for s in seeds)


def test_joined_pieces_keep_ids_logprobs_and_the_oldest_version(codec: PromptCodec) -> None:
    ids = codec.encode("def f(x):\n    return x * 2 + 31")
    logprobs = [-0.1 * (i + 1) for i in range(len(ids))]
    joined = join_pieces(codec, 4, ids, logprobs, ["2", "3"], "length", [])
    assert (joined.prompt_index, joined.output_ids, joined.logprobs) == (4, ids, logprobs)
    assert joined.text == codec.decode(ids) and joined.finish_reason == "length" and joined.weight_version == "2"


def test_a_stop_string_straddling_two_pieces_ends_the_sample_there(codec: PromptCodec) -> None:
    """No server sees a stop string whose first part is in the resumed prompt: the join cuts the sample at the token
    that completed it, as an uninterrupted generation would have stopped."""
    ids = codec.encode("def f(x):\n    return x * 2 + 31")  # 'def',' f','(','x','):','\n','   ',' return',...
    logprobs = [float(-i) for i in range(len(ids))]
    joined = join_pieces(codec, 0, ids, logprobs, ["1", "2"], "length", ["x):"])
    assert joined.output_ids == ids[:5] and joined.logprobs == logprobs[:5]  # '):' completed the stop string
    assert joined.finish_reason == "stop" and joined.text == "def f("
    untouched = join_pieces(codec, 0, ids, logprobs, ["1"], "length", ["never there"])
    assert untouched.output_ids == ids and untouched.finish_reason == "length"


def test_resumption_is_a_setting(tiny_dir: Path) -> None:
    assert Settings().inference.sglang_resume_aborted is True and Settings().inference.sglang_max_resumes == 3
    off = SGLangClient.from_settings(Settings(sglang_resume_aborted=False, sglang_max_resumes=1).inference, tiny_dir)
    try:
        assert off.resume_aborted is False and off.max_resumes == 1
    finally:
        off.close()
