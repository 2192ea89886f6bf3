"""`azr validate FILE.jsonl`: one JSON line per row, in order, with the sandbox's verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_validate(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AZR_EXECUTOR_WORKERS": "2", "AZR_EXECUTOR_TIMEOUT_S": "5"}
    return subprocess.run([sys.executable, "-m", "azr", "validate", str(path), *args],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)


def test_validate_reproduces_cruxeval_and_reports_bad_rows(tmp_path: Path, shared_dir: Path) -> None:
    rows = [json.loads(line) for line in (shared_dir / "data" / "cruxeval.jsonl").read_text().splitlines()[:25]]
    lines = [json.dumps(row) for row in rows]
    lines.insert(3, "{not json")
    lines.append(json.dumps({"id": "hostile", "code": "import subprocess\ndef f(x):\n    return x", "input": "1"}))
    lines.append(json.dumps({"id": "no-input", "code": "def f(x):\n    return x"}))
    source = tmp_path / "rows.jsonl"
    source.write_text("\n".join(lines) + "\n")

    completed = run_validate(source)
    assert completed.returncode == 2, completed.stderr  # some lines were not usable rows: bad input
    printed = [json.loads(line) for line in completed.stdout.splitlines()]
    assert len(printed) == len(lines)
    assert printed[3]["status"] == "invalid_row" and "not JSON" in printed[3]["error"]
    by_id = {line["id"]: line for line in printed}
    for row in rows:
        assert (by_id[row["id"]]["status"], by_id[row["id"]]["output"]) == ("ok", row["output"])
    assert by_id["hostile"]["status"] == "forbidden"
    assert by_id["no-input"]["status"] == "invalid_row"


def test_validate_induction_rows_from_the_authors_seed_file(tmp_path: Path, shared_dir: Path) -> None:
    rows = (shared_dir / "data" / "azr_seeds" / "7b_coder_code_f_seed_io.jsonl").read_text().splitlines()[:5]
    source = tmp_path / "induction.jsonl"
    source.write_text("\n".join(rows) + "\n")
    completed = run_validate(source, "--task", "induction")
    assert completed.returncode == 0, completed.stderr
    printed = [json.loads(line) for line in completed.stdout.splitlines()]
    assert [len(line["outputs"] or []) for line in printed] == [len(json.loads(row)["inputs"]) for row in rows]
    assert all(line["status"] == "ok" for line in printed), printed


def test_a_program_too_deep_to_check_gets_its_row_and_the_others_theirs(tmp_path: Path) -> None:
    """Issue 37: a ~600-deep `x + x + ...` made the static check raise; `azr validate` exited 1 and printed no row
    for it or the benign rows after it."""
    deep = "def f(x):\n    return " + " + ".join(["x"] * 600)
    rows = [{"id": "before", "code": "def f(x):\n    return x + 1", "input": "1"},
            {"id": "deep", "code": deep, "input": "1"},
            {"id": "after", "code": "def f(x):\n    return x * 3", "input": "2"}]
    source = tmp_path / "deep.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    completed = run_validate(source)
    assert completed.returncode == 0, completed.stderr
    printed = {line["id"]: line for line in map(json.loads, completed.stdout.splitlines())}
    assert (printed["before"]["output"], printed["after"]["output"]) == ("2", "6")
    assert printed["deep"]["status"] == "forbidden" and "nested too deeply" in printed["deep"]["error"]
