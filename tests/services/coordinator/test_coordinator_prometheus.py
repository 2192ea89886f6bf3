"""The coordinator's Prometheus endpoint after a real self-play step (seeding, then one step of Algorithm 1) against
the real executor, a real SQLite store and the in-process episode queue; only the model is scripted, so the test
knows which proposals are valid. The scrape must agree with the step's metrics line and with the queue itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_scrape import labelled, scrape, value
from scripted_engine import ScriptedEngine, block, fenced, propose_deduction, propose_induction, r1, solve_induction
from throwaway_servers import free_port

from executor_svc.executor import Executor
from executor_svc.prometheus_metrics import ExecutorMetrics
from services.algorithm.task_types import Role, TaskType
from services.coordinator.loop import LoopOptions, SelfPlayLoop
from services.coordinator.prometheus_metrics import CoordinatorMetrics
from services.coordinator.step import SelfPlayStep, StepConfig
from services.coordinator.step_metrics import MetricsLog
from services.http.metrics_endpoint import MetricsEndpoint, serve_metrics
from services.queues import InProcessEpisodeQueue, InProcessPolicyVersionBoard
from services.rollouts.engine_rollouts import EngineRollouts
from services.store import open_store

B = 2


def propose_abduction(_: str, seen: int) -> str:
    """Even calls: a valid task; odd calls: no R1 template at all (a parse failure, never run)."""
    if seen % 2 == 0:
        return r1(fenced("python", "def f(x):\n    return x + 3") + "\n" + fenced("input", str(seen + 7)))
    return "I forgot the template entirely."


def solve_deduction(instruction: str, seen: int) -> str:
    """Right on even calls, wrong on odd ones (the buffers also hold the zero triplet, the identity)."""
    program, given = block(instruction, "python"), block(instruction, "input")
    right = str(2 * int(given)) if "x * 2" in program else str(int(given) + 3) if "x + 3" in program else given
    return r1(fenced("output", right if seen % 2 == 0 else "-1"))


def solve_abduction(instruction: str, seen: int) -> str:
    program, output = block(instruction, "python"), block(instruction, "output")
    right = str(int(output) // 2) if "x * 2" in program else str(int(output) - 3) if "x + 3" in program else output
    return r1(fenced("input", right))


SCRIPTS = {"propose/deduction": propose_deduction, "propose/abduction": propose_abduction,
           "propose/induction": propose_induction, "solve/deduction": solve_deduction,
           "solve/abduction": solve_abduction, "solve/induction": solve_induction}


@pytest.fixture()
def coordinator(tmp_path: Path) -> Iterator[tuple[SelfPlayLoop, InProcessEpisodeQueue, MetricsEndpoint]]:
    """A distributed-style loop (policy versions from a board) whose metrics are served on a free port; the
    in-process executor records into the coordinator's registry, as `azr coordinator` wires it without RQ."""
    prometheus = CoordinatorMetrics()
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    store.ensure_run("t", {})
    queue = InProcessEpisodeQueue()
    prometheus.watch_episode_queue(queue)
    executor = Executor(workers=1, metrics=ExecutorMetrics(prometheus.registry))
    config = StepConfig(batch_size=B, references_k=2, learnability_samples=2, induction_inputs=10,
                        max_response_tokens=64, temperature=1.0, top_p=1.0)
    runner = SelfPlayStep(run_id="t", store=store, executor=executor, rollouts=EngineRollouts(ScriptedEngine(SCRIPTS)),
                          episodes=queue, config=config, executor_parallelism=4)
    options = LoopOptions(steps=1, seed=0, seed_target=B, seed_max_rounds=3, max_staleness=1)
    loop = SelfPlayLoop(run_id="t", step_runner=runner, store=store, metrics=MetricsLog(tmp_path / "metrics.jsonl"),
                        options=options, versions=InProcessPolicyVersionBoard(), on_step=prometheus.observe_step)
    endpoint = serve_metrics(prometheus.registry, free_port(), "127.0.0.1")
    assert endpoint is not None
    try:
        yield loop, queue, endpoint
    finally:
        endpoint.close()
        runner.close()
        executor.close()
        store.close()


