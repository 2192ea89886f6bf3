"""Ports: the interfaces the core uses to reach the outside. Each has two adapters (embedded, distributed).

- CodeExecutor: `executor_svc.executor.Executor` (in-process sandbox pool) or `executor_svc.rq_client.RQCodeExecutor`
  (jobs on the RQ queue `executor`, run by `azr worker executor`).
- TripletStore: `services.store` (SQLAlchemy; SQLite in the embedded profile, PostgreSQL in the distributed one).
- EpisodeQueue: `services.queues` (a Redis Stream with a consumer group, or an in-process queue; same contract).
- InferenceEngine: `services.inference` (local transformers engine, or the SGLang HTTP client).
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any, Literal, Protocol, Sequence, Union

from pydantic import BaseModel, Field

from services.algorithm.task_types import TaskType
from services.execution import CheckResult, InductionValidationResult, ValidationResult
from services.records import RECORD_SCHEMA_VERSION, Episode, InductionTask, Triplet, TripletSource


class CodeExecutor(Protocol):
    """Runs model-written code in a sandbox and decides: the only source of truth for rewards."""

    def validate_proposal(self, program: str, input: str) -> ValidationResult:
        """Run f(input) twice under different hash seeds; ok with the gold output repr, or why not."""

    def validate_induction(self, program: str, inputs: Sequence[str]) -> InductionValidationResult:
        """Validate the program on every input; one failing input invalidates the proposal."""

    def check_deduction(self, gold_output: str, agent_output: str) -> CheckResult:
        """Compare the predicted output with the gold output as Python values, in the sandbox."""

    def check_abduction(self, program: str, gold_output: str, agent_input: str) -> CheckResult:
        """Run f(agent_input) in the sandbox and compare with the gold output."""

    def check_induction(self, agent_program: str, inputs: Sequence[str], outputs: Sequence[str]) -> CheckResult:
        """Run the agent's program on every hidden input and compare with each gold output."""


# ------------------------------------------------------------------------------------------------ buffer store


class InsertOutcome(BaseModel):
    """What `TripletStore.insert_*` did with one entry."""

    id: str  # the stored entry's id: the new one, or the existing one when a duplicate
    created: bool  # False: same normalised program + input(s) already in that buffer; nothing written
    evicted: int = 0  # oldest non-seed entries removed to keep the buffer under its cap


class BufferStats(BaseModel):
    """Counts and summary statistics of one buffer (`GET /v1/buffers`)."""

    buffer: TaskType
    count: int
    by_source: dict[str, int]  # TripletSource value -> entries
    min_step: int | None = None
    max_step: int | None = None
    max_policy_version: int | None = None
    latest_created_at: datetime | None = None
    cap: int


BufferEntry = Union[Triplet, InductionTask]


class StepRecord(BaseModel):
    """One step of a run as recorded: its policy version and metrics line (`GET /v1/runs/{run_id}/steps`)."""

    schema_version: int = RECORD_SCHEMA_VERSION
    run_id: str
    step: int
    policy_version: int
    metrics: dict[str, Any]
    recorded_at: datetime


class RunSummary(BaseModel):
    """One run of the run log with how far it got (`GET /v1/runs`)."""

    run_id: str
    created_at: datetime
    steps: int  # recorded steps
    first_step: int | None = None  # None: no step recorded yet
    last_step: int | None = None
    last_recorded_at: datetime | None = None


