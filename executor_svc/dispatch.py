"""One entry point from a typed request to the executor call it names; shared by RQ jobs, HTTP and the CLI."""

from __future__ import annotations

from pydantic import TypeAdapter

from services.execution import (
    CheckAbductionRequest,
    CheckDeductionRequest,
    CheckInductionRequest,
    ExecutionRequest,
    ExecutionResult,
    ValidateInductionRequest,
    ValidateProposalRequest,
)
from services.ports import CodeExecutor

EXECUTION_REQUEST = TypeAdapter(ExecutionRequest)
"""Parses a JSON-ready dict into the request model its `op` names (raises pydantic.ValidationError)."""


def execute_request(executor: CodeExecutor, request: ExecutionRequest) -> ExecutionResult:
    """Run the operation the request names on `executor`."""
    if isinstance(request, ValidateProposalRequest):
        return executor.validate_proposal(request.program, request.input)
    if isinstance(request, ValidateInductionRequest):
        return executor.validate_induction(request.program, request.inputs)
    if isinstance(request, CheckDeductionRequest):
        return executor.check_deduction(request.gold_output, request.agent_output)
    if isinstance(request, CheckAbductionRequest):
        return executor.check_abduction(request.program, request.gold_output, request.agent_input)
    if isinstance(request, CheckInductionRequest):
        return executor.check_induction(request.agent_program, request.inputs, request.outputs, request.gold_imports)
    raise TypeError(f"unknown executor request {type(request).__name__}")
