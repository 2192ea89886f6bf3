"""`azr serve inference` (real uvicorn subprocesses, tiny model) and SGLangClient over real HTTP on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pytest
from http_fixtures import InferenceServerProcess, ScriptedProxy

from services.algorithm.prompts import deduction_solver_prompt
from services.inference.local_engine import LocalEngine
from services.inference.sglang_client import SGLangClient
from services.ports import InferenceError, SamplingParams

pytestmark = pytest.mark.slow  # two server processes load torch + the tiny model (~10 s)


@pytest.fixture(scope="module")
def servers() -> Iterator[list[InferenceServerProcess]]:
    """Two `azr serve inference --model tiny` servers, started together."""
    started = [InferenceServerProcess(), InferenceServerProcess()]
    try:
        for server in started:
            server.wait_ready()
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module")
def client(servers: list[InferenceServerProcess], tiny_dir: Path) -> Iterator[SGLangClient]:
    """A client of the first server only."""
    with_client = SGLangClient([servers[0].url], tiny_dir, timeout=120, retries=2, backoff_s=0.05)
    yield with_client
    with_client.close()


@pytest.fixture(scope="module")
def prompts(client: SGLangClient) -> list[list[int]]:
    """Three prompts of different lengths."""
    return [client.prompt_ids(deduction_solver_prompt("def f(x):\n    return x * 2", str(i) * (i + 1)))
            for i in range(3)]


def test_batch_with_n_maps_samples_to_their_prompts(client: SGLangClient, prompts: list[list[int]]) -> None:
    out = client.generate(prompts, SamplingParams(max_new_tokens=8, temperature=1.0, n=3, seed=1))
    assert [len(group) for group in out] == [3, 3, 3]
    for index, group in enumerate(out):
        assert all(c.prompt_index == index and c.weight_version == "0" for c in group)
        assert len({tuple(c.output_ids) for c in group}) > 1  # samples of one prompt differ
    # Mapping check: each prompt alone, same seed, greedy -> the same ids as in the batch.
    greedy = SamplingParams(max_new_tokens=8, temperature=0, n=2)
    batch = client.generate(prompts, greedy)
    for index, prompt in enumerate(prompts):
        alone = client.generate([prompt], greedy)[0]
        assert [c.output_ids for c in batch[index]] == [c.output_ids for c in alone]


def test_seeded_samples_travel_one_row_each_with_their_own_seed(client: SGLangClient, prompts: list[list[int]],
                                                                tiny_engine: LocalEngine) -> None:
    """A seeded request with n = 4 reaches the server as one row per sample with seed + k, so every sample is the
    one the local engine draws for that seed, and the n samples of a prompt differ."""
    sampling = SamplingParams(max_new_tokens=8, temperature=1.0, n=4, seed=77)
    remote = client.generate(prompts[:2], sampling)
    local = tiny_engine.generate(prompts[:2], sampling)
    assert [[c.output_ids for c in g] for g in remote] == [[c.output_ids for c in g] for g in local]
    assert all(len({tuple(c.output_ids) for c in group}) == 4 for group in remote)


def test_logprobs_come_back_per_token(client: SGLangClient, prompts: list[list[int]],
                                      tiny_engine: LocalEngine) -> None:
    out = client.generate(prompts[:1], SamplingParams(max_new_tokens=10, temperature=1.0, seed=3))[0][0]
    assert len(out.logprobs) == len(out.output_ids) == 10
    assert out.logprobs == pytest.approx(tiny_engine.forward_logprobs(prompts[0], out.output_ids), abs=1e-4)
    assert out.finish_reason == "length"
    assert out.text == client.decode(out.output_ids)


def test_stop_strings_over_http(client: SGLangClient, prompts: list[list[int]]) -> None:
    seeded = SamplingParams(max_new_tokens=40, temperature=1.0, seed=4)
    free = client.generate(prompts[:1], seeded)[0][0]
    visible = [i for i in range(len(free.text) // 3, len(free.text) - 3) if free.text[i:i + 3].strip()]
    stop = free.text[visible[0]:visible[0] + 3]
    stopped = client.generate(prompts[:1], seeded.model_copy(update={"stop": [stop]}))[0][0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[:free.text.index(stop)]
    assert stopped.output_ids == free.output_ids[:len(stopped.output_ids)]


def test_weight_update_changes_version_and_outputs(servers: list[InferenceServerProcess], tiny_dir: Path,
                                                   perturbed_dir: Path, prompts: list[list[int]]) -> None:
    both = SGLangClient([s.url for s in servers], tiny_dir, timeout=120, retries=1, backoff_s=0.05)
    greedy = SamplingParams(max_new_tokens=10, temperature=0)
    before = both.generate(prompts, greedy)
    try:
        both.update_weights(str(perturbed_dir), 1)
        assert both.weight_version() == "1"
        assert {info.model_path for info in both.model_info().values()} == {str(perturbed_dir)}
        after = both.generate(prompts, greedy)
        assert {c.weight_version for group in after for c in group} == {"1"}
        assert [g[0].output_ids for g in after] != [g[0].output_ids for g in before]
        with pytest.raises(InferenceError, match="no HF model directory"):
            both.update_weights(str(perturbed_dir / "missing"), 2)
        assert both.health() == {s.url: True for s in servers}  # continue_generation ran despite the failure
        assert both.weight_version() == "1"
    finally:
        both.update_weights(str(tiny_dir), 0)
        both.close()


def test_load_balancing_spreads_a_batch_over_servers(servers: list[InferenceServerProcess], tiny_dir: Path,
                                                      prompts: list[list[int]]) -> None:
    # Tag the second server's (identical) weights with another version to see which server answered.
    tagged = httpx.post(servers[1].url + "/update_weights_from_disk",
                        json={"model_path": str(tiny_dir), "weight_version": "second"}, timeout=60)
    assert tagged.status_code == 200 and tagged.json()["success"] is True
    both = SGLangClient([s.url for s in servers], tiny_dir, timeout=120)
    try:
        out = both.generate(prompts + prompts, SamplingParams(max_new_tokens=4, temperature=0))
        versions = [group[0].weight_version for group in out]
        assert set(versions) == {"0", "second"}
        assert [group[0].output_ids for group in out[:3]] == [group[0].output_ids for group in out[3:]]
        with pytest.raises(InferenceError, match="different weight versions"):
            both.weight_version()
    finally:
        httpx.post(servers[1].url + "/update_weights_from_disk",
                   json={"model_path": str(tiny_dir), "weight_version": "0"}, timeout=60)
        both.close()


def test_a_dead_server_is_skipped(servers: list[InferenceServerProcess], tiny_dir: Path,
                                  prompts: list[list[int]]) -> None:
    from http_fixtures import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    both = SGLangClient([dead, servers[0].url], tiny_dir, timeout=30, retries=2, backoff_s=0.01)
    try:
        out = both.generate(prompts, SamplingParams(max_new_tokens=3, temperature=0))
        assert [len(g) for g in out] == [1, 1, 1]
    finally:
        both.close()


def test_5xx_then_abort_are_retried(servers: list[InferenceServerProcess], tiny_dir: Path,
                                    prompts: list[list[int]]) -> None:
    proxy = ScriptedProxy(servers[0].url, ["500", "abort-first", "pass"])
    flaky = SGLangClient([proxy.url], tiny_dir, timeout=60, retries=2, backoff_s=0.01)
    try:
        out = flaky.generate(prompts[:2], SamplingParams(max_new_tokens=5, temperature=1.0, n=2, seed=9))
        assert [len(g) for g in out] == [2, 2]
        assert all(c.finish_reason == "length" and len(c.output_ids) == 5 for g in out for c in g)
        # 1: refused with 500; 2: the full batch, one row per seeded sample (the first aborted); 3: only the
        # aborted sample, n=1, with the seed it had.
        assert len(proxy.bodies) == 3
        assert proxy.bodies[1]["input_ids"] == [prompts[0], prompts[0], prompts[1], prompts[1]]
        assert [p["sampling_seed"] for p in proxy.bodies[1]["sampling_params"]] == [9, 10, 11, 12]
        assert proxy.bodies[2]["input_ids"] == [prompts[0]]
        assert [(p["n"], p["sampling_seed"]) for p in proxy.bodies[2]["sampling_params"]] == [(1, 9)]
    finally:
        flaky.close()
        proxy.close()


def test_persistent_failure_raises_inference_error(servers: list[InferenceServerProcess], tiny_dir: Path,
                                                   prompts: list[list[int]]) -> None:
    proxy = ScriptedProxy(servers[0].url, ["500"] * 3)
    failing = SGLangClient([proxy.url], tiny_dir, timeout=60, retries=2, backoff_s=0.01)
    try:
        with pytest.raises(InferenceError, match="failed after 3 attempts"):
            failing.generate(prompts[:1], SamplingParams(max_new_tokens=2))
        assert len(proxy.bodies) == 3
    finally:
        failing.close()
        proxy.close()


def test_server_rejects_bad_requests(servers: list[InferenceServerProcess], prompts: list[list[int]]) -> None:
    url = servers[0].url
    unknown = httpx.post(url + "/generate", json={"input_ids": prompts[0], "sampling_params": {"max_tokens": 4}})
    assert unknown.status_code == 400 and "max_tokens" in unknown.json()["message"]
    unsupported = httpx.post(url + "/generate", json={"input_ids": prompts[0], "sampling_params": {"min_p": 0.1}})
    assert unsupported.status_code == 400 and "not supported" in unsupported.json()["message"]
    both = httpx.post(url + "/generate", json={"input_ids": prompts[0], "text": "x"})
    assert both.status_code == 400 and "exactly one" in both.json()["message"]
    bad_range = httpx.post(url + "/generate", json={"input_ids": prompts[0], "sampling_params": {"top_p": 0}})
    assert bad_range.status_code == 400
    bad_token = httpx.post(url + "/generate", json={"input_ids": [1, 10**9]})
    assert bad_token.status_code == 400 and "input_ids must lie in" in bad_token.json()["message"]
    empty = httpx.post(url + "/generate", json={"input_ids": [[1, 2], []]})
    assert empty.status_code == 400 and "at least one token" in empty.json()["message"]
    assert httpx.post(url + "/continue_generation").status_code == 400  # control POSTs need a JSON body
    assert httpx.post(url + "/update_weights_from_disk", json={}).status_code == 400


def test_single_prompt_text_input_and_health(servers: list[InferenceServerProcess]) -> None:
    url = servers[0].url
    single = httpx.post(url + "/generate", json={"text": "def f(x):", "return_logprob": True,
                                                 "sampling_params": {"max_new_tokens": 3, "temperature": 0}}).json()
    assert isinstance(single, dict) and len(single["output_ids"]) == 3
    assert len(single["meta_info"]["output_token_logprobs"]) == 3
    assert single["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
    assert httpx.get(url + "/health", timeout=30).status_code == 200
    assert httpx.post(url + "/pause_generation", json={"mode": "abort"}).json()["status"] == "ok"
    try:
        assert httpx.get(url + "/health", timeout=30).status_code == 503
    finally:
        assert httpx.post(url + "/continue_generation", json={}).status_code == 200
    assert httpx.get(url + "/health", timeout=30).status_code == 200
