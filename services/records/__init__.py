"""Records that cross process boundaries (docs/design.md §8). Every one carries a version.

`policy_version` is the integer the trainer publishes after a successful weight push; SGLang's
`weight_version` carries it as a string.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Discriminator, Field, Tag

from services.algorithm.task_types import Role, TaskType
from services.execution import ExecStatus

RECORD_SCHEMA_VERSION = 3
"""Bumped whenever the shape of the records below changes (2: format verdicts beside the extracted task/answer;
3: proposed and solver tasks are one type per shape, told apart by `kind`; a solution's status is an ExecStatus)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TripletSource(StrEnum):
    """Where a buffer entry came from."""

    ZERO = "zero"  # the Fig 5 identity triplet
    SEED = "seed"  # proposed by the base model before training, or imported from a seed file
    PROPOSED = "proposed"  # proposed during self-play
    USER = "user"  # submitted over HTTP


class Triplet(BaseModel):
    """A (program, input, output) entry of the deduction or abduction buffer."""

    schema_version: int = RECORD_SCHEMA_VERSION
    id: str | None = None
    buffer: TaskType
    program: str
    input: str  # argument source text, inserted as f(<input>)
    output: str  # repr(f(input)), computed by the executor under a fixed hash seed
    imports: list[str] = Field(default_factory=list)
    source: TripletSource = TripletSource.PROPOSED
    step: int = 0
    policy_version: int = 0
    program_hash: str | None = None
    created_at: datetime = Field(default_factory=_utcnow)


class InductionTask(BaseModel):
    """An induction buffer entry: a program, N inputs with their outputs, and a message.

    The solver is shown the first N//2 pairs (`given`) and the message; it is judged on the rest (`hidden`).
    """

    schema_version: int = RECORD_SCHEMA_VERSION
    id: str | None = None
    buffer: TaskType = TaskType.INDUCTION
    program: str
    inputs: list[str]
    outputs: list[str]
    message: str
    imports: list[str] = Field(default_factory=list)
    source: TripletSource = TripletSource.PROPOSED
    step: int = 0
    policy_version: int = 0
    program_hash: str | None = None
    created_at: datetime = Field(default_factory=_utcnow)

    @property
    def split(self) -> int:
        """Index of the first hidden pair: the first N//2 pairs are given."""
        return len(self.inputs) // 2

    @property
    def given_pairs(self) -> list[tuple[str, str]]:
        return list(zip(self.inputs[: self.split], self.outputs[: self.split]))

    @property
    def hidden_pairs(self) -> list[tuple[str, str]]:
        return list(zip(self.inputs[self.split :], self.outputs[self.split :]))


class Episode(BaseModel):
    """One trained-on sample: what the trainer consumes (docs/design.md §8)."""

    schema_version: int = RECORD_SCHEMA_VERSION
    id: str  # unique; re-delivery is detected by it
    run_id: str
    step: int
    task_type: TaskType
    role: Role
    prompt_ids: list[int]
    response_ids: list[int]
    behaviour_logprobs: list[float] | None = None  # one per response token
    reward: float  # the Eq 6 scalar
    policy_version: int
    text: str | None = None
    task_id: str | None = None
    exec_status: str | None = None  # the executor's status, or why nothing ran (an extraction or format failure)
    format_ok: bool | None = None  # the response's Eq 6 format verdict (R1 template)


def _task_kind(value: object) -> str | None:
    """The `kind` tag of a task union member; a JSON body may leave it out: `inputs` marks an induction task."""
    if isinstance(value, dict):
        kind = value.get("kind")
        if kind is not None:
            return str(kind)
        return "induction" if "inputs" in value else "io"
    return getattr(value, "kind", None)


class ProposedIOTask(BaseModel):
    """A deduction or abduction proposal as parsed (before validation): the proposed program and one input."""

    kind: Literal["io"] = "io"
    program: str
    input: str  # argument source text


class ProposedInductionTask(BaseModel):
    """An induction proposal as parsed (before validation): the buffer program it was shown, its inputs, a hint."""

    kind: Literal["induction"] = "induction"
    program: str  # the program the proposer was shown (it proposes inputs for it, not a program)
    inputs: list[str]  # N argument source texts
    message: str  # the hint for the solver


ProposedTask = Annotated[Annotated[ProposedIOTask, Tag("io")] | Annotated[ProposedInductionTask, Tag("induction")],
                         Discriminator(_task_kind)]
"""The task a proposer response parsed into, one type per shape (tag `kind`)."""


class Proposal(BaseModel):
    """One proposer rollout (docs/design.md §8): what was asked, what came back, and what it parsed into."""

    schema_version: int = RECORD_SCHEMA_VERSION
    task_type: TaskType
    prompt_ids: list[int]
    response_ids: list[int]
    behaviour_logprobs: list[float]
    text: str
    task: ProposedTask | None = None  # extracted whatever the format verdict; None when nothing could be extracted
    parse_failure: str | None = None  # why no task was extracted (services.algorithm.response_format.ParseFailure)
    format_ok: bool = True  # the response's Eq 6 format verdict; a valid task with a format error is stored, scored −1
    format_failure: str | None = None  # why the format check failed (ParseFailure value)
    reference_ids: list[str] = Field(default_factory=list)  # buffer entries shown in the prompt
    weight_version: str  # policy version of the weights that sampled it
    finish_reason: str = "stop"


class IOSolveTask(BaseModel):
    """A deduction or abduction task as the solver API receives it. Deduction shows `input` and checks against the
    gold `output`; abduction shows `output` and runs f on the answer (the gold `input` is never shown)."""

    kind: Literal["io"] = "io"
    task_id: str | None = None
    program: str
    input: str
    output: str


class InductionSolveTask(BaseModel):
    """An induction task as the solver API receives it: the first N//2 pairs and the message are shown, the
    program is written from them and judged on the rest (§3.2)."""

    kind: Literal["induction"] = "induction"
    task_id: str | None = None
    program: str  # the gold program (never shown)
    inputs: list[str]  # all N inputs
    outputs: list[str]  # all N outputs
    message: str

    @property
    def split(self) -> int:
        """Index of the first hidden pair: the solver sees the first N//2 pairs (§3.2)."""
        return len(self.inputs) // 2


SolveTask = Annotated[Annotated[IOSolveTask, Tag("io")] | Annotated[InductionSolveTask, Tag("induction")],
                      Discriminator(_task_kind)]
"""A task as the solver receives it, one type per shape (tag `kind`): enough to build the prompt and check answers."""


class Solution(BaseModel):
    """One solver rollout: the parsed answer and, when checked, the executor's verdict."""

    schema_version: int = RECORD_SCHEMA_VERSION
    task_type: TaskType
    task_id: str | None = None
    prompt_ids: list[int]
    response_ids: list[int]
    behaviour_logprobs: list[float]
    text: str
    answer: str | None = None  # deduction: output text; abduction: input text; induction: program source
    parse_failure: str | None = None  # why it is a format error: the format check's reason, or no code block
    format_ok: bool = True  # the Eq 6 format verdict; an answer with a format error is never checked
    weight_version: str
    finish_reason: str = "stop"
    checked: bool = False
    correct: bool | None = None  # set when checked
    exec_status: ExecStatus | None = None  # the executor's status when checked; None when nothing ran
