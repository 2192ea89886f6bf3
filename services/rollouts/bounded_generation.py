"""Generation an API client asked for, bounded: `max_new_tokens` clamped to `max_response_tokens`, and stopped when
the client goes away.

The APIs take `sampling` from the request (`POST /v1/propose`, `POST /v1/solve`); without a bound one request could
hold the engine for as long as it liked, and without cancellation it kept generating for a client that had left.

- `clamped(sampling, limit)`: the request's sampling with `max_new_tokens` at most `limit` (the settings'
  `max_response_tokens`, what self-play itself allows).
- `AbortableEngine(engine, abort)`: the engine, but its generation ends at the next token once `abort` is set,
  where the engine can stop mid-way (the local engine's `sample(..., abort=)`; the samples cut short come back as
  `length`, and nobody reads them). An engine that cannot (the SGLang client sends whole HTTP requests) finishes
  the request it is in: its length is still bounded by the clamp. Everything else is the engine's.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from services.ports import Completion, InferenceEngine, SamplingParams


def clamped(sampling: SamplingParams, limit: int) -> SamplingParams:
    """`sampling` with `max_new_tokens` no larger than `limit`."""
    if sampling.max_new_tokens <= limit:
        return sampling
    return sampling.model_copy(update={"max_new_tokens": limit})


class AbortableEngine:
    """An InferenceEngine whose `generate` stops early once `abort` is set (where the engine below can)."""

    def __init__(self, engine: InferenceEngine, abort: threading.Event) -> None:
        self._engine = engine
        self.abort = abort

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[list[Completion]]:
        sample = getattr(self._engine, "sample", None)
        if not callable(sample):
            return self._engine.generate(prompts, sampling)
        batches, version = sample(prompts, sampling, abort=self.abort)
        return [[Completion(prompt_index=index, text=raw.text, output_ids=raw.output_ids, logprobs=raw.logprobs,
                            finish_reason="stop" if raw.finish_reason == "stop" else "length",
                            weight_version=version) for raw in samples]
                for index, samples in enumerate(batches)]

    def __getattr__(self, name: str) -> Any:  # prompt_ids, decode, weight_version, update_weights: the engine's
        return getattr(self._engine, name)
