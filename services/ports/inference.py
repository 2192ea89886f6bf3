"""The InferenceEngine port: generation from token ids, with the sampling parameters and completions it exchanges.

Adapters: `services.inference` (the local transformers engine, or the SGLang HTTP client).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, Field, StrictFloat

from services.json_types import JsonInt


class SamplingParams(BaseModel):
    """How to sample completions; the SGLang `sampling_params` subset we use (docs/design.md §6)."""

    # Strict scalars: a JSON body must carry numbers as numbers (no `true` or `"3"` taken for an integer), as the
    # OpenAPI schema of the APIs that receive these says.
    max_new_tokens: JsonInt = Field(512, ge=1)
    temperature: StrictFloat = Field(1.0, ge=0)  # 0 means greedy
    top_p: StrictFloat = Field(1.0, gt=0, le=1)
    top_k: JsonInt = -1  # -1: off
    n: JsonInt = Field(1, ge=1)  # completions per prompt
    stop: list[str] = Field(default_factory=list)
    seed: JsonInt | None = None  # SGLang's `sampling_seed`


class Completion(BaseModel):
    """One sampled continuation of one prompt, with what the trainer needs."""

    prompt_index: int  # which prompt of the request it continues
    text: str
    output_ids: list[int]
    logprobs: list[float]  # behaviour logprob of each output token under the weights that sampled it
    finish_reason: Literal["stop", "length"]
    weight_version: str  # the policy version of the weights that produced it (SGLang `weight_version`)


class InferenceEngine(Protocol):
    """Generates completions from token ids: the local transformers engine or SGLang servers over HTTP."""

    def prompt_ids(self, instruction: str) -> list[int]:
        """Token ids of the R1 prompt (Fig 33) for a task instruction (Figs 34-39), ready for generation: instruct
        models (with a chat template) get `services.algorithm.prompts.r1_chat_messages(instruction)` through their
        chat template with the assistant turn opened; base models get `render_r1_prompt(instruction)` as plain text."""

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of token ids (special tokens dropped)."""

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[list[Completion]]:
        """For each prompt, `sampling.n` completions (outer list in prompt order). Aborted samples are retried
        internally; a persistent failure raises InferenceError."""

    def weight_version(self) -> str:
        """The policy version the engine currently serves."""

    def update_weights(self, model_path: str, policy_version: int) -> None:
        """Serve the checkpoint at `model_path` from now on, tagged `policy_version` (SGLang: pause ->
        update_weights_from_disk -> continue, continue in a finally)."""


class InferenceError(RuntimeError):
    """Generation failed after retries, or a weight update was refused."""


