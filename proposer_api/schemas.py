"""Request and response bodies of proposer_api; each carries `schema_version`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.algorithm.task_types import TaskType
from services.execution import ExecStatus
from services.http.errors import InvalidRequest
from services.json_types import JsonInt
from services.ports import RunSummary, StepRecord
from services.records import InductionTask, Triplet

API_SCHEMA_VERSION = 1
"""Bumped whenever a body below changes shape."""

MAX_PAGE = 500
"""Largest page `GET /v1/buffers/{buffer}` returns."""

MAX_SEARCH = 200
"""Longest text search (`q`) `GET /v1/buffers/{buffer}` accepts."""

MAX_INTEGER = 2**63 - 1
"""Largest integer a query parameter takes (a signed 64-bit column: a larger one could not be compared in SQL)."""

SeedSource = Literal["user"]
"""The source a submitted seed gets: `user`, evictable like proposals and capped per buffer
(`seed_submission_quota`). `seed` entries, never evicted, come only from `azr seeds import` and seeding (issue 37:
a token holder could otherwise fill a buffer for good)."""

ProgramBuffer = Literal["deduction", "abduction"]
"""Buffers a program seed may go to."""


def _both_program_buffers() -> list[ProgramBuffer]:
    return ["deduction", "abduction"]


class ProgramSeed(BaseModel):
    """A deduction/abduction seed: one program and the argument text it is called with."""

    model_config = ConfigDict(extra="forbid")

    schema_version: JsonInt = API_SCHEMA_VERSION
    kind: Literal["program"]
    program: str = Field(min_length=1, max_length=20_000, description="Python source defining `f`.")
    input: str = Field(min_length=1, max_length=10_000, description="Argument source text, as in f(<input>).")
    buffers: list[ProgramBuffer] = Field(
        default_factory=_both_program_buffers, min_length=1, max_length=2,
        description="Buffers to store the triplet in (default both).")
    source: SeedSource = Field("user", description="Always `user`: evictable, at most `seed_submission_quota` per "
                                                   "buffer (`seed` entries come only from `azr seeds import`).")


class InductionSeed(BaseModel):
    """An induction seed: a program, the inputs it is run on, and the message shown to the solver."""

    model_config = ConfigDict(extra="forbid")

    schema_version: JsonInt = API_SCHEMA_VERSION
    kind: Literal["induction"]
    program: str = Field(min_length=1, max_length=20_000)
    inputs: list[Annotated[str, Field(min_length=1, max_length=10_000)]] = Field(min_length=2, max_length=64)
    message: str = Field(min_length=1, max_length=4_000)
    source: SeedSource = Field("user", description="Always `user` (see ProgramSeed.source).")


SeedSubmission = Annotated[ProgramSeed | InductionSeed, Field(discriminator="kind")]
"""Body of `POST /v1/seeds`: `kind` says which (the route restates the discriminator in its Body())."""


class StoredOutcome(BaseModel):
    """What happened to the seed in one buffer."""

    buffer: TaskType
    id: str
    created: bool  # False: a duplicate; `id` is the existing entry


class SeedAccepted(BaseModel):
    """`201` (something new stored) or `200` (every buffer already had it): the outcome and the entries."""

    schema_version: int = API_SCHEMA_VERSION
    outcomes: list[StoredOutcome]
    entries: list[Triplet | InductionTask]


class SeedRejected(BaseModel):
    """`422` with `problem: "seed_rejected"`: the request was well formed but the executor refused the program (its
    `status` and `error` say why); nothing was stored. A malformed request's 422 has `problem: "invalid_request"`."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    problem: Literal["seed_rejected"] = "seed_rejected"
    schema_version: int = API_SCHEMA_VERSION
    detail: str
    status: ExecStatus
    error: str | None = None
    failed_index: int | None = None  # induction: which input failed


SeedProblem = Annotated[InvalidRequest | SeedRejected, Field(discriminator="problem")]
"""`POST /v1/seeds`'s 422: a malformed request (`invalid_request`) or a program the executor refused
(`seed_rejected`), told apart by `problem`."""


class BufferPage(BaseModel):
    """One page of a buffer, newest first, with the total matching the filters."""

    schema_version: int = API_SCHEMA_VERSION
    buffer: TaskType
    total: int
    limit: int
    offset: int
    entries: list[Triplet | InductionTask]


MAX_STEPS_PAGE = 2000
"""Most steps `GET /v1/runs/{run_id}/steps` returns at once (the dashboard pages on with `since_step`)."""

MAX_HISTORY_PAGE = 500
"""Most solve attempts `GET /v1/buffers/{buffer}/{entry_id}/history` returns at once."""


class RunList(BaseModel):
    """`GET /v1/runs`: every run of the run log, the most recently active first."""

    schema_version: int = API_SCHEMA_VERSION
    runs: list[RunSummary]


class StepsPage(BaseModel):
    """`GET /v1/runs/{run_id}/steps`: metrics lines after `since_step`, in step order."""

    schema_version: int = API_SCHEMA_VERSION
    run_id: str
    since_step: int | None
    steps: list[StepRecord]
    has_more: bool  # True: more steps follow; ask again with since_step = the last step here


class SolveAttempt(BaseModel):
    """One solver episode of a buffer entry: when, by which policy, and how it went."""

    episode_id: str
    run_id: str
    step: int
    policy_version: int
    reward: float
    exec_status: str | None
    response_tokens: int
    text: str | None  # the solver's response


class EntryHistory(BaseModel):
    """`GET /v1/buffers/{buffer}/{entry_id}/history`: the solve attempts of one entry, by step."""

    schema_version: int = API_SCHEMA_VERSION
    buffer: TaskType
    entry_id: str
    total: int
    limit: int
    offset: int
    attempts: list[SolveAttempt]
