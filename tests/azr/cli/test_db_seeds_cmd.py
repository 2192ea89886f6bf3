"""`azr db upgrade` and `azr seeds import`: real databases, the real executor, the authors' seed files."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from azr.cli.main import app
from services.algorithm.task_types import TaskType
from services.records import InductionTask, TripletSource
from services.store import open_store

RUNNER = CliRunner()
EXECUTOR_ENV = {"AZR_EXECUTOR_WORKERS": "2", "AZR_EXECUTOR_TIMEOUT_S": "10", "AZR_QUEUE_BACKEND": "inprocess"}


@pytest.fixture()
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """An empty private PostgreSQL database (no tables), dropped afterwards."""
    name = f"azr_t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def invoke(*args: str) -> Any:
    return RUNNER.invoke(app, list(args), env=EXECUTOR_ENV, catch_exceptions=False)


def summary_of(result: Any) -> dict[str, Any]:
    return json.loads(result.stdout.strip().splitlines()[-1])


def validate_statuses(path: Path) -> dict[int, str]:
    """Line number -> status that `azr validate` prints (rows without an `id` are named by their line)."""
    result = invoke("validate", str(path))
    assert result.exit_code == 0, result.output
    return {line["id"]: line["status"] for line in map(json.loads, result.stdout.splitlines())}


def rejected_by_line(summary: dict[str, Any]) -> dict[int, str]:
    return {row["line"]: row["status"] for row in summary["rejected_rows"]}


def test_db_upgrade_creates_the_schema_on_sqlite_and_postgres(tmp_path: Path, fresh_postgres_url: str) -> None:
    for url in (f"sqlite:///{tmp_path / 'sub' / 'azr.sqlite3'}", fresh_postgres_url):
        result = invoke("db", "upgrade", "--database-url", url)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["revision"] == "0002"
        with open_store(url) as store:  # would raise if the schema were not at head
            assert store.count(TaskType.DEDUCTION) == 0


def test_db_upgrade_reports_an_unreachable_database() -> None:
    result = RUNNER.invoke(app, ["db", "upgrade", "--database-url", "postgresql+psycopg://postgres@127.0.0.1:9/x"])
    assert result.exit_code == 1
    assert "database upgrade failed" in result.output and "OperationalError" in result.output


def test_seeds_import_stores_executor_outputs_and_counts_duplicates_and_rejections(tmp_path: Path) -> None:
    rows = [
        {"id": "double", "code": "def f(x):\n    return x * 2", "input": "1", "output": "999"},  # file output wrong
        {"id": "same", "snippet": "def f(x): return x*2  # reformatted", "input": "1"},
        {"id": "hostile", "code": "import subprocess\ndef f(x):\n    return x", "input": "1"},
        {"id": "raises", "code": "def f(x):\n    return 1 // 0", "input": "1"},
        {"id": "no-input", "code": "def f(x):\n    return x"},
    ]
    path = tmp_path / "seeds.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n{not json\n")
    url = f"sqlite:///{tmp_path / 'azr.sqlite3'}"
    result = invoke("seeds", "import", str(path), "--buffer", "abduction", "--database-url", url)
    assert result.exit_code == 2  # two lines were not usable rows (bad input); the rest was still imported
    summary = summary_of(result)
    assert summary["rows"] == 6
    assert summary["stored"] == {"abduction": 1} and summary["duplicate"] == {"abduction": 1}
    assert summary["rejected"] == {"forbidden": 1, "runtime_error": 1, "invalid_row": 2}
    assert [row["line"] for row in summary["rejected_rows"]] == [3, 4, 5, 6]
    with open_store(url) as store:
        entries, total = store.list_entries(TaskType.ABDUCTION)
        assert total == 1 and store.count(TaskType.DEDUCTION) == 0
        assert (entries[0].output, entries[0].source) == ("2", TripletSource.SEED)  # type: ignore[union-attr]


def test_seeds_import_rejects_an_unknown_buffer(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"code": "def f(x):\n    return x", "input": "1"}) + "\n")
    result = RUNNER.invoke(app, ["seeds", "import", str(path), "--buffer", "everything",
                                 "--database-url", f"sqlite:///{tmp_path / 'x.sqlite3'}"], env={"COLUMNS": "250"})
    assert result.exit_code == 2 and "'everything' is not one of 'auto'," in result.output


def author_rows(shared_dir: Path, name: str, lines: range, out: Path) -> Path:
    """Lines `lines` (1-based) of one of the authors' seed files, written to `out` under the same name."""
    rows = (shared_dir / "data" / "azr_seeds" / name).read_text().splitlines(keepends=True)
    path = out / name
    path.write_text("".join(rows[lines.start - 1:lines.stop - 1]))
    return path


