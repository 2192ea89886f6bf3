"""A step whose rollouts come from weights older than the step may use (an inference server restarted on the base
weights, not yet given the current ones) publishes nothing and runs again once the server is current: the trainer
never receives episodes it would drop as stale, so it never waits for a batch that cannot fill."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from scripted_engine import COUNTING_SCRIPTS as SCRIPTS
from scripted_engine import ScriptedEngine

from executor_svc.executor import Executor
from services.coordinator.loop import LoopOptions, SelfPlayLoop
from services.coordinator.step import SelfPlayStep, StepConfig
from services.coordinator.step_metrics import MetricsLog
from services.queues import InProcessEpisodeQueue, InProcessPolicyVersionBoard
from services.rollouts.engine_rollouts import EngineRollouts
from services.store import open_store

B = 1


@pytest.mark.slow
def test_a_step_sampled_by_stale_weights_publishes_nothing_and_runs_again(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    store.ensure_run("stale", {})
    engine = ScriptedEngine(SCRIPTS, version=0)
    queue, board = InProcessEpisodeQueue(), InProcessPolicyVersionBoard()
    said: list[str] = []
    config = StepConfig(batch_size=B, references_k=2, learnability_samples=2, induction_inputs=4,
                        max_response_tokens=64, temperature=1.0, top_p=1.0)
    with Executor(workers=1) as executor:
        runner = SelfPlayStep(run_id="stale", store=store, executor=executor, episodes=queue,
                              rollouts=EngineRollouts(engine), config=config, executor_parallelism=2,
                              progress=said.append)

        def loop(until: int) -> SelfPlayLoop:
            options = LoopOptions(steps=until, seed=0, seed_target=B, seed_max_rounds=3, max_staleness=0,
                                  until_step=until, stale_retry_s=0.2)
            return SelfPlayLoop(run_id="stale", step_runner=runner, store=store, options=options, versions=board,
                                metrics=MetricsLog(tmp_path / "metrics.jsonl"), progress=said.append)

        try:
            assert [line["step"] for line in loop(1).run()] == [1]  # step 1 may use the base weights (v0)
            step_1 = {d.episode.id for d in queue.read("trainer", 1000, 0.0)}
            board.publish(1)  # the trainer trained on step 1; the server restarted and still serves v0
            threading.Timer(1.0, lambda: setattr(engine, "version", "1")).start()  # the trainer's re-push
            assert [line["step"] for line in loop(2).run()] == [2]
        finally:
            runner.close()
            store.close()
    published = [d.episode for d in queue.read("trainer", 1000, 0.0)]
    assert step_1 and published
    assert {e.id.split("/")[1] for e in published} == {"2"}
    assert {e.policy_version for e in published} == {1}  # nothing from the stale attempt reached the trainer
    assert len(published) == len({e.id for e in published})  # each episode once
    assert any("older than 1" in line and "running step 2 again" in line for line in said), said
