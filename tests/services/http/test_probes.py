"""Probes against the real local servers, and against a port nothing listens on."""

from __future__ import annotations

import socket

from services.http.probes import database_unavailable_reason, redis_unavailable_reason


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_real_redis_answers(redis_url: str) -> None:
    assert redis_unavailable_reason(redis_url) is None


def test_real_postgres_answers(postgres_url: str) -> None:
    assert database_unavailable_reason(postgres_url) is None


def test_sqlite_answers(tmp_path) -> None:
    assert database_unavailable_reason(f"sqlite:///{tmp_path / 'probe.sqlite3'}") is None


def test_a_dead_server_gives_a_reason() -> None:
    port = _closed_port()
    assert "does not answer" in (redis_unavailable_reason(f"redis://127.0.0.1:{port}/0", timeout_s=1) or "")
    reason = database_unavailable_reason(f"postgresql+psycopg://postgres@127.0.0.1:{port}/test", timeout_s=1)
    assert reason is not None and "does not answer" in reason
