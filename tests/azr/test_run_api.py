"""`azr run`'s own HTTP API: served from a thread over the run's store and executor, a per-session token instead of
the placeholder, the coordinator's metrics on `/metrics`, and a busy or zero port that only costs a message."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter
from pydantic import SecretStr
from throwaway_servers import free_port

from azr.run_api import port_is_free, session_settings, start_run_api
from executor_svc.executor import Executor
from services.execution import ExecutionLimits
from services.settings import DEFAULT_API_TOKEN, Settings
from services.store import open_store

SEED = {"kind": "program", "program": "def f(a):\n    return a * 2", "input": "21"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[object]:
    store = open_store(f"sqlite:///{tmp_path / 'buffers.sqlite3'}", create=True)
    yield store
    store.close()


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=3)) as executor:
        yield executor


def test_placeholder_token_is_replaced_for_the_session_and_a_set_one_is_kept() -> None:
    placeholder = Settings(api_token=SecretStr(DEFAULT_API_TOKEN))
    first, second = session_settings(placeholder.api), session_settings(placeholder.api)
    assert not first.uses_default_secret() and len(first.api_token.get_secret_value()) >= 24
    assert first.api_token.get_secret_value() != second.api_token.get_secret_value()
    chosen = Settings(api_token=SecretStr("my-own-token-123"))
    assert session_settings(chosen.api).api_token.get_secret_value() == "my-own-token-123"


def test_serves_dashboard_buffers_seeds_and_the_given_metrics(tmp_path: Path, store: object,
                                                              executor: Executor) -> None:
    registry = CollectorRegistry()
    steps = Counter("azr_coordinator_steps", "steps", registry=registry)
    steps.inc(3)
    messages: list[str] = []
    settings = Settings(run_root=tmp_path, run_id="r", api_token=SecretStr(DEFAULT_API_TOKEN))
    api = start_run_api(settings, store, executor, registry, messages.append, port=free_port())
    assert api is not None, messages
    try:
        assert httpx.get(f"{api.url}/dashboard", timeout=10).status_code == 200
        assert "azr_coordinator_steps_total 3.0" in httpx.get(f"{api.url}/metrics", timeout=10).text
        placeholder = httpx.post(f"{api.url}/v1/seeds", json=SEED, timeout=30,
                                 headers={"Authorization": f"Bearer {DEFAULT_API_TOKEN}"})
        assert placeholder.status_code == 403  # the well-known placeholder opens nothing
        created = httpx.post(f"{api.url}/v1/seeds", json=SEED, timeout=30,
                             headers={"Authorization": f"Bearer {api.token}"})
        assert created.status_code == 201, created.text
        page = httpx.get(f"{api.url}/v1/buffers/deduction", timeout=10).json()
        assert page["total"] == 1 and page["entries"][0]["output"] == "42"
    finally:
        api.close()
    token_file = settings.run.run_dir / "api-token"
    assert token_file.read_text().strip() == api.token and token_file.stat().st_mode & 0o777 == 0o600
    assert api.token not in api.token_source and str(token_file) in api.token_source
    assert port_is_free("127.0.0.1", int(api.url.rsplit(":", 1)[1]))  # closed: the port is released


def test_a_token_the_user_set_is_named_not_written_or_shown(tmp_path: Path, store: object,
                                                             executor: Executor) -> None:
    settings = Settings(run_root=tmp_path, run_id="r", api_token=SecretStr("my-own-token-123"))
    api = start_run_api(settings, store, executor, CollectorRegistry(), print, port=free_port())
    assert api is not None
    api.close()
    assert api.token == "my-own-token-123" and api.token_source == "your AZR_API_TOKEN"
    assert not (settings.run.run_dir / "api-token").exists()


def test_port_zero_is_off_and_a_busy_port_is_reported(tmp_path: Path, store: object, executor: Executor) -> None:
    messages: list[str] = []
    settings = Settings(run_root=tmp_path, run_id="r")
    assert start_run_api(settings, store, executor, CollectorRegistry(), messages.append, port=0) is None
    assert messages == []
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        assert start_run_api(settings, store, executor, CollectorRegistry(), messages.append, port=busy) is None
    assert messages and f"port {busy} is busy" in messages[0]
