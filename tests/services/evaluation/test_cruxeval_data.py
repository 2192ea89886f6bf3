"""The pure part of the CRUXEval evaluation (rows, scores, metrics keys) and reading evaluation files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.algorithm.task_types import TaskType
from services.evaluation.cruxeval import (
    METRIC_KEY,
    CruxRow,
    EvalDataError,
    EvalSample,
    Split,
    SplitScore,
    gold_answer,
    metrics_keys,
    score,
    solve_task,
)
from services.evaluation.dataset import held_out, load_rows, seed_programs


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def row_json(**fields: object) -> str:
    return json.dumps({"code": "def f(x):\n    return x", "input": "1", "output": "1", **fields})


def sample(split: Split, correct: bool, answer: str | None = "1") -> EvalSample:
    return EvalSample(id="r", split=split, task_type=TaskType.DEDUCTION, response="", answer=answer,
                      format_ok=answer is not None, parse_failure=None if answer is not None else "no_think",
                      correct=correct,
                      exec_status=None, gold="1", finish_reason="stop", response_tokens=0, weight_version="0")


def test_the_shared_file_loads_in_file_order_and_limit_takes_the_first_rows(shared_dir: Path) -> None:
    path = shared_dir / "data" / "cruxeval.jsonl"
    every = load_rows(path)
    first = [json.loads(line)["id"] for line in path.read_text().splitlines()[:20]]
    assert len(every) == 500
    assert [row.id for row in load_rows(path, 20)] == first == [row.id for row in every[:20]]


def test_a_row_is_a_solver_task_of_both_splits() -> None:
    row = CruxRow(id="s", code="def f(a):\n    return a[::-1]", input="'ab'", output="'ba'")
    task = solve_task(row)
    assert (task.task_id, task.program, task.input, task.output) == ("s", row.code, "'ab'", "'ba'")
    assert gold_answer(row, Split.OUTPUT) == "'ba'" and gold_answer(row, Split.INPUT) == "'ab'"


@pytest.mark.parametrize(("lines", "message"), [
    ([row_json(id="a"), "{not json", row_json(id="c")], "line 2: not JSON"),
    ([row_json(id="a"), "[1, 2]"], "line 2: not an object"),
    ([row_json(id="a"), json.dumps({"code": "def f(x):\n    return x", "input": "1", "id": "b"})],
     "line 2: not a CRUXEval row"),
    ([row_json(id="a"), row_json(id="b", output=7)], "line 2: not a CRUXEval row"),
    ([row_json(id="a"), "", row_json(id="a")], "line 3: id 'a' already used on line 1"),
])
def test_a_malformed_row_is_refused_naming_its_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = write_lines(tmp_path / "bad.jsonl", lines)
    with pytest.raises(EvalDataError, match=message) as raised:
        load_rows(path, limit=1)  # rows beyond the limit are checked too
    assert str(path) in str(raised.value)


def test_missing_field_is_named(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "bad.jsonl", [json.dumps({"code": "def f(x):\n    return x", "input": "1"})])
    with pytest.raises(EvalDataError, match="`output`"):
        load_rows(path)


def test_missing_empty_and_non_utf8_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(EvalDataError, match="no such file"):
        load_rows(tmp_path / "absent.jsonl")
    with pytest.raises(EvalDataError, match="no rows"):
        load_rows(write_lines(tmp_path / "empty.jsonl", ["", "  "]))
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(EvalDataError, match="not UTF-8"):
        load_rows(binary)
    with pytest.raises(EvalDataError, match="limit"):
        load_rows(write_lines(tmp_path / "ok.jsonl", [row_json(id="a")]), limit=-1)


def test_a_row_without_id_is_named_by_its_line_and_other_columns_are_ignored(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "noid.jsonl", [row_json(id="first", difficulty=3),
                                                 row_json(code="def f():\n    return 1", input="")])
    rows = load_rows(path)
    assert [row.id for row in rows] == ["first", "line-2"]
    assert rows[1].input == ""  # f() takes no arguments


def test_scores_count_parse_failures_as_wrong_and_give_the_metrics_keys() -> None:
    samples = [sample(Split.OUTPUT, True), sample(Split.OUTPUT, False), sample(Split.OUTPUT, False, answer=None),
               sample(Split.OUTPUT, True), sample(Split.INPUT, False, answer=None)]
    scores = score(samples)
    assert scores == {Split.OUTPUT: SplitScore(Split.OUTPUT, correct=2, count=4, parse_failures=1),
                      Split.INPUT: SplitScore(Split.INPUT, correct=0, count=1, parse_failures=1)}
    assert scores[Split.OUTPUT].line() == "CRUXEval-O  accuracy 0.500 (2/4)  format OK 0.750  parse failures 1"
    assert metrics_keys(scores) == {"eval/cruxeval_o": 0.5, "eval/cruxeval_o/count": 4,
                                    "eval/cruxeval_o/format_ok": 0.75, "eval/cruxeval_i": 0.0,
                                    "eval/cruxeval_i/count": 1, "eval/cruxeval_i/format_ok": 0.0}
    assert METRIC_KEY == {Split.OUTPUT: "eval/cruxeval_o", Split.INPUT: "eval/cruxeval_i"}
    assert score([]) == {} and metrics_keys({}) == {}


def test_a_held_out_probe_leaves_out_the_seeded_programs(tmp_path: Path, shared_dir: Path) -> None:
    rows = load_rows(shared_dir / "data" / "cruxeval.jsonl")
    seeds = tmp_path / "seeds.jsonl"  # two CRUXEval programs as seeds, one reformatted (comments, spacing)
    seeds.write_text(json.dumps({"snippet": rows[3].code + "  # same program", "input": "1"}) + "\n"
                     + json.dumps({"program": rows[7].code, "input": "1"}) + "\n" + json.dumps({"other": 1}) + "\n")
    kept = held_out(rows, seed_programs([seeds]))
    assert [row.id for row in kept] == [row.id for i, row in enumerate(rows) if i not in (3, 7)]
    with pytest.raises(EvalDataError):
        seed_programs([tmp_path / "absent.jsonl"])
