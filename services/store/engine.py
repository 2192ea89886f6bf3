"""Engines for the buffer store: PostgreSQL (psycopg 3) or SQLite, configured for many concurrent writers.

SQLite allows one writer at a time. A deferred transaction that reads and then writes can fail at once with
"database is locked" (its snapshot went stale, so waiting cannot help), so every write transaction here starts
with `BEGIN IMMEDIATE` (take the write lock first, waiting up to `SQLITE_BUSY_TIMEOUT_S`), in WAL mode so readers
never block the writer. Read transactions use a plain `BEGIN`: one consistent snapshot.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

T = TypeVar("T")
P = ParamSpec("P")

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_S = 60.0
"""How long a SQLite writer waits for the write lock before failing."""

WRITE_OPTION = "azr_write_transaction"
"""Execution option: this connection's transactions write (SQLite: BEGIN IMMEDIATE)."""


def is_sqlite(database_url: str) -> bool:
    """Whether the URL names a SQLite database."""
    return make_url(database_url).get_backend_name() == "sqlite"


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (pysqlite's own BEGIN is deferred)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA synchronous=NORMAL")  # durable at checkpoints; WAL keeps the file consistent
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        writes = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


def create_store_engine(database_url: str, *, pool_size: int = 5) -> Engine:
    """An engine for `database_url`; SQLite files get WAL, a busy timeout and immediate write transactions."""
    if not database_url:
        raise ValueError("database_url is empty: set AZR_DATABASE_URL or pass --database-url")
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False})
        _configure_sqlite(engine)
        return engine
    if url.get_backend_name() == "postgresql":
        # No pool_pre_ping: it costs a round trip per checkout (~half a K-sample). A connection broken by a
        # server restart fails its statement instead; SQLAlchemy then drops the pool and `SqlTripletStore`
        # retries the operation once on a fresh connection (see `retry_on_disconnect`).
        return create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_recycle=1800,
                             connect_args={"connect_timeout": 5})
    raise ValueError(f"unsupported database {url.get_backend_name()!r}: use postgresql+psycopg:// or sqlite:///")


def connection_lost(error: DBAPIError) -> bool:
    """Whether `error` is the connection's, not the statement's: a pooled connection that died (a server restart),
    or PostgreSQL refusing or dropping connections (down, starting, shutting down). SQLite's own errors ("database
    is locked" after its busy timeout) are not: waiting longer cannot help them."""
    if error.connection_invalidated:
        return True
    return type(error.orig).__module__.startswith("psycopg") and type(error.orig).__name__ in (
        "OperationalError", "AdminShutdown", "CannotConnectNow")


def retry_on_disconnect(operation: Callable[P, T]) -> Callable[P, T]:
    """Run a store method again when its connection was lost (`connection_lost`): at once (a pooled connection
    that died: the pool was dropped, a fresh one usually works), then with backoff and a log line each time until
    it succeeds or the outage has lasted the store's `outage_s` (0: only the immediate retry; the APIs answer 503
    instead of waiting), and then the database's error goes up.

    Safe for the store's operations: each is one transaction (rolled back when the connection died), and inserts
    are idempotent (a retried insert that had committed finds its own row and reports it as existing).
    """

    @functools.wraps(operation)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        outage_s = float(getattr(args[0], "outage_s", 0.0)) if args else 0.0
        began: float | None = None
        wait, tries = 0.2, 0
        while True:
            try:
                return operation(*args, **kwargs)
            except DBAPIError as error:
                if not connection_lost(error):
                    raise
                tries += 1
                if tries == 1:
                    continue
                now = time.monotonic()
                began = now if began is None else began
                left = outage_s - (now - began)
                if left <= 0:
                    if outage_s > 0:
                        log.error("database still unavailable after %.1f s (%d tries) during %s: giving up",
                                  now - began, tries, operation.__name__)
                    raise
                pause = min(wait, 5.0, left)
                log.warning("database unavailable during %s (%s): try %d again in %.1f s (gives up after %.0f s "
                            "more)", operation.__name__, str(error.orig).splitlines()[0][:160], tries + 1, pause,
                            left)
                time.sleep(pause)
                wait *= 2

    return wrapper
