"""Channel claims with a heartbeat, and idempotent run starts.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.add_column("channel", sa.Column("claim_run_id", sa.Text()), schema="airwave")
    op.add_column("channel", sa.Column("claim_step_key", sa.Text()), schema="airwave")
    op.add_column("channel", sa.Column("claim_attempt", sa.Integer()), schema="airwave")
    op.add_column(
        "channel",
        sa.Column("claim_heartbeat_at", sa.DateTime(timezone=True)),
        schema="airwave",
    )
    op.create_table(
        "run_start",
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("job_name", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("idempotency_key"),
        schema="airwave",
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("run_start", schema="airwave")
    for column in ("claim_heartbeat_at", "claim_attempt", "claim_step_key", "claim_run_id"):
        op.drop_column("channel", column, schema="airwave")
