"""What the executor decides, as typed records that cross process boundaries (docs/design.md §5).

The executor is the only source of truth: every reward is computed from an `ExecStatus`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

EXECUTION_SCHEMA_VERSION = 2
"""Bumped whenever the shape of the records below changes (2: `CheckInductionRequest.gold_imports`)."""


class ExecStatus(StrEnum):
    """Outcome of running (or refusing to run) one program. Each value is distinct and documented."""

    OK = "ok"  # ran, returned a value, (for validation) deterministic
    SYNTAX_ERROR = "syntax_error"  # program or input/answer text does not parse
    FORBIDDEN = "forbidden"  # uses a Fig 8 module, a dotted forbidden name, or a dynamic import
    NO_FUNCTION = "no_function"  # no top-level callable `f`
    RUNTIME_ERROR = "runtime_error"  # raised an exception (including SystemExit) while running
    TIMEOUT = "timeout"  # broke the wall-clock or CPU-time limit
    MEMORY = "memory"  # broke the address-space limit (MemoryError or killed for memory)
    NONDETERMINISTIC = "nondeterministic"  # two runs under different hash seeds disagree
    OUTPUT_TOO_LARGE = "output_too_large"  # repr of the result exceeds the output limit
    NO_RETURN = "no_return"  # f returned None: a task needs a value to reason about
    WRONG_ANSWER = "wrong_answer"  # an answer check ran cleanly and the answer is wrong
    CRASHED = "crashed"  # the task's process died without a result (os._exit, signal, killed parent)
    SANDBOX_ERROR = "sandbox_error"  # infrastructure fault: retried, never the program's fault


class ExecutionLimits(BaseModel):
    """Resource limits applied to every run of model-written code."""

    timeout_s: float = Field(10.0, gt=0, description="Wall-clock limit per run (paper: 10 s).")
    memory_mb: int = Field(1024, gt=16, description="Address-space limit per run, MiB.")
    max_output_bytes: int = Field(65536, gt=0, description="Largest repr of a result accepted.")
    max_processes: int = Field(64, gt=0, description="Process/thread cap for one task (docker pids-limit).")


class ValidationResult(BaseModel):
    """Result of validating a proposal: (program, input) -> output, or why not."""

    schema_version: int = EXECUTION_SCHEMA_VERSION
    status: ExecStatus
    output: str | None = None  # repr(f(input)) when status is ok
    error: str | None = None  # short reason otherwise
    imports: list[str] = Field(default_factory=list)
    ms: float = 0.0


class InductionValidationResult(BaseModel):
    """Result of validating an induction proposal: program + N inputs -> N outputs."""

    schema_version: int = EXECUTION_SCHEMA_VERSION
    status: ExecStatus
    outputs: list[str] | None = None
    error: str | None = None
    failed_index: int | None = None  # which input invalidated the proposal
    ms: float = 0.0


class CheckResult(BaseModel):
    """Result of checking a solver answer against the gold triplet."""

    schema_version: int = EXECUTION_SCHEMA_VERSION
    status: ExecStatus  # ok = correct; wrong_answer = ran and wrong; others = why it could not be judged
    correct: bool
    error: str | None = None
    ms: float = 0.0


# --- requests: one model per executor operation, discriminated by `op` (RQ payloads, POST /v1/execute) ---------------


class ValidateProposalRequest(BaseModel):
    """Validate a deduction/abduction proposal: does `f(<input>)` run, return, and agree across hash seeds?"""

    schema_version: int = EXECUTION_SCHEMA_VERSION
    op: Literal["validate_proposal"] = "validate_proposal"
    program: str = Field(max_length=200_000)
    input: str = Field(max_length=200_000)


class ValidateInductionRequest(BaseModel):
    """Validate an induction proposal: the program must pass validation on every one of the N inputs."""

    schema_version: int = EXECUTION_SCHEMA_VERSION
    op: Literal["validate_induction"] = "validate_induction"
    program: str = Field(max_length=200_000)
    inputs: list[str] = Field(min_length=1, max_length=64)


class CheckDeductionRequest(BaseModel):
    """Is the agent's predicted output equal, as a Python value, to the gold output?"""

    schema_version: int = EXECUTION_SCHEMA_VERSION
    op: Literal["check_deduction"] = "check_deduction"
    gold_output: str = Field(max_length=200_000)
    agent_output: str = Field(max_length=200_000)


class CheckAbductionRequest(BaseModel):
    """Does the program map the agent's input to the gold output?"""

    schema_version: int = EXECUTION_SCHEMA_VERSION
    op: Literal["check_abduction"] = "check_abduction"
    program: str = Field(max_length=200_000)
    gold_output: str = Field(max_length=200_000)
    agent_input: str = Field(max_length=200_000)


class CheckInductionRequest(BaseModel):
    """Does the agent's program map every hidden input to its gold output?"""

    schema_version: int = EXECUTION_SCHEMA_VERSION
    op: Literal["check_induction"] = "check_induction"
    agent_program: str = Field(max_length=200_000)
    inputs: list[str] = Field(min_length=1, max_length=64)
    outputs: list[str] = Field(min_length=1, max_length=64)
    gold_imports: list[str] = Field(default_factory=list, max_length=64)  # run before the agent's program


ExecutionRequest = Annotated[
    ValidateProposalRequest
    | ValidateInductionRequest
    | CheckDeductionRequest
    | CheckAbductionRequest
    | CheckInductionRequest,
    Field(discriminator="op"),
]
"""Any executor request; `op` selects the operation."""

ExecutionResult = ValidationResult | InductionValidationResult | CheckResult
"""Any executor result."""


class ExecutorJobFailed(RuntimeError):
    """An executor call failed for the infrastructure's reasons after its retries (worker crashes, a failed queue
    job): never the program's fault. Raised by remote executors (RQ); an API answers it with 503."""


class ExecutorTimeout(TimeoutError):
    """No executor result arrived within the caller's deadline; the job may still run. An API answers it with 504."""
