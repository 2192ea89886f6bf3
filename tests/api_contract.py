"""Runs schemathesis (the pinned CLI of the `test` extra) with every check against a served API's OpenAPI document,
and reads its JSON report: the figures a contract test asserts on and prints.

The CLI runs as a subprocess against a real server on loopback (the app in a uvicorn thread of the test process);
tests/schemathesis.toml and tests/schemathesis_hooks.py say what each route may answer and bound the model's work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parent
CONFIG_FILE = TESTS_DIR / "schemathesis.toml"


@dataclass(frozen=True)
class ContractRun:
    """What one schemathesis run found."""

    operations: int  # API operations tested
    cases: int  # test cases generated and sent
    failures: list[dict[str, Any]]  # one entry per failure kind, with its operations
    errors: list[Any]  # errors that stopped an operation's testing (schema problems, network)
    exit_code: int
    output: str  # the CLI's own report, for the assertion message

    def summary(self) -> str:
        return f"{self.operations} operations, {self.cases} cases, {len(self.failures)} failure kinds"


def run_schemathesis(base_url: str, report_dir: Path, *, max_examples: int, seed: int = 1,
                     headers: dict[str, str] | None = None, timeout_s: float = 300) -> ContractRun:
    """Test every operation of `base_url/openapi.json` with all checks and all phases."""
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or shutil.which("schemathesis")
    assert cli is not None, "schemathesis is not installed (pip install -e '.[test]')"
    command = [cli, "--config-file", str(CONFIG_FILE), "run", f"{base_url}/openapi.json", "--checks", "all",
               "--max-examples", str(max_examples), "--seed", str(seed), "--workers", "1",
               "--generation-database", "none", "--report", "json", "--report-dir", str(report_dir),
               "--no-color"]
    for name, value in (headers or {}).items():
        command += ["--header", f"{name}: {value}"]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "schemathesis_hooks",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s, cwd=report_dir)
    reports = sorted(report_dir.glob("json-*.json"))
    assert reports, f"no schemathesis report (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    report = json.loads(reports[-1].read_text())
    return ContractRun(operations=report["operations"]["tested"], cases=report["test_cases"]["generated"],
                       failures=report["failures"], errors=report["errors"], exit_code=done.returncode,
                       output=done.stdout[-12000:] + done.stderr[-4000:])


def assert_no_failures(run: ContractRun, expected_operations: int) -> None:
    """Every operation tested, every check passed."""
    print(f"schemathesis: {run.summary()}")
    assert run.failures == [] and run.errors == [] and run.exit_code == 0, run.output
    assert run.operations == expected_operations, run.output
