"""`azr trainer` is registered and refuses the in-process queue (it would train on nothing)."""

from __future__ import annotations

from typer.testing import CliRunner

from azr.cli.main import app


def test_trainer_command_refuses_the_in_process_queue(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AZR_QUEUE_BACKEND", "inprocess")
    monkeypatch.setenv("AZR_RUN_ROOT", str(tmp_path))
    result = CliRunner().invoke(app, ["trainer", "--model", "tiny", "--no-push"])
    assert result.exit_code == 2
    assert "AZR_QUEUE_BACKEND=redis" in result.output
    assert not any(tmp_path.iterdir()), "nothing is written when the trainer refuses to start"
