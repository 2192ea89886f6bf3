"""A database of our own on a shared PostgreSQL server, for tests and benchmarks: created on enter, dropped on exit.

`DROP ... WITH (FORCE)` because services that did not stop cleanly must not keep it alive (PostgreSQL >= 13).
"""

from __future__ import annotations

import uuid

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


class PrivateDatabase:
    """`with PrivateDatabase(server_url) as url:` — `url` names a fresh, empty database on that server."""

    def __init__(self, server_url: str, prefix: str = "azr_t") -> None:
        self.admin_url = server_url
        self.name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.url = make_url(server_url).set(database=self.name).render_as_string(hide_password=False)

    def __enter__(self) -> str:
        self._admin(f'CREATE DATABASE "{self.name}"')
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def _admin(self, statement: str) -> None:
        engine = create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(text(statement))
        finally:
            engine.dispose()
