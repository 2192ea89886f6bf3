"""The step's rules about real model text, against the real executor, store and queue (only the model is scripted):

- a valid task whose response fails the format check joins its buffer and earns −1 (§3.3.2), with no learnability
  samples spent on it;
- learnability (Eq 4) counts correct answers whatever their format; identical answers to one task are checked once;
- an executor that fails twice for infrastructure reasons drops that episode / sample, counted, never scored;
- prompts over `max_prompt_tokens` are never sent: references are drawn again, over-long solve tasks are replaced.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from scripted_engine import ScriptedEngine, block, fenced, propose_induction, r1, solve_induction

from executor_svc.executor import Executor
from services.algorithm.prompts import ReferenceTriplet
from services.algorithm.task_types import Role, TaskType
from services.coordinator.step import SelfPlayStep, StepConfig
from services.execution import CheckResult, ExecStatus, ValidationResult
from services.ports import ProposeContext
from services.queues import InProcessEpisodeQueue
from services.records import Triplet, TripletSource
from services.rollouts.engine_rollouts import EngineRollouts
from services.rollouts.proposing import proposer_instruction
from services.store import open_store

B, N = 2, 8


def unformatted(answer: str) -> str:
    """A response that never closes </think> (a format error) but still holds an answer block."""
    return f"Thinking and thinking...\n<answer>\n{answer}\n</answer>"


def malformed_proposal(_: str, seen: int) -> str:
    """A valid doubling task, but with text between </think> and <answer> (format error)."""
    task = fenced("python", "def f(x):\n    return x * 2") + "\n" + fenced("input", str(seen + 1))
    return f"plan</think>\nHere is my task:\n<answer>\n{task}\n</answer>"


def proposal_with_input(number: int) -> str:
    return r1(fenced("python", "def f(x):\n    return x * 2") + "\n" + fenced("input", str(number)))


def echo_abduction(instruction: str, _: int) -> str:
    return r1(fenced("input", block(instruction, "output")))


def right_deduction(instruction: str, _: int) -> str:
    """Any program the tests use doubles its input or returns it; answer right for the doubling ones."""
    program, given = block(instruction, "python"), block(instruction, "input")
    return r1(fenced("output", str(2 * int(given)) if "x * 2" in program else given))


BASE = {"propose/deduction": lambda _i, seen: proposal_with_input(seen + 1),
        "propose/abduction": lambda _i, seen: r1(fenced("python", "def f(a):\n    return a") + fenced("input", "7")),
        "propose/induction": propose_induction, "solve/deduction": right_deduction,
        "solve/abduction": echo_abduction, "solve/induction": solve_induction}


class CountingExecutor:
    """The real executor, counting calls; `faults` answers/programs get `sandbox_error` (or raise) every time."""

    def __init__(self, real: Executor, *, fault_answers: Sequence[str] = (), raise_programs: Sequence[str] = ()):
        self.real, self.fault_answers, self.raise_programs = real, set(fault_answers), set(raise_programs)
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def _note(self, kind: str, what: str) -> None:
        with self._lock:
            self.calls.append((kind, what))

    def validate_proposal(self, program: str, input: str) -> ValidationResult:
        self._note("validate", input)
        if program in self.raise_programs:
            raise RuntimeError("executor job failed after its retries")
        return self.real.validate_proposal(program, input)

    def validate_induction(self, program: str, inputs: Sequence[str]) -> Any:
        return self.real.validate_induction(program, inputs)

    def check_deduction(self, gold_output: str, agent_output: str) -> CheckResult:
        self._note("deduction", agent_output)
        if agent_output in self.fault_answers:
            return CheckResult(status=ExecStatus.SANDBOX_ERROR, correct=False, error="worker failed to start")
        return self.real.check_deduction(gold_output, agent_output)

    def check_abduction(self, program: str, gold_output: str, agent_input: str) -> CheckResult:
        return self.real.check_abduction(program, gold_output, agent_input)

    def check_induction(self, agent_program: str, inputs: Sequence[str], outputs: Sequence[str],
                        gold_imports: Sequence[str] = ()) -> CheckResult:
        return self.real.check_induction(agent_program, inputs, outputs, gold_imports)


@pytest.fixture(scope="module")
def real_executor() -> Iterator[Executor]:
    with Executor(workers=1) as running:
        yield running


def run_step(tmp_path: Path, scripts: dict[str, Any], executor: Any, *, max_prompt_tokens: int = 0,
             references_k: int = 6, extra: Sequence[Triplet] = ()) -> tuple[Any, Any, ScriptedEngine]:
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    store.initialise()
    for triplet in extra:
        store.insert_triplet(triplet)
    engine = ScriptedEngine(scripts, version=1)
    config = StepConfig(batch_size=B, references_k=references_k, learnability_samples=N, induction_inputs=10,
                        max_response_tokens=64, temperature=1.0, top_p=1.0, max_prompt_tokens=max_prompt_tokens)
    runner = SelfPlayStep(run_id="r", store=store, executor=executor, rollouts=EngineRollouts(engine),
                          episodes=InProcessEpisodeQueue(), config=config, executor_parallelism=4)
    try:
        result = runner.run(1, 1, random.Random(0))
    finally:
        runner.close()
    return result, store, engine


def group(result: Any, task_type: TaskType, role: Role) -> list[Any]:
    return [e for e in result.episodes if e.task_type is task_type and e.role is role]


def test_a_valid_task_with_a_format_error_is_stored_and_earns_minus_one(tmp_path: Path,
                                                                         real_executor: Executor) -> None:
    result, store, engine = run_step(tmp_path, dict(BASE, **{"propose/deduction": malformed_proposal}),
                                     real_executor)
    proposals = group(result, TaskType.DEDUCTION, Role.PROPOSE)
    assert [e.reward for e in proposals] == [-1.0, -1.0]
    assert all(e.format_ok is False and e.exec_status == "ok" and e.task_id for e in proposals)
    stored = [store.get(TaskType.DEDUCTION, e.task_id) for e in proposals]
    assert all(entry is not None and entry.source is TripletSource.PROPOSED for entry in stored)
    assert len(result.new_ids[TaskType.DEDUCTION]) == 2
    assert result.metrics["valid_rate/deduction"] == 1.0
    assert result.metrics["format_failures/deduction/propose/malformed_tags"] == 2
    assert ("solve/deduction", N) not in engine.calls  # no learnability samples for a −1 proposal
    assert result.metrics["learnability/deduction"] is None
    store.close()


def after_fill(script: Any) -> Any:
    """A deduction solver script counted from the learnability samples on: the step answers its solve batch's fill
    (drawn before proposing) in the proposers' generation, first; this step's two valid tasks then displace it,
    so those B answers are never used or checked."""
    def answer(instruction: str, seen: int) -> str:
        return r1(fenced("output", "0")) if seen < B else script(instruction, seen - B)
    return answer


def test_learnability_counts_right_answers_whatever_their_format(tmp_path: Path, real_executor: Executor) -> None:
    @after_fill
    def learn_then_solve(instruction: str, seen: int) -> str:
        if seen >= B * N:  # the solve batch: always right and well formed
            return right_deduction(instruction, seen)
        given = int(block(instruction, "input"))
        # per proposal: 4 right answers with a format error (no </think>), 4 well-formed wrong ones
        return unformatted(fenced("output", str(2 * given))) if seen % 2 == 0 else r1(fenced("output", "-1"))

    counting = CountingExecutor(real_executor)
    result, store, _ = run_step(tmp_path, dict(BASE, **{"solve/deduction": learn_then_solve}), counting)
    assert [e.reward for e in group(result, TaskType.DEDUCTION, Role.PROPOSE)] == [0.5, 0.5]  # 1 − r̄, r̄ = 4/8
    assert result.metrics["learnability/deduction"] == 0.5
    # 2 proposals x 8 samples, 2 distinct answers each -> 4 learnability checks, then B solve-batch checks
    assert len([c for c in counting.calls if c[0] == "deduction"]) == 2 * 2 + B
    store.close()


def test_executor_faults_are_retried_once_then_dropped_and_counted(tmp_path: Path, real_executor: Executor) -> None:
    @after_fill
    def faulty_answers(instruction: str, seen: int) -> str:
        if seen < N:  # learnability of the first proposal: one sample hits a broken sandbox
            return r1(fenced("output", "13" if seen == 0 else "-1"))
        if seen < 2 * N:
            return r1(fenced("output", "-1"))
        return r1(fenced("output", "13" if seen == 2 * N else "-1"))  # the first solve answer: broken sandbox too

    counting = CountingExecutor(real_executor, fault_answers=["13"], raise_programs=["def f(a):\n    return a"])
    result, store, _ = run_step(tmp_path, dict(BASE, **{"solve/deduction": faulty_answers}), counting)
    assert [c for c in counting.calls if c == ("deduction", "13")] == [("deduction", "13")] * 4  # 2 x (try + retry)
    assert result.metrics["dropped/deduction/learnability"] == 1
    assert result.metrics["dropped/deduction/solve"] == 1
    assert len(group(result, TaskType.DEDUCTION, Role.SOLVE)) == B - 1
    assert all(e.exec_status != "sandbox_error" for e in result.episodes)
    # r̄ of the first proposal is 0/7 over the samples that were judged (the dropped one does not count as wrong)
    assert [e.reward for e in group(result, TaskType.DEDUCTION, Role.PROPOSE)] == [0.0, 0.0]
    # abduction proposals whose validation raised twice: dropped, not stored, no episode
    assert result.metrics["dropped/abduction/propose"] == B
    assert group(result, TaskType.ABDUCTION, Role.PROPOSE) == []
    assert len([c for c in counting.calls if c[0] == "validate" and c[1] == "7"]) == 2 * B
    store.close()


def test_proposer_prompts_over_the_limit_are_drawn_again(tmp_path: Path, real_executor: Executor) -> None:
    huge = Triplet(buffer=TaskType.DEDUCTION, program="def f(x):\n    return x\n" + "# padding\n" * 800,
                   input="1", output="1", source=TripletSource.SEED)
    zero = ProposeContext([ReferenceTriplet("def f(a):\n    return a", '"Hello World"', '"Hello World"')])
    limit = len(ScriptedEngine(BASE).prompt_ids(proposer_instruction(TaskType.DEDUCTION, zero, 10))) + 200
    result, store, engine = run_step(tmp_path, BASE, real_executor, max_prompt_tokens=limit, references_k=1,
                                     extra=[huge, huge.model_copy(update={"buffer": TaskType.ABDUCTION})])
    assert engine.prompts_seen, "the engine saw no prompt"
    assert max(len(prompt) for prompt in engine.prompts_seen) <= limit
    assert result.metrics["prompt_over_limit/deduction"] == 0
    # the huge triplet is never a solve task either: the batch holds copies of tasks that fit
    solved = group(result, TaskType.DEDUCTION, Role.SOLVE)
    assert len(solved) == B and all(store.get(TaskType.DEDUCTION, e.task_id).program != huge.program
                                    for e in solved)
    store.close()