class TripletStore(Protocol):
    """The three buffers D_ded, D_abd, D_ind (DESIGN.md §1, §2 items 5-6); SQLAlchemy over PostgreSQL or SQLite.

    Every sampling call takes a `random.Random` so a run is reproducible from its seed. Entries are returned
    as `services.records` models with `id` and `program_hash` filled in. The last three methods read the run log
    kept beside the buffers (runs, their steps' metrics lines, solver episodes per entry) for the dashboard.
    """

    def initialise(self) -> None:
        """Put the zero triplet (Fig 5) in D_abd and D_ded if absent. Idempotent."""

    def insert_triplet(self, triplet: Triplet) -> InsertOutcome:
        """Store a deduction/abduction triplet unless the same normalised program + input is in that buffer."""

    def insert_induction(self, task: InductionTask) -> InsertOutcome:
        """Store an induction task unless the same normalised program + inputs is in D_ind."""

    def get(self, buffer: TaskType, entry_id: str) -> BufferEntry | None:
        """One entry by id, or None."""

    def list_entries(self, buffer: TaskType, *, limit: int = 50, offset: int = 0, source: TripletSource | None = None,
                     min_step: int | None = None, step: int | None = None,
                     text: str | None = None) -> tuple[list[BufferEntry], int]:
        """A page of entries, newest first, and the total matching the filters: `step` exactly, `min_step` or later,
        `text` a case-insensitive substring of the program, input(s), output(s) or message."""

    def sample_references(self, buffer: TaskType, k: int, rng: random.Random) -> list[Triplet]:
        """K distinct triplets of D_ded or D_abd, uniformly without replacement (all of them when fewer than K)."""

    def sample_program(self, rng: random.Random) -> Triplet | None:
        """One triplet uniformly from D_abd ∪ D_ded, for an induction proposal; None when both are empty."""

    def sample_batch(self, buffer: TaskType, size: int, new_ids: Sequence[str], rng: random.Random) -> list[BufferEntry]:
        """A solver batch of `size`: this step's new entries first, then uniform fill from the buffer (§3.3.2)."""

    def stats(self) -> list[BufferStats]:
        """One BufferStats per buffer, in TaskType order."""

    def count(self, buffer: TaskType) -> int:
        """Entries in one buffer."""

    def list_runs(self) -> list[RunSummary]:
        """Every run of the run log, the most recently active first."""

    def list_steps(self, run_id: str, *, since_step: int | None = None, limit: int | None = None) -> list[StepRecord]:
        """A run's recorded steps in step order: those after `since_step` (all when None), at most `limit`."""

    def solve_history(self, buffer: TaskType, entry_id: str, *, limit: int = 100,
                      offset: int = 0) -> tuple[list[Episode], int]:
        """Solver episodes of one buffer entry (their `task_id`), by step then id, and how many there are."""


# ------------------------------------------------------------------------------------------------ episode queue


class Delivery(BaseModel):
    """One episode handed to a consumer; `ack` it by `delivery_id` once applied."""

    delivery_id: str  # the queue's own id for this delivery (a stream entry id, or a counter)
    episode: Episode
    deliveries: int = 1  # how many times this entry has been handed out (>1 after a consumer died)


class EpisodeQueue(Protocol):
    """Completed episodes from the coordinator to the trainer, at least once (DESIGN.md §3).

    An episode read but not acknowledged is handed out again after `claim_after_s` to any consumer of the
    group; the trainer detects a second application by `Episode.id`.
    """

    def publish(self, episodes: Sequence[Episode]) -> list[str]:
        """Append episodes; returns their delivery ids."""

    def read(self, consumer: str, max_count: int, block_s: float) -> list[Delivery]:
        """Up to `max_count` deliveries for `consumer`: first ones left unacknowledged by dead consumers, then new."""

    def ack(self, delivery_ids: Sequence[str]) -> int:
        """Acknowledge applied deliveries; returns how many were pending."""

    def pending(self) -> int:
        """Deliveries handed out and not yet acknowledged."""

    def depth(self) -> int:
        """Episodes published and not yet handed out."""


# ------------------------------------------------------------------------------------------------ inference


class SamplingParams(BaseModel):
    """How to sample completions; the SGLang `sampling_params` subset we use (DESIGN.md §6)."""

    max_new_tokens: int = Field(512, ge=1)
    temperature: float = Field(1.0, ge=0)  # 0 means greedy
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = -1  # -1: off
    n: int = Field(1, ge=1)  # completions per prompt
    stop: list[str] = Field(default_factory=list)
    seed: int | None = None  # SGLang's `sampling_seed`


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
