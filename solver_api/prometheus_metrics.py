"""Prometheus metrics of `POST /v1/solve` (the app's HTTP request counts and latencies come from
services/http/ops.py, in the same registry).

Answers checked by the executor (`check: true`) are counted by outcome: `correct`, the executor's status of a wrong
one (`wrong_answer`, `runtime_error`, `timeout`, ...), `parse_failure` for a response with a format error (never
run), or `sandbox_error` for an answer the executor failed on twice for infrastructure reasons.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter

from services.records import Solution

CORRECT = "correct"
"""Outcome label of an answer the executor judged right."""
PARSE_FAILURE = "parse_failure"
"""Outcome label of an answer whose response fails the format check (not run)."""


class SolverMetrics:
    """`azr_solver_checked_answers_total{task_type,outcome}` in the app's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.checked = Counter("azr_solver_checked_answers", "Answers of POST /v1/solve checked by the executor, by "
                               "task type and outcome: correct, the executor's status, or parse_failure",
                               ["task_type", "outcome"], registry=registry)

    def observe_checked(self, groups: Sequence[Sequence[Solution]]) -> None:
        """Count the checked answers of one response (n per task)."""
        for group in groups:
            for solution in group:
                self.checked.labels(solution.task_type.value, outcome_of(solution)).inc()


def outcome_of(solution: Solution) -> str:
    """The outcome label of one checked answer."""
    if not solution.format_ok or solution.answer is None:
        return PARSE_FAILURE
    if solution.correct:
        return CORRECT
    return solution.exec_status or "wrong_answer"
