"""`azr serve inference` (real uvicorn subprocesses, tiny model) and SGLangClient over real HTTP on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_fixtures import InferenceServerProcess, ScriptedProxy

from services.algorithm.prompts import deduction_solver_prompt
from services.inference.local_engine import LocalEngine
from services.inference.sglang_client import SGLangClient, oldest_version, resume_seed
from services.ports import InferenceError, SamplingParams
from services.settings import Settings

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
    both = SGLangClient([s.url for s in servers], tiny_dir, timeout=120, max_rows_per_request=3)
    try:  # two chunks of three, one per server
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
    flaky = SGLangClient([proxy.url], tiny_dir, timeout=60, retries=2, backoff_s=0.01, resume_aborted=False)
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
        stats = flaky.abort_stats
        assert (stats.samples, stats.lost, stats.tokens, stats.resumed) == (1, 1, 5, 0)
    finally:
        flaky.close()
        proxy.close()


def test_an_aborted_sample_is_resumed_from_the_tokens_it_had(servers: list[InferenceServerProcess], tiny_dir: Path,
                                                             prompts: list[list[int]],
                                                             tiny_engine: LocalEngine) -> None:
    """The first sample comes back aborted after 4 of its 8 tokens: the client re-posts prompt + those 4 tokens for
    the 4 left, with a fresh seed derived from its own, and joins the two pieces into one sample."""
    proxy = ScriptedProxy(servers[0].url, ["abort-half"])
    resuming = SGLangClient([proxy.url], tiny_dir, timeout=60, retries=2, backoff_s=0.01)
    try:
        out = resuming.generate(prompts[:2], SamplingParams(max_new_tokens=8, temperature=1.0, n=2, seed=9))
        (first_body, first_items), (second_body, second_items) = proxy.exchanges
        prefix = first_items[0]["output_ids"]
        assert len(prefix) == 4
        assert second_body["input_ids"] == [prompts[0] + prefix]
        assert [(p["n"], p["max_new_tokens"], p["sampling_seed"]) for p in second_body["sampling_params"]] == [
            (1, 4, resume_seed(9, 4))]
        sample = out[0][0]
        assert sample.output_ids == prefix + second_items[0]["output_ids"] and len(sample.output_ids) == 8
        assert sample.logprobs == [lp for lp, _, _ in first_items[0]["meta_info"]["output_token_logprobs"] +
                                   second_items[0]["meta_info"]["output_token_logprobs"]]
        # Same weights on both sides: the joined behaviour logprobs are the teacher-forced ones of the whole sample.
        assert sample.logprobs == pytest.approx(tiny_engine.forward_logprobs(prompts[0], sample.output_ids), abs=1e-4)
        assert sample.text == resuming.decode(sample.output_ids) and sample.finish_reason == "length"
        assert sample.weight_version == "0"
        assert [c.output_ids for g in out for c in g][1:] == [item["output_ids"] for item in first_items[1:]]
        stats = resuming.abort_stats
        assert (stats.resumed, stats.resumed_tokens, stats.samples, stats.lost, stats.tokens) == (1, 4, 0, 0, 0)
    finally:
        resuming.close()
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


def test_a_batch_travels_in_bounded_chunks_and_a_timeout_resends_only_its_chunk(
        servers: list[InferenceServerProcess], tiny_dir: Path, prompts: list[list[int]]) -> None:
    """At most 2 samples per request; the first request outlives the client's timeout: that chunk alone is sent
    again. The timeout (8 s) is far above a 4-token answer of the tiny model even on a loaded 2-core machine (a 1 s
    timeout also expired on the unscripted chunk there), and far below the scripted delay (30 s)."""
    proxy = ScriptedProxy(servers[0].url, ["slow"], slow_s=30.0)
    chunked = SGLangClient([proxy.url], tiny_dir, timeout=8.0, retries=2, backoff_s=0.01, max_rows_per_request=2,
                           max_concurrent_requests=1)
    direct = SGLangClient([servers[0].url], tiny_dir, timeout=60)
    greedy = SamplingParams(max_new_tokens=4, temperature=0)
    try:
        out = chunked.generate(prompts, greedy)
        assert [[c.output_ids for c in g] for g in out] == [[c.output_ids for c in g] for g in
                                                             direct.generate(prompts, greedy)]
        sent = [body["input_ids"] for body in proxy.bodies]
        assert sent == [prompts[:2], prompts[:2], prompts[2:]], "the timed-out chunk resent alone, never the batch"
    finally:
        chunked.close()
        direct.close()
        proxy.close()


def test_the_client_takes_its_timeout_chunking_and_admin_key_from_the_settings(tiny_dir: Path) -> None:
    settings = Settings(sglang_urls=["http://127.0.0.1:9"], sglang_request_timeout_s=7.5,
                        sglang_max_rows_per_request=4, sglang_max_concurrent_requests=3,
                        sglang_admin_api_key="k3y")
    client = SGLangClient.from_settings(settings.inference, tiny_dir)
    try:
        assert client._http.timeout.read == 7.5 and client.max_concurrent_requests == 3
        assert client.chunk_bounds(10, 1) == [(0, 4), (4, 8), (8, 10)]
        assert client.chunk_bounds(3, 2) == [(0, 2), (2, 3)]  # a prompt's n samples stay together
        assert client.chunk_bounds(2, 8) == [(0, 1), (1, 2)]  # n above the cap: one prompt per request
        assert client.control.headers_for("/update_weights_from_disk") == {"Authorization": "Bearer k3y"}
        assert client.control.headers_for("/generate") == {} and client.control.headers_for("/model_info") == {}
    finally:
        client.close()


def _push_during_generation(server: InferenceServerProcess, tiny_dir: Path, perturbed_dir: Path,
                            resume: bool) -> tuple[list[list[int]], list, SGLangClient, ScriptedProxy]:
    """Twelve distinct prompts (one sample each, 48 tokens, 2 per request, 4 requests in flight) generated through a
    recording proxy while a pusher pushes the perturbed weights under new versions until a push has hit a sample
    that had tokens. Returns the prompts, the completions, the client (closed) and the proxy (closed)."""
    import threading
    import time

    proxy = ScriptedProxy(server.url, [])
    client = SGLangClient([proxy.url], tiny_dir, timeout=120, retries=6, backoff_s=0.05, max_rows_per_request=2,
                          max_concurrent_requests=4, resume_aborted=resume, max_resumes=5)
    pusher = SGLangClient([server.url], tiny_dir, timeout=120)
    batch = [client.prompt_ids(deduction_solver_prompt("def f(x):\n    return x + 1", str(i))) for i in range(12)]
    sampling = SamplingParams(max_new_tokens=48, temperature=1.0, seed=5)
    result: list = []
    generating = threading.Thread(target=lambda: result.append(client.generate(batch, sampling)))
    try:
        generating.start()
        pushes = 0
        stats = client.abort_stats
        while generating.is_alive() and stats.tokens + stats.resumed_tokens == 0 and pushes < 20:
            time.sleep(0.2)  # let decoding get going: back-to-back pushes abort every sample before its first token
            pusher.update_weights(str(perturbed_dir), pushes + 1)
            pushes += 1
        generating.join(timeout=300)
        assert not generating.is_alive() and result
    finally:
        pusher.update_weights(str(tiny_dir), 0)
        client.close()
        pusher.close()
        proxy.close()
    return batch, result[0], client, proxy


def _chains(batch: list[list[int]], proxy: ScriptedProxy) -> dict[int, list[tuple[list[int], dict, dict]]]:
    """Per prompt, the (input_ids, sampling_params, returned item) of every request row for it, in order."""
    chains: dict[int, list[tuple[list[int], dict, dict]]] = {i: [] for i in range(len(batch))}
    for body, items in proxy.exchanges:
        params = body["sampling_params"]
        for row, (ids, item) in enumerate(zip(body["input_ids"], items)):
            owner = max((i for i, prompt in enumerate(batch) if ids[:len(prompt)] == prompt),
                        key=lambda i: len(batch[i]))
            chains[owner].append((ids, params[row] if isinstance(params, list) else params, item))
    return chains


def test_a_weight_push_during_generation_resumes_in_flight_samples(
        servers: list[InferenceServerProcess], tiny_dir: Path, perturbed_dir: Path) -> None:
    """Resumption on (the default): the samples in flight when a push pauses the server come back aborted with the
    tokens they had; the client continues each from there, so every sample finishes (stop or length), no generated
    token is thrown away, and a resumed sample is its pieces joined, tagged with the oldest weight version."""
    batch, out, client, proxy = _push_during_generation(servers[0], tiny_dir, perturbed_dir, resume=True)
    assert [len(group) for group in out] == [1] * len(batch)
    assert all(c.finish_reason in ("stop", "length") for group in out for c in group)
    assert all(len(c.logprobs) == len(c.output_ids) for group in out for c in group)
    stats = client.abort_stats
    assert stats.resumed >= 1 and stats.resumed_tokens >= 1, "a push while chunks were in flight resumed none"
    assert stats.tokens == 0 and stats.lost == 0, "resumption on, yet generated tokens were thrown away"
    spanning = 0
    for index, chain in _chains(batch, proxy).items():
        ids: list[int] = []
        logprobs: list[float] = []
        versions: list[str] = []
        for sent, params, item in chain:  # each request continues exactly where the previous piece stopped
            assert sent == batch[index] + ids and params["max_new_tokens"] == 48 - len(ids)
            ids += item["output_ids"]
            logprobs += [lp for lp, _, _ in item["meta_info"]["output_token_logprobs"]]
            versions += [item["meta_info"]["weight_version"]] if item["output_ids"] else []
        assert chain[-1][2]["meta_info"]["finish_reason"]["type"] != "abort"
        sample = out[index][0]
        assert (sample.output_ids, sample.logprobs) == (ids, logprobs)  # prefix + continuation(s)
        assert sample.weight_version == oldest_version(versions or [chain[-1][2]["meta_info"]["weight_version"]])
        if len(set(versions)) > 1:
            spanning += 1
            assert sample.weight_version == min(versions, key=int) and sample.text == client.decode(ids)
    assert stats.mixed_versions == spanning
    assert spanning >= 1, "no resumed sample spans two weight versions: the push did not land mid-sample"


def test_without_resumption_a_push_throws_in_flight_samples_away_and_asks_again(
        servers: list[InferenceServerProcess], tiny_dir: Path, perturbed_dir: Path) -> None:
    """Resumption off (the behaviour before it existed): aborted samples are asked for again from their prompt with
    their own seed; `abort_stats` counts exactly the aborted samples and the tokens they had generated."""
    batch, out, client, proxy = _push_during_generation(servers[0], tiny_dir, perturbed_dir, resume=False)
    assert [len(group) for group in out] == [1] * len(batch)
    assert all(c.finish_reason in ("stop", "length") for group in out for c in group)
    aborted = [item for _, items in proxy.exchanges for item in items
               if item["meta_info"]["finish_reason"]["type"] == "abort"]
    stats = client.abort_stats
    assert stats.samples == len(aborted) >= 1, "a push while chunks were in flight aborted none"
    assert stats.tokens == sum(len(item["output_ids"]) for item in aborted) >= 1
    assert stats.lost == sum(1 for item in aborted if item["output_ids"]) >= 1
    assert (stats.resumed, stats.resumed_tokens, stats.mixed_versions) == (0, 0, 0)
    for index, chain in _chains(batch, proxy).items():
        assert all(sent == batch[index] for sent, _, _ in chain)  # never a continuation
        assert all(params["sampling_seed"] == 5 + index for _, params, _ in chain)
        assert out[index][0].output_ids == chain[-1][2]["output_ids"]  # the last, unaborted answer alone


def test_control_endpoints_need_the_admin_key_when_the_server_has_one(tiny_dir: Path, perturbed_dir: Path,
                                                                      prompts: list[list[int]]) -> None:
    """`azr serve inference` with AZR_SGLANG_ADMIN_API_KEY guards pause / update / continue as SGLang's
    --admin-api-key does; generation and /model_info stay open; the client sends the key only where it is needed."""
    server = InferenceServerProcess(env={"AZR_SGLANG_ADMIN_API_KEY": "s3cret"})
    clients: list[SGLangClient] = []
    try:
        server.wait_ready()
        url = server.url
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            for path in ("/pause_generation", "/continue_generation", "/update_weights_from_disk"):
                refused = httpx.post(url + path, json={"model_path": str(perturbed_dir)}, headers=headers)
                assert refused.status_code == 401, (path, headers, refused.text)
        assert httpx.get(url + "/model_info").status_code == 200
        assert httpx.post(url + "/generate", json={"input_ids": prompts[0],
                                                   "sampling_params": {"max_new_tokens": 2}}).status_code == 200
        keyless, wrong, keyed = (SGLangClient([url], tiny_dir, timeout=60, admin_api_key=key)
                                 for key in (None, "wrong", "s3cret"))
        clients += [keyless, wrong, keyed]
        with pytest.raises(InferenceError, match="admin API key was missing"):
            keyless.update_weights(str(perturbed_dir), 1)
        with pytest.raises(InferenceError, match="admin API key was refused"):
            wrong.update_weights(str(perturbed_dir), 1)
        assert keyed.weight_version() == "0" and keyed.health() == {url: True}  # nothing was left paused
        keyed.update_weights(str(perturbed_dir), 1)
        assert keyless.weight_version() == "1"
        assert [len(g) for g in keyless.generate(prompts[:2], SamplingParams(max_new_tokens=2))] == [1, 1]
    finally:
        for client in clients:
            client.close()
        server.stop()
