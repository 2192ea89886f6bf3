"""The `azr` command: help (each setting's variable and default, the exit-status convention), `config show` for both
profiles, validated choices, the executor commands' names (`azr run` itself: tests/services/coordinator/
test_embedded_run.py; config files: tests/services/settings/test_config_file.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from azr.cli.main import app

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
        [sys.executable, "-m", "azr", "config", "show"], capture_output=True, text=True, env=env, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    shown = json.loads(completed.stdout)
    assert shown["profile"] == "distributed" and shown["api_token"] == "********"
    assert "tok-123" not in completed.stdout


def wide_help(*command: str) -> str:
    """`azr ... --help` on a wide terminal, whitespace collapsed (so no option's text is wrapped apart)."""
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_help_shows_each_setting_option_with_its_variable_and_default() -> None:
    run_help = wide_help("run")
    for shown in ("[env var: AZR_BATCH_SIZE] [default: (2)]", "[env var: AZR_STEPS] [default: (1)]",
                  "[env var: AZR_MAX_RESPONSE_TOKENS] [default: (1024)]", "[env var: AZR_MODEL]",
                  "[env var: AZR_CONFIG]"):
        assert shown in run_help, shown
    assert "Qwen/Qwen2.5-Coder-0.5B-Instruct" in run_help  # --model takes hub ids
    assert "[env var: AZR_STEPS]" in wide_help("coordinator") and "[env var: AZR_CONFIG]" in wide_help("coordinator")
    assert "[env var: AZR_RUN_ID]" in wide_help("trainer") and "[env var: AZR_CONFIG]" in wide_help("trainer")
    assert "[env var: AZR_EXECUTOR_QUEUE] [default: (executor)]" in wide_help("worker", "executor")
    assert "[env var: AZR_EXECUTOR_BACKEND] [default: (process (embedded), docker (distributed))]" in wide_help(
        "validate")
    assert "0 done, 1 runtime failure, 2 usage or bad input" in wide_help()


def test_azr_run_has_no_profile_option() -> None:
    result = runner.invoke(app, ["run", "--profile", "embedded"])
    assert result.exit_code == 2 and "No such option: --profile" in result.output


def test_a_distributed_profile_from_the_environment_is_refused_by_azr_run() -> None:
    result = runner.invoke(app, ["run", "--model", "tiny"], env={"AZR_PROFILE": "distributed"})
    assert result.exit_code == 2 and "`azr run` is the embedded profile" in " ".join(result.output.split())


@pytest.mark.parametrize(("command", "wrong"), [
    (["validate", "FILE", "--task", "sorting"], "'sorting' is not one of 'deduction', 'abduction', 'induction'"),
    (["validate", "FILE", "--backend", "vm"], "'vm' is not one of 'process', 'docker'"),
    (["seeds", "import", "FILE", "--backend", "vm"], "'vm' is not one of 'process', 'docker'"),
    (["eval", "cruxeval", "--split", "sideways"], "'sideways' is not one of 'output', 'input', 'both'"),
    (["config", "show", "--profile", "cloud"], "'cloud' is not one of 'embedded', 'distributed'"),
    (["parse", "FILE", "--role", "judge"], "'judge' is not one of 'propose', 'solve'"),
])
def test_choice_options_are_validated_as_usage_errors(tmp_path: Path, command: list[str], wrong: str) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"code": "def f(x):\\n    return x", "input": "1"}\n')
    result = runner.invoke(app, [str(rows) if part == "FILE" else part for part in command], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert wrong in result.output


def test_the_executor_commands_have_distinct_names() -> None:
    serve_help = wide_help("serve")
    assert "executor-debug" in serve_help and "POST /v1/execute" in serve_help
    assert "RQ" in wide_help("worker", "executor")
    old = runner.invoke(app, ["serve", "executor"])
    assert old.exit_code == 2 and "No such command 'executor'" in old.output
