"""`SGLangClient`: the InferenceEngine port over SGLang servers' native HTTP API (distributed profile).

- Tokenizes locally with the served model's tokenizer (`model_dir`), sends token ids to `POST /generate` with
  `return_logprob`, and reads `output_ids`, `meta_info.output_token_logprobs` and `meta_info.weight_version`.
- Response order (sglang tokenizer_manager `_handle_batch_request`, read at commit 001067fffe33): batch order, and
  with n > 1 each prompt's n samples consecutively, so item k belongs to prompt k // n.
- Samples with finish_reason `abort` (a pause for a weight update) are re-requested, up to `retries` rounds; 5xx,
  timeouts and connection errors are retried with exponential backoff on the next server. Then InferenceError.
- Several URLs: a batch is split into contiguous shards sent concurrently, round-robin over the servers not marked
  down (a server that failed is skipped for `down_s` seconds). A router URL is just one URL.
- `update_weights`: for every server, pause (abort mode) -> update_weights_from_disk -> continue in a finally, then
  checks `/model_info`.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import httpx
from pydantic import TypeAdapter, ValidationError

from services.inference.chat_codec import PromptCodec
from services.inference.sampling import sample_seeds
from services.inference.sglang_wire import GenerateItem, ModelInfoResponse, WireSamplingParams
from services.ports import Completion, InferenceError, SamplingParams

_ITEMS = TypeAdapter(list[GenerateItem])


class ServerFailure(Exception):
    """One attempt at one server failed in a retryable way (5xx, timeout, connection)."""


class SGLangClient:
    """Generates through SGLang servers (or `azr serve inference`); implements `services.ports.InferenceEngine`."""

    def __init__(self, urls: Sequence[str], model_dir: str | Path, timeout: float = 600.0, retries: int = 3,
                 backoff_s: float = 0.5, down_s: float = 5.0, codec: PromptCodec | None = None) -> None:
        """`urls`: server (or router) base URLs; `model_dir`: an HF dir with the served model's tokenizer."""
        if not urls:
            raise ValueError("SGLangClient needs at least one server URL")
        self.urls = [url.rstrip("/") for url in urls]
        self.codec = codec or PromptCodec.from_model_dir(model_dir)
        self.retries = retries
        self.backoff_s = backoff_s
        self.down_s = down_s
        self._http = httpx.Client(timeout=timeout)
        self._down_until: dict[str, float] = {}
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self._last_version: str | None = None

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    # ------------------------------------------------------------------------------------------ server choice

    def _healthy_urls(self) -> list[str]:
        """Servers not marked down, or all of them when every one is down (better to try than to fail)."""
        now = time.monotonic()
        with self._lock:
            healthy = [url for url in self.urls if self._down_until.get(url, 0.0) <= now]
        return healthy or list(self.urls)

    def _next_url(self) -> str:
        """Round-robin over the healthy servers."""
        healthy = self._healthy_urls()
        return healthy[next(self._turn) % len(healthy)]

    def _mark_down(self, url: str) -> None:
        with self._lock:
            self._down_until[url] = time.monotonic() + self.down_s

    # ------------------------------------------------------------------------------------------ HTTP

    def _post_once(self, url: str, path: str, body: dict[str, object]) -> httpx.Response:
        """One POST; ServerFailure for what a retry can fix, InferenceError for a 4xx (our request is wrong)."""
        try:
            response = self._http.post(url + path, json=body)
        except httpx.HTTPError as exc:  # timeouts, refused connections, broken transfers
            raise ServerFailure(f"{url}{path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise ServerFailure(f"{url}{path}: HTTP {response.status_code}: {response.text[:300]}")
        return response

    def _post_retrying(self, path: str, body: dict[str, object]) -> httpx.Response:
        """POST to the next healthy server, retrying retryable failures on the next one with backoff."""
        failures = []
        for attempt in range(self.retries + 1):
            url = self._next_url()
            try:
                return self._post_once(url, path, body)
            except ServerFailure as exc:
                failures.append(str(exc))
                self._mark_down(url)
                if attempt < self.retries:
                    time.sleep(self.backoff_s * 2 ** attempt)
        raise InferenceError(f"POST {path} failed after {self.retries + 1} attempts: {failures}")

    # ------------------------------------------------------------------------------------------ port methods

    def prompt_ids(self, instruction: str) -> list[int]:
        """Token ids of the R1 prompt for a task instruction, with the served model's tokenizer."""
        return self.codec.prompt_ids(instruction)

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of token ids, special tokens dropped."""
        return self.codec.decode(token_ids)

    def _request_items(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams,
                       seeds: Sequence[int | None] | None = None) -> list[GenerateItem]:
        """One `/generate` call for a batch; returns len(prompts) * n items in response order. With `seeds` (one per
        prompt) each prompt carries its own `sampling_seed` (the caller sends n = 1 per row then)."""
        wire = WireSamplingParams.from_port(sampling)
        params: object = wire.model_dump(exclude_none=True)
        if seeds is not None:
            params = [wire.model_copy(update={"sampling_seed": seed}).model_dump(exclude_none=True) for seed in seeds]
        body = {"input_ids": [list(p) for p in prompts], "return_logprob": True, "sampling_params": params}
        response = self._post_retrying("/generate", body)
        if response.status_code != 200:
            raise InferenceError(f"/generate refused the request: HTTP {response.status_code}: {response.text}")
        try:
            items = _ITEMS.validate_python(response.json())
        except (ValueError, ValidationError) as exc:
            raise InferenceError(f"/generate answered an unexpected shape: {exc}") from exc
        if len(items) != len(prompts) * sampling.n:
            raise InferenceError(f"/generate returned {len(items)} items for {len(prompts)} prompts x n={sampling.n}")
        return items

    def _completion(self, item: GenerateItem, prompt_index: int) -> Completion:
        meta = item.meta_info
        logprobs = meta.output_token_logprobs
        if logprobs is None or [token for _, token, _ in logprobs] != item.output_ids:
            raise InferenceError("/generate returned output_token_logprobs that do not match output_ids")
        return Completion(prompt_index=prompt_index, text=item.text, output_ids=item.output_ids,
                          logprobs=[lp for lp, _, _ in logprobs],
                          finish_reason="length" if meta.finish_reason.type == "length" else "stop",
                          weight_version=meta.weight_version)

    def _generate_shard(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams,
                        seeds: Sequence[int | None]) -> list[list[Completion]]:
        """Completions for one shard, re-requesting aborted samples (one row each, same seed) until none is left.

        `seeds`: one per sample, prompt-major. Seeded samples always travel one row each (n = 1 with its own
        `sampling_seed`), so the n samples of a prompt differ even on a deterministic server."""
        n = sampling.n
        results: list[list[Completion | None]] = [[None] * n for _ in prompts]
        pending = [(index, j) for index in range(len(prompts)) for j in range(n)]  # (prompt, sample) still wanted
        seeded = any(seed is not None for seed in seeds)
        one = sampling.model_copy(update={"n": 1})
        for round_ in range(self.retries + 1):
            if round_:
                time.sleep(self.backoff_s * 2 ** (round_ - 1))
            if round_ == 0 and not seeded:
                items = self._request_items(prompts, sampling)
            else:
                items = self._request_items([prompts[i] for i, _ in pending], one,
                                            [seeds[i * n + j] for i, j in pending] if seeded else None)
            aborted = []
            for (prompt_index, j), item in zip(pending, items):
                if item.meta_info.finish_reason.type == "abort":
                    aborted.append((prompt_index, j))
                else:
                    results[prompt_index][j] = self._completion(item, prompt_index)
            pending = aborted
            if not pending:
                return [[c for c in group if c is not None] for group in results]
        raise InferenceError(f"{len(pending)} samples still aborted after {self.retries + 1} rounds")

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[list[Completion]]:
        """For each prompt, `sampling.n` completions, in prompt order; shards run concurrently across servers.
        With `sampling.seed`, sample k of the request (prompt-major) is drawn with seed + k (`sample_seeds`)."""
        if not prompts:
            return []
        n = sampling.n
        seeds = sample_seeds(sampling.seed, len(prompts), n)
        shards = min(len(self._healthy_urls()), len(prompts))
        size = -(-len(prompts) // shards)
        bounds = [(start, min(start + size, len(prompts))) for start in range(0, len(prompts), size)]

        def shard(bound: tuple[int, int]) -> list[list[Completion]]:
            start, end = bound
            return self._generate_shard(prompts[start:end], sampling, seeds[start * n:end * n])

        if len(bounds) == 1:
            parts = [shard(bounds[0])]
        else:
            with ThreadPoolExecutor(max_workers=len(bounds)) as pool:
                parts = list(pool.map(shard, bounds))
        merged: list[list[Completion]] = []
        for (start, _), part in zip(bounds, parts):
            for offset, completions in enumerate(part):
                merged.append([c.model_copy(update={"prompt_index": start + offset}) for c in completions])
        if merged and merged[-1]:
            self._last_version = merged[-1][-1].weight_version
        return merged

    def model_info(self) -> dict[str, ModelInfoResponse]:
        """`GET /model_info` of every server, by URL."""
        infos = {}
        for url in self.urls:
            try:
                response = self._http.get(url + "/model_info")
                response.raise_for_status()
                infos[url] = ModelInfoResponse.model_validate(response.json())
            except (httpx.HTTPError, ValidationError) as exc:
                raise InferenceError(f"{url}/model_info failed: {exc}") from exc
        return infos

    def weight_version(self) -> str:
        """The weight version the servers report; InferenceError when they disagree (an update half done)."""
        versions = {info.weight_version for info in self.model_info().values()}
        if len(versions) != 1:
            raise InferenceError(f"servers serve different weight versions: {sorted(versions)}")
        return versions.pop()

    def health(self) -> dict[str, bool]:
        """Readiness of every server (`GET /health` answered 200), by URL."""
        status = {}
        for url in self.urls:
            try:
                status[url] = self._http.get(url + "/health").status_code == 200
            except httpx.HTTPError:
                status[url] = False
        return status

    def update_weights(self, model_path: str, policy_version: int) -> None:
        """On every server: pause (abort) -> update_weights_from_disk -> continue (always); then verify the
        version. InferenceError names each server that refused or failed."""
        errors = []
        for url in self.urls:
            try:
                self._update_one(url, model_path, str(policy_version))
            except (ServerFailure, InferenceError) as exc:
                errors.append(f"{url}: {exc}")
        if errors:
            raise InferenceError(f"weight update to version {policy_version} failed: {errors}")
        version = self.weight_version()
        if version != str(policy_version):
            raise InferenceError(f"servers report weight version {version} after updating to {policy_version}")

    def _update_one(self, url: str, model_path: str, version: str) -> None:
        paused = self._post_once(url, "/pause_generation", {"mode": "abort"})
        if paused.status_code != 200:
            raise InferenceError(f"pause_generation refused: HTTP {paused.status_code}: {paused.text[:300]}")
        try:
            response = self._post_once(url, "/update_weights_from_disk",
                                       {"model_path": model_path, "weight_version": version})
            try:
                body = response.json()
            except ValueError:
                body = {}
            if response.status_code != 200 or not body.get("success", False):
                raise InferenceError(f"update_weights_from_disk failed (HTTP {response.status_code}): "
                                     f"{body.get('message', response.text[:300])}")
        finally:
            self._post_once(url, "/continue_generation", {})
