"""CRUXEval through the solve path and the real executor, with a scripted model that answers some rows right,
some wrong and some unparseably: in-process (EngineRollouts) and over HTTP (HttpRollouts → solver_api), and the
coordinator's periodic evaluation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from scripted_engine import ScriptedEngine, block, fenced, r1
from throwaway_servers import LoopbackServer

from executor_svc.executor import Executor
from services.algorithm.task_types import TaskType
from services.evaluation.cruxeval import CruxRow, Split
from services.evaluation.dataset import load_rows
from services.evaluation.periodic import PeriodicEvaluation
from services.evaluation.runner import run_cruxeval
from services.ports import Completion, SamplingParams, greedy_sampling
from services.records import IOSolveTask
from services.rollouts.engine_rollouts import EngineRollouts
from services.rollouts.http_rollouts import HttpRollouts
from services.rollouts.http_schemas import MAX_TASKS_PER_REQUEST
from services.settings import Settings
from solver_api.app import create_solver_app

ROWS = 12
TOKEN = "eval-test-token"


class RecordingEngine(ScriptedEngine):
    """The scripted engine, remembering the sampling of every generate call (to see greedy arrive over HTTP)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.samplings: list[SamplingParams] = []

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[list[Completion]]:
        self.samplings.append(sampling)
        return super().generate(prompts, sampling)


def outcome(index: int) -> str:
    """Row i's scripted answer: right for i % 3 == 0, wrong for 1, no R1 format for 2."""
    return ("right", "wrong", "unparseable")[index % 3]


def scripted_engine(rows: list[CruxRow]) -> RecordingEngine:
    """Answers each row by its position: the gold output / gold input, a wrong one, or free prose."""
    by_deduction = {(row.code, row.input): index for index, row in enumerate(rows)}
    by_abduction = {(row.code, row.output): index for index, row in enumerate(rows)}

    def deduction(instruction: str, _seen: int) -> str:
        index = by_deduction[(block(instruction, "python"), block(instruction, "input"))]
        kind = outcome(index)
        if kind == "unparseable":
            return "The output is obviously the input."
        return r1(fenced("output", rows[index].output if kind == "right" else "'not the output'"))

    def abduction(instruction: str, _seen: int) -> str:
        index = by_abduction[(block(instruction, "python"), block(instruction, "output"))]
        kind = outcome(index)
        if kind == "unparseable":
            return "I would call it with something."
        return r1(fenced("input", rows[index].input if kind == "right" else ")("))

    return RecordingEngine({"solve/deduction": deduction, "solve/abduction": abduction}, version=7)


@pytest.fixture(scope="module")
def rows(shared_dir: Path) -> list[CruxRow]:
    return load_rows(shared_dir / "data" / "cruxeval.jsonl", ROWS)


def test_accuracy_is_the_fraction_the_executor_accepts(rows: list[CruxRow], executor: Executor) -> None:
    engine = scripted_engine(rows)
    report = run_cruxeval(EngineRollouts(engine), executor, rows, list(Split), max_new_tokens=64, batch_size=5,
                          check_parallelism=4)
    assert [(s.split, s.id) for s in report.samples] == \
        [(split, row.id) for split in Split for row in rows]  # split-major, file order, across chunks of 5
    for split in Split:
        assert report.scores[split].correct == ROWS // 3 and report.scores[split].count == ROWS
        assert report.scores[split].accuracy == pytest.approx(1 / 3)
        assert report.scores[split].parse_failures == ROWS // 3
    wrong_status = {Split.OUTPUT: "wrong_answer", Split.INPUT: "syntax_error"}
    for sample, index in zip(report.samples, [i for _ in Split for i in range(ROWS)]):
        kind = outcome(index)
        assert sample.correct is (kind == "right"), sample
        if kind == "unparseable":  # counted wrong, never run, the reason recorded
            assert (sample.format_ok, sample.exec_status, sample.parse_failure) == (False, None, "no_think")
        else:
            assert sample.parse_failure is None and sample.answer is not None
            assert sample.exec_status == ("ok" if kind == "right" else wrong_status[sample.split])
        assert sample.gold == (rows[index].output if sample.split is Split.OUTPUT else rows[index].input)
        assert sample.weight_version == "7"
    # Greedy: one sample per prompt at temperature 0, every call.
    assert engine.samplings and all(s.temperature == 0 and s.n == 1 and s.max_new_tokens == 64
                                    for s in engine.samplings)


def test_any_input_giving_the_output_counts_for_cruxeval_i(tmp_path: Path, executor: Executor) -> None:
    data = tmp_path / "parity.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in [
        {"id": "parity", "code": "def f(x):\n    return x % 2", "input": "3", "output": "1"},
        {"id": "double", "code": "def f(x):\n    return x * 2", "input": "2", "output": "4"},
    ]) + "\n")
    rows = load_rows(data)
    engine = ScriptedEngine({"solve/abduction": lambda _instruction, seen: r1(fenced("input", ["5", "3"][seen]))})
    report = run_cruxeval(EngineRollouts(engine), executor, rows, [Split.INPUT], max_new_tokens=16)
    assert [(s.id, s.answer, s.correct, s.exec_status) for s in report.samples] == \
        [("parity", "5", True, "ok"), ("double", "3", False, "wrong_answer")]
    assert list(report.scores) == [Split.INPUT] and report.scores[Split.INPUT].accuracy == 0.5


