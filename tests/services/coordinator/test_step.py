"""One self-play step against the real executor, a real SQLite store and the in-process episode queue.

Only the model is scripted (scripted_engine.py), so the test knows which proposals are valid and which answers
are right, and can check every reward of Eq 4-6 and every episode the step publishes.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from scripted_engine import STEP_SCRIPTS as SCRIPTS
from scripted_engine import ScriptedEngine

from executor_svc.executor import Executor
from services.algorithm.task_types import Role, TaskType
from services.coordinator.step import SelfPlayStep, StepConfig
from services.queues import InProcessEpisodeQueue
from services.records import TripletSource
from services.rollouts.engine_rollouts import EngineRollouts
from services.rollouts.solving import check_answer, read_answer, solve_task_from_entry
from services.store import open_store

B = 2
LEARN_N = 8


@pytest.fixture()
def setup(tmp_path: Path, executor: Executor):
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    store.initialise()
    queue = InProcessEpisodeQueue()
    engine = ScriptedEngine(SCRIPTS, version=3)
    config = StepConfig(batch_size=B, references_k=6, learnability_samples=LEARN_N, induction_inputs=10,
                        max_response_tokens=64, temperature=1.0, top_p=1.0)
    runner = SelfPlayStep(run_id="t", store=store, executor=executor, rollouts=EngineRollouts(engine),
                          episodes=queue, config=config, executor_parallelism=4)
    yield runner, store, queue, engine
    runner.close()
    store.close()


def test_step_rewards_episodes_and_buffers(setup, executor: Executor) -> None:
    runner, store, queue, engine = setup
    result = runner.run(1, 3, random.Random(0))
    episodes = result.episodes
    by_group = {(t, r): [e for e in episodes if e.task_type is t and e.role is r] for t in TaskType for r in Role}
    assert all(len(members) == B for members in by_group.values()), {k: len(v) for k, v in by_group.items()}
    assert len({e.id for e in episodes}) == 6 * B
    assert all(e.step == 1 and e.policy_version == 3 and e.run_id == "t" for e in episodes)

    # Proposers (Eq 6 ∘ Eq 4): valid with r̄ = 4/8 -> 0.5; forbidden import / broken template -> −1.
    assert [e.reward for e in by_group[(TaskType.DEDUCTION, Role.PROPOSE)]] == [0.5, -1.0]
    assert by_group[(TaskType.DEDUCTION, Role.PROPOSE)][1].exec_status == "forbidden"
    assert [e.reward for e in by_group[(TaskType.ABDUCTION, Role.PROPOSE)]] == [0.5, -1.0]
    assert by_group[(TaskType.ABDUCTION, Role.PROPOSE)][1].exec_status == "missing_code_block"
    assert by_group[(TaskType.ABDUCTION, Role.PROPOSE)][1].format_ok is False
    for episode in by_group[(TaskType.INDUCTION, Role.PROPOSE)]:
        # the solver always writes x * 2: r̄ ∈ {0, 1} on a valid task -> 0; an invalid proposal -> −1
        assert episode.reward == (0.0 if episode.exec_status == "ok" else -1.0)

    # Learnability samples: n = 8 rows of each valid proposal's solver prompt, in the generation that also answers
    # the solve batch (one decoding batch).
    for kind in ("solve/deduction", "solve/abduction"):
        rows = [tuple(p) for (k, _), p in zip(engine.calls, engine.prompts_seen) if k == kind]
        assert max(rows.count(row) for row in rows) >= LEARN_N

    # Valid proposals joined their buffers, with source, step and policy version.
    assert result.new_ids[TaskType.DEDUCTION] and result.new_ids[TaskType.ABDUCTION]
    new = store.get(TaskType.DEDUCTION, result.new_ids[TaskType.DEDUCTION][0])
    assert new is not None and new.source is TripletSource.PROPOSED and new.step == 1 and new.policy_version == 3
    assert new.output == "2"  # f(1) = 1 * 2, computed by the executor

    # Solver rewards (Eq 6 ∘ Eq 5) agree with the executor re-run on each episode's answer.
    for task_type in TaskType:
        for episode in by_group[(task_type, Role.SOLVE)]:
            entry = store.get(task_type, episode.task_id or "")
            assert entry is not None
            answer, format_ok, _ = read_answer(task_type, episode.text or "")
            if answer is None or not format_ok:
                assert episode.reward == -1.0
                continue
            verdict = check_answer(executor, task_type, solve_task_from_entry(entry), answer)
            assert episode.reward == (1.0 if verdict.correct else -0.5), (episode.text, verdict)

    # The solve batch puts this step's new tasks first (§3.3.2).
    first_solved = by_group[(TaskType.DEDUCTION, Role.SOLVE)][0]
    assert first_solved.task_id == result.new_ids[TaskType.DEDUCTION][0]

    # Every episode reached the queue; metrics line carries the documented keys.
    delivered = queue.read("trainer-test", 100, 0.1)
    assert sorted(d.episode.id for d in delivered) == sorted(e.id for e in episodes)
    for key in ("valid_rate/deduction", "reward/deduction/propose", "solve_rate/abduction", "buffer/induction",
                "task/cognitive_complexity", "task/deduction/ast_edit_distance", "task/abduction/answer_diversity",
                "time/generation", "time/executor", "time/total"):
        assert key in result.metrics, key
    assert result.metrics["valid_rate/deduction"] == 0.5
    assert result.metrics["valid_proposals"] == sum(len(ids) for ids in result.new_ids.values()) > 0


class GenerateCalls(ScriptedEngine):
    """The scripted engine, recording which kinds of prompt each generate() call carried."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[set[str]] = []

    def generate(self, prompts, sampling):
        before = len(self.calls)
        out = super().generate(prompts, sampling)
        self.batches.append({kind for kind, _ in self.calls[before:]})
        return out


