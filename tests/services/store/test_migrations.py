"""Alembic: both dialects reach head from empty, the models and the migrations agree, `open_store` guards the schema,
and 0002 backfills `episodes.task_id` from the payloads stored before it."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, Table, inspect, text
from sqlalchemy.exc import OperationalError
from throwaway_servers import PrivateDatabase

from services.algorithm.task_types import TaskType
from services.store import SqlTripletStore, open_store, upgrade_database
from services.store.engine import create_store_engine
from services.store.migrate import MIGRATIONS_DIR, alembic_config, current_revision, head_revision
from services.store.schema import metadata


def test_the_database_is_at_head_and_matches_the_models(database_url: str) -> None:
    engine = create_store_engine(database_url)
    try:
        assert current_revision(engine) == head_revision() == "0002"
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection, opts={"compare_type": True}), metadata)
        assert diff == []
        assert {"buffer_entries", "buffer_sizes", "runs", "steps", "episodes"} <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_is_idempotent_and_downgrade_reverses_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'azr.sqlite3'}"
    assert upgrade_database(url) == "0002"
    assert upgrade_database(url) == "0002"
    engine = create_store_engine(url)
    try:
        config = alembic_config(url)
        command.downgrade(config, "base")
        assert current_revision(engine) is None
        assert "buffer_entries" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    assert upgrade_database(url) == "0002"


def test_open_store_refuses_an_unmigrated_database_unless_asked_to_create(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    with pytest.raises(RuntimeError, match="azr db upgrade"):
        open_store(url)
    with open_store(url, create=True) as store:
        store.initialise()
        assert store.count(TaskType.DEDUCTION) == 1


def test_migration_scripts_ship_as_package_files() -> None:
    assert (MIGRATIONS_DIR / "env.py").is_file() and (MIGRATIONS_DIR / "script.py.mako").is_file()
    assert sorted(path.name for path in (MIGRATIONS_DIR / "versions").glob("0*.py")) == [
        "0001_buffers_runs_episodes.py", "0002_episode_task_id.py"]


def test_ping_raises_when_the_database_does_not_answer() -> None:
    store = SqlTripletStore(create_store_engine("postgresql+psycopg://postgres@127.0.0.1:9/none"))
    try:
        with pytest.raises(OperationalError):
            store.ping()
    finally:
        store.close()


def test_ping_answers_on_a_live_database(store: SqlTripletStore) -> None:
    store.ping()
    assert store.count(TaskType.INDUCTION) == 0


def _upgrade(url: str) -> str:
    return upgrade_database(url)


@pytest.mark.slow
def test_services_starting_together_migrate_a_fresh_postgres_database_once(postgres_url: str) -> None:
    with PrivateDatabase(postgres_url) as url:
        with multiprocessing.get_context("fork").Pool(4) as pool:  # each process builds its own engine
            assert pool.map(_upgrade, [url] * 4) == ["0002"] * 4  # the advisory lock serialises them
        with open_store(url) as store:
            store.initialise()
            assert store.count(TaskType.ABDUCTION) == 1


def _episode_row(episode_id: str, task_id: object) -> dict:
    payload = {"id": episode_id, "run_id": "run-m", "step": 1, "task_type": "deduction", "role": "solve",
               "prompt_ids": [1], "response_ids": [2], "reward": 1.0, "policy_version": 0, "task_id": task_id}
    return {"id": episode_id, "run_id": "run-m", "step": 1, "task_type": "deduction", "role": "solve",
            "policy_version": 0, "reward": 1.0, "payload": payload, "created_at": datetime.now(UTC)}


def _migrate_episodes_from_0001(url: str) -> None:
    """Episodes stored at 0001 get their payload's task id in the 0002 column; a downgrade and upgrade redo it."""
    config = alembic_config(url)
    command.upgrade(config, "0001")
    engine = create_store_engine(url)
    try:
        at_0001 = MetaData()
        runs = Table("runs", at_0001, autoload_with=engine)
        episodes = Table("episodes", at_0001, autoload_with=engine)
        assert "task_id" not in episodes.c
        with engine.begin() as connection:
            connection.execute(runs.insert(),
                               {"run_id": "run-m", "settings": {}, "created_at": datetime.now(UTC)})
            connection.execute(episodes.insert(), [_episode_row("with-id", "17"), _episode_row("no-id", None),
                                                   _episode_row("long-id", "9" * 65)])
        for _ in range(2):
            command.upgrade(config, "head")
            with engine.connect() as connection:
                task_ids = dict(connection.execute(text("SELECT id, task_id FROM episodes")).all())
            assert task_ids == {"with-id": "17", "no-id": None, "long-id": None}
            assert "ix_episodes_task_id" in {index["name"] for index in inspect(engine).get_indexes("episodes")}
            with SqlTripletStore(engine) as store:  # closing it disposes the pool only: the engine stays usable
                assert [e.id for e in store.solve_history(TaskType.DEDUCTION, "17")[0]] == ["with-id"]
            command.downgrade(config, "0001")
            assert "task_id" not in {column["name"] for column in inspect(engine).get_columns("episodes")}
            with engine.connect() as connection:
                assert connection.execute(text("SELECT count(*) FROM episodes")).scalar_one() == 3
    finally:
        engine.dispose()


def test_the_task_id_migration_backfills_sqlite(tmp_path: Path) -> None:
    _migrate_episodes_from_0001(f"sqlite:///{tmp_path / 'backfill.sqlite3'}")


def test_the_task_id_migration_backfills_postgres(postgres_url: str) -> None:
    with PrivateDatabase(postgres_url) as url:
        _migrate_episodes_from_0001(url)
