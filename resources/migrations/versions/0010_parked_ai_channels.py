"""Parked AI channels: an `ai_lineup` run never deletes a channel its approved diff kept.

`airwave_dagster.ai_parked_channel` names the rows the packages step set aside (number negated,
disabled) while their rebuild runs; the report step deletes each once its replacement committed,
or restores it as it was and records where and why (issue 27 item 8).

Revision ID: 0010_parked_ai_channels
Revises: 0009_cache_write_1h
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_parked_ai_channels"
down_revision = "0009_cache_write_1h"
branch_labels = None
depends_on = None

SCHEMA = "airwave_dagster"


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "ai_parked_channel",
        sa.Column(
            "channel_id",
            sa.Text(),
            sa.ForeignKey("public.channel.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("ledger_id", sa.Text(), nullable=False),
        sa.Column("previous_number", sa.Integer(), nullable=False),
        sa.Column("previous_enabled", sa.Boolean(), nullable=False),
        sa.Column(
            "parked_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("restored_number", sa.Integer(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        schema=SCHEMA,
    )
    op.create_index(
        "ai_parked_channel_ledger_id", "ai_parked_channel", ["ledger_id"], schema=SCHEMA
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("ai_parked_channel", schema=SCHEMA)
