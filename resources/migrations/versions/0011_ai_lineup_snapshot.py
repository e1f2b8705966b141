"""AI lineup snapshots: what an approved `ai_lineup` run replaced, so it can be rolled back.

`airwave_dagster.ai_lineup_snapshot` holds, per lineup (root run id), the rows of the AI channels
and packages its wipe replaced, captured in the wipe's transaction, the fingerprint of what the
lineup left on air (written by its report), and which rollback put the rows back (issue 26
item 3).

Revision ID: 0011_ai_lineup_snapshot
Revises: 0010_parked_ai_channels
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0011_ai_lineup_snapshot"
down_revision = "0010_parked_ai_channels"
branch_labels = None
depends_on = None

SCHEMA = "airwave_dagster"


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "ai_lineup_snapshot",
        sa.Column("ledger_id", sa.Text(), primary_key=True),
        sa.Column("media_source_id", sa.Text(), nullable=False),
        sa.Column("attached", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("rows", pg.JSONB(), nullable=False),
        sa.Column(
            "taken_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("after", pg.JSONB(), nullable=True),
        sa.Column("after_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("rolled_back_by", sa.Text(), nullable=True),
        sa.Column("rolled_back_at", sa.DateTime(timezone=True), nullable=True),
        schema=SCHEMA,
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("ai_lineup_snapshot", schema=SCHEMA)
