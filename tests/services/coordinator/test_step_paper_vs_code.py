"""A self-play step under the paper's and under the released code's reward switches (docs/paper-vs-code.md):
the unlearnable-proposal reward (Eq 4: 0; the code: −0.5) and induction checks with the gold program's imports before
the solver's program. Real executor, store and queue; the model is scripted, so every reward is known by hand."""

from __future__ import annotations

import random
from pathlib import Path

from scripted_engine import ScriptedEngine, block, fenced, propose_induction, r1

from executor_svc.executor import Executor
from services.algorithm.task_types import Role, TaskType
from services.coordinator.step import SelfPlayStep, StepConfig
from services.queues import InProcessEpisodeQueue
from services.records import Episode, Triplet, TripletSource
from services.rollouts.engine_rollouts import EngineRollouts
from services.store import open_store

B = 2
GOLD = "import math\ndef f(x):\n    return math.floor(x / 3)"
"""The one program in the buffers, so every induction proposal is about it."""


def propose_deduction(_: str, seen: int) -> str:
    return r1(fenced("python", "def f(x):\n    return x * 2") + "\n" + fenced("input", str(seen + 1)))


def propose_abduction(_: str, seen: int) -> str:
    return r1(fenced("python", "def f(a, b):\n    return a + b") + "\n" + fenced("input", f"1, {seen + 10}"))


def solve_deduction(instruction: str, _: int) -> str:
    return r1(fenced("output", str(2 * int(block(instruction, "input")))))  # always right: r̄ = 1


def solve_abduction(instruction: str, _: int) -> str:
    return r1(fenced("input", f"0, {block(instruction, 'output')}"))  # always right: r̄ = 1


def solve_induction(_: str, __: int) -> str:
    return r1(fenced("python", "def f(x):\n    return math.floor(x / 3)"))  # right, but without `import math`


SCRIPTS = {"propose/deduction": propose_deduction, "propose/abduction": propose_abduction,
           "propose/induction": propose_induction, "solve/deduction": solve_deduction,
           "solve/abduction": solve_abduction, "solve/induction": solve_induction}


def run_step(tmp_path: Path, executor: Executor, *, unlearnable: float, gold_imports: bool) -> list[Episode]:
    store = open_store(f"sqlite:///{tmp_path / f'buffers-{gold_imports}.sqlite3'}", create=True)
    # No zero triplet (`initialise`): GOLD, seeded in both buffers, is the only program an induction proposal can draw.
    for buffer in (TaskType.DEDUCTION, TaskType.ABDUCTION):
        store.insert_triplet(Triplet(buffer=buffer, program=GOLD, input="9", output="3", imports=["import math"],
                                     source=TripletSource.SEED))
    config = StepConfig(batch_size=B, references_k=6, learnability_samples=4, induction_inputs=10,
                        max_response_tokens=64, temperature=1.0, top_p=1.0,
                        unlearnable_proposal_reward=unlearnable, induction_gold_imports=gold_imports)
    runner = SelfPlayStep(run_id="t", store=store, executor=executor, rollouts=EngineRollouts(ScriptedEngine(SCRIPTS)),
                          episodes=InProcessEpisodeQueue(), config=config, executor_parallelism=2)
    try:
        return runner.run(1, 0, random.Random(0)).episodes
    finally:
        runner.close()
        store.close()


def rewards(episodes: list[Episode], task_type: TaskType, role: Role) -> list[float]:
    return [e.reward for e in episodes if e.task_type is task_type and e.role is role]


def test_paper_and_released_code_rewards(tmp_path: Path, executor: Executor) -> None:
    paper = run_step(tmp_path, executor, unlearnable=0.0, gold_imports=False)
    code = run_step(tmp_path, executor, unlearnable=-0.5, gold_imports=True)
    # Deduction and abduction tasks are always solved: r̄ = 1, unlearnable -> 0 (Eq 4) / −0.5 (the code).
    for task_type in (TaskType.DEDUCTION, TaskType.ABDUCTION):
        assert rewards(paper, task_type, Role.PROPOSE) == [0.0] * B
        assert rewards(code, task_type, Role.PROPOSE) == [-0.5] * B
    # Induction of the `import math` program: the solver's program lacks the import. Checked as written it always
    # fails (r̄ = 0, a well-formed wrong answer: −0.5); after the gold imports it always passes (r̄ = 1, reward 1).
    # Either way the proposal is unlearnable: 0 / −0.5.
    assert rewards(paper, TaskType.INDUCTION, Role.PROPOSE) == [0.0] * B
    assert rewards(code, TaskType.INDUCTION, Role.PROPOSE) == [-0.5] * B
    assert rewards(paper, TaskType.INDUCTION, Role.SOLVE) == [-0.5] * B
    assert rewards(code, TaskType.INDUCTION, Role.SOLVE) == [1.0] * B
    assert {e.exec_status for e in paper if e.task_type is TaskType.INDUCTION and e.role is Role.SOLVE} == {
        "runtime_error"}