def test_over_http_the_solver_api_gives_the_same_results(rows: list[CruxRow], executor: Executor) -> None:
    local = run_cruxeval(EngineRollouts(scripted_engine(rows)), executor, rows, list(Split), max_new_tokens=64)
    engine = scripted_engine(rows)
    settings = Settings(api_token=TOKEN)
    with LoopbackServer(create_solver_app(settings.api, settings.rollout, engine=engine)) as url:
        rollouts = HttpRollouts("http://127.0.0.1:1", url, TOKEN, outage_s=0)
        try:
            remote = run_cruxeval(rollouts, executor, rows, list(Split), max_new_tokens=64, batch_size=ROWS)
        finally:
            rollouts.close()
    assert [s.model_dump() for s in remote.samples] == [s.model_dump() for s in local.samples]
    assert remote.scores == local.scores
    assert engine.samplings and all(s.temperature == 0 and s.n == 1 for s in engine.samplings)


def test_http_rollouts_split_more_tasks_than_one_request_carries() -> None:
    engine = RecordingEngine({"solve/deduction": lambda instruction, _seen: r1(fenced("output",
                                                                                      block(instruction, "input")))})
    tasks = [IOSolveTask(task_id=str(i), program="def f(x):\n    return x", input=str(i), output=str(i))
             for i in range(MAX_TASKS_PER_REQUEST + 3)]
    settings = Settings(api_token=TOKEN, max_request_bytes=4_000_000)
    with LoopbackServer(create_solver_app(settings.api, settings.rollout, engine=engine)) as url:
        rollouts = HttpRollouts("http://127.0.0.1:1", url, TOKEN, outage_s=0)
        try:
            groups = rollouts.solve({TaskType.DEDUCTION: tasks}, greedy_sampling(8))[TaskType.DEDUCTION]
        finally:
            rollouts.close()
    assert len(engine.samplings) == 2  # two requests: 512 tasks, then 3
    assert [group[0].answer for group in groups] == [str(i) for i in range(len(tasks))]


def test_periodic_evaluation_runs_every_k_steps_and_gives_the_metrics_keys(rows: list[CruxRow],
                                                                          executor: Executor) -> None:
    said: list[str] = []
    evaluation = PeriodicEvaluation(every_steps=2, rows=rows[:6], rollouts=EngineRollouts(scripted_engine(rows)),
                                    executor=executor, max_new_tokens=32, check_parallelism=2,
                                    progress=said.append)
    assert [step for step in range(1, 7) if evaluation.due(step)] == [2, 4, 6]
    entries = evaluation.evaluate(2)
    assert entries.pop("time/eval") >= 0
    assert entries == {"eval/cruxeval_o": round(2 / 6, 6), "eval/cruxeval_o/count": 6,
                       "eval/cruxeval_o/format_ok": round(4 / 6, 6), "eval/cruxeval_i": round(2 / 6, 6),
                       "eval/cruxeval_i/count": 6, "eval/cruxeval_i/format_ok": round(4 / 6, 6),
                       "eval/policy_version": 7}
    assert said and "CRUXEval-O  accuracy 0.333 (2/6)" in said[-1]


def periodic_evaluation(settings: Settings, rollouts: EngineRollouts, executor: Executor) -> PeriodicEvaluation | None:
    """The periodic evaluation `azr.factory` builds from these settings' sections."""
    return PeriodicEvaluation.from_settings(settings.observability, settings.rollout, rollouts, executor)


def test_periodic_evaluation_from_settings(tmp_path: Path, shared_dir: Path, executor: Executor) -> None:
    rollouts = EngineRollouts(ScriptedEngine({}))
    assert periodic_evaluation(Settings(), rollouts, executor) is None  # off by default
    assert Settings(profile="distributed").observability.eval_every_steps == 0
    on = periodic_evaluation(Settings(eval_every_steps=3, eval_limit=4), rollouts, executor)
    assert on is not None and on.every_steps == 3 and [r.id for r in on.rows] == [f"sample_{i}" for i in range(1, 5)]
    assert Settings().observability.eval_data.resolve() == (shared_dir / "data" / "cruxeval.jsonl").resolve()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"code": "def f(x):\\n    return x", "input": "1", "output": "1"}\nnot json\n')
    with pytest.raises(ValueError, match="line 2: not JSON"):  # at coordinator start, not k steps later
        periodic_evaluation(Settings(eval_every_steps=1, eval_data=bad), rollouts, executor)
