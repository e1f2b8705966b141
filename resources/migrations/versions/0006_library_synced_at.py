"""When a media source's whole library was last mirrored (not just the items schedules used).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.add_column(
        "media_source",
        sa.Column("library_synced_at", sa.DateTime(timezone=True)),
        schema="airwave",
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_column("media_source", "library_synced_at", schema="airwave")
