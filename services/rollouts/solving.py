"""The solver role (Figs 37-39): prompts from tasks, generation, reading, and the executor's verdict on answers.

Every answer is judged by the CodeExecutor (the sandbox), never in this process. Two ways to judge a response:
- a solver episode (Eq 5, 6): a response with a format error is never checked (it earns −1 whatever it says);
- a learnability sample (Eq 4): its answer is checked whatever its format (the authors count correct answers).
An executor call that fails for infrastructure reasons is tried once more; if it fails again the verdict is `None`
and the caller drops that sample, never scoring it (services/rollouts/executor_faults.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from services.algorithm.parsing import (
    learnability_answer,
    read_response,
)
from services.algorithm.prompts import ReferenceTriplet, induction_solver_prompt, solver_prompt
from services.algorithm.static_check import check_program
from services.algorithm.task_types import Role, TaskType
from services.execution import CheckResult, ExecStatus
from services.ports import BufferEntry, CodeExecutor, Completion, InferenceEngine, SamplingParams
from services.records import InductionSolveTask, InductionTask, IOSolveTask, Solution, SolveTask
from services.rollouts.executor_faults import with_fault_retry


def solve_task_from_entry(entry: BufferEntry) -> SolveTask:
    """The solver-facing view of a buffer entry (all gold values kept for checking; the prompt hides them)."""
    if isinstance(entry, InductionTask):
        return InductionSolveTask(task_id=entry.id, program=entry.program, inputs=entry.inputs, outputs=entry.outputs,
                                  message=entry.message)
    return IOSolveTask(task_id=entry.id, program=entry.program, input=entry.input, output=entry.output)


def task_shape_error(task_type: TaskType, task: SolveTask) -> str | None:
    """Why `task` cannot be a `task_type` task (an induction type with an I/O task or the reverse, unequal
    induction pairs), or None when it can."""
    if task_type is TaskType.INDUCTION:
        if not isinstance(task, InductionSolveTask):
            return "induction needs inputs, outputs and a message"
        if len(task.inputs) != len(task.outputs) or len(task.inputs) < 2:
            return "induction needs >= 2 inputs and as many outputs"
        return None
    if not isinstance(task, IOSolveTask):
        return f"{task_type.value} needs input and output"
    return None


def solver_instruction(task_type: TaskType, task: SolveTask) -> str:
    """The task instruction of Figs 37-39 (the R1 wrapper is the engine's job)."""
    error = task_shape_error(task_type, task)
    if error is not None:
        raise ValueError(error)
    if isinstance(task, InductionSolveTask):
        return induction_solver_prompt(list(zip(task.inputs[:task.split], task.outputs[:task.split])), task.message)
    return solver_prompt(task_type, ReferenceTriplet(task.program, task.input, task.output))


class AnswerReading(NamedTuple):
    """A solver response as read: unpacks as (answer, format_ok, failure)."""

    answer: str | None
    """The answer as read whatever the format; None when none can be extracted."""
    format_ok: bool
    """Eq 6's format verdict."""
    failure: str | None
    """Why the response is a format error (a ParseFailure value); None when it is not."""


def read_answer(task_type: TaskType, text: str) -> AnswerReading:
    """How a solver response reads: its answer, its format verdict and why it fails the format, if it does."""
    reading = read_response(task_type, Role.SOLVE, text)
    failure = reading.failure
    return AnswerReading(answer=reading.solver_answer, format_ok=failure is None,
                         failure=failure.value if failure else None)


def solution_record(task_type: TaskType, task: SolveTask, prompt_ids: list[int], completion: Completion) -> Solution:
    reading = read_answer(task_type, completion.text)
    return Solution(task_type=task_type, task_id=task.task_id, prompt_ids=prompt_ids,
                    response_ids=completion.output_ids, behaviour_logprobs=completion.logprobs, text=completion.text,
                    answer=reading.answer, parse_failure=reading.failure, format_ok=reading.format_ok,
                    weight_version=completion.weight_version, finish_reason=completion.finish_reason)


def solve(engine: InferenceEngine, tasks: Mapping[TaskType, Sequence[SolveTask]],
          sampling: SamplingParams) -> dict[TaskType, list[list[Solution]]]:
    """`sampling.n` solutions per task of every task type, from ONE generation call, read but not checked (outer list
    in task order per type)."""
    order = [(task_type, task) for task_type, group in tasks.items() for task in group]
    prompts = [engine.prompt_ids(solver_instruction(t, task)) for t, task in order]
    completions = engine.generate(prompts, sampling) if prompts else []
    out: dict[TaskType, list[list[Solution]]] = {task_type: [] for task_type in tasks}
    for (task_type, task), prompt, group in zip(order, prompts, completions):
        out[task_type].append([solution_record(task_type, task, prompt, completion) for completion in group])
    return out


def check_answer(executor: CodeExecutor, task_type: TaskType, task: SolveTask, answer: str, *,
                 induction_gold_imports: bool = False) -> CheckResult:
    """The executor's verdict on one answer: deduction compares values, abduction runs f(answer), induction runs
    the agent's program on every hidden input (§3.2); with ``induction_gold_imports``, after the gold program's import
    statements (the released code's check)."""
    error = task_shape_error(task_type, task)
    if error is not None:
        raise ValueError(error)
    if isinstance(task, IOSolveTask):
        if task_type is TaskType.DEDUCTION:
            return executor.check_deduction(task.output, answer)
        return executor.check_abduction(task.program, task.output, answer)
    split = task.split
    if not induction_gold_imports:
        return executor.check_induction(answer, task.inputs[split:], task.outputs[split:])
    imports = check_program(task.program).imports
    return executor.check_induction(answer, task.inputs[split:], task.outputs[split:], imports)


def with_verdict(solution: Solution, verdict: CheckResult | None) -> Solution:
    """The solution marked checked: not run (a format error, or no answer) -> incorrect with no status."""
    if verdict is None:
        return solution.model_copy(update={"checked": True, "correct": False, "exec_status": None})
    return solution.model_copy(update={"checked": True, "correct": verdict.correct, "exec_status": verdict.status})


def check_solution(executor: CodeExecutor, task_type: TaskType, task: SolveTask, solution: Solution, *,
                   learnability: bool = False, induction_gold_imports: bool = False) -> Solution | None:
    """Check one solution in the sandbox; None when the executor failed twice for infrastructure reasons (drop it).

    A solver episode is checked only when its format is right; a learnability sample (`learnability=True`) is
    checked on the answer its raw response gives, whatever its format. ``induction_gold_imports``: see
    `check_answer`."""
    if learnability:
        answer = learnability_answer(task_type, solution.text)
    else:
        answer = solution.answer if solution.format_ok else None
    if answer is None:
        return with_verdict(solution, None)
    verdict = with_fault_retry(lambda: check_answer(executor, task_type, task, answer,
                                                    induction_gold_imports=induction_gold_imports),
                               lambda result: result.status, f"{task_type.value} check of task {task.task_id}")
    return None if verdict is None else with_verdict(solution, verdict)


def checked_or_fault(checked: Solution | None, solution: Solution) -> Solution:
    """The checked solution; when the executor failed twice for infrastructure reasons (`check_solution` gave None),
    the solution marked wrong with status `sandbox_error`, for callers that report rather than drop (the solver API's
    `check: true`, an evaluation): never silently right."""
    if checked is not None:
        return checked
    return solution.model_copy(update={"checked": True, "correct": False, "exec_status": ExecStatus.SANDBOX_ERROR})
