"""Alembic environment: migrates the connection handed over in `config.attributes["connection"]`, or opens one
from `sqlalchemy.url`. There is no alembic.ini: `services.store.migrate.alembic_config` builds the config."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from services.store.engine import create_store_engine
from services.store.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Migrate the given connection, or a fresh engine's."""
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_store_engine(context.config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.connect() as fresh:
            _run(fresh)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; run `azr db upgrade`")
run_migrations_online()
