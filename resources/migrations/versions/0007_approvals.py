"""Interrupts: one durable row per approval gate of a run tree, resolved exactly once.

Revision ID: 0007_approvals
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0007_approvals"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "interrupt",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("root_run_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("gate_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False, server_default="open"),
        sa.Column("payload", pg.JSONB(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_by", sa.Text(), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("continuation_run_id", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.UniqueConstraint("root_run_id", "gate_id", name="interrupt_one_per_gate"),
        sa.CheckConstraint(
            "status IN ('open','approved','rejected','canceled','expired')",
            name="interrupt_status",
        ),
        schema="airwave",
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("interrupt", schema="airwave")
