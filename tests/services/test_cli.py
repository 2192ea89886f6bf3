"""The `azr` command: help, `config show` for both profiles, (`azr run` itself: tests/services/coordinator/test_embedded_run.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from services.cli.main import app

runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("run", "config"):
        assert command in result.output


def test_config_show_both_profiles() -> None:
    for profile, batch_size, queue in (("embedded", 2, "inprocess"), ("distributed", 64, "redis")):
        result = runner.invoke(app, ["config", "show", "--profile", profile])
        assert result.exit_code == 0, result.output
        shown = json.loads(result.output)
        assert (shown["profile"], shown["batch_size"], shown["queue_backend"]) == (profile, batch_size, queue)
        assert "change-me" not in result.output


def test_config_show_rejects_a_bad_profile() -> None:
    result = runner.invoke(app, ["config", "show", "--profile", "cloud"])
    assert result.exit_code == 2
    assert "profile" in result.output


def test_python_dash_m_services_is_the_same_command(tmp_path: Path) -> None:
    env = {**os.environ, "AZR_PROFILE": "distributed", "AZR_API_TOKEN": "tok-123"}
    completed = subprocess.run(
        [sys.executable, "-m", "services", "config", "show"], capture_output=True, text=True, env=env, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    shown = json.loads(completed.stdout)
    assert shown["profile"] == "distributed" and shown["api_token"] == "********"
    assert "tok-123" not in completed.stdout
