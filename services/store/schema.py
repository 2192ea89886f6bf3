"""The buffer store's tables (SQLAlchemy Core). The Alembic migrations in `migrations/versions/` create exactly these;
`tests/services/store/test_migrations.py` checks that they agree.

- `buffer_entries`: the three buffers in one table, keyed by `buffer`. Deduction/abduction rows use `input`/`output`;
  induction rows use `inputs`/`outputs` (JSON lists), `message` and `given_count` (the first N//2 pairs are shown).
  `entry_key` = hash of (normalised program, normalised input(s)); UNIQUE (buffer, entry_key) makes de-duplication
  hold under any number of concurrent writers. `slot` is a dense per-buffer position 0..size-1 (UNIQUE per buffer)
  so that uniform sampling picks random slots instead of reading the table.
- `buffer_sizes`: one row per buffer with its entry count; writers lock it (SELECT ... FOR UPDATE on PostgreSQL,
  BEGIN IMMEDIATE on SQLite), which serialises inserts and evictions of one buffer and keeps `slot` dense.
- `runs`, `steps`, `episodes`: what a run did, for inspection and the dashboard. `episodes.task_id` (indexed) is the
  buffer entry an episode solved or proposed, copied out of the payload so an entry's solve history is one lookup.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

TASK_ID_LENGTH = 64
"""Longest `episodes.task_id` kept in its column (buffer entry ids are at most 18 digits); a longer one stays in the
payload only, so an odd id can never fail an insert."""

ENTRY_ID = BigInteger().with_variant(Integer(), "sqlite")
"""SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity."""

buffer_entries = Table(
    "buffer_entries",
    metadata,
    Column("id", ENTRY_ID, primary_key=True, autoincrement=True),
    Column("buffer", String(16), nullable=False),
    Column("slot", Integer, nullable=False),
    Column("program", Text, nullable=False),
    Column("input", Text, nullable=True),
    Column("output", Text, nullable=True),
    Column("inputs", JSON, nullable=True),
    Column("outputs", JSON, nullable=True),
    Column("message", Text, nullable=True),
    Column("given_count", Integer, nullable=True),
    Column("imports", JSON, nullable=False),
    Column("source", String(16), nullable=False),
    Column("step", Integer, nullable=False),
    Column("policy_version", Integer, nullable=False),
    Column("program_hash", String(64), nullable=False),
    Column("entry_key", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("buffer", "entry_key", name="uq_buffer_entries_buffer_entry_key"),
    UniqueConstraint("buffer", "slot", name="uq_buffer_entries_buffer_slot"),
    CheckConstraint("buffer IN ('deduction', 'abduction', 'induction')", name="buffer"),
    CheckConstraint("source IN ('zero', 'seed', 'proposed', 'user')", name="source"),
    Index("ix_buffer_entries_buffer_id", "buffer", "id"),
    sqlite_autoincrement=True,  # never reuse an id on SQLite: ids order entries by age and name this step's entries
)

buffer_sizes = Table(
    "buffer_sizes",
    metadata,
    Column("buffer", String(16), primary_key=True),
    Column("size", Integer, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("settings", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

steps = Table(
    "steps",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("step", Integer, nullable=False),
    Column("policy_version", Integer, nullable=False),
    Column("metrics", JSON, nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("run_id", "step", name="pk_steps"),
)

episodes = Table(
    "episodes",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("step", Integer, nullable=False),
    Column("task_type", String(16), nullable=False),
    Column("role", String(16), nullable=False),
    Column("policy_version", Integer, nullable=False),
    Column("reward", Float, nullable=False),
    Column("payload", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("task_id", String(TASK_ID_LENGTH), nullable=True),
    Index("ix_episodes_run_id_step", "run_id", "step"),
    Index("ix_episodes_task_id", "task_id"),
)