def never_valid(_: str, __: int) -> str:
    return "I forgot the template entirely."


def test_without_valid_proposals_a_step_is_one_generation_of_both_roles(tmp_path: Path, executor: Executor) -> None:
    """The solve batches' fill is drawn before proposing and answered with the proposers: a step none of whose
    proposals is valid (no learnability samples, no task of its own to solve) generates once."""
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    store.initialise()
    scripts = dict(SCRIPTS, **{f"propose/{t.value}": never_valid for t in TaskType})
    engine = GenerateCalls(scripts, version=3)
    config = StepConfig(batch_size=B, references_k=6, learnability_samples=LEARN_N, induction_inputs=10,
                        max_response_tokens=64, temperature=1.0, top_p=1.0)
    runner = SelfPlayStep(run_id="t", store=store, executor=executor, rollouts=EngineRollouts(engine),
                          episodes=InProcessEpisodeQueue(), config=config, executor_parallelism=4)
    try:
        result = runner.run(1, 3, random.Random(0))
    finally:
        runner.close()
        store.close()
    assert len(engine.batches) == 1  # a fresh store holds the zero triplet: D_ind is empty, nothing to solve there
    assert engine.batches[0] == {f"propose/{t.value}" for t in TaskType} | {"solve/deduction", "solve/abduction"}
    solved = [e for e in result.episodes if e.role is Role.SOLVE]
    assert len(solved) == 2 * B and all(e.task_id for e in solved)
    assert all(e.reward == -1.0 for e in result.episodes if e.role is Role.PROPOSE)


def test_this_steps_tasks_displace_the_fill_and_get_their_own_answers(setup) -> None:
    """Valid proposals go first in their solve batch (§3.3.2); the fill answers they displace are not used, and
    their own answers come from a later generation."""
    runner, store, queue, engine = setup
    result = runner.run(1, 3, random.Random(0))
    new = set(result.new_ids[TaskType.DEDUCTION])
    solved = [e for e in result.episodes if e.task_type is TaskType.DEDUCTION and e.role is Role.SOLVE]
    assert new and {e.task_id for e in solved[:len(new)]} == new
