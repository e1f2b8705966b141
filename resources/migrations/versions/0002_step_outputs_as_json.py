"""Step outputs as JSON: the Postgres IO manager's checkpoint table.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "step_output",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("step_key", sa.Text(), nullable=False),
        sa.Column("output_name", sa.Text(), nullable=False),
        sa.Column("mapping_key", sa.Text(), server_default="", nullable=False),
        sa.Column("type_name", sa.Text(), nullable=False),
        sa.Column("code_version", sa.Text(), nullable=True),
        sa.Column("value", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("run_id", "step_key", "output_name", "mapping_key"),
        schema="airwave",
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("step_output", schema="airwave")