def test_scrape_after_a_step_matches_its_metrics_line(coordinator) -> None:
    loop, queue, endpoint = coordinator
    url = f"http://127.0.0.1:{endpoint.port}/metrics"
    assert value(scrape(url), "azr_coordinator_steps_total") == 0
    (line,) = loop.run(policy_version=0)
    samples = scrape(url)

    assert value(samples, "azr_coordinator_steps_total") == 1
    assert value(samples, "azr_coordinator_step") == line["step"] == 1
    assert value(samples, "azr_coordinator_policy_version") == line["policy_version_after"]
    for task_type in TaskType:
        t = task_type.value
        assert value(samples, "azr_coordinator_valid_rate_ratio", task_type=t) == line[f"valid_rate/{t}"]
        assert value(samples, "azr_coordinator_solve_rate_ratio", task_type=t) == line[f"solve_rate/{t}"]
        assert value(samples, "azr_coordinator_buffer_entries", task_type=t) == line[f"buffer/{t}"]
        for role in Role:
            assert value(samples, "azr_coordinator_reward_mean", task_type=t, role=role.value) == \
                line[f"reward/{t}/{role.value}"]
            assert value(samples, "azr_coordinator_episodes_total", task_type=t, role=role.value) == B
    for phase in ("generation", "executor", "store_queue", "other", "total"):
        assert value(samples, "azr_coordinator_last_step_phase_seconds", phase=phase) == line[f"time/{phase}"]
        assert value(samples, "azr_coordinator_step_phase_seconds_count", phase=phase) == 1
        assert value(samples, "azr_coordinator_step_phase_seconds_sum", phase=phase) == line[f"time/{phase}"]

    # What the scripts make of each batch of B = 2 proposals, counted independently of the line.
    assert labelled(samples, "azr_coordinator_proposals_total") == {
        (("outcome", "valid"), ("status", "ok"), ("task_type", "deduction")): 1,
        (("outcome", "invalid"), ("status", "forbidden"), ("task_type", "deduction")): 1,
        (("outcome", "valid"), ("status", "ok"), ("task_type", "abduction")): 1,
        (("outcome", "parse_failure"), ("status", "missing_code_block"), ("task_type", "abduction")): 1,
        (("outcome", "valid"), ("status", "ok"), ("task_type", "induction")): 2,
    }
    assert (line["valid_rate/deduction"], line["valid_rate/abduction"], line["valid_rate/induction"]) == \
        (0.5, 0.5, 1.0)

    # Queue depths are read at scrape time: 6·B episodes published, none read yet; then a trainer reads five.
    assert value(samples, "azr_episode_queue_depth_episodes") == 6 * B
    assert value(samples, "azr_episode_queue_unacked_episodes") == 0
    assert len(queue.read("trainer", 5, 0.0)) == 5
    after_read = scrape(url)
    assert value(after_read, "azr_episode_queue_depth_episodes") == 6 * B - 5
    assert value(after_read, "azr_episode_queue_unacked_episodes") == 5

    # The in-process executor's tasks (seeding and the step) are on the same endpoint.
    assert value(samples, "azr_executor_tasks_total", kind="validate_proposal", status="forbidden") >= 1
    assert value(samples, "azr_executor_tasks_total", kind="validate_induction", status="ok") >= 2
    assert value(samples, "azr_executor_task_duration_seconds_count", kind="check_deduction") >= 1


def test_a_group_without_data_drops_its_last_step_series() -> None:
    """A later step with an empty solve group must not show the earlier step's reward for it."""
    metrics = CoordinatorMetrics()
    first: dict[str, Any] = {"step": 1, "reward/induction/solve": -0.5, "valid_rate/induction": 1.0,
                             "time/total": 2.0, "policy_version_after": 0}
    second: dict[str, Any] = {"step": 2, "reward/induction/propose": 0.25, "valid_rate/induction": None,
                              "time/total": 3.0, "policy_version_after": 1}
    metrics.observe_step(first)
    metrics.observe_step(second)
    from prometheus_client import generate_latest
    from prometheus_scrape import parse_exposition

    samples = parse_exposition(generate_latest(metrics.registry).decode())
    assert labelled(samples, "azr_coordinator_reward_mean") == {(("role", "propose"), ("task_type", "induction")): 0.25}
    assert labelled(samples, "azr_coordinator_valid_rate_ratio") == {}
    assert value(samples, "azr_coordinator_step_phase_seconds_sum", phase="total") == 5.0
    assert value(samples, "azr_coordinator_policy_version") == 1


def test_dropped_episodes_and_format_failures_are_counted() -> None:
    """`dropped/<type>/<role>` and `format_failures/<type>/<role>/<reason>` of each line add up in counters."""
    metrics = CoordinatorMetrics()
    for step in (1, 2):
        metrics.observe_step({"step": step, "dropped/deduction/solve": 1, "dropped/abduction/learnability": step,
                              "format_failures/induction/propose/no_think": 2, "policy_version_after": 0})
    from prometheus_client import generate_latest
    from prometheus_scrape import parse_exposition

    samples = parse_exposition(generate_latest(metrics.registry).decode())
    assert value(samples, "azr_coordinator_dropped_total", task_type="deduction", role="solve") == 2
    assert value(samples, "azr_coordinator_dropped_total", task_type="abduction", role="learnability") == 3
    assert value(samples, "azr_coordinator_format_failures_total", task_type="induction", role="propose",
                 reason="no_think") == 4
