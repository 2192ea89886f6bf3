"""Task records are one type per shape (a discriminated union on `kind`); a wire body may leave `kind` out."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from services.algorithm.task_types import TaskType
from services.execution import ExecStatus
from services.records import (
    InductionSolveTask,
    IOSolveTask,
    Proposal,
    ProposedInductionTask,
    ProposedIOTask,
    Solution,
    SolveTask,
)
from services.rollouts.http_schemas import SolveRequest
from services.rollouts.solving import solver_instruction, task_shape_error
from services.rollouts.validation import validate_proposal

IO = {"program": "def f(x):\n    return x + 1", "input": "1", "output": "2"}
INDUCTION = {"program": "def f(x):\n    return x", "inputs": ["1", "2", "3", "4"], "outputs": ["1", "2", "3", "4"],
             "message": "identity"}
solve_task = TypeAdapter(SolveTask)


def test_a_body_without_kind_parses_into_the_type_its_fields_name() -> None:
    assert isinstance(solve_task.validate_python(IO), IOSolveTask)
    induction = solve_task.validate_python(INDUCTION)
    assert isinstance(induction, InductionSolveTask) and induction.split == 2
    assert isinstance(solve_task.validate_python({**INDUCTION, "kind": "induction"}), InductionSolveTask)
    # the tag is written back out, so a dumped record parses to the same type
    assert solve_task.validate_json(solve_task.dump_json(induction)) == induction


def test_a_task_missing_a_field_of_its_shape_or_with_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValidationError, match="output"):
        solve_task.validate_python({"program": "def f(x):\n    return x", "input": "1"})
    with pytest.raises(ValidationError, match="message"):
        solve_task.validate_python({key: value for key, value in INDUCTION.items() if key != "message"})
    with pytest.raises(ValidationError, match="union_tag_invalid"):
        solve_task.validate_python({**IO, "kind": "riddle"})


@pytest.mark.parametrize(("task_type", "body", "reason"), [
    ("induction", IO, "tasks[0]: induction needs inputs, outputs and a message"),
    ("deduction", INDUCTION, "tasks[0]: deduction needs input and output"),
    ("abduction", INDUCTION, "tasks[0]: abduction needs input and output"),
    ("induction", {**INDUCTION, "outputs": ["1"]}, "tasks[0]: induction needs >= 2 inputs and as many outputs"),
])
def test_a_solve_request_whose_tasks_do_not_fit_its_task_type_says_which_and_why(task_type, body, reason) -> None:
    with pytest.raises(ValidationError) as refused:
        SolveRequest.model_validate({"task_type": task_type, "tasks": [body]})
    assert reason in str(refused.value)


def test_each_shape_builds_its_own_solver_prompt_and_a_mismatch_is_an_error() -> None:
    deduction = solver_instruction(TaskType.DEDUCTION, IOSolveTask(**IO))
    abduction = solver_instruction(TaskType.ABDUCTION, IOSolveTask(**IO))
    induction = solver_instruction(TaskType.INDUCTION, InductionSolveTask(**INDUCTION))
    assert "return x + 1" in deduction and "return x + 1" in abduction and deduction != abduction
    assert "identity" in induction and "return x" not in induction  # the gold program is never shown
    assert task_shape_error(TaskType.INDUCTION, IOSolveTask(**IO)) is not None
    with pytest.raises(ValueError, match="deduction needs input and output"):
        solver_instruction(TaskType.DEDUCTION, InductionSolveTask(**INDUCTION))


def test_a_proposal_carrying_the_other_shape_is_refused_before_anything_runs() -> None:
    class NoExecutor:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the executor was called ({name})")

    proposal = Proposal(task_type=TaskType.INDUCTION, prompt_ids=[1], response_ids=[2], behaviour_logprobs=[0.0],
                        text="", weight_version="0", task=ProposedIOTask(program=IO["program"], input="1"))
    with pytest.raises(ValueError, match="induction proposal carries a io task"):
        validate_proposal(NoExecutor(), proposal, step=1, policy_version=0)  # type: ignore[arg-type]
    parsed = Proposal.model_validate_json(proposal.model_copy(update={
        "task_type": TaskType.INDUCTION,
        "task": ProposedInductionTask(program=IO["program"], inputs=["1", "2"], message="m")}).model_dump_json())
    assert isinstance(parsed.task, ProposedInductionTask) and parsed.task.inputs == ["1", "2"]


def test_a_solutions_status_is_the_executors_enum_on_both_sides_of_the_wire() -> None:
    solution = Solution(task_type=TaskType.DEDUCTION, prompt_ids=[1], response_ids=[2], behaviour_logprobs=[0.0],
                        text="", weight_version="0", checked=True, correct=False, exec_status="timeout")
    assert solution.exec_status is ExecStatus.TIMEOUT
    assert Solution.model_validate_json(solution.model_dump_json()).exec_status is ExecStatus.TIMEOUT
    with pytest.raises(ValidationError):
        solution.model_validate({**solution.model_dump(), "exec_status": "went_fishing"})
