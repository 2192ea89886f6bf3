"""`azr parse`: one row per response with the format verdict, the deciding failure, the reward the text decides and
what was extracted; bad rows are reported and skipped, the others still read."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from azr.cli.main import app

RUNNER = CliRunner()


def write_rows(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(row if isinstance(row, str) else json.dumps(row) for row in rows) + "\n")
    return path


def rows_of(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_rows_with_their_kind(tmp_path: Path) -> None:
    file = write_rows(tmp_path / "responses.jsonl", [
        {"kind": "propose_deduction", "finish_reason": "stop",
         "text": "plan</think>\n<answer>\n```python\ndef g(n):\n    return n + 1\n```\n```input\n4\n```\n"
                 "</answer>\nDone!"},
        {"kind": "solve_abduction", "text": "thinking without end <answer>```input\n'x'\n```</answer>"},
        {"kind": "propose_induction", "text": "plan</think><answer>```input\n1\n```\n```message\nm\n```</answer>"},
    ])
    result = RUNNER.invoke(app, ["parse", str(file)])
    assert result.exit_code == 0, result.output
    first, second, third = rows_of(result.stdout)
    assert first["format_ok"] is True and first["reward"] is None and first["finish_reason"] == "stop"
    assert first["extracted"] == {"program": "def f(n):\n    return n + 1", "input": "4", "renamed_from": "g"}
    assert second["format_ok"] is False and second["failure"] == "no_think" and second["reward"] == -1.0
    assert second["extracted"] == {"input": "'x'", "rule": "block"}  # read, but a format error is never checked
    assert third["failure"] == "wrong_input_count" and third["format_ok"] is True and third["reward"] == -1.0
    assert "propose_deduction: format_ok 1" in result.stderr


def test_role_and_task_type_options_and_bad_rows(tmp_path: Path) -> None:
    file = write_rows(tmp_path / "r.jsonl", [{"text": "x</think><answer>the output is 5</answer>"}, "not json",
                                             {"kind": "guess_what", "text": "t"}, {"no_text": 1}])
    result = RUNNER.invoke(app, ["parse", str(file), "--role", "solve", "--task-type", "deduction"])
    assert result.exit_code == 2
    (row,) = rows_of(result.stdout)
    assert row["line"] == 1 and row["extracted"] == {"output": "5", "rule": "phrase"}
    assert "line 2: not JSON" in result.stderr and "unknown kind 'guess_what'" in result.stderr
    assert "line 4: no string field `text`" in result.stderr and "3 row(s) could not be read" in result.stderr


def test_a_row_without_kind_needs_both_options(tmp_path: Path) -> None:
    file = write_rows(tmp_path / "r.jsonl", [{"text": "x"}])
    result = RUNNER.invoke(app, ["parse", str(file), "--role", "solve"])
    assert result.exit_code == 2 and "give --role and --task-type" in result.stderr


def test_multiple_functions_can_be_allowed(tmp_path: Path) -> None:
    code = "def helper(x):\n    return x\ndef f(x):\n    return helper(x)"
    text = f"p</think><answer>```python\n{code}\n```\n```input\n1\n```</answer>"
    file = write_rows(tmp_path / "r.jsonl", [{"kind": "propose_abduction", "text": text}])
    refused = rows_of(RUNNER.invoke(app, ["parse", str(file)]).stdout)[0]
    allowed = rows_of(RUNNER.invoke(app, ["parse", str(file), "--allow-multiple-functions"]).stdout)[0]
    assert refused["failure"] == "multiple_functions" and allowed["extractable"] is True


def test_out_writes_the_rows_to_a_file(tmp_path: Path) -> None:
    file = write_rows(tmp_path / "r.jsonl", [{"kind": "solve_induction", "text": "a</think><answer>no code</answer>"}])
    target = tmp_path / "read.jsonl"
    result = RUNNER.invoke(app, ["parse", str(file), "--out", str(target)])
    assert result.exit_code == 0
    assert rows_of(target.read_text())[0]["failure"] == "missing_code_block"
