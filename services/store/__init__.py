"""The buffer store: triplet buffers, episodes, runs and steps in PostgreSQL (distributed) or SQLite (embedded).

    store = open_store("sqlite:///runs/azr.sqlite3", create=True)   # or postgresql+psycopg://...
    store.initialise()                                              # the zero triplet in D_abd and D_ded
    store.insert_triplet(triplet); store.sample_references(TaskType.DEDUCTION, 6, rng)

`azr db upgrade` brings a database to the newest schema (Alembic, migrations shipped in this package).
"""

from __future__ import annotations

from services.ports import BufferStats, InsertOutcome
from services.store.engine import create_store_engine
from services.store.migrate import current_revision, head_revision, upgrade_database, upgrade_engine
from services.store.run_log import StepRecord
from services.store.sql_store import SqlTripletStore


def open_store(database_url: str, *, buffer_cap: int = 16_384, create: bool = False,
               outage_s: float = 0.0) -> SqlTripletStore:
    """A store on `database_url`. `create=True` first brings the schema to head (Alembic); otherwise a database
    that is not at head raises RuntimeError telling to run `azr db upgrade`. `outage_s`: see SqlTripletStore."""
    engine = create_store_engine(database_url)
    try:
        if create:
            upgrade_engine(engine)
        else:
            at = current_revision(engine)
            if at != head_revision():
                raise RuntimeError(f"database schema is at {at or 'nothing (empty database)'}, not "
                                   f"{head_revision()}: run `azr db upgrade` (or open the store with create=True)")
    except BaseException:
        engine.dispose()
        raise
    return SqlTripletStore(engine, buffer_cap=buffer_cap, outage_s=outage_s)


__all__ = [
    "BufferStats",
    "InsertOutcome",
    "SqlTripletStore",
    "StepRecord",
    "open_store",
    "upgrade_database",
]
