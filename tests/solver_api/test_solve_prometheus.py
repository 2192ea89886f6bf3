"""`POST /v1/solve` with `check: true` counts every checked answer by task type and outcome in the solver's own
`/metrics`; the outcome of an answer is the real executor's verdict on it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_scrape import labelled, parse_exposition, scrape
from throwaway_servers import LoopbackServer

from executor_svc.executor import Executor
from services.algorithm.task_types import TaskType
from services.records import IOSolveTask, Solution
from services.rollouts.solving import check_solution
from services.settings import Settings
from solver_api.app import create_solver_app
from solver_api.prometheus_metrics import SolverMetrics

TASK = IOSolveTask(program="def f(x):\n    return x * 2", input="3", output="6")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Executor]:
    with Executor(workers=1) as executor:
        yield executor


def answer(text: str | None) -> Solution:
    """A deduction solution whose parsed answer is `text` (None: the response did not parse)."""
    return Solution(task_type=TaskType.DEDUCTION, prompt_ids=[1], response_ids=[2], behaviour_logprobs=[-0.1],
                    text=text or "no template", answer=text, parse_failure=None if text else "no_think",
                    weight_version="0")


def test_checked_answers_are_counted_by_the_executors_verdict(sandbox: Executor) -> None:
    registry = CollectorRegistry()
    metrics = SolverMetrics(registry)
    checked = [check_solution(sandbox, TaskType.DEDUCTION, TASK, answer(text))
               for text in ("6", "6", "7", "6 +", None)]
    assert [s.correct for s in checked] == [True, True, False, False, False]
    metrics.observe_checked([checked[:2], checked[2:]])
    samples = parse_exposition(generate_latest(registry).decode())
    assert labelled(samples, "azr_solver_checked_answers_total") == {
        (("outcome", "correct"), ("task_type", "deduction")): 2,
        (("outcome", "wrong_answer"), ("task_type", "deduction")): 1,
        (("outcome", checked[3].exec_status), ("task_type", "deduction")): 1,
        (("outcome", "parse_failure"), ("task_type", "deduction")): 1,
    }
    assert checked[3].exec_status == "syntax_error"  # no literal to read (nothing runs: answers are read)


@pytest.mark.slow
def test_solve_route_counts_checked_answers_only(sandbox: Executor) -> None:
    """The tiny (random) model answers n = 3 per task; only the `check: true` request is counted, as the
    response reports each answer."""
    from services.inference.local_engine import LocalEngine
    from services.inference.tiny_model import tiny_model_dir

    engine = LocalEngine(tiny_model_dir(), device="cpu")
    settings = Settings(api_token="solver-test-token")
    headers = {"Authorization": "Bearer solver-test-token"}
    body = {"task_type": "deduction", "tasks": [TASK.model_dump(mode="json")], "n": 3,
            "sampling": {"max_new_tokens": 8, "temperature": 1.0, "seed": 2}}
    with LoopbackServer(create_solver_app(settings.api, settings.rollout, sandbox, engine=engine)) as url:
        unchecked = httpx.post(f"{url}/v1/solve", headers=headers, json=body, timeout=120)
        assert unchecked.status_code == 200, unchecked.text
        checked = httpx.post(f"{url}/v1/solve", headers=headers, json={**body, "check": True}, timeout=120)
        assert checked.status_code == 200, checked.text
        samples = scrape(f"{url}/metrics")
    (solutions,) = checked.json()["solutions"]
    expected = Counter("parse_failure" if not s["format_ok"] or s["answer"] is None else "correct" if s["correct"]
                       else s["exec_status"] for s in solutions)
    checked = labelled(samples, "azr_solver_checked_answers_total")
    counted = {dict(labels)["outcome"]: v for labels, v in checked.items()}
    assert counted == dict(expected) and sum(counted.values()) == 3
