"""Fixtures of the store tests: every contract test runs on SQLite and on a real PostgreSQL database.

PostgreSQL: one private database `azr_t_<uuid>` per test session (created through an autocommit connection to the
`test` database, dropped at the end); tables are emptied between tests. SQLite: a fresh file per test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from services.store import SqlTripletStore, open_store, upgrade_database

EMPTY_TABLES_SQL = (
    "DELETE FROM episodes", "DELETE FROM steps", "DELETE FROM runs", "DELETE FROM buffer_entries",
    "UPDATE buffer_sizes SET size = 0",
)


@pytest.fixture(scope="session")
def private_postgres_url(postgres_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database of this session, migrated to head; dropped afterwards."""
    name = f"azr_t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade_database(url)
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def empty_tables(url: str) -> None:
    """Delete every row this session wrote (the schema stays)."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            for statement in EMPTY_TABLES_SQL:
                connection.execute(text(statement))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database at head: a SQLite file, or the session's PostgreSQL database emptied."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
        upgrade_database(url)
        return url
    url = request.getfixturevalue("private_postgres_url")
    empty_tables(url)
    return url


@pytest.fixture()
def make_store(database_url: str) -> Iterator[Callable[..., SqlTripletStore]]:
    """Opens stores on the test database (closed at the end)."""
    opened: list[SqlTripletStore] = []

    def make(buffer_cap: int = 16_384) -> SqlTripletStore:
        store = open_store(database_url, buffer_cap=buffer_cap)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture()
def store(make_store: Callable[..., SqlTripletStore]) -> SqlTripletStore:
    """A store with the default cap on an empty database."""
    return make_store()


@pytest.fixture(scope="session")
def seed_rows(shared_dir: Path) -> list[dict]:
    """The authors' deduction/abduction seed rows (snippet, input, output)."""
    path = shared_dir / "data" / "azr_seeds" / "7b_coder_seed_io.jsonl"
    return [json.loads(line) for line in path.open() if line.strip()]


@pytest.fixture(scope="session")
def induction_seed_rows(shared_dir: Path) -> list[dict]:
    """The authors' induction seed rows (snippet, inputs, outputs, message)."""
    path = shared_dir / "data" / "azr_seeds" / "7b_coder_code_f_seed_io.jsonl"
    return [json.loads(line) for line in path.open() if line.strip()]
