"""The CodeExecutor port: the sandbox that runs model-written code, the only source of truth for rewards.

Adapters: `executor_svc.executor.Executor` (in-process sandbox pool) or `executor_svc.rq_client.RQCodeExecutor`
(jobs on the RQ queue `executor`, run by `azr worker executor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from services.execution import CheckResult, InductionValidationResult, ValidationResult


class CodeExecutor(Protocol):
    """Runs model-written code in a sandbox and decides: the only source of truth for rewards."""

    def validate_proposal(self, program: str, input: str) -> ValidationResult:
        """Run f(input) twice under different hash seeds; ok with the gold output repr, or why not."""

    def validate_induction(self, program: str, inputs: Sequence[str]) -> InductionValidationResult:
        """Validate the program on every input; one failing input invalidates the proposal."""

    def check_deduction(self, gold_output: str, agent_output: str) -> CheckResult:
        """Compare the predicted output with the gold output as Python values, both read as literals outside any
        sandbox (nothing runs)."""

    def check_abduction(self, program: str, gold_output: str, agent_input: str) -> CheckResult:
        """Run f(agent_input) in the sandbox and compare its output with the gold output outside it (the gold value
        never enters the sandbox)."""

    def check_induction(self, agent_program: str, inputs: Sequence[str], outputs: Sequence[str],
                        gold_imports: Sequence[str] = ()) -> CheckResult:
        """Run the agent's program on every hidden input and compare with each gold output; ``gold_imports`` (the
        gold program's import statements) run before the agent's program when given."""

    def readiness_problem(self) -> str | None:
        """What keeps the executor from working now (for `/readyz`), or None when it can take work."""
