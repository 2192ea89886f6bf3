"""Issue 37: a NUL in an induction proposal's message (model text may hold one) was a PostgreSQL DataError that
escaped the coordinator's `store_entries`. Such a task is invalid before anything runs, on a real executor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from executor_svc.executor import Executor
from services.algorithm.task_types import TaskType
from services.records import Proposal, ProposedInductionTask, ProposedIOTask
from services.rollouts.validation import validate_proposal


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with Executor(workers=1) as running:
        yield running


def proposal(task_type: TaskType, task: ProposedInductionTask | ProposedIOTask) -> Proposal:
    return Proposal(task_type=task_type, prompt_ids=[1], response_ids=[2], behaviour_logprobs=[-0.1], text="t",
                    task=task, weight_version="0")


@pytest.mark.parametrize("message", ["a\x00b", "lone \ud800 surrogate"])
def test_an_induction_task_no_buffer_can_store_is_invalid(executor: Executor, message: str) -> None:
    task = ProposedInductionTask(program="def f(x):\n    return x", inputs=["1", "2"], message=message)
    verdict = validate_proposal(executor, proposal(TaskType.INDUCTION, task), step=1, policy_version=0)
    assert (verdict.status, verdict.entry, verdict.dropped) == ("syntax_error", None, False)
    assert "NUL" in (verdict.error or "")
    clean = task.model_copy(update={"message": "doubles nothing"})
    assert validate_proposal(executor, proposal(TaskType.INDUCTION, clean), step=1, policy_version=0).valid


def test_a_program_task_with_a_nul_is_invalid(executor: Executor) -> None:
    task = ProposedIOTask(program="def f(x):\n    return x", input="'a\x00'")
    verdict = validate_proposal(executor, proposal(TaskType.DEDUCTION, task), step=1, policy_version=0)
    assert verdict.status == "syntax_error" and verdict.entry is None
