"""Alembic without an alembic.ini: the config is built in code, the scripts ship inside the package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from services.store.engine import WRITE_OPTION, create_store_engine

MIGRATION_LOCK_KEY = 7_262_013
"""PostgreSQL advisory lock held while migrating, so services starting together do not race to create tables."""

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
"""env.py, script.py.mako and versions/ (package data)."""


def alembic_config(database_url: str | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (the URL goes through attributes, never an ini file)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if database_url:
        config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def head_revision() -> str:
    """The newest revision the packaged migrations know."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no Alembic revisions found under {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade_engine(engine: Engine) -> str:
    """Bring the database behind `engine` to head; returns the head revision."""
    config = alembic_config()
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:  # SQLite: BEGIN IMMEDIATE
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return head_revision()


def upgrade_database(database_url: str) -> str:
    """Bring the database at `database_url` to head (creating the tables on an empty one); returns the head revision."""
    engine = create_store_engine(database_url)
    try:
        return upgrade_engine(engine)
    finally:
        engine.dispose()
