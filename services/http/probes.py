"""Cheap liveness probes of the servers AZR depends on; `None` means it answers, a string says why not.

Used by the test suite (tests/conftest.py) to decide between skip (laptop) and fail (CI). The services' `/readyz`
asks their own dependencies instead (`Pingable`, services/http/ops.py).
"""

from __future__ import annotations

import redis
from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError


def redis_unavailable_reason(url: str, timeout_s: float = 2.0) -> str | None:
    """PING the Redis server at `url`."""
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
        return None
    except redis.RedisError as error:
        return f"redis at {url} does not answer: {error}"
    finally:
        client.close()


def database_unavailable_reason(url: str, timeout_s: float = 2.0) -> str | None:
    """Run `SELECT 1` on the database at `url` (PostgreSQL or SQLite)."""
    connect_args = {"connect_timeout": int(max(1, timeout_s))} if url.startswith("postgresql") else {}
    engine = create_engine(url, connect_args=connect_args, pool_pre_ping=False)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        return None
    except SQLAlchemyError as error:
        where = engine.url.render_as_string(hide_password=True)
        return f"database at {where} does not answer: {error.__class__.__name__}: {str(error).splitlines()[0]}"
    finally:
        engine.dispose()
