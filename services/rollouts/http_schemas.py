"""Request and response bodies of `POST /v1/propose` (proposer_api) and `POST /v1/solve` (solver_api).

Shared by the APIs and by the coordinator's HTTP client, so both sides validate the same shapes.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StrictBool, model_validator

from services.algorithm.task_types import TaskType
from services.json_types import INTEGER_NOT_BOOL_OR_TEXT, JsonInt
from services.ports import SamplingParams
from services.records import RECORD_SCHEMA_VERSION, Proposal, Solution, SolveTask
from services.rollouts.solving import task_shape_error

MAX_PROPOSALS_PER_REQUEST = 512
MAX_TASKS_PER_REQUEST = 512
MAX_SAMPLES_PER_TASK = 64
MAX_INSTRUCTIONS_PER_REQUEST = 512


class ReferenceIn(BaseModel):
    """A reference triplet shown to the proposer (id optional: references need not come from the buffer)."""

    id: str | None = None
    program: str = Field(min_length=1, max_length=20_000)
    input: str = Field(max_length=20_000)
    output: str = Field(max_length=20_000)


class ProposeRequest(BaseModel):
    """`count` proposals of `task_type`. `references`: one non-empty list per proposal (len == count), or one list
    used for every proposal, or None (or []) to sample K from the buffer (deduction/abduction) or one program of
    D_abd ∪ D_ded (induction, which takes exactly one reference)."""

    schema_version: JsonInt = RECORD_SCHEMA_VERSION
    task_type: TaskType
    count: JsonInt = Field(1, ge=1, le=MAX_PROPOSALS_PER_REQUEST)
    references: list[Annotated[list[ReferenceIn], Field(min_length=1)]] | list[ReferenceIn] | None = None
    sampling: SamplingParams | None = None
    num_inputs: Annotated[int, Field(ge=2, le=64), INTEGER_NOT_BOOL_OR_TEXT] | None = None
    seed: JsonInt | None = None

    @model_validator(mode="after")
    def _check_references(self) -> ProposeRequest:
        refs = self.references
        if refs and isinstance(refs[0], list) and len(refs) != self.count:
            raise ValueError(f"references has {len(refs)} lists for count={self.count}: give one per proposal")
        per_prompt = refs if refs and isinstance(refs[0], list) else [refs] if refs else []
        if self.task_type is TaskType.INDUCTION and any(len(group) != 1 for group in per_prompt):
            raise ValueError("an induction proposal is shown exactly one program: one reference per proposal")
        if self.sampling is not None and self.sampling.n != 1:
            raise ValueError("proposals take sampling.n = 1 (one rollout per prompt); ask for a larger count")
        return self


class ProposeResponse(BaseModel):
    schema_version: int = RECORD_SCHEMA_VERSION
    proposals: list[Proposal]
    weight_version: str


class SolveRequest(BaseModel):
    """`n` solutions for each task; with `check` the executor judges every parsed answer."""

    schema_version: JsonInt = RECORD_SCHEMA_VERSION
    task_type: TaskType
    tasks: list[SolveTask] = Field(min_length=1, max_length=MAX_TASKS_PER_REQUEST)
    n: JsonInt = Field(1, ge=1, le=MAX_SAMPLES_PER_TASK)
    sampling: SamplingParams | None = None
    check: StrictBool = False

    @model_validator(mode="after")
    def _check_tasks(self) -> SolveRequest:
        for index, task in enumerate(self.tasks):
            error = task_shape_error(self.task_type, task)
            if error is not None:
                raise ValueError(f"tasks[{index}]: {error}")
        return self


class SolveResponse(BaseModel):
    schema_version: int = RECORD_SCHEMA_VERSION
    solutions: list[list[Solution]]
    weight_version: str


class PromptTokensRequest(BaseModel):
    """Task instructions whose full prompts (R1 wrapper or chat template included) the coordinator needs to measure."""

    schema_version: JsonInt = RECORD_SCHEMA_VERSION
    instructions: list[str] = Field(min_length=1, max_length=MAX_INSTRUCTIONS_PER_REQUEST)


class PromptTokensResponse(BaseModel):
    """Prompt length in tokens of each instruction, in order, with the served model's tokenizer."""

    schema_version: int = RECORD_SCHEMA_VERSION
    tokens: list[int]
