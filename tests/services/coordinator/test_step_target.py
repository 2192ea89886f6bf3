"""`azr coordinator --steps N` is a total: a restarted coordinator reads the run's last recorded step and runs up to
step N, never N more (a crash at step k under compose's `restart: on-failure` must not carry the run to k + N).

Real loop, real executor, real SQLite store, in-process queue and policy-version board; only the model is scripted.
Each "coordinator" below is a fresh loop over the same store and run, as a restarted process would build it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_engine import COUNTING_SCRIPTS as SCRIPTS
from scripted_engine import ScriptedEngine
from typer.testing import CliRunner

from azr.cli.main import app
from executor_svc.executor import Executor
from services.algorithm.task_types import TaskType
from services.coordinator.loop import LoopOptions, SelfPlayLoop
from services.coordinator.step import SelfPlayStep, StepConfig
from services.coordinator.step_metrics import MetricsLog
from services.queues import InProcessEpisodeQueue, InProcessPolicyVersionBoard
from services.rollouts.engine_rollouts import EngineRollouts
from services.store import open_store

B = 2


@pytest.fixture()
def coordinators(tmp_path: Path) -> Iterator[object]:
    """Builds loops over one store: as `azr coordinator` does (`until_step` = --steps), or with `total=False` as
    `azr run --resume` does (--steps more)."""
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    store.ensure_run("restarted", {})
    executor = Executor(workers=1)
    runners: list[SelfPlayStep] = []
    config = StepConfig(batch_size=B, references_k=2, learnability_samples=2, induction_inputs=4,
                        max_response_tokens=64, temperature=1.0, top_p=1.0)

    def coordinator(steps: int, total: bool = True, continues_after_step: int = 0) -> SelfPlayLoop:
        runner = SelfPlayStep(run_id="restarted", store=store, executor=executor, episodes=InProcessEpisodeQueue(),
                              rollouts=EngineRollouts(ScriptedEngine(SCRIPTS)), config=config, executor_parallelism=2)
        runners.append(runner)
        options = LoopOptions(steps=steps, seed=0, seed_target=B, seed_max_rounds=3, max_staleness=100,
                              until_step=steps if total else None, continues_after_step=continues_after_step)
        return SelfPlayLoop(run_id="restarted", step_runner=runner, store=store, options=options,
                            metrics=MetricsLog(tmp_path / "metrics.jsonl"), versions=InProcessPolicyVersionBoard())

    try:
        yield coordinator
    finally:
        for runner in runners:
            runner.close()
        executor.close()
        store.close()


@pytest.mark.slow
def test_a_restarted_coordinator_runs_up_to_its_target_not_that_many_more(coordinators) -> None:
    first = coordinators(2)  # the first coordinator ran two steps, then (say) crashed
    assert [line["step"] for line in first.run()] == [1, 2]
    restarted = coordinators(5)  # restarted with --steps 5: three more, not five
    assert restarted.last_step() == 2
    assert [line["step"] for line in restarted.run()] == [3, 4, 5]
    again = coordinators(5)  # restarted once more after it finished: the target is reached, nothing runs
    assert again.run() == [] and again.last_step() == 5


@pytest.mark.slow
def test_without_a_target_the_loop_runs_that_many_more(coordinators) -> None:
    """`azr run --resume --steps N` keeps its meaning: N steps after the recorded ones."""
    assert [line["step"] for line in coordinators(2).run()] == [1, 2]
    assert [line["step"] for line in coordinators(2, total=False).run()] == [3, 4]


@pytest.mark.slow
def test_a_run_from_a_snapshot_numbers_its_steps_after_the_snapshots_and_seeds_its_buffers(coordinators) -> None:
    """A new run started from another run's snapshot taken at step 5 (its buffers restart from the seed files):
    seeded like a new run, its first step is 6; restarted, it resumes after its own recorded steps."""
    continued = coordinators(2, total=False, continues_after_step=5)
    assert [line["step"] for line in continued.run()] == [6, 7]
    assert all(continued.store.count(task_type) >= B for task_type in TaskType)  # seeded like a new run
    resumed = coordinators(1, total=False, continues_after_step=5)
    assert resumed.last_step() == 7 and [line["step"] for line in resumed.run()] == [8]


def test_the_help_says_the_coordinator_steps_are_a_total_and_run_steps_are_more() -> None:
    runner = CliRunner()
    coordinator_help, run_help = (" ".join(runner.invoke(app, [command, "--help"], terminal_width=100)
                                           .output.replace("│", " ").split()) for command in ("coordinator", "run"))
    assert "Run up to this step, a total" in coordinator_help and "not N more" in coordinator_help
    assert "this many more after the recorded ones" in run_help
