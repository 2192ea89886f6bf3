"""CRUXEval (500 real triplets): every row validates and reproduces its gold output; the gold output passes the
deduction check and the gold input the abduction check; perturbed answers fail (docs/design.md §7)."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from executor_svc.executor import Executor
from services.execution import ExecStatus, ExecutionLimits

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rows(shared_dir: Path) -> list[dict[str, Any]]:
    lines = (shared_dir / "data" / "cruxeval.jsonl").read_text().splitlines()
    loaded = [json.loads(line) for line in lines if line.strip()]
    assert len(loaded) == 500
    return loaded


@pytest.fixture(scope="module")
def executor(executor_backend: str, executor_factory: Callable[..., Executor]) -> Iterator[Executor]:
    # cruxeval programs run in milliseconds; a short limit keeps the few perturbed inputs that loop cheap
    with executor_factory(executor_backend, workers=2, limits=ExecutionLimits(timeout_s=2.0)) as running:
        yield running


def perturb_value(value: Any) -> Any:
    """A value that differs from `value` under ==, of the same type where that is possible."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, bytes):
        return value + b"x"
    if isinstance(value, list):
        return value + ["x"]
    if isinstance(value, tuple):
        return value + ("x",)
    if isinstance(value, dict):
        return {**value, "azr-extra-key": 0}
    if isinstance(value, (set, frozenset)):
        return type(value)(value | {"azr-extra"})
    return ["x", value]  # None and the rest


def perturbed_output(text: str) -> str:
    return repr(perturb_value(ast.literal_eval(text)))


def perturbed_input(text: str) -> str:
    """Change the first literal argument of an argument list (some arguments are lambdas)."""
    call = ast.parse(f"f({text})", mode="eval").body
    assert isinstance(call, ast.Call) and not call.keywords
    for index, node in enumerate(call.args):
        try:
            value = ast.literal_eval(node)
        except ValueError:
            continue
        call.args[index] = ast.parse(repr(perturb_value(value)), mode="eval").body
        return ", ".join(ast.unparse(argument) for argument in call.args)
    raise AssertionError(f"no literal argument in {text!r}")


def test_every_row_validates_and_reproduces_its_gold_output(executor: Executor, rows: list[dict[str, Any]]) -> None:
    results = executor.validate_many([(row["code"], row["input"]) for row in rows])
    wrong = [(row["id"], result.status, result.error, result.output, row["output"])
             for row, result in zip(rows, results) if (result.status, result.output) != (ExecStatus.OK, row["output"])]
    assert wrong == []


def test_gold_outputs_pass_the_deduction_check_and_perturbed_ones_fail(executor: Executor,
                                                                        rows: list[dict[str, Any]]) -> None:
    gold = executor.check_deduction_many([(row["output"], row["output"]) for row in rows])
    assert [(row["id"], result) for row, result in zip(rows, gold) if not result.correct] == []
    wrong = executor.check_deduction_many([(row["output"], perturbed_output(row["output"])) for row in rows])
    assert [(row["id"], result) for row, result in zip(rows, wrong)
            if result.status is not ExecStatus.WRONG_ANSWER] == []


def test_gold_inputs_pass_the_abduction_check_and_perturbed_ones_fail(executor: Executor,
                                                                       rows: list[dict[str, Any]]) -> None:
    gold = executor.check_abduction_many([(row["code"], row["output"], row["input"]) for row in rows])
    assert [(row["id"], result) for row, result in zip(rows, gold) if not result.correct] == []
    # a wrong target output always fails
    wrong_target = executor.check_abduction_many([(row["code"], perturbed_output(row["output"]), row["input"])
                                                  for row in rows])
    assert [(row["id"], result) for row, result in zip(rows, wrong_target) if result.correct] == []
    # a perturbed input fails unless f really maps it to the gold output (f need not be injective): the check
    # must agree with an independent validation run of the same input
    inputs = [perturbed_input(row["input"]) for row in rows]
    checks = executor.check_abduction_many([(row["code"], row["output"], text) for row, text in zip(rows, inputs)])
    runs = executor.validate_many([(row["code"], text) for row, text in zip(rows, inputs)])
    disagreements = [(row["id"], check, run) for row, check, run in zip(rows, checks, runs)
                     if check.correct != (run.status is ExecStatus.OK and run.output == row["output"])]
    assert disagreements == []
    assert sum(not check.correct for check in checks) >= 0.7 * len(rows)
