"""Buffers (one table, dense per-buffer slots, de-duplication key), buffer sizes, runs, steps, episodes.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BUFFERS = ("deduction", "abduction", "induction")


def upgrade() -> None:
    """Create the tables and one size row per buffer."""
    op.create_table(
        "buffer_entries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("buffer", sa.String(16), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("program", sa.Text(), nullable=False),
        sa.Column("input", sa.Text(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("inputs", sa.JSON(), nullable=True),
        sa.Column("outputs", sa.JSON(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("given_count", sa.Integer(), nullable=True),
        sa.Column("imports", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("program_hash", sa.String(64), nullable=False),
        sa.Column("entry_key", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_buffer_entries"),
        sa.UniqueConstraint("buffer", "entry_key", name="uq_buffer_entries_buffer_entry_key"),
        sa.UniqueConstraint("buffer", "slot", name="uq_buffer_entries_buffer_slot"),
        sa.CheckConstraint("buffer IN ('deduction', 'abduction', 'induction')", name="ck_buffer_entries_buffer"),
        sa.CheckConstraint("source IN ('zero', 'seed', 'proposed', 'user')", name="ck_buffer_entries_source"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_buffer_entries_buffer_id", "buffer_entries", ["buffer", "id"])
    sizes = op.create_table(
        "buffer_sizes",
        sa.Column("buffer", sa.String(16), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("buffer", name="pk_buffer_sizes"),
    )
    op.bulk_insert(sizes, [{"buffer": name, "size": 0} for name in BUFFERS])
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_runs"),
    )
    op.create_table(
        "steps",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name="fk_steps_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "step", name="pk_steps"),
    )
    op.create_table(
        "episodes",
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("task_type", sa.String(16), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name="fk_episodes_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_episodes"),
    )
    op.create_index("ix_episodes_run_id_step", "episodes", ["run_id", "step"])


def downgrade() -> None:
    """Drop everything this revision created."""
    op.drop_index("ix_episodes_run_id_step", table_name="episodes")
    op.drop_table("episodes")
    op.drop_table("steps")
    op.drop_table("runs")
    op.drop_table("buffer_sizes")
    op.drop_index("ix_buffer_entries_buffer_id", table_name="buffer_entries")
    op.drop_table("buffer_entries")