@pytest.mark.slow
def test_importing_both_author_seed_files_matches_what_validate_says(
        shared_dir: Path, fresh_postgres_url: str, tmp_path: Path) -> None:
    # 80 rows of each file, where each holds every kind of rejection the whole file has (the whole files take ~50 s
    # per pass here; their every row is checked against the file in tests/executor_svc/test_executor_seeds.py and
    # imported whole by tests/azr/cli/test_run_seed_default.py).
    seed_file = author_rows(shared_dir, "7b_coder_seed_io.jsonl", range(81, 161), tmp_path)
    induction_file = author_rows(shared_dir, "7b_coder_code_f_seed_io.jsonl", range(61, 141), tmp_path)

    imported = invoke("seeds", "import", str(seed_file), "--database-url", fresh_postgres_url)
    assert imported.exit_code == 0, imported.output
    io_summary = summary_of(imported)
    io_lines = validate_statuses(seed_file)
    io_statuses = Counter(io_lines.values())
    valid = io_statuses.pop("ok")
    assert valid > 70  # the authors' seeds are mostly valid
    assert set(io_statuses) == {"no_return", "nondeterministic"}, io_statuses  # both rejections to compare
    # per line first: if the sandbox ever judged a row differently in the two runs, this names the row
    assert rejected_by_line(io_summary) == {line: status for line, status in io_lines.items() if status != "ok"}
    for buffer in ("deduction", "abduction"):
        assert io_summary["stored"].get(buffer, 0) + io_summary["duplicate"].get(buffer, 0) == valid
    assert Counter(io_summary["rejected"]) == io_statuses

    imported = invoke("seeds", "import", str(induction_file), "--database-url", fresh_postgres_url)
    assert imported.exit_code == 0, imported.output
    induction_summary = summary_of(imported)
    induction_lines = validate_statuses(induction_file)
    induction_statuses = Counter(induction_lines.values())
    valid_induction = induction_statuses.pop("ok")
    assert set(induction_statuses) == {"no_return", "nondeterministic", "output_too_large"}, induction_statuses
    assert rejected_by_line(induction_summary) == {
        line: status for line, status in induction_lines.items() if status != "ok"}
    assert induction_summary["stored"].get("induction", 0) + induction_summary["duplicate"].get("induction", 0) \
        == valid_induction
    assert Counter(induction_summary["rejected"]) == induction_statuses

    with open_store(fresh_postgres_url) as store:
        assert store.count(TaskType.DEDUCTION) == io_summary["stored"]["deduction"]
        assert store.count(TaskType.ABDUCTION) == io_summary["stored"]["abduction"]
        assert store.count(TaskType.INDUCTION) == induction_summary["stored"]["induction"]
        messages = {json.loads(line)["message"] for line in induction_file.open() if line.strip()}
        sample = store.list_entries(TaskType.INDUCTION, limit=20)[0]
        assert all(isinstance(entry, InductionTask) and entry.message in messages and entry.source == TripletSource.SEED
                   and len(entry.outputs) == len(entry.inputs) for entry in sample)

    again = invoke("seeds", "import", str(seed_file), "--buffer", "deduction", "--database-url", fresh_postgres_url)
    assert summary_of(again)["stored"] == {} and summary_of(again)["duplicate"] == {"deduction": valid}
