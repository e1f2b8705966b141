"""Schedule maintenance: per-channel pool fingerprint and pass seams.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "channel_schedule_state",
        sa.Column("channel_id", sa.Text(), nullable=False),
        sa.Column("pool_fingerprint", sa.Text()),
        sa.Column("pool_size", sa.Integer()),
        sa.Column(
            "pass_marks",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["channel_id"], ["airwave.channel.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("channel_id"),
        schema="airwave",
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("channel_schedule_state", schema="airwave")
