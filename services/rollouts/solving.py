"""The solver role (Figs 37-39): prompts from tasks, generation, parsing, and the executor's verdict on answers.

Every answer is judged by the CodeExecutor (the sandbox), never in this process.
"""

from __future__ import annotations

from typing import Sequence

from services.algorithm.parsing import AbductionSolution, DeductionSolution, InductionSolution, parse_response
from services.algorithm.prompts import ReferenceTriplet, induction_solver_prompt, solver_prompt
from services.algorithm.response_format import ParseFailed
from services.algorithm.task_types import Role, TaskType
from services.execution import CheckResult, ExecStatus
from services.ports import BufferEntry, CodeExecutor, Completion, InferenceEngine, SamplingParams
from services.records import InductionTask, SolveTask, Solution


def solve_task_from_entry(entry: BufferEntry) -> SolveTask:
    """The solver-facing view of a buffer entry (all gold values kept for checking; the prompt hides them)."""
    if isinstance(entry, InductionTask):
        return SolveTask(task_id=entry.id, program=entry.program, inputs=entry.inputs, outputs=entry.outputs,
                         message=entry.message)
    return SolveTask(task_id=entry.id, program=entry.program, input=entry.input, output=entry.output)


def given_split(task: SolveTask) -> int:
    """Index of the first hidden induction pair: the solver sees the first N//2 pairs (§3.2)."""
    return len(task.inputs or []) // 2


def solver_instruction(task_type: TaskType, task: SolveTask) -> str:
    """The task instruction of Figs 37-39 (the R1 wrapper is the engine's job)."""
    if task_type is TaskType.INDUCTION:
        if not task.inputs or not task.outputs or task.message is None or len(task.inputs) != len(task.outputs):
            raise ValueError("an induction task needs inputs, outputs (as many) and a message")
        split = given_split(task)
        return induction_solver_prompt(list(zip(task.inputs[:split], task.outputs[:split])), task.message)
    if task.input is None or task.output is None:
        raise ValueError(f"a {task_type} task needs its input and output")
    return solver_prompt(task_type, ReferenceTriplet(task.program, task.input, task.output))


def parse_answer(task_type: TaskType, text: str) -> tuple[str | None, str | None]:
    """(answer, None) when the response is well formed, else (None, parse-failure reason)."""
    parsed = parse_response(task_type, Role.SOLVE, text)
    if isinstance(parsed, ParseFailed):
        return None, parsed.reason.value
    if isinstance(parsed, DeductionSolution):
        return parsed.output, None
    if isinstance(parsed, AbductionSolution):
        return parsed.input, None
    if isinstance(parsed, InductionSolution):
        return parsed.program.source, None
    raise TypeError(f"unexpected solver parse result {type(parsed).__name__}")


def solution_record(task_type: TaskType, task: SolveTask, prompt_ids: list[int], completion: Completion) -> Solution:
    answer, failure = parse_answer(task_type, completion.text)
    return Solution(task_type=task_type, task_id=task.task_id, prompt_ids=prompt_ids,
                    response_ids=completion.output_ids, behaviour_logprobs=completion.logprobs, text=completion.text,
                    answer=answer, parse_failure=failure, weight_version=completion.weight_version,
                    finish_reason=completion.finish_reason)


def solve(engine: InferenceEngine, task_type: TaskType, tasks: Sequence[SolveTask],
          sampling: SamplingParams) -> list[list[Solution]]:
    """`sampling.n` solutions per task (outer list in task order), parsed but not checked."""
    if not tasks:
        return []
    prompts = [engine.prompt_ids(solver_instruction(task_type, task)) for task in tasks]
    completions = engine.generate(prompts, sampling)
    return [[solution_record(task_type, task, prompt, completion) for completion in group]
            for task, prompt, group in zip(tasks, prompts, completions)]


def check_answer(executor: CodeExecutor, task_type: TaskType, task: SolveTask, answer: str) -> CheckResult:
    """The executor's verdict on one answer: deduction compares values, abduction runs f(answer), induction runs
    the agent's program on every hidden input (§3.2)."""
    if task_type is TaskType.DEDUCTION:
        assert task.output is not None
        return executor.check_deduction(task.output, answer)
    if task_type is TaskType.ABDUCTION:
        assert task.output is not None
        return executor.check_abduction(task.program, task.output, answer)
    assert task.inputs is not None and task.outputs is not None
    split = given_split(task)
    return executor.check_induction(answer, task.inputs[split:], task.outputs[split:])


def with_verdict(solution: Solution, verdict: CheckResult | None) -> Solution:
    """The solution marked checked: a parse failure is never run (it is a format error, status None)."""
    if verdict is None:
        return solution.model_copy(update={"checked": True, "correct": False, "exec_status": None})
    return solution.model_copy(update={"checked": True, "correct": verdict.correct,
                                       "exec_status": verdict.status.value})


def check_solution(executor: CodeExecutor, task_type: TaskType, task: SolveTask, solution: Solution) -> Solution:
    """Check one solution in the sandbox (parse failures are not run)."""
    if solution.answer is None:
        return with_verdict(solution, None)
    return with_verdict(solution, check_answer(executor, task_type, task, solution.answer))


def is_sandbox_fault(verdict: CheckResult) -> bool:
    """An infrastructure fault, never the answer's fault (it is retried by the executor, reported if it persists)."""
    return verdict.status is ExecStatus.SANDBOX_ERROR

