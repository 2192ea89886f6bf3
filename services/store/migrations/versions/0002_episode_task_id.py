"""Episodes get an indexed `task_id` column (the buffer entry solved or proposed), backfilled from the payload.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TASK_ID_LENGTH = 64
"""Same as services.store.schema.TASK_ID_LENGTH (a migration is frozen: it never imports the live schema)."""

PAYLOAD_TASK_ID = {
    "postgresql": "payload->>'task_id'",  # JSON null and a missing key both give SQL NULL
    "sqlite": "json_extract(payload, '$.task_id')",
}
"""The payload's `task_id` as text, per dialect."""


def upgrade() -> None:
    """Add the column and its index, then copy each stored episode's task id out of its payload."""
    op.add_column("episodes", sa.Column("task_id", sa.String(TASK_ID_LENGTH), nullable=True))
    op.create_index("ix_episodes_task_id", "episodes", ["task_id"])
    extract = PAYLOAD_TASK_ID[op.get_bind().dialect.name]
    # Longer ids cannot be buffer entries; they stay in the payload only (as record_episodes does).
    op.execute(f"UPDATE episodes SET task_id = {extract} "
               f"WHERE {extract} IS NOT NULL AND length({extract}) <= {TASK_ID_LENGTH}")


def downgrade() -> None:
    """Drop the index and the column (the payload still holds every task id)."""
    op.drop_index("ix_episodes_task_id", table_name="episodes")
    with op.batch_alter_table("episodes") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("task_id")
