"""`azr serve proposer|solver` as real uvicorn subprocesses, and their refusal to start with a default token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from throwaway_servers import REPO_ROOT, free_port, wait_for
from typer.testing import CliRunner

from azr.cli.main import app


def start(service: str, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "azr", "serve", service, "--host", "127.0.0.1", "--port", str(port),
               "--no-inference"]
    return subprocess.Popen(command, cwd=REPO_ROOT, env={**os.environ, **env}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.slow
def test_serve_proposer_embedded_migrates_seeds_and_serves(tmp_path: Path) -> None:
    port = free_port()
    env = {"AZR_PROFILE": "embedded", "AZR_DATABASE_URL": f"sqlite:///{tmp_path / 'azr.sqlite3'}",
           "AZR_API_TOKEN": "serve-test-token", "AZR_EXECUTOR_WORKERS": "1"}
    process = start("proposer", port, env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: process.poll() is not None or answers(f"{url}/readyz"), 60, "azr serve proposer", 0.2)
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        stats = {s["buffer"]: s["count"] for s in httpx.get(f"{url}/v1/buffers").json()}
        assert stats == {"deduction": 1, "abduction": 1, "induction": 0}  # the zero triplet (Fig 5)
        seed = {"kind": "program", "program": "def f(a):\n    return a[::-1]", "input": "'abc'"}
        created = httpx.post(f"{url}/v1/seeds", json=seed, headers={"Authorization": "Bearer serve-test-token"})
        assert created.status_code == 201 and created.json()["entries"][0]["output"] == "'cba'"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.slow
def test_serve_solver_embedded_is_ready() -> None:
    port = free_port()
    process = start("solver", port, {"AZR_PROFILE": "embedded", "AZR_EXECUTOR_WORKERS": "1",
                                     "AZR_API_TOKEN": "serve-test-token"})
    try:
        wait_for(lambda: process.poll() is not None or answers(f"http://127.0.0.1:{port}/readyz"), 60,
                 "azr serve solver", 0.2)
        assert process.poll() is None
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.parametrize("profile", ["distributed", "embedded"])
@pytest.mark.parametrize("service", ["proposer", "solver", "executor-debug"])
@pytest.mark.parametrize("token", ["", "change-me"])
def test_services_refuse_a_default_token_in_every_profile(profile: str, service: str, token: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: the embedded `azr serve proposer` accepted `change-me` (POST /v1/seeds -> 201)."""
    monkeypatch.setenv("AZR_PROFILE", profile)
    monkeypatch.setenv("AZR_API_TOKEN", token)
    result = CliRunner().invoke(app, ["serve", service, "--port", str(free_port())]
                                + (["--no-inference"] if service != "executor-debug" else []))
    assert result.exit_code == 2  # bad input: settings that must not be served (azr/cli/exit_codes.py)
    assert "refusing to start: AZR_API_TOKEN is unset or the placeholder" in result.output
